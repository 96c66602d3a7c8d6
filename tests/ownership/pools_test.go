package ownership_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	validator "github.com/pb33f/libopenapi-validator"
)

// leaseBody creates a lease of project for n hosts over [start, end).
func leaseBody(name, start, end string, n int) string {
	return fmt.Sprintf(`{"name": %q, "start_date": %q, "end_date": %q, "events": [],
 "reservations": [{"resource_type": "physical:host", "min": %d, "max": %d, "hypervisor_properties": "", "resource_properties": ""}]}`, name, start, end, n, n)
}

// entries is a lease's ownership entries (of its one reservation).
func entries(t *testing.T, l map[string]any) []map[string]any {
	t.Helper()
	rs := l["reservations"].([]any)
	if len(rs) != 1 {
		t.Fatalf("lease has %d reservations", len(rs))
	}
	raw, ok := rs[0].(map[string]any)["ownership"]
	if !ok {
		return nil
	}
	var out []map[string]any
	for _, e := range raw.([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// describe renders entries as "pool[:consumer][ lent by x][ reclaim action]",
// sorted by pool.
func describe(es []map[string]any) string {
	var parts []string
	for _, e := range es {
		s := e["pool"].(string)
		if c, ok := e["consumer"]; ok {
			s += ":" + c.(string)
		}
		if l, ok := e["lent_by"]; ok {
			s += " lent by " + l.(string)
		}
		if r, ok := e["reclaim"]; ok {
			s += " " + r.(map[string]any)["action"].(string)
		}
		parts = append(parts, s)
	}
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && parts[j] < parts[j-1]; j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
	return strings.Join(parts, ", ")
}

// shortenedTo reads lease id (who's) and fails unless it ends at at, to
// the minute, with its end_lease event there too: a reclaim's cut. It
// returns the lease and that end in Blazar's date format.
func shortenedTo(t *testing.T, ts *httptest.Server, val validator.Validator, id, who string, at time.Time) (map[string]any, string) {
	t.Helper()
	wantAt := at.Truncate(time.Minute).Format("2006-01-02T15:04:05.000000")
	b := getLease(t, ts, val, id)
	if b["end_date"] != wantAt {
		t.Fatalf("%s's lease ends %v, want %s", who, b["end_date"], wantAt)
	}
	for _, ev := range b["events"].([]any) {
		if ev := ev.(map[string]any); ev["event_type"] == "end_lease" && ev["time"] != wantAt {
			t.Fatalf("%s's end event at %v, want %s", who, ev["time"], wantAt)
		}
	}
	return b, wantAt
}

// getLease reads a lease and checks the answer against blazar-v1.yaml.
func getLease(t *testing.T, ts *httptest.Server, val validator.Validator, id string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/leases/"+id, nil)
	req.Header.Set("X-Auth-Token", "admin")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET lease %s: %d %s", id, resp.StatusCode, body)
	}
	vreq, _ := http.NewRequest("GET", "http://localhost/v1/leases/"+id, nil)
	vreq.Header = req.Header.Clone()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.Request = vreq
	if ok, errs := val.ValidateHttpResponse(vreq, resp); !ok {
		t.Errorf("GET lease %s does not match blazar-v1.yaml: %v\n%s", id, errs, body)
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out["lease"]
}

// TestPoolsLimitsAndReclaim: two projects under one parent over HTTP. a
// (PA) owns one host, b (PB) two, which b lends with a grace period of an
// hour and a lending limit of one. PA's leases show where their hosts came
// from; a second loan at once is refused for b's limit; b reclaims its
// lent host, not before the hour is over, and then PA's lease is
// shortened and both leases say so.
func TestPoolsLimitsAndReclaim(t *testing.T) {
	ts := start(t)
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	for i := 1; i <= 3; i++ {
		if status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i)); status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	// A lease before the plan: no ownership field.
	status, body := do(t, ts, "u:PC", "POST", "/v1/leases", leaseBody("before", "2098-01-01 00:00", "2098-01-02 00:00", 1))
	if status != 201 {
		t.Fatalf("lease before the plan: %d %v", status, body)
	}
	if es := entries(t, getLease(t, ts, val, body["lease"].(map[string]any)["id"].(string))); es != nil {
		t.Fatalf("a lease made without a plan has ownership entries %v", es)
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB", "lending_limit": 1}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 3}, {"consumer": "a", "group": "rack1", "amount": 1},
             {"consumer": "b", "group": "rack1", "amount": 2, "lend": true, "lend_grace_seconds": 3600}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}

	// Far ahead: PA takes its own host and one of b's.
	status, body = do(t, ts, "u:PA", "POST", "/v1/leases", leaseBody("pa-far", "2099-01-01 00:00", "2099-01-02 00:00", 2))
	if status != 201 {
		t.Fatalf("PA's lease: %d %v", status, body)
	}
	far := body["lease"].(map[string]any)["id"].(string)
	if got := describe(entries(t, getLease(t, ts, val, far))); got != "owned:a, private:dom lent by b" {
		t.Fatalf("PA's pools = %s", got)
	}
	// A second loan overlapping it: b's other host is free, but b lends
	// one at a time.
	status, body = do(t, ts, "u:PA", "POST", "/v1/leases", leaseBody("pa-more", "2099-01-01 12:00", "2099-01-03 00:00", 1))
	if status != 409 || !strings.Contains(fmt.Sprint(body["error_message"]), `consumer "b" lends at most 1 hosts at once`) {
		t.Fatalf("loan beyond b's limit: %d %v", status, body)
	}

	// Now: PA borrows b's host for a day (two hosts: its own and b's).
	now := time.Now().UTC()
	fmtDate := func(t time.Time) string { return t.Format("2006-01-02 15:04") }
	status, body = do(t, ts, "u:PA", "POST", "/v1/leases", leaseBody("pa-now", fmtDate(now.Add(2*time.Minute)), fmtDate(now.Add(24*time.Hour)), 2))
	if status != 201 {
		t.Fatalf("PA's lease now: %d %v", status, body)
	}
	borrower := body["lease"].(map[string]any)["id"].(string)
	if got := describe(entries(t, getLease(t, ts, val, borrower))); got != "owned:a, private:dom lent by b" {
		t.Fatalf("PA's pools now = %s", got)
	}
	// b asks for both its hosts in ten minutes: PA keeps b's host for the
	// hour of grace, so b is refused and told from when.
	status, body = do(t, ts, "u:PB", "POST", "/v1/leases", leaseBody("pb-soon", fmtDate(now.Add(10*time.Minute)), fmtDate(now.Add(30*time.Hour)), 2))
	if status != 409 || !strings.Contains(fmt.Sprint(body["error_message"]), "can be reclaimed, after their lending grace period, for a lease starting at") {
		t.Fatalf("reclaim within the grace period: %d %v", status, body)
	}
	if l := getLease(t, ts, val, borrower); entries(t, l)[0]["reclaim"] != nil || entries(t, l)[1]["reclaim"] != nil {
		t.Fatalf("a refused reclaim changed PA's lease: %v", l)
	}
	// In two hours: b reclaims, PA's lease ends then.
	at := now.Add(2 * time.Hour)
	status, body = do(t, ts, "u:PB", "POST", "/v1/leases", leaseBody("pb-later", fmtDate(at), fmtDate(now.Add(30*time.Hour)), 2))
	if status != 201 {
		t.Fatalf("reclaim: %d %v", status, body)
	}
	owner := body["lease"].(map[string]any)["id"].(string)
	b, wantAt := shortenedTo(t, ts, val, borrower, "PA", at)
	if got := describe(entries(t, b)); got != "owned:a, private:dom lent by b shortened" {
		t.Fatalf("PA's entries after the reclaim = %s", got)
	}
	for _, e := range entries(t, b) {
		if r, ok := e["reclaim"].(map[string]any); ok && (r["by_lease"] != owner || r["at"] != wantAt || r["grace_seconds"] != float64(3600)) {
			t.Fatalf("PA's reclaim note = %v", r)
		}
	}
	o := getLease(t, ts, val, owner)
	if got := describe(entries(t, o)); got != "owned:b, owned:b reclaimed" {
		t.Fatalf("PB's entries = %s", got)
	}
	// The listing (its own JSON writer) shows the same entries.
	status, body = do(t, ts, "admin", "GET", "/v1/leases", "")
	if status != 200 {
		t.Fatalf("listing: %d %v", status, body)
	}
	listed := map[string]string{}
	for _, l := range body["leases"].([]any) {
		l := l.(map[string]any)
		listed[l["id"].(string)] = describe(entries(t, l))
	}
	if listed[borrower] != "owned:a, private:dom lent by b shortened" || listed[owner] != "owned:b, owned:b reclaimed" || listed[far] != "owned:a, private:dom lent by b" {
		t.Fatalf("listed entries = %v", listed)
	}
}

// TestUpdateDrawsFromPools: a lease update over HTTP that adds a host
// takes it from the project's next pool, and its answer (checked against
// blazar-v1.yaml) lists where each host came from.
func TestUpdateDrawsFromPools(t *testing.T) {
	ts := start(t)
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	for i := 1; i <= 4; i++ {
		if status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i)); status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 2}, {"consumer": "a", "group": "rack1", "amount": 1}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	status, body := do(t, ts, "u:PA", "POST", "/v1/leases", leaseBody("grow", "2099-01-01 00:00", "2099-01-02 00:00", 1))
	if status != 201 {
		t.Fatalf("lease: %d %v", status, body)
	}
	l := body["lease"].(map[string]any)
	id := l["id"].(string)
	resID := l["reservations"].([]any)[0].(map[string]any)["id"].(string)
	for _, step := range []struct {
		body, want string
	}{
		{fmt.Sprintf(`{"reservations": [{"id": %q, "min": 2, "max": 2}]}`, resID), "owned:a, private:dom"},
		{fmt.Sprintf(`{"reservations": [{"id": %q, "min": 3, "max": 3}]}`, resID), "owned:a, private:dom, public"},
	} {
		req, _ := http.NewRequest("PUT", ts.URL+"/v1/leases/"+id, strings.NewReader(step.body))
		req.Header.Set("X-Auth-Token", "u:PA")
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("update %s: %d %s", step.body, resp.StatusCode, raw)
		}
		vreq, _ := http.NewRequest("PUT", "http://localhost/v1/leases/"+id, strings.NewReader(step.body))
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		resp.Request = vreq
		if ok, errs := val.ValidateHttpRequestResponse(vreq, resp); !ok {
			t.Errorf("update answer does not match blazar-v1.yaml: %v\n%s", errs, raw)
		}
		var out map[string]map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if got := describe(entries(t, out["lease"])); got != step.want {
			t.Fatalf("after %s: %s, want %s", step.body, got, step.want)
		}
	}
}
