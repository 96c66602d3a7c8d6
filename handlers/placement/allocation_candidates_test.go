package placement

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/placement"
)

// TestAllocationCandidatesShapes: the response shape per microversion
// (list vs dict allocations, mappings, summaries' traits, parent/root,
// requested-only resources before 1.27) and the errors.
func TestAllocationCandidatesShapes(t *testing.T) {
	srv, svc := allocServer(t, dbtest.Open(t))
	ctx := context.Background()
	cn := seedProvider(t, svc, "cn", 8)
	mem := placement.DefaultInventory("MEMORY_MB")
	mem.Total = 1024
	vcpu := placement.DefaultInventory("VCPU")
	vcpu.Total = 8
	if _, _, err := svc.SetInventories(ctx, cn, nil, []placement.Inventory{vcpu, mem}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.SetProviderTraits(ctx, cn, 1, []string{"HW_CPU_X86_AVX2"}); err != nil {
		t.Fatal(err)
	}
	get := func(mv, query string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/allocation_candidates?"+query, nil)
		req.Header.Set("X-Auth-Token", "admin")
		req.Header.Set("OpenStack-API-Version", "placement "+mv)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s %s: %v: %s", mv, query, err, raw)
		}
		if resp.StatusCode == 200 && mv >= "1.15" && resp.Header.Get("Last-Modified") == "" {
			t.Errorf("%s: no last-modified", mv)
		}
		return resp.StatusCode, body
	}
	summary := func(res map[string]any, extra map[string]any) map[string]any {
		m := map[string]any{"resources": res}
		for k, v := range extra {
			m[k] = v
		}
		return map[string]any{cn: m}
	}
	capOf := func(c float64) map[string]any { return map[string]any{"capacity": c, "used": float64(0)} }
	for _, tc := range []struct {
		mv, query string
		want      map[string]any
	}{
		{"1.10", "resources=VCPU:1", map[string]any{
			"allocation_requests": []any{map[string]any{"allocations": []any{map[string]any{
				"resource_provider": map[string]any{"uuid": cn}, "resources": map[string]any{"VCPU": float64(1)}}}}},
			"provider_summaries": summary(map[string]any{"VCPU": capOf(8)}, nil)}},
		{"1.17", "resources=VCPU:1&required=HW_CPU_X86_AVX2", map[string]any{
			"allocation_requests": []any{map[string]any{"allocations": map[string]any{cn: map[string]any{"resources": map[string]any{"VCPU": float64(1)}}}}},
			"provider_summaries":  summary(map[string]any{"VCPU": capOf(8)}, map[string]any{"traits": []any{"HW_CPU_X86_AVX2"}})}},
		{"1.34", "resources=VCPU:1,MEMORY_MB:64", map[string]any{
			"allocation_requests": []any{map[string]any{
				"allocations": map[string]any{cn: map[string]any{"resources": map[string]any{"VCPU": float64(1), "MEMORY_MB": float64(64)}}},
				"mappings":    map[string]any{"": []any{cn}}}},
			"provider_summaries": summary(map[string]any{"VCPU": capOf(8), "MEMORY_MB": capOf(1024)},
				map[string]any{"traits": []any{"HW_CPU_X86_AVX2"}, "parent_provider_uuid": nil, "root_provider_uuid": cn})}},
		{"1.39", "resources=VCPU:9", map[string]any{"allocation_requests": []any{}, "provider_summaries": map[string]any{}}},
	} {
		st, body := get(tc.mv, tc.query)
		if st != 200 {
			t.Errorf("%s %s: %d %v", tc.mv, tc.query, st, body)
			continue
		}
		if diff := cmp.Diff(tc.want, body); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.mv, tc.query, diff)
		}
	}
	for _, tc := range []struct {
		mv, query string
		status    int
		detail    string
	}{
		{"1.9", "resources=VCPU:1", 404, "The resource could not be found."},
		{"1.39", "resources=CUSTOM_NOPE:1", 400, "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."},
		{"1.39", "resources=VCPU:1&required=CUSTOM_NOPE", 400, "No such trait(s): CUSTOM_NOPE."},
		{"1.39", "resources=VCPU:x", 400, "Requested resource VCPU expected positive integer amount. Got: x."},
	} {
		st, body := get(tc.mv, tc.query)
		errs, _ := body["errors"].([]any)
		if st != tc.status || len(errs) != 1 {
			t.Errorf("%s %s: %d %v", tc.mv, tc.query, st, body)
			continue
		}
		if d, _ := errs[0].(map[string]any)["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s %s: detail %q, want %q", tc.mv, tc.query, d, tc.detail)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "ctl\x01\n", "ünïcode ✓"} {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil || got != s {
			t.Errorf("%q: got %q, %v", s, got, err)
		}
	}
}
