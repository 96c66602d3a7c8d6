package ownership_test

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestEarliestInstanceFromPools: two projects under one parent over
// HTTP, with instance leases and the earliest window. c1 counts 4 slots;
// dom owns it whole and gives a (PA) 2 slots and b (PB) 2 (not lent);
// dom also owns c2 whole, its private pool; c3 is public. With PA's
// slots of c1 and c2 taken for the day and c3 until noon, PA's earliest
// window for 2 slots is at noon from the public pool, though b's slots
// of c1 are free; PB's starts at once on its own slots; PC, outside the
// tree, waits for the public pool too. A lease created at "earliest"
// gets the window the search gave. Answers match blazar-v1.yaml.
func TestEarliestInstanceFromPools(t *testing.T) {
	ts := start(t)
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	ids := map[string]string{}
	for i, extra := range []string{`"rack": "r1", "ownership_slots": "4"`, `"rack": "r2"`, `"rack": "r3"`} {
		name := fmt.Sprintf("c%d", i+1)
		status, body := do(t, ts, "admin", "POST", "/v1/os-hosts",
			fmt.Sprintf(`{"name": %q, "vcpus": "8", "memory_mb": "16384", "local_gb": "800", %s}`, name, extra))
		if status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
		ids[name] = fmt.Sprint(body["host"].(map[string]any)["id"])
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB"}],
 "groups": [{"name": "g1", "properties": {"rack": "r1"}}, {"name": "g2", "properties": {"rack": "r2"}}],
 "entries": [{"consumer": "dom", "group": "g1", "amount": 1}, {"consumer": "dom", "group": "g2", "amount": 1},
             {"consumer": "a", "group": "g1", "amount": 2, "partial": true},
             {"consumer": "b", "group": "g1", "amount": 2, "partial": true}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	slots := func(n int) string {
		return fmt.Sprintf(`[{"resource_type": "virtual:instance", "amount": %d, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10,
 "affinity": null, "resource_properties": ""}]`, n)
	}
	for _, b := range []struct {
		project, end string
		n            int
		want         string
	}{
		{"PA", "2099-01-02 00:00", 2, "owned:a"},
		{"PA", "2099-01-02 00:00", 4, "private:dom"},
		{"PC", "2099-01-01 12:00", 4, "public"},
	} {
		status, body := do(t, ts, "u:"+b.project, "POST", "/v1/leases", fmt.Sprintf(`{"name": "busy", "start_date": "2099-01-01 00:00",
 "end_date": %q, "events": [], "reservations": %s}`, b.end, slots(b.n)))
		if status != 201 {
			t.Fatalf("%s's lease: %d %v", b.project, status, body)
		}
		if got := describe(entries(t, getLease(t, ts, val, body["lease"].(map[string]any)["id"].(string)))); got != b.want {
			t.Fatalf("%s's lease of %d slots: pools %s, want %s", b.project, b.n, got, b.want)
		}
	}
	for _, tc := range []struct {
		project, start, host string
	}{
		{"PA", "2099-01-01T12:00:00.000000", ids["c3"]},
		{"PB", "2099-01-01T00:00:00.000000", ids["c1"]},
		{"PC", "2099-01-01T12:00:00.000000", ids["c3"]},
	} {
		status, body := doChecked(t, ts, val, "u:"+tc.project, "POST", "/v1/leases/earliest",
			fmt.Sprintf(`{"after": "2099-01-01 00:00", "duration": 3600, "reservations": %s}`, slots(2)))
		if status != 200 {
			t.Fatalf("%s's earliest window: %d %v", tc.project, status, body)
		}
		win := body["earliest"].(map[string]any)
		hosts := win["reservations"].([]any)[0].(map[string]any)["resources"]
		if win["start_date"] != tc.start || fmt.Sprint(hosts) != "["+tc.host+"]" {
			t.Errorf("%s's earliest window starts %v on %v, want %s on [%s]", tc.project, win["start_date"], hosts, tc.start, tc.host)
		}
	}
	status, body := do(t, ts, "u:PA", "POST", "/v1/leases", fmt.Sprintf(`{"name": "pa", "start_date": "earliest", "duration": 3600, "after": "2099-01-01 00:00",
 "events": [], "reservations": %s}`, slots(2)))
	if status != 201 {
		t.Fatalf("PA at earliest: %d %v", status, body)
	}
	l := getLease(t, ts, val, body["lease"].(map[string]any)["id"].(string))
	if l["start_date"] != "2099-01-01T12:00:00.000000" || describe(entries(t, l)) != "public" {
		t.Fatalf("PA's lease at earliest starts %v with pools %s", l["start_date"], describe(entries(t, l)))
	}
}
