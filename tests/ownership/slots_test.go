package ownership_test

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// instanceLease creates an instance lease of project for amount slots of
// 2 VCPU/4 GiB/10 GB (affinity null) over one day of 2099.
func instanceLease(t *testing.T, ts *httptest.Server, project, name string, amount int) (int, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"name": %q, "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00", "events": [],
 "reservations": [{"resource_type": "virtual:instance", "amount": %d, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10,
                   "affinity": null, "resource_properties": ""}]}`, name, amount)
	return do(t, ts, "u:"+project, "POST", "/v1/leases", body)
}

// TestInstanceSlotsFromPools: two projects under one parent over HTTP,
// with instance leases. c1 counts 4 slots (ownership_slots); dom owns it
// whole and gives a (PA) 2 slots and b (PB) 2; dom also owns c2 whole,
// its private pool; c3 is public. PA's leases take a's slots of c1
// first, then dom's c2, then the public c3 (never b's slots, which b
// does not lend); PB gets its own slots though PA's leases came first.
// Each lease body lists where its slots came from and matches
// blazar-v1.yaml; PA's pools list its part of c1 and match
// ownership.yaml.
func TestInstanceSlotsFromPools(t *testing.T) {
	ts := start(t)
	blazarSpec := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	ownSpec := specValidator(t, specPath)
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
	// A lease before the plan: upstream's body.
	status, body := instanceLease(t, ts, "PC", "before", 1)
	if status != 201 {
		t.Fatalf("lease before the plan: %d %v", status, body)
	}
	if es := entries(t, getLease(t, ts, blazarSpec, body["lease"].(map[string]any)["id"].(string))); es != nil {
		t.Fatalf("an instance lease made without a plan has ownership entries %v", es)
	}
	if status, body := do(t, ts, "admin", "DELETE", "/v1/leases/"+body["lease"].(map[string]any)["id"].(string), ""); status != 204 {
		t.Fatalf("delete: %d %v", status, body)
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
	// PA's pools: its 2 slots of c1, dom's c2, then the public pool.
	status, ex := getChecked(t, ts, ownSpec, "u:PA", "/v1/ownership/projects/PA")
	if status != 200 {
		t.Fatalf("PA's pools: %d %v", status, ex)
	}
	var order []string
	for _, p := range ex["explanation"].(map[string]any)["pools"].([]any) {
		p := p.(map[string]any)
		s := fmt.Sprintf("%s hosts=%v", p["kind"], p["hosts"])
		for _, pt := range asList(p["parts"]) {
			pt := pt.(map[string]any)
			s += fmt.Sprintf(" part=%v:%v/%v", pt["host"], pt["slots"], pt["of"])
		}
		order = append(order, s)
	}
	want := []string{"owned hosts=[] part=" + ids["c1"] + ":2/4", "private hosts=[" + ids["c2"] + "]", "public hosts=[" + ids["c3"] + "]"}
	if strings.Join(order, "; ") != strings.Join(want, "; ") {
		t.Fatalf("PA's pools:\n got %s\nwant %s", strings.Join(order, "; "), strings.Join(want, "; "))
	}

	c1, c2, c3 := ids["c1"], ids["c2"], ids["c3"]
	for _, st := range []struct {
		project string
		amount  int
		want    string
	}{
		{"PA", 2, "owned:a@" + c1},                        // a's 2 slots of c1
		{"PA", 2, "private:dom@" + c2},                    // a's slots used: dom's private c2
		{"PA", 5, "private:dom@" + c2 + ", public@" + c3}, // c2's 2 left, then the public c3
		{"PB", 2, "owned:b@" + c1},                        // b's slots stayed b's
		{"PB", 1, "public@" + c3},                         // b's slots and dom's c2 are full
	} {
		status, body := instanceLease(t, ts, st.project, fmt.Sprintf("%s-%d", st.project, st.amount), st.amount)
		if status != 201 {
			t.Fatalf("%s's lease of %d: %d %v", st.project, st.amount, status, body)
		}
		l := getLease(t, ts, blazarSpec, body["lease"].(map[string]any)["id"].(string))
		var got []string
		for _, e := range entries(t, l) {
			s := e["pool"].(string)
			if c, ok := e["consumer"]; ok {
				s += ":" + c.(string)
			}
			got = append(got, s+"@"+e["host_id"].(string))
		}
		if g := strings.Join(sorted(got), ", "); g != st.want {
			t.Errorf("%s's lease of %d slots: %s, want %s", st.project, st.amount, g, st.want)
		}
	}
	// Nothing PA may use is left (b's 2 slots of c1 are b's).
	if status, body := instanceLease(t, ts, "PA", "more", 1); status != 409 {
		t.Fatalf("PA's lease beyond its pools: %d %v", status, body)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
