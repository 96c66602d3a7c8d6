package blazar

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

func newOwnershipServer(t *testing.T) http.Handler {
	t.Helper()
	d := dbtest.Open(t)
	hsvc := hosts.New(d, standalone.New(nil))
	for _, name := range []string{"c1", "c2", "c3", "c4"} {
		if _, err := hsvc.Create(context.Background(), map[string]any{"name": name, "rack": "r1"}); err != nil {
			t.Fatalf("create host %s: %v", name, err)
		}
	}
	rt := NewRouter()
	RegisterOwnership(rt, ownership.New(d, hsvc, func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }), nil)
	return rt.Handler(NoAuth{})
}

func call(t *testing.T, h http.Handler, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-Auth-Token", token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

const twoProjectPlan = `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB", "borrow_grace_seconds": 600}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 3}, {"consumer": "a", "group": "rack1", "amount": 1, "lend": true, "lend_grace_seconds": 3600},
             {"consumer": "b", "group": "rack1", "amount": 1}]}`

func TestOwnershipAPI(t *testing.T) {
	h := newOwnershipServer(t)
	tests := []struct {
		name, token, method, path, body string
		status                          int
		want                            string // substring of the error message
	}{
		{"member may not write", "u:PA", "PUT", "/ownership/plan", twoProjectPlan, 403, "leasehold:ownership:update"},
		{"member may not read the plan", "u:PA", "GET", "/ownership/plan", "", 403, "leasehold:ownership:get"},
		{"no generation", "admin", "PUT", "/ownership/plan", `{"consumers": []}`, 400, "generation"},
		{"unknown field", "admin", "PUT", "/ownership/plan", `{"generation": 0, "owners": []}`, 400, "owners"},
		{"children above parent", "admin", "PUT", "/ownership/plan", strings.Replace(twoProjectPlan, `"amount": 3`, `"amount": 1`, 1), 400,
			`consumer "dom" owns 1 hosts of resource group "rack1" but its children`},
		{"create", "admin", "PUT", "/ownership/plan", twoProjectPlan, 200, ""},
		{"stale generation", "admin", "PUT", "/ownership/plan", twoProjectPlan, 409, "generation 0 was given, the plan is at 1"},
		{"delete a parent", "admin", "DELETE", "/ownership/consumers/dom?generation=1", "", 409, "has children"},
		{"delete without generation", "admin", "DELETE", "/ownership/consumers/a", "", 400, "generation"},
		{"unknown entry", "admin", "DELETE", "/ownership/consumers/a/groups/nope?generation=1", "", 404, "no plan entry"},
		{"member reads its own view", "u:PA", "GET", "/ownership/projects/PA", "", 200, ""},
		{"member may not read another project", "u:PA", "GET", "/ownership/projects/PB", "", 403, "leasehold:ownership:get_project"},
		{"member's loans over a window", "u:PA", "GET", "/ownership/projects/PA?start_date=2030-02-01%2000:00&end_date=2030-02-02T00:00:00Z", "", 200, ""},
		{"member's loans, not a date", "u:PA", "GET", "/ownership/projects/PA?start_date=tomorrow", "", 400, `start_date "tomorrow" is not a date`},
		{"member's loans, empty window", "u:PA", "GET", "/ownership/projects/PA?start_date=2030-02-01%2000:00&end_date=2030-02-01%2000:00", "", 400,
			"end_date must be after start_date"},
		{"another project's loans: policy before the window", "u:PA", "GET", "/ownership/projects/PB?start_date=tomorrow", "", 403,
			"leasehold:ownership:get_project"},
		{"entry upsert", "admin", "PUT", "/ownership/consumers/b/groups/rack1", `{"generation": 1, "amount": 2}`, 200, ""},
		{"recompute", "admin", "POST", "/ownership/recompute", `{"generation": 2}`, 200, ""},
	}
	for _, tt := range tests {
		status, body := call(t, h, tt.token, tt.method, "/ownership"+strings.TrimPrefix(tt.path, "/ownership"), tt.body)
		if status != tt.status {
			t.Fatalf("%s: status %d, want %d: %v", tt.name, status, tt.status, body)
		}
		if tt.want != "" {
			msg, _ := body["error_message"].(string)
			if !strings.Contains(msg, tt.want) || body["error_code"] != float64(tt.status) {
				t.Fatalf("%s: body %v, want a Blazar error containing %q", tt.name, body, tt.want)
			}
		}
	}
	// The computed view: three hosts owned by dom, a and b one each (b
	// now wants two of dom's three; one is a's).
	status, body := call(t, h, "admin", "GET", "/ownership", "")
	if status != 200 {
		t.Fatalf("GET /ownership: %d %v", status, body)
	}
	o := body["ownership"].(map[string]any)
	if o["generation"] != float64(3) || len(o["hosts"].([]any)) != 3 {
		t.Fatalf("ownership = %v", o)
	}
	// A project's view carries its window and its (here empty) loans;
	// the explain answer has neither.
	status, body = call(t, h, "u:PA", "GET", "/ownership/projects/PA?start_date=2030-02-01%2000:00&end_date=2030-02-02%2000:00", "")
	if status != 200 {
		t.Fatalf("PA's view: %d %v", status, body)
	}
	ex := body["explanation"].(map[string]any)
	want := map[string]any{"window": map[string]any{"start_date": "2030-02-01T00:00:00Z", "end_date": "2030-02-02T00:00:00Z"},
		"loans": map[string]any{"lent": []any{}, "borrowed": []any{}}}
	if diff := cmp.Diff(want, map[string]any{"window": ex["window"], "loans": ex["loans"]}); diff != "" {
		t.Fatalf("PA's window and loans (-want +got):\n%s", diff)
	}
	// PB's member: owned, then dom's private pool, then a's lent host
	// (3600 s ≥ b's 600 s), then the public pool.
	status, body = call(t, h, "u:PB", "POST", "/ownership/explain", `{"project_id": "PB"}`)
	if status != 200 {
		t.Fatalf("explain: %d %v", status, body)
	}
	var kinds []string
	for _, p := range body["explanation"].(map[string]any)["pools"].([]any) {
		kinds = append(kinds, p.(map[string]any)["kind"].(string))
	}
	if strings.Join(kinds, ",") != "owned,lent,public" {
		t.Fatalf("PB's pools = %v (%v)", kinds, body)
	}
	if _, ok := body["explanation"].(map[string]any)["loans"]; ok {
		t.Fatalf("explain answers loans: %v", body)
	}
}
