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

// doChecked is do, with the exchange checked against val (the request
// too when it succeeded).
func doChecked(t *testing.T, ts *httptest.Server, val validator.Validator, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	vreq, _ := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	vreq.Header = req.Header.Clone()
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	resp.Request = vreq
	var ok bool
	var errs []error
	if resp.StatusCode < 300 {
		v, es := val.ValidateHttpRequestResponse(vreq, resp)
		ok = v
		for _, e := range es {
			errs = append(errs, e)
		}
	} else {
		v, es := val.ValidateHttpResponse(vreq, resp)
		ok = v
		for _, e := range es {
			errs = append(errs, e)
		}
	}
	if !ok {
		t.Errorf("%s %s → %d does not match blazar-v1.yaml: %v\nanswer: %s", method, path, resp.StatusCode, errs, raw)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestReclaimFromInstanceLease: two projects under one parent over HTTP.
// a (PA) owns the one host c1 and lends it with a grace period of an
// hour; b (PB) borrows slots on it for an instance lease. PA's host lease
// is refused within the hour, told from when, and served after it: PB's
// instance lease is shortened to the reclaim time, and both leases'
// ownership entries (checked against blazar-v1.yaml) say so.
func TestReclaimFromInstanceLease(t *testing.T) {
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
	status, body := doChecked(t, ts, val, "u:PB", "POST", "/v1/leases", fmt.Sprintf(`{"name": "pb", "start_date": %q, "end_date": %q, "events": [],
 "reservations": [{"resource_type": "virtual:instance", "amount": 2, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10,
                   "affinity": null, "resource_properties": ""}]}`, fmtDate(now.Add(2*time.Minute)), fmtDate(now.Add(24*time.Hour))))
	if status != 201 {
		t.Fatalf("PB's instance lease: %d %v", status, body)
	}
	borrower := body["lease"].(map[string]any)["id"].(string)
	if got := describe(entries(t, getLease(t, ts, val, borrower))); got != "private:dom lent by a" {
		t.Fatalf("PB's pools = %s", got)
	}
	// Within the grace period: refused, and told from when.
	status, body = doChecked(t, ts, val, "u:PA", "POST", "/v1/leases", leaseBody("pa-soon", fmtDate(now.Add(10*time.Minute)), fmtDate(now.Add(30*time.Hour)), 1))
	if status != 409 || body["error_name"] == nil || !strings.Contains(fmt.Sprint(body["error_message"]), "can be reclaimed, after their lending grace period, for a lease starting at") {
		t.Fatalf("reclaim within the grace period: %d %v", status, body)
	}
	if l := getLease(t, ts, val, borrower); entries(t, l)[0]["reclaim"] != nil {
		t.Fatalf("a refused reclaim changed PB's lease: %v", l)
	}
	// In two hours: a reclaims its host, PB's lease ends then.
	at := now.Add(2 * time.Hour)
	status, body = doChecked(t, ts, val, "u:PA", "POST", "/v1/leases", leaseBody("pa-later", fmtDate(at), fmtDate(now.Add(30*time.Hour)), 1))
	if status != 201 {
		t.Fatalf("reclaim: %d %v", status, body)
	}
	owner := body["lease"].(map[string]any)["id"].(string)
	b, wantAt := shortenedTo(t, ts, val, borrower, "PB", at)
	if got := describe(entries(t, b)); got != "private:dom lent by a shortened" {
		t.Fatalf("PB's entries after the reclaim = %s", got)
	}
	if r := entries(t, b)[0]["reclaim"].(map[string]any); r["by_lease"] != owner || r["at"] != wantAt || r["grace_seconds"] != float64(3600) ||
		r["original_end_date"] != now.Add(24*time.Hour).Truncate(time.Minute).Format("2006-01-02T15:04:05.000000") {
		t.Fatalf("PB's reclaim note = %v", r)
	}
	o := getLease(t, ts, val, owner)
	if got := describe(entries(t, o)); got != "owned:a reclaimed" {
		t.Fatalf("PA's entries = %s", got)
	}
	if r := entries(t, o)[0]["reclaim"].(map[string]any); r["from_lease"] != borrower || r["at"] != wantAt {
		t.Fatalf("PA's reclaim note = %v", r)
	}
	// The listing (its own JSON writer) shows the borrower's note too.
	status, body = doChecked(t, ts, val, "u:PB", "GET", "/v1/leases", "")
	if status != 200 {
		t.Fatalf("listing: %d %v", status, body)
	}
	for _, l := range body["leases"].([]any) {
		if l := l.(map[string]any); l["id"] == borrower && describe(entries(t, l)) != "private:dom lent by a shortened" {
			t.Fatalf("PB's listed entries = %s", describe(entries(t, l)))
		}
	}
}
