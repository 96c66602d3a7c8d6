package ownership_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
)

// specValidator reads the OpenAPI document at path and returns its
// validator (format assertions on).
func specValidator(t *testing.T, path string) validator.Validator {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	val, verrs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(verrs) > 0 {
		t.Fatalf("validator: %v", verrs)
	}
	return val
}

// getChecked is do for a GET whose answer must match ownership.yaml.
func getChecked(t *testing.T, ts *httptest.Server, val validator.Validator, token, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	req.Header.Set("X-Auth-Token", token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	vreq, _ := http.NewRequest("GET", "http://localhost"+path, nil)
	vreq.Header = req.Header.Clone()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.Request = vreq
	if ok, errs := val.ValidateHttpResponse(vreq, resp); !ok {
		t.Errorf("GET %s → %d does not match %s: %v\n%s", path, resp.StatusCode, specPath, errs, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	return resp.StatusCode, out
}

// TestMembersSeeTheirLoans: a (PA) and b (PB) under dom each own a host
// and lend it. PA borrows b's host on Feb 1, PB borrows a's on Feb 3;
// PC, outside the tree, uses the public host. Each member sees, over the
// window, exactly the loans its project takes part in, from its side.
func TestMembersSeeTheirLoans(t *testing.T) {
	ts := start(t)
	val := specValidator(t, specPath)
	for i := 1; i <= 3; i++ {
		if status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i)); status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 2},
             {"consumer": "a", "group": "rack1", "amount": 1, "lend": true, "lend_grace_seconds": 3600},
             {"consumer": "b", "group": "rack1", "amount": 1, "lend": true, "lend_grace_seconds": 3600}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	// Each consumer's host, from the computed ownership.
	_, body := do(t, ts, "admin", "GET", "/v1/ownership", "")
	hostOwnedBy := map[string]string{}
	for _, h := range body["ownership"].(map[string]any)["hosts"].([]any) {
		h := h.(map[string]any)
		for _, o := range h["owners"].([]any) {
			if c := o.(map[string]any)["consumer"].(string); c != "dom" {
				hostOwnedBy[c] = h["host"].(string)
			}
		}
	}
	hostA, hostB := hostOwnedBy["a"], hostOwnedBy["b"]
	if hostA == "" || hostB == "" || hostA == hostB {
		t.Fatalf("owned hosts = %v", hostOwnedBy)
	}
	// leaseOn creates n one-host leases of project on day d and returns
	// the one that took host.
	leaseOn := func(project string, d, n int, host string) string {
		t.Helper()
		found := ""
		for i := range n {
			status, body := do(t, ts, "u:"+project, "POST", "/v1/leases",
				leaseBody(fmt.Sprintf("%s-%d-%d", project, d, i), fmt.Sprintf("2099-02-%02d 00:00", d), fmt.Sprintf("2099-02-%02d 00:00", d+1), 1))
			if status != 201 {
				t.Fatalf("lease of %s: %d %v", project, status, body)
			}
			id := body["lease"].(map[string]any)["id"].(string)
			if hostOf(t, ts, id) == host {
				found = id
			}
		}
		if found == "" && host != "" {
			t.Fatalf("no lease of %s took host %s", project, host)
		}
		return found
	}
	paBorrows := leaseOn("PA", 1, 2, hostB)
	pbBorrows := leaseOn("PB", 3, 2, hostA)
	leaseOn("PC", 1, 1, "")

	window := "?start_date=2099-02-01%2000:00&end_date=2099-02-05%2000:00"
	loan := func(host, lease, project, consumer string, d int) any {
		return map[string]any{"host": host, "lease_id": lease, "project_id": project, "consumer": consumer,
			"start_date": fmt.Sprintf("2099-02-%02dT00:00:00Z", d), "end_date": fmt.Sprintf("2099-02-%02dT00:00:00Z", d+1)}
	}
	tests := []struct {
		name, token, path string
		lent, borrowed    []any
	}{
		{"PA lent to PB and borrowed from b", "u:PA", "/v1/ownership/projects/PA" + window,
			[]any{loan(hostA, pbBorrows, "PB", "b", 3)}, []any{loan(hostB, paBorrows, "PB", "b", 1)}},
		{"PB sees the same loans from its side", "u:PB", "/v1/ownership/projects/PB" + window,
			[]any{loan(hostB, paBorrows, "PA", "a", 1)}, []any{loan(hostA, pbBorrows, "PA", "a", 3)}},
		{"PC, with a lease in the window, takes part in none", "u:PC", "/v1/ownership/projects/PC" + window, []any{}, []any{}},
		{"the admin reads PA's", "admin", "/v1/ownership/projects/PA?start_date=2099-02-01%2000:00&end_date=2099-02-02%2000:00",
			[]any{}, []any{loan(hostB, paBorrows, "PB", "b", 1)}},
		{"none now (the default window)", "u:PA", "/v1/ownership/projects/PA", []any{}, []any{}},
	}
	for _, tt := range tests {
		status, body := getChecked(t, ts, val, tt.token, tt.path)
		if status != 200 {
			t.Fatalf("%s: %d %v", tt.name, status, body)
		}
		got := body["explanation"].(map[string]any)["loans"]
		if diff := cmp.Diff(map[string]any{"lent": tt.lent, "borrowed": tt.borrowed}, got); diff != "" {
			t.Errorf("%s: loans (-want +got):\n%s", tt.name, diff)
		}
	}
	// Another project's view is refused, and a bad window is a Blazar
	// 400 naming the parameter.
	for _, tt := range []struct {
		token, path string
		status      int
	}{
		{"u:PA", "/v1/ownership/projects/PB" + window, 403},
		{"u:PC", "/v1/ownership/projects/PA" + window, 403},
		{"u:PA", "/v1/ownership/projects/PA?start_date=2099-02-05%2000:00&end_date=2099-02-01%2000:00", 400},
		{"u:PA", "/v1/ownership/projects/PA?end_date=someday", 400},
	} {
		status, body := getChecked(t, ts, val, tt.token, tt.path)
		if status != tt.status || body["error_code"] != float64(tt.status) || body["error_message"] == "" {
			t.Fatalf("GET %s as %s: %d %v, want a %d error body", tt.path, tt.token, status, body, tt.status)
		}
		if _, ok := body["explanation"]; ok {
			t.Fatalf("GET %s as %s answered an explanation", tt.path, tt.token)
		}
	}
}
