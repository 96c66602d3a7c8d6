package ownership_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// placement calls the server's built-in Placement at microversion 1.38.
func placement(t *testing.T, ts *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+"/placement"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("OpenStack-API-Version", "placement 1.38")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// instanceOn runs an instance of project "other" on the compute provider
// of host name.
func instanceOn(t *testing.T, ts *httptest.Server, name string) {
	t.Helper()
	code, out := placement(t, ts, "GET", "/resource_providers?name="+name, "")
	rps, _ := out["resource_providers"].([]any)
	if code != 200 || len(rps) != 1 {
		t.Fatalf("provider %s: %d %v", name, code, out)
	}
	rp := rps[0].(map[string]any)["uuid"].(string)
	body := fmt.Sprintf(`{"allocations": {%q: {"resources": {"VCPU": 1, "MEMORY_MB": 1024}}}, "consumer_generation": null,
 "project_id": "other", "user_id": "someone", "consumer_type": "INSTANCE"}`, rp)
	if code, out := placement(t, ts, "PUT", "/allocations/"+uuid.NewString(), body); code != 204 {
		t.Fatalf("instance on %s: %d %v", name, code, out)
	}
}

// TestBestEffortDrawsFromPools: a BEST-EFFORT lease that must clear a
// host clears one of the project's own before a public one, though the
// public one is cheaper to clear; and a project outside the tree never
// clears a host someone owns.
func TestBestEffortDrawsFromPools(t *testing.T) {
	ts := start(t)
	ids := map[string]string{}
	for _, name := range []string{"own", "pub"} {
		status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": %q, "vcpus": "8", "memory_mb": "16384", "local_gb": "100", "grp": "be"}`, name))
		if status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
		ids[name] = fmt.Sprint(body["host"].(map[string]any)["id"])
	}
	// A place instances can move to (known only to Placement).
	spare := uuid.NewString()
	if code, out := placement(t, ts, "POST", "/resource_providers", fmt.Sprintf(`{"name": "spare", "uuid": %q}`, spare)); code != 200 {
		t.Fatalf("spare: %d %v", code, out)
	}
	if code, out := placement(t, ts, "PUT", "/resource_providers/"+spare+"/inventories",
		`{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 32}, "MEMORY_MB": {"total": 65536}}}`); code != 200 {
		t.Fatalf("spare inventory: %d %v", code, out)
	}
	// "own" is the dearer to clear: three instances against one.
	for range 3 {
		instanceOn(t, ts, "own")
	}
	instanceOn(t, ts, "pub")
	plan := fmt.Sprintf(`{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"}],
 "groups": [{"name": "mine", "hosts": [%q]}],
 "entries": [{"consumer": "dom", "group": "mine", "amount": 1}, {"consumer": "a", "group": "mine", "amount": 1}]}`, ids["own"])
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	best := func(project string) (int, map[string]any) {
		body := fmt.Sprintf(`{"name": "be-%s", "lease_type": "BEST-EFFORT", "timeout": 600, "end_date": %q, "events": [],
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": "[\"==\", \"$grp\", \"be\"]"}]}`,
			project, time.Now().UTC().Add(48*time.Hour).Format("2006-01-02 15:04"))
		return do(t, ts, "u:"+project, "POST", "/v1/leases", body)
	}
	// Outside the tree: only the public host, cleared.
	status, body := best("PZ")
	if status != 201 {
		t.Fatalf("PZ's best-effort lease: %d %v", status, body)
	}
	if h := hostOf(t, ts, body["lease"].(map[string]any)["id"].(string)); h != ids["pub"] {
		t.Fatalf("PZ's lease clears host %s, want the public %s", h, ids["pub"])
	}
	// PA: its own host, though the public one would have been cheaper
	// (it is taken now anyway, so delete PZ's lease first).
	if status, body := do(t, ts, "admin", "DELETE", "/v1/leases/"+body["lease"].(map[string]any)["id"].(string), ""); status != 204 && status != 200 {
		t.Fatalf("delete: %d %v", status, body)
	}
	instanceOn(t, ts, "pub") // busy again, still the cheaper to clear
	status, body = best("PA")
	if status != 201 {
		t.Fatalf("PA's best-effort lease: %d %v", status, body)
	}
	id := body["lease"].(map[string]any)["id"].(string)
	if h := hostOf(t, ts, id); h != ids["own"] {
		t.Fatalf("PA's lease clears host %s, want its own %s", h, ids["own"])
	}
	_, got := do(t, ts, "admin", "GET", "/v1/leases/"+id, "")
	if d := describe(entries(t, got["lease"].(map[string]any))); d != "owned:a" {
		t.Fatalf("PA's best-effort entries = %s", d)
	}
}
