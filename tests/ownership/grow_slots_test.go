package ownership_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestActiveInstanceGrowsWithinItsPart: over HTTP, c1 counts 4 slots and
// dom gives a (PA) 2 of them and b (PB) the other 2 (not lent); c2 is
// public. PA's lease starting now takes a's 2 slots of c1 with affinity
// (all on one host); once it is ACTIVE, growing it to 3 slots would put
// the third on c1 beyond a's part, so the update is refused with
// Blazar's error body (checked against blazar-v1.yaml) and the lease
// keeps its amount.
func TestActiveInstanceGrowsWithinItsPart(t *testing.T) {
	ts, s := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // the event loop starts the lease
	t.Cleanup(func() { cancel(); <-done })
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	for i, extra := range []string{`"rack": "r1", "ownership_slots": "4"`, `"rack": "r2"`} {
		status, body := do(t, ts, "admin", "POST", "/v1/os-hosts",
			fmt.Sprintf(`{"name": "c%d", "vcpus": "8", "memory_mb": "16384", "local_gb": "800", %s}`, i+1, extra))
		if status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB"}],
 "groups": [{"name": "g1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "g1", "amount": 1},
             {"consumer": "a", "group": "g1", "amount": 2, "partial": true},
             {"consumer": "b", "group": "g1", "amount": 2, "partial": true}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	status, body := doChecked(t, ts, val, "u:PA", "POST", "/v1/leases", `{"name": "pa", "start_date": "now", "end_date": "2099-01-02 00:00", "events": [],
 "reservations": [{"resource_type": "virtual:instance", "amount": 2, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10,
                   "affinity": true, "resource_properties": ""}]}`)
	if status != 201 {
		t.Fatalf("PA's lease: %d %v", status, body)
	}
	id := body["lease"].(map[string]any)["id"].(string)
	var l map[string]any
	// Waits for the event loop (no time asserted; the deadline only
	// bounds a broken loop).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if l = getLease(t, ts, val, id); l["status"] == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PA's lease never started: %v", l)
		}
	}
	if got := describe(entries(t, l)); got != "owned:a" {
		t.Fatalf("PA's slots from %s, want a's part of c1", got)
	}
	res := l["reservations"].([]any)[0].(map[string]any)
	status, body = doChecked(t, ts, val, "u:PA", "PUT", "/v1/leases/"+id,
		fmt.Sprintf(`{"reservations": [{"id": %q, "amount": 3}]}`, res["id"]))
	if status != 409 || body["error_name"] == nil || !strings.Contains(fmt.Sprint(body["error_message"]), "Not enough") {
		t.Fatalf("growing past a's part: %d %v", status, body)
	}
	if n := getLease(t, ts, val, id)["reservations"].([]any)[0].(map[string]any)["amount"]; n != float64(2) {
		t.Fatalf("amount %v after a refused growth", n)
	}
}
