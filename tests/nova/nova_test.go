package nova_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// bootTimeout bounds a boot's wait for ACTIVE or ERROR.
const bootTimeout = 90 * time.Second

// TestBlazarFilterLayout: hosts registered with Leasehold join Nova's
// freepool (an unknown host is a 404, a host running servers a 409); a
// member's lease starting now moves its host into the reservation's
// aggregate (zone blazar_<id>, blazar:owner = the project); under the
// upstream BlazarFilter a boot with the reservation hint lands on that
// host, one without a hint on the host no lease knows, and another
// project's boot with the hint finds no valid host; at the lease's end
// the servers are gone and the host is back in the freepool.
func TestBlazarFilterLayout(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	lh := e.StartLeasehold(t, "")
	tok := e.Tokens(t)

	// Host registration resolves the host in Nova.
	code, body := call(t, lh.URL, "POST", "/os-hosts", tok.Admin, map[string]any{"name": "nosuch"}, nil)
	if code != http.StatusNotFound || !strings.Contains(body, "nosuch") {
		t.Errorf("registering an unknown host: %d %s, want 404 naming it", code, body)
	}
	busy, err := n.BootOn(ctx, tok.Admin, "busy", "1", "compute1")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := n.WaitServer(ctx, tok.Admin, busy, bootTimeout); err != nil || s.Status != "ACTIVE" || s.Host != "compute1" {
		t.Fatalf("forced boot on compute1: %+v %v", s, err)
	}
	code, body = call(t, lh.URL, "POST", "/os-hosts", tok.Admin, map[string]any{"name": "compute1"}, nil)
	if code != http.StatusConflict {
		t.Errorf("registering a host that runs a server: %d %s, want 409", code, body)
	}
	if err := n.DeleteServer(ctx, tok.Admin, busy); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitGone(ctx, tok.Admin, busy, bootTimeout); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, h := range []string{"compute1", "compute2"} {
		ids[h] = registerHost(t, lh.URL, tok.Admin, h)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			call(t, lh.URL, "DELETE", "/os-hosts/"+id, tok.Admin, nil, nil)
		}
		waitDone(t, func() []outbox.Record { // out of the freepool before the next test
			rows, err := outbox.List(context.Background(), lh.S.DB())
			if err != nil {
				t.Fatal(err)
			}
			return rows
		})
	})
	var host struct {
		Host map[string]any `json:"host"`
	}
	mustCall(t, lh.URL, "GET", "/os-hosts/"+ids["compute1"], tok.Admin, http.StatusOK, nil, &host)
	if host.Host["service_name"] != "compute1" || host.Host["hypervisor_type"] == "" || toInt(host.Host["vcpus"]) <= 0 || toInt(host.Host["memory_mb"]) <= 0 {
		t.Errorf("host details not taken from Nova: %v", host.Host)
	}
	if _, err := n.WaitAggregate(ctx, tok.Admin, 30*time.Second, func(as []novatest.Aggregate) bool {
		return slices.Equal(membership(as, "compute1"), []string{"freepool"}) && slices.Equal(membership(as, "compute2"), []string{"freepool"}) &&
			membership(as, "compute3") == nil && countNamed(as, "freepool") == 1
	}); err != nil {
		t.Fatal(err)
	}

	// A member's lease starting now.
	lease := createHostLease(t, lh.URL, tok.Demo, "nova-layout", "2030-01-01 00:00")
	res := lease.Reservations[0].ID
	var reserved string
	aggs, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		for _, a := range as {
			if a.Name == res && len(a.Hosts) == 1 {
				reserved = a.Hosts[0]
				return slices.Equal(membership(as, reserved), []string{res})
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	agg, _, _ := n.AggregateNamed(ctx, tok.Admin, res)
	if agg.Metadata["blazar:owner"] != lease.ProjectID || agg.AvailabilityZone != "blazar_"+res || countNamed(aggs, res) != 1 {
		t.Errorf("reservation aggregate %+v, want zone blazar_%s and blazar:owner %s, once", agg, res, lease.ProjectID)
	}
	other := "compute1"
	if reserved == "compute1" {
		other = "compute2"
	}
	if got := membership(aggs, other); !slices.Equal(got, []string{"freepool"}) {
		t.Errorf("the unreserved registered host %s is in %v, want the freepool only", other, got)
	}
	waitLease(t, lh.URL, tok.Demo, lease.ID, 30*time.Second, "active and clear", func(l Lease) bool {
		return l.Status == "ACTIVE" && !l.Degraded
	})

	// Boots under the BlazarFilter.
	t0 := time.Now()
	hinted, err := n.BootAndWait(ctx, tok.Demo, "hinted", "1", map[string]any{"reservation": res}, bootTimeout)
	hintedTook := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if hinted.Status != "ACTIVE" {
		t.Fatalf("boot with the reservation hint: %+v", hinted)
	}
	if h, err := n.ServerHost(ctx, tok.Admin, hinted.ID); err != nil || h != reserved {
		t.Errorf("boot with the reservation hint landed on %q (%v), want the reserved %s", h, err, reserved)
	}
	t0 = time.Now()
	plain, err := n.BootAndWait(ctx, tok.Demo, "plain", "1", nil, bootTimeout)
	plainTook := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := n.ServerHost(ctx, tok.Admin, plain.ID); plain.Status != "ACTIVE" || h != "compute3" {
		t.Errorf("boot without a hint: %+v on %q, want ACTIVE on compute3 (in no Blazar pool)", plain, h)
	}
	stranger, err := n.BootAndWait(ctx, tok.Admin, "stranger", "1", map[string]any{"reservation": res}, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if stranger.Status != "ERROR" || !strings.Contains(stranger.Fault, "No valid host") {
		t.Errorf("another project's boot with the hint: %+v, want ERROR with no valid host", stranger)
	}
	t.Logf("boot to ACTIVE: %s with the reservation hint (BlazarFilter passes the reserved host), %s without", hintedTook.Round(time.Millisecond), plainTook.Round(time.Millisecond))

	// The end: moved to the next whole minute.
	end := nextMinute(5 * time.Second)
	mustCall(t, lh.URL, "PUT", "/leases/"+lease.ID, tok.Demo, http.StatusOK, map[string]any{"end_date": end}, nil)
	if err := n.WaitGone(ctx, tok.Admin, hinted.ID, 150*time.Second); err != nil {
		t.Fatalf("the lease's server after its end (%s): %v", end, err)
	}
	if _, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return countNamed(as, res) == 0 && slices.Equal(membership(as, reserved), []string{"freepool"})
	}); err != nil {
		t.Fatal(err)
	}
	waitLease(t, lh.URL, tok.Demo, lease.ID, 30*time.Second, "terminated", func(l Lease) bool {
		return l.Status == "TERMINATED" && !l.Degraded
	})
	if s, err := n.GetServer(ctx, tok.Admin, plain.ID); err != nil || s.Status != "ACTIVE" {
		t.Errorf("the server on the unreserved host after the end: %+v %v, want it untouched", s, err)
	}
	for _, id := range []string{plain.ID, stranger.ID} {
		_ = n.DeleteServer(ctx, tok.Admin, id)
	}
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		var n int64
		for _, c := range x {
			if c < '0' || c > '9' {
				return 0
			}
			n = n*10 + int64(c-'0')
		}
		return n
	}
	return 0
}
