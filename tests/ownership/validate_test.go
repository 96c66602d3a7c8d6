package ownership_test

import (
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
