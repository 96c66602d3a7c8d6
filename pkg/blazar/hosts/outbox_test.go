package hosts

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts/hoststest"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// pendingActions lists the outbox rows as "kind key host…".
func pendingActions(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := outbox.List(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		var p PoolPayload
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", r.Payload, err)
		}
		out = append(out, r.Kind+" "+r.Key+" "+strings.Join(p.Hosts, ","))
	}
	return out
}

// runOutbox runs the due outbox rows with the hosts handlers over drv and
// returns how many handler runs there were.
func runOutbox(t *testing.T, d *db.DB, drv compute.Driver) int {
	t.Helper()
	n, err := outbox.NewWorker(d, OutboxHandlers(drv), outbox.Config{}, nil).RunDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// driverOps lists the standalone driver's calls by host, in call order
// (actions of different hosts run independently, in any order).
func driverOps(drv *standalone.Driver) map[string][]string {
	out := map[string][]string{}
	for _, c := range drv.Calls() {
		for _, h := range c.Hosts {
			out[h] = append(out[h], c.Op)
		}
	}
	return out
}

// TestOutboxActionsOnlyWithTheWrite: a refused create or delete leaves
// no outbox row; the handlers carry out their payload each time they
// run (an action run again after a crash is a second, harmless call) and
// refuse a payload they cannot read for good.
func TestOutboxActionsOnlyWithTheWrite(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, drv := newService(t, d)
		h, err := s.Create(ctx, body("name", "c1"))
		if err != nil {
			t.Fatal(err)
		}
		runOutbox(t, d, drv)
		if _, err := s.Create(ctx, body("name", "c1")); err == nil {
			t.Fatal("duplicate created")
		}
		hoststest.ReserveHosts(t, d, hoststest.Lease{ID: "l1", ReservationID: "r1", Start: fixed, End: fixed.Add(time.Hour)}, h.ID)
		if err := s.Delete(ctx, h.ID); err == nil {
			t.Fatal("reserved host deleted")
		}
		if left := pendingActions(t, d); len(left) != 0 {
			t.Errorf("outbox rows after refused writes: %v", left)
		}
		// The pool actions name the host as the compute service knows it.
		if _, err := s.Create(ctx, body("name", "c2", "service_name", "nova-c2")); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"compute.add_to_freepool host:2 nova-c2"}, pendingActions(t, d)); diff != "" {
			t.Errorf("outbox (-want +got):\n%s", diff)
		}
		runOutbox(t, d, drv)
		handlers := OutboxHandlers(drv)
		payload, _ := json.Marshal(PoolPayload{Hosts: []string{"c1"}})
		for range 2 {
			if err := handlers[KindRemoveFromFreePool](ctx, payload); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string][]string{"c1": {"add_to_freepool", "remove_from_freepool", "remove_from_freepool"}, "nova-c2": {"add_to_freepool"}}
		if diff := cmp.Diff(want, driverOps(drv)); diff != "" {
			t.Errorf("driver calls (-want +got):\n%s", diff)
		}
		if err := handlers[KindAddToFreePool](ctx, json.RawMessage(`{"Hosts": "c1"}`)); !outbox.IsPermanent(err) {
			t.Errorf("bad payload: %v, want a permanent error", err)
		}
	})
}
