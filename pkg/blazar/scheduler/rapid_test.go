package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestFilterProperty: for random leases (projects, types, statuses,
// windows around now, hosts) and random requests, the passing hosts are
// exactly those a direct reading of the rules gives, every other host
// has a reason, and every host asked about is answered once.
func TestFilterProperty(t *testing.T) {
	registered := []host{{1, "compute1", "svc1"}, {2, "compute2", "svc2"}, {3, "compute3", "svc3"},
		{4, "compute4", "svc4"}, {5, "compute5", "svc5"}, {6, "compute6", "svc6"}}
	idOf := map[string]string{}
	for _, h := range registered {
		idOf[h.node] = fmt.Sprint(h.id)
	}
	names := []string{"compute1", "compute2", "compute3", "compute4", "compute5", "compute6", "x1", "x2"}
	f := newFixture(t, dbtest.Open(t), registered)
	model := map[string]lease{}
	var resIDs []string
	ctx := context.Background()

	rapid.Check(t, func(rt *rapid.T) {
		for range rapid.IntRange(0, 3).Draw(rt, "new leases") {
			start := t0.Add(time.Duration(rapid.IntRange(-5, 5).Draw(rt, "start h")) * time.Hour)
			l := lease{
				project:   rapid.SampledFrom([]string{"p1", "p2"}).Draw(rt, "project"),
				resType:   rapid.SampledFrom([]string{"physical:host", "virtual:instance", "virtual:floatingip"}).Draw(rt, "type"),
				resStatus: rapid.SampledFrom([]string{"pending", "active", "deleted"}).Draw(rt, "status"),
				start:     start,
				end:       start.Add(time.Duration(rapid.IntRange(1, 4).Draw(rt, "hours")) * time.Hour),
			}
			if l.resType != "virtual:floatingip" {
				l.hosts = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"1", "2", "3", "4", "5", "6"}), 1, 3, rapid.ID[string]).Draw(rt, "hosts")
			}
			id := f.add(rt, l)
			model[id] = l
			resIDs = append(resIDs, id)
		}
		pick := func(label string) string {
			choices := append([]string{"", "", "unknown-reservation"}, resIDs...)
			return rapid.SampledFrom(choices).Draw(rt, label)
		}
		req := Request{
			ProjectID:         rapid.SampledFrom([]string{"p1", "p2"}).Draw(rt, "req project"),
			Reservation:       pick("hint"),
			FlavorReservation: pick("flavor"),
			Explain:           rapid.Bool().Draw(rt, "explain"),
			Hosts:             rapid.SliceOfN(rapid.SampledFrom(names), 0, 10).Draw(rt, "candidates"),
		}
		got, err := f.svc.Filter(ctx, req)
		if err != nil {
			rt.Fatal(err)
		}

		var checks []string
		for _, id := range []string{req.Reservation, req.FlavorReservation} {
			if id != "" && !slices.Contains(checks, id) {
				checks = append(checks, id)
			}
		}
		passes := func(name string) bool {
			hostID, known := idOf[name]
			if len(checks) == 0 {
				return !known
			}
			for _, id := range checks {
				l, ok := model[id]
				if !ok || !known || l.project != req.ProjectID || l.resStatus != "active" ||
					t0.Before(l.start) || !t0.Before(l.end) || !slices.Contains(l.hosts, hostID) {
					return false
				}
			}
			return true
		}
		want := []string{}
		seen := map[string]bool{}
		for _, name := range req.Hosts {
			if seen[name] {
				continue
			}
			seen[name] = true
			if passes(name) {
				want = append(want, name)
			}
		}
		if !slices.Equal(want, got.Hosts) {
			rt.Fatalf("passing %v, want %v", got.Hosts, want)
		}
		for name := range seen {
			reason, rejected := got.Rejected[name]
			if rejected == slices.Contains(got.Hosts, name) || (rejected && reason == "") {
				rt.Fatalf("host %s: rejected=%v reason %q, passing %v", name, rejected, reason, got.Hosts)
			}
		}
		if len(got.Rejected)+len(got.Hosts) != len(seen) {
			rt.Fatalf("answered %d hosts, asked about %d", len(got.Rejected)+len(got.Hosts), len(seen))
		}
	})
}
