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

// kindLease is the body of a lease of kind typ (IMMEDIATE, BEST-EFFORT)
// starting now with one physical:host reservation of n hosts.
func kindLease(name, typ string, n int, extra map[string]any) map[string]any {
	b := map[string]any{"name": name, "lease_type": typ, "end_date": "2030-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": n, "max": n,
			"hypervisor_properties": "", "resource_properties": ""}},
		"events": []any{}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// registerForKinds registers hosts with lh and removes them when the
// test ends, once every compute action is done (back out of the
// freepool for the next test).
func registerForKinds(t *testing.T, lh *Leasehold, admin string, hosts ...string) {
	t.Helper()
	var ids []string
	for _, h := range hosts {
		ids = append(ids, registerHost(t, lh.URL, admin, h))
	}
	t.Cleanup(func() {
		for _, id := range ids {
			call(t, lh.URL, "DELETE", "/os-hosts/"+id, admin, nil, nil)
		}
		waitDone(t, func() []outbox.Record {
			rows, err := outbox.List(context.Background(), lh.S.DB())
			if err != nil {
				t.Fatal(err)
			}
			return rows
		})
	})
}

// deleteLease deletes lease id and waits until its hosts are out of its
// aggregate (the aggregate is gone).
func deleteLease(t *testing.T, e *Env, lh *Leasehold, tok Tokens, id, res string) {
	t.Helper()
	mustCall(t, lh.URL, "DELETE", "/leases/"+id, tok.Demo, http.StatusNoContent, nil, nil)
	if _, err := e.Nova.WaitAggregate(context.Background(), tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return countNamed(as, res) == 0
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseKindsWithNova: lease kinds on the nova driver against
// nova-box (computes compute1..3, compute1 and compute2 registered).
//
//   - IMMEDIATE: ACTIVE in the create answer, its host in the
//     reservation's aggregate.
//   - A server of another project (the admin's, forced onto compute1)
//     makes compute1 busy now as Nova reports it (Leasehold's Placement
//     knows nothing of Nova's servers): an IMMEDIATE lease of two hosts
//     is refused with that reason, nothing stored.
//   - BEST-EFFORT for the same two hosts: accepted IN-PROGRESS, the
//     server live-migrated by Nova to compute3 (the only host outside a
//     Blazar pool, where the BlazarFilter lets a server without a
//     reservation run), then ACTIVE with both hosts in its aggregate.
func TestLeaseKindsWithNova(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	lh := e.StartLeasehold(t, "")
	tok := e.Tokens(t)
	registerForKinds(t, lh, tok.Admin, "compute1", "compute2")

	// IMMEDIATE: active at once.
	var out struct{ Lease Lease }
	mustCall(t, lh.URL, "POST", "/leases", tok.Demo, http.StatusCreated, kindLease("immediate", "IMMEDIATE", 1, nil), &out)
	if out.Lease.Status != "ACTIVE" || len(out.Lease.Reservations) != 1 {
		t.Fatalf("IMMEDIATE lease in the create answer: %+v, want ACTIVE", out.Lease)
	}
	res := out.Lease.Reservations[0].ID
	if _, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		for _, a := range as {
			if a.Name == res {
				return len(a.Hosts) == 1 && slices.Equal(membership(as, a.Hosts[0]), []string{res}) && a.Metadata["blazar:owner"] == out.Lease.ProjectID
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	deleteLease(t, e, lh, tok, out.Lease.ID, res)

	// Another project's server on compute1, past the scheduler.
	squatter, err := n.BootOn(ctx, tok.Admin, "squatter", "1", "compute1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.DeleteServer(ctx, tok.Admin, squatter)
		_ = n.WaitGone(ctx, tok.Admin, squatter, bootTimeout)
	})
	if s, err := n.WaitServer(ctx, tok.Admin, squatter, bootTimeout); err != nil || s.Status != "ACTIVE" || s.Host != "compute1" {
		t.Fatalf("forced boot on compute1: %+v %v", s, err)
	}
	code, body := call(t, lh.URL, "POST", "/leases", tok.Demo, kindLease("immediate-busy", "IMMEDIATE", 2, nil), nil)
	if code != http.StatusConflict || !strings.Contains(body, squatter) {
		t.Errorf("IMMEDIATE lease of two hosts with a server of another project on one: %d %s, want 409 naming server %s", code, body, squatter)
	}
	if b := mustCall(t, lh.URL, "GET", "/leases", tok.Demo, http.StatusOK, nil, nil); strings.Contains(b, "immediate-busy") {
		t.Errorf("the refused lease was stored: %s", b)
	}

	// BEST-EFFORT: clears compute1 by a live migration.
	t0 := time.Now()
	mustCall(t, lh.URL, "POST", "/leases", tok.Demo, http.StatusCreated, kindLease("best-effort", "BEST-EFFORT", 2, map[string]any{"timeout": 300}), &out)
	if out.Lease.Status != "IN-PROGRESS" {
		t.Errorf("BEST-EFFORT lease in the create answer: %s, want IN-PROGRESS", out.Lease.Status)
	}
	l := waitLease(t, lh.URL, tok.Demo, out.Lease.ID, 150*time.Second, "ACTIVE", func(l Lease) bool {
		return l.Status == "ACTIVE" || l.Status == "TIMEDOUT" || l.Status == "ERROR"
	})
	took := time.Since(t0)
	if l.Status != "ACTIVE" {
		t.Fatalf("BEST-EFFORT lease ended %s, want ACTIVE; nova-box log:\n%s", l.Status, n.LogTail(3000))
	}
	if h, err := n.ServerHost(ctx, tok.Admin, squatter); err != nil || h != "compute3" {
		t.Errorf("the other project's server runs on %q (%v), want compute3", h, err)
	}
	res = l.Reservations[0].ID
	if _, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return slices.Equal(membership(as, "compute1"), []string{res}) && slices.Equal(membership(as, "compute2"), []string{res})
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("BEST-EFFORT lease IN-PROGRESS → ACTIVE in %s (one live migration)", took.Round(time.Millisecond))
	deleteLease(t, e, lh, tok, l.ID, res)
}

// TestHealWhenNovaDisablesHost: an active lease's host whose
// nova-compute service is disabled (read by the status poller) is
// healed as one made non-reservable: the booking moves to the other
// registered host, which joins the reservation's aggregate, and the
// reservation shows resources_changed with the lease degraded.
func TestHealWhenNovaDisablesHost(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	tok := e.Tokens(t)
	lh := e.StartLeasehold(t, "[nova]\nhost_status_interval = 1\n")
	registerForKinds(t, lh, tok.Admin, "compute1", "compute2")
	var out struct{ Lease Lease }
	mustCall(t, lh.URL, "POST", "/leases", tok.Demo, http.StatusCreated, kindLease("heal", "IMMEDIATE", 1, nil), &out)
	res := out.Lease.Reservations[0].ID
	var first string
	if _, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		for _, a := range as {
			if a.Name == res && len(a.Hosts) == 1 {
				first = a.Hosts[0]
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"compute1": "compute2", "compute2": "compute1"}[first]
	setComputeService(t, e, tok.Admin, first, "disabled")
	t.Cleanup(func() { setComputeService(t, e, tok.Admin, first, "enabled") })
	deadline := time.Now().Add(60 * time.Second)
	for {
		var got struct {
			Lease struct {
				Degraded     bool             `json:"degraded"`
				Reservations []map[string]any `json:"reservations"`
			} `json:"lease"`
		}
		mustCall(t, lh.URL, "GET", "/leases/"+out.Lease.ID, tok.Demo, http.StatusOK, nil, &got)
		if got.Lease.Degraded && got.Lease.Reservations[0]["resources_changed"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not healed 60s after Nova disabled %s: %+v", first, got.Lease)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := n.WaitAggregate(ctx, tok.Admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return slices.Equal(membership(as, other), []string{res}) && !slices.Contains(membership(as, first), res)
	}); err != nil {
		t.Fatal(err)
	}
	deleteLease(t, e, lh, tok, out.Lease.ID, res)
}
