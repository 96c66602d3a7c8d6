package ownership_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A child owning slots under a parent owning whole hosts is refused with
// a 400 naming the child and the group when its slots, converted to
// hosts, exceed the parent's; the plan is left as it was.
func TestPlanSlotsBeyondParentRefused(t *testing.T) {
	ts := start(t)
	do(t, ts, "admin", "POST", "/v1/os-hosts", `{"name": "c1", "rack": "r1"}`)
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "p", "parent_id": "dom", "rank": 1, "project_id": "PA"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 1},
             {"consumer": "p", "group": "rack1", "amount": 1000, "partial": true}]}`
	status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan)
	msg, _ := body["error_message"].(string)
	if status != 400 || body["error_code"] != float64(400) ||
		!strings.Contains(msg, `consumer "p" owns 1000 slots of resource group "rack1", more than its parent "dom" owns there`) {
		t.Fatalf("plan: %d %v, want a 400 naming p and rack1", status, body)
	}
	status, body = do(t, ts, "admin", "GET", "/v1/ownership/plan", "")
	if p, _ := body["plan"].(map[string]any); status != 200 || p["generation"] != float64(0) {
		t.Fatalf("plan after the refusal: %d %v", status, body)
	}
	// One slot of the parent's one host is within it.
	plan = strings.Replace(plan, `"amount": 1000`, `"amount": 1`, 1)
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
}

// A host removed under a project's ownership is replaced at the next
// refresh: the project owns another host, and GET /v1/ownership shows the
// recomputation's report with its trigger.
func TestHostRemovalRecomputes(t *testing.T) {
	ts, srv := startServer(t)
	for i := 1; i <= 4; i++ {
		do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i))
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 2}, {"consumer": "a", "group": "rack1", "amount": 1}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	ownedHost := func() string {
		status, body := do(t, ts, "u:PA", "GET", "/v1/ownership/projects/PA", "")
		if status != 200 {
			t.Fatalf("PA's pools: %d %v", status, body)
		}
		p := body["explanation"].(map[string]any)["pools"].([]any)[0].(map[string]any)
		if p["kind"] != "owned" {
			t.Fatalf("PA's first pool = %v", p)
		}
		return p["hosts"].([]any)[0].(string)
	}
	before := ownedHost()
	if status, body := do(t, ts, "admin", "DELETE", "/v1/os-hosts/"+before, ""); status != 204 && status != 200 {
		t.Fatalf("delete host %s: %d %v", before, status, body)
	}
	if err := srv.Ownership.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := ownedHost(); after == before {
		t.Fatalf("PA still owns the removed host %s", before)
	}
	status, body := do(t, ts, "admin", "GET", "/v1/ownership", "")
	if status != 200 {
		t.Fatalf("ownership: %d %v", status, body)
	}
	o := body["ownership"].(map[string]any)
	if r := o["report"].(map[string]any); o["generation"] != float64(2) || r["trigger"] != "hosts" || r["moved_hosts"].(float64) < 1 {
		t.Fatalf("ownership after the removal = %v", o)
	}
}

// POST /v1/ownership/explain with a request: the pools in order with
// their free matching hosts, and the pool whose prefix serves it, as the
// lease create's choice; a request no pool serves says why.
func TestExplainRequest(t *testing.T) {
	ts := start(t)
	for i := 1; i <= 5; i++ {
		do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1", "gpu": "%v"}`, i, i == 5))
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 3}, {"consumer": "a", "group": "rack1", "amount": 1}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	explain := func(body string) map[string]any {
		t.Helper()
		status, out := do(t, ts, "u:PA", "POST", "/v1/ownership/explain", body)
		if status != 200 {
			t.Fatalf("explain %s: %d %v", body, status, out)
		}
		return out["explanation"].(map[string]any)["request"].(map[string]any)
	}
	// Two hosts: owned (1 free) is not enough, owned + private (2 more) is.
	r := explain(`{"project_id": "PA", "min": 2, "max": 2, "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00"}`)
	pools := r["pools"].([]any)
	var kinds []string
	var free []float64
	for _, p := range pools {
		p := p.(map[string]any)
		kinds = append(kinds, p["kind"].(string))
		free = append(free, p["free"].(float64))
	}
	if strings.Join(kinds, ",") != "owned,private,public" || free[0] != 1 || free[1] != 2 || free[2] != 2 {
		t.Fatalf("pools = %v", pools)
	}
	if r["served_by"] != float64(2) || len(r["chosen"].([]any)) != 2 {
		t.Fatalf("request = %v", r)
	}
	// A lease of PA takes its owned host over the window: one request of
	// one host is then served by the private pool.
	if status, body := lease(t, ts, "PA", 1); status != 201 && status != 200 {
		t.Fatalf("lease: %d %v", status, body)
	}
	r = explain(`{"min": 1, "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00"}`)
	if r["served_by"] != float64(2) || r["pools"].([]any)[0].(map[string]any)["free"] != float64(0) {
		t.Fatalf("after a lease: %v", r)
	}
	// Matching hosts only: the one GPU host is public.
	r = explain(`{"min": 1, "resource_properties": "[\"=\", \"$gpu\", \"true\"]", "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00"}`)
	if r["served_by"] != float64(3) {
		t.Fatalf("GPU request = %v", r)
	}
	// Six hosts: none serves, and the answer says why.
	r = explain(`{"min": 6, "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00"}`)
	if r["served_by"] != float64(0) || r["reason"] == "" {
		t.Fatalf("six hosts = %v", r)
	}
	if status, body := do(t, ts, "u:PA", "POST", "/v1/ownership/explain", `{"min": 1}`); status != 400 {
		t.Fatalf("no window: %d %v", status, body)
	}
}
