package placement

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

// TestProviderJSONText pins the provider body's text (key order, null
// parent) at the microversions where it changes: the typed bodies must
// encode exactly as the maps they replaced.
func TestProviderJSONText(t *testing.T) {
	parent := "c9d5d8a6-1b7f-4a4c-9a55-4f0f1c2b7e01"
	p := &placement.Provider{UUID: "7d8f1c1e-5d1a-4b8e-8d6e-2f1b9a7c3e10", Name: "rp <&> é", Generation: 3,
		RootProviderUUID: parent, ParentProviderUUID: &parent, CreatedAt: time.Unix(1, 0)}
	root := *p
	root.ParentProviderUUID, root.RootProviderUUID = nil, p.UUID
	links := func(extra string) string {
		b := "/resource_providers/" + p.UUID
		s := `[{"rel":"self","href":"` + b + `"},{"rel":"inventories","href":"` + b + `/inventories"},{"rel":"usages","href":"` + b + `/usages"}`
		for _, rel := range []string{"aggregates", "traits", "allocations"} {
			if extra == "" {
				break
			}
			s += `,{"rel":"` + rel + `","href":"` + b + "/" + rel + `"}`
			if rel == extra {
				break
			}
		}
		return s + "]"
	}
	for _, tc := range []struct {
		minor int
		p     *placement.Provider
		want  string
	}{
		{0, p, `{"generation":3,"links":` + links("") + `,"name":"rp <&> é","uuid":"` + p.UUID + `"}`},
		{13, p, `{"generation":3,"links":` + links("allocations") + `,"name":"rp <&> é","uuid":"` + p.UUID + `"}`},
		{14, p, `{"generation":3,"links":` + links("allocations") + `,"name":"rp <&> é","parent_provider_uuid":"` + parent + `","root_provider_uuid":"` + parent + `","uuid":"` + p.UUID + `"}`},
		{39, &root, `{"generation":3,"links":` + links("allocations") + `,"name":"rp <&> é","parent_provider_uuid":null,"root_provider_uuid":"` + p.UUID + `","uuid":"` + p.UUID + `"}`},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(microversion.WithVersion(r.Context(), microversion.Version{Major: 1, Minor: tc.minor}))
		b, err := marshalJSON(providerJSON(r, tc.p))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, string(b)); diff != "" {
			t.Errorf("1.%d (-want +got):\n%s", tc.minor, diff)
		}
	}
}

// TestProviderListText holds the listing's own encoder to the bytes
// encoding/json gives for the same providers through providerJSON, at
// every microversion where the body changes, for names and prefixes that
// need escaping (quotes, control characters, HTML characters, non-ASCII,
// U+2028, invalid UTF-8).
func TestProviderListText(t *testing.T) {
	parent := "c9d5d8a6-1b7f-4a4c-9a55-4f0f1c2b7e01"
	names := []string{"plain", "rp <&> é", `q"uo\te`, "tab\tnew\nline\x01", "line\u2028sep", "bad\xffutf8", ""}
	var ps []placement.Provider
	for i, n := range names {
		p := placement.Provider{UUID: fmt.Sprintf("7d8f1c1e-5d1a-4b8e-8d6e-2f1b9a7c3e%02d", i), Name: n,
			Generation: int64(i * 7), RootProviderUUID: parent}
		if i%2 == 0 {
			p.ParentProviderUUID = &parent
		} else {
			p.RootProviderUUID = p.UUID
		}
		ps = append(ps, p)
	}
	for _, pfx := range []string{"", "/placement", `/odd "prefix"`} {
		for _, minor := range []int{0, 1, 6, 11, 13, 14, 39} {
			r := httptest.NewRequest("GET", "/", nil)
			ctx := microversion.WithVersion(r.Context(), microversion.Version{Major: 1, Minor: minor})
			r = r.WithContext(context.WithValue(ctx, prefixKey{}, pfx))
			for _, list := range [][]placement.Provider{nil, ps[:1], ps} {
				bodies := make([]any, 0, len(list))
				for i := range list {
					bodies = append(bodies, providerJSON(r, &list[i]))
				}
				want, err := marshalJSON(map[string]any{"resource_providers": bodies})
				if err != nil {
					t.Fatal(err)
				}
				got := appendProviderList(nil, pfx, microversion.Version{Major: 1, Minor: minor}, list)
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("prefix %q, 1.%d, %d providers (-encoding/json +appendProviderList):\n%s", pfx, minor, len(list), diff)
				}
			}
		}
	}
}
