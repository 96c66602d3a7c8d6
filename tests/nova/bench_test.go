package nova_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// BenchmarkBoot measures what a boot costs end to end (POST /servers to
// ACTIVE, through Nova's real scheduler) under the BlazarFilter layout —
// a boot with the reservation hint onto a reserved host, and one without
// a hint onto the host no lease knows — and in a second nova-box without
// the BlazarFilter and without aggregates: the difference is the whole
// scheduling overhead the layout adds. Each iteration boots, waits and
// deletes one server; p50 is reported besides the mean.
//
//	go test -run '^$' -bench Boot -benchtime 10x ./tests/nova/
func BenchmarkBoot(b *testing.B) {
	e := RequireEnv(b)
	ctx := context.Background()
	lh := e.StartLeasehold(b, "")
	tok := e.Tokens(b)
	ids := []string{registerHost(b, lh.URL, tok.Admin, "compute1"), registerHost(b, lh.URL, tok.Admin, "compute2")}
	b.Cleanup(func() {
		for _, id := range ids {
			call(b, lh.URL, "DELETE", "/os-hosts/"+id, tok.Admin, nil, nil)
		}
	})
	lease := createHostLease(b, lh.URL, tok.Demo, "bench-boot", "2030-01-01 00:00")
	b.Cleanup(func() { call(b, lh.URL, "DELETE", "/leases/"+lease.ID, tok.Demo, nil, nil) })
	res := lease.Reservations[0].ID
	if _, err := e.Nova.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		for _, a := range as {
			if a.Name == res && len(a.Hosts) == 1 {
				return true
			}
		}
		return false
	}); err != nil {
		b.Fatal(err)
	}
	boots := func(b *testing.B, n *novatest.Nova, tok string, hints map[string]any) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			s, err := n.BootAndWait(ctx, tok, "bench", "1", hints, bootTimeout)
			if err != nil || s.Status != "ACTIVE" {
				b.Fatalf("boot: %+v %v", s, err)
			}
			took = append(took, time.Since(t0))
			b.StopTimer()
			if err := n.DeleteServer(ctx, tok, s.ID); err != nil {
				b.Fatal(err)
			}
			if err := n.WaitGone(ctx, tok, s.ID, bootTimeout); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	}
	b.Run("blazarfilter/hinted", func(b *testing.B) { boots(b, e.Nova, tok.Demo, map[string]any{"reservation": res}) })
	b.Run("blazarfilter/unhinted", func(b *testing.B) { boots(b, e.Nova, tok.Demo, nil) })
	b.Run("nofilter", func(b *testing.B) {
		// noauth2: a Keystone-backed box would re-register the catalog's
		// compute endpoint under the package's Nova.
		plain, err := novatest.Start(ctx, novatest.Options{Hosts: novaHosts})
		if plain != nil {
			defer func() { _ = plain.Down() }()
		}
		if err != nil {
			b.Fatal(err)
		}
		boots(b, plain, "demo:demo", nil)
	})
}
