package ownership_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// instanceBody is a lease body of one virtual:instance reservation of
// amount slots of 2 VCPU, 4 GiB and 10 GB.
func instanceBody(name, start, end string, amount int) string {
	return fmt.Sprintf(`{"name": %q, "start_date": %q, "end_date": %q, "events": [],
 "reservations": [{"resource_type": "virtual:instance", "amount": %d, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10,
                   "affinity": null, "resource_properties": ""}]}`, name, start, end, amount)
}

// TestInstanceReclaimFromInstanceLease: two projects under one parent
// over HTTP. a (PA) owns the one host c1 (8 VCPUs) and lends it with a
// grace period of an hour; b (PB) borrows 4 VCPUs of it for an instance
// lease. PA's instance lease of 6 VCPUs is refused within the hour, told
// from when, and served after it: PB's lease is shortened to the reclaim
// time, and both leases' ownership entries (checked against
// blazar-v1.yaml) say so.
func TestInstanceReclaimFromInstanceLease(t *testing.T) {
	ts := start(t)
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	if status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", `{"name": "c1", "vcpus": "8", "memory_mb": "16384", "local_gb": "800", "rack": "r1"}`); status != 201 && status != 200 {
		t.Fatalf("create host: %d %v", status, body)
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 1},
             {"consumer": "a", "group": "rack1", "amount": 1, "lend": true, "lend_grace_seconds": 3600}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	now := time.Now().UTC()
	fmtDate := func(t time.Time) string { return t.Format("2006-01-02 15:04") }
	status, body := doChecked(t, ts, val, "u:PB", "POST", "/v1/leases", instanceBody("pb", fmtDate(now.Add(2*time.Minute)), fmtDate(now.Add(24*time.Hour)), 2))
	if status != 201 {
		t.Fatalf("PB's instance lease: %d %v", status, body)
	}
	borrower := body["lease"].(map[string]any)["id"].(string)
	if got := describe(entries(t, getLease(t, ts, val, borrower))); got != "private:dom lent by a" {
		t.Fatalf("PB's pools = %s", got)
	}
	// Within the grace period: refused with Blazar's error body, and told
	// from when.
	status, body = doChecked(t, ts, val, "u:PA", "POST", "/v1/leases", instanceBody("pa-soon", fmtDate(now.Add(10*time.Minute)), fmtDate(now.Add(30*time.Hour)), 3))
	if status != 409 || body["error_name"] == nil || !strings.Contains(fmt.Sprint(body["error_message"]), "can be reclaimed, after their lending grace period, for a lease starting at") {
		t.Fatalf("reclaim within the grace period: %d %v", status, body)
	}
	if l := getLease(t, ts, val, borrower); entries(t, l)[0]["reclaim"] != nil || l["end_date"] != now.Add(24*time.Hour).Truncate(time.Minute).Format("2006-01-02T15:04:05.000000") {
		t.Fatalf("a refused reclaim changed PB's lease: %v", l)
	}
	// The earliest window is the first whole minute after the grace
	// period (asked now: within a minute or two of an hour from now).
	status, body = doChecked(t, ts, val, "u:PA", "POST", "/v1/leases/earliest", `{"duration": 3600, "reservations": [{"resource_type": "virtual:instance",
 "amount": 3, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10, "affinity": null, "resource_properties": ""}]}`)
	if status != 200 {
		t.Fatalf("PA's earliest window: %d %v", status, body)
	}
	got, err := time.Parse("2006-01-02T15:04:05.000000", body["earliest"].(map[string]any)["start_date"].(string))
	if err != nil || got.Before(now.Add(time.Hour)) || got.After(now.Add(time.Hour+3*time.Minute)) {
		t.Fatalf("PA's earliest window starts %v (%v), want the end of the grace period, about %s", got, err, now.Add(time.Hour))
	}
	// In two hours: a reclaims its slots, PB's lease ends then.
	at := now.Add(2 * time.Hour)
	status, body = doChecked(t, ts, val, "u:PA", "POST", "/v1/leases", instanceBody("pa-later", fmtDate(at), fmtDate(now.Add(30*time.Hour)), 3))
	if status != 201 {
		t.Fatalf("reclaim: %d %v", status, body)
	}
	owner := body["lease"].(map[string]any)["id"].(string)
	b, wantAt := shortenedTo(t, ts, val, borrower, "PB", at)
	if got := describe(entries(t, b)); got != "private:dom lent by a shortened" {
		t.Fatalf("PB's entries after the reclaim = %s", got)
	}
	if r := entries(t, b)[0]["reclaim"].(map[string]any); r["by_lease"] != owner || r["at"] != wantAt || r["grace_seconds"] != float64(3600) {
		t.Fatalf("PB's reclaim note = %v", r)
	}
	o := getLease(t, ts, val, owner)
	if got := describe(entries(t, o)); got != "owned:a reclaimed" {
		t.Fatalf("PA's entries = %s", got)
	}
	if r := entries(t, o)[0]["reclaim"].(map[string]any); r["from_lease"] != borrower || r["at"] != wantAt {
		t.Fatalf("PA's reclaim note = %v", r)
	}
	// PB cannot borrow the reclaimed room back.
	status, body = doChecked(t, ts, val, "u:PB", "POST", "/v1/leases", instanceBody("pb-again", fmtDate(at.Add(time.Hour)), fmtDate(at.Add(2*time.Hour)), 2))
	if status != 409 || body["error_name"] == nil {
		t.Fatalf("PB borrows the reclaimed room: %d %v", status, body)
	}
}
