package placement

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/placement"
)

// apiServer starts the Placement API (legacy policy) on a fresh database.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	svc := placement.NewService(dbtest.Open(t), placement.Config{})
	srv := httptest.NewServer(New(svc, config.Placement{PolicyMode: "legacy"}, config.CORS{}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

type apiCase struct {
	name    string
	method  string
	path    string
	mv      string
	headers map[string]string
	body    string
	// want
	status int
	has    []string // substrings of the body
	hdr    map[string]string
	noHdr  []string
}

func runAPICases(t *testing.T, srv *httptest.Server, cases []apiCase) {
	t.Helper()
	for _, tc := range cases {
		var rd io.Reader
		if tc.body != "" {
			rd = strings.NewReader(tc.body)
		}
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Auth-Token", "admin")
		if tc.mv != "" {
			req.Header.Set("OpenStack-API-Version", "placement "+tc.mv)
		}
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range tc.headers {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s %s: status %d, want %d; body %s", tc.name, tc.method, tc.path, resp.StatusCode, tc.status, b)
			continue
		}
		for _, s := range tc.has {
			if !strings.Contains(string(b), s) {
				t.Errorf("%s: body %s\nlacks %q", tc.name, b, s)
			}
		}
		for k, v := range tc.hdr {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", tc.name, k, got, v)
			}
		}
		for _, k := range tc.noHdr {
			if got := resp.Header.Get(k); got != "" {
				t.Errorf("%s: header %s = %q, want none", tc.name, k, got)
			}
		}
	}
}

const (
	rpA = "11111111-2222-3333-4444-555555555555"
	rpB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

func TestInventoryAPI(t *testing.T) {
	srv := apiServer(t)
	runAPICases(t, srv, []apiCase{
		{name: "create rp", method: "POST", path: "/resource_providers", body: `{"name": "a", "uuid": "` + strings.ReplaceAll(rpA, "-", "") + `"}`,
			status: 201, hdr: map[string]string{"Location": srv.URL + "/resource_providers/" + rpA}},
		{name: "no content type", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{}`,
			headers: map[string]string{"Content-Type": ""}, status: 400, has: []string{"content-type header required when content-length \u003e 0"}},
		{name: "wrong content type", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{}`,
			headers: map[string]string{"Content-Type": "text/plain"}, status: 415,
			has: []string{`The request media type text/plain is not supported by this server. \n\n The media type text/plain is not supported, use application/json`}},
		{name: "malformed", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{"foo": }`,
			status: 400, has: []string{"Malformed JSON: Expecting value: line 1 column 9 (char 8)"}},
		{name: "schema", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{"resource_class": "DISK_GB", "total": 0}`,
			status: 400, has: []string{"JSON does not validate: 0 is less than the minimum of 1  Failed validating 'minimum' in schema['properties']['total']"}},
		{name: "capacity", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{"resource_class": "DISK_GB", "total": 10, "reserved": 10}`,
			status: 400, has: []string{"Unable to create inventory for resource provider " + rpA + ": Invalid inventory for 'DISK_GB' on resource provider '" + rpA + "'. The reserved value is greater than or equal to total."}},
		{name: "capacity 1.26", mv: "1.26", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{"resource_class": "DISK_GB", "total": 10, "reserved": 10}`,
			status: 201, has: []string{`"resource_provider_generation":1`, `"allocation_ratio":1.0`}},
		{name: "unknown class", method: "POST", path: "/resource_providers/" + rpA + "/inventories", body: `{"resource_class": "HOUSE", "total": 10}`,
			status: 400, has: []string{"Unable to create inventory for resource provider " + rpA + ": No such resource class HOUSE."}},
		{name: "integral float", method: "PUT", path: "/resource_providers/" + rpA + "/inventories/DISK_GB", body: `{"resource_provider_generation": 1, "total": 20.0, "allocation_ratio": 1.5}`,
			status: 200, has: []string{`"total":20`, `"allocation_ratio":1.5`, `"resource_provider_generation":2`}},
		{name: "stale", mv: "1.23", method: "PUT", path: "/resource_providers/" + rpA + "/inventories", body: `{"resource_provider_generation": 1, "inventories": {}}`,
			status: 409, has: []string{"resource provider generation conflict", `"code":"placement.concurrent_update"`}},
		{name: "delete all 1.4", mv: "1.4", method: "DELETE", path: "/resource_providers/" + rpA + "/inventories",
			status: 405, has: []string{"The method DELETE is not allowed for this resource. \\n\\n "}},
		{name: "empty list has no Last-Modified", mv: "1.15", method: "DELETE", path: "/resource_providers/" + rpA + "/inventories", status: 204},
		{name: "empty list", mv: "1.15", method: "GET", path: "/resource_providers/" + rpA + "/inventories",
			status: 200, hdr: map[string]string{"Cache-Control": "no-cache"}, noHdr: []string{"Last-Modified"}},
		{name: "no provider", method: "GET", path: "/resource_providers/" + rpB + "/inventories",
			status: 404, has: []string{"No resource provider with uuid " + rpB + " found : No resource provider with uuid " + rpB + " found"}},
		{name: "route 404", method: "GET", path: "/nothing", status: 404, has: []string{`"detail":"The resource could not be found.\n\n   "`}},
	})
}

func TestProviderListAPI(t *testing.T) {
	srv := apiServer(t)
	runAPICases(t, srv, []apiCase{
		{name: "create", method: "POST", path: "/resource_providers", body: `{"name": "a", "uuid": "` + rpA + `"}`, status: 201},
		{name: "unknown param", method: "GET", path: "/resource_providers?resources=VCPU:1", mv: "1.3", status: 400,
			has: []string{"Invalid query string parameters: Additional properties are not allowed ('resources' was unexpected)"}},
		{name: "bad uuid", method: "GET", path: "/resource_providers?uuid=1111", status: 400,
			has: []string{"Invalid query string parameters: '1111' is not a 'uuid'"}},
		{name: "uuid without hyphens is a uuid", method: "GET", path: "/resource_providers?uuid=" + strings.ReplaceAll(rpA, "-", ""), status: 200,
			has: []string{`"resource_providers":[]`}},
		{name: "bad utf-8", method: "GET", path: "/resource_providers?name=%ff", status: 400,
			has: []string{"Invalid query string parameters: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"}},
		{name: "negative amount, not HTML-escaped", method: "GET", path: "/resource_providers?resources=VCPU:-2", mv: "1.4", status: 400,
			has: []string{"Requested resource VCPU requires amount >= 1. Got: -2."}},
		{name: "unknown class", method: "GET", path: "/resource_providers?resources=HOUSE:2", mv: "1.4", status: 400,
			has: []string{"Invalid resource class in resources parameter: No such resource class HOUSE."}},
		{name: "unknown trait", method: "GET", path: "/resource_providers?required=CUSTOM_NO", mv: "1.18", status: 400,
			has: []string{`Invalid trait(s) in \"required\" parameter: No such trait(s): CUSTOM_NO.`}},
		{name: "forbidden before 1.22", method: "GET", path: "/resource_providers?required=!HW_CPU_X86_AVX", mv: "1.21", status: 400,
			has: []string{"Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !HW_CPU_X86_AVX"}},
		{name: "member_of twice before 1.24", method: "GET", path: "/resource_providers?member_of=" + rpA + "&member_of=" + rpB, mv: "1.23", status: 400,
			has: []string{"Multiple member_of parameters are not supported"}},
		{name: "in_tree", method: "GET", path: "/resource_providers?in_tree=" + rpA, mv: "1.14", status: 200, has: []string{`"uuid":"` + rpA + `"`}},
		// Placement's "uuid" format is oslo's is_uuid_like, not
		// jsonschema's: braces and urn: pass, a leading + or 0x does not.
		{name: "in_tree in braces", method: "GET", path: "/resource_providers?in_tree=%7B" + rpA + "%7D", mv: "1.14", status: 200},
		{name: "uuid with 0x", method: "GET", path: "/resource_providers?uuid=0x" + rpA[2:], status: 400,
			has: []string{"Invalid query string parameters: '0x" + rpA[2:] + "' is not a 'uuid'  Failed validating 'format' in schema['properties']['uuid']"}},
		{name: "parent with +", method: "POST", path: "/resource_providers", mv: "1.14", body: `{"name": "b", "parent_provider_uuid": "+` + rpA[1:] + `"}`, status: 400,
			has: []string{"JSON does not validate: '+" + rpA[1:] + "' is not a 'uuid'  Failed validating 'format' in schema[0]:     {'format': 'uuid', 'type': 'string'}  On instance:"}},
		// It passes validation, but the parent is looked up as written.
		{name: "urn parent", method: "POST", path: "/resource_providers", mv: "1.14", body: `{"name": "b", "parent_provider_uuid": "urn:uuid:` + rpA + `"}`, status: 400,
			has: []string{"parent provider UUID does not exist."}},
	})
}

func TestTraitsClassesAggregatesAPI(t *testing.T) {
	srv := apiServer(t)
	runAPICases(t, srv, []apiCase{
		{name: "create", method: "POST", path: "/resource_providers", body: `{"name": "a", "uuid": "` + rpA + `"}`, status: 201},
		{name: "bad trait name", method: "PUT", path: "/traits/GOLD", mv: "1.6", status: 400, has: []string{`start with the prefix \"CUSTOM_\"`}},
		{name: "trait", method: "PUT", path: "/traits/CUSTOM_GOLD", mv: "1.6", status: 201, hdr: map[string]string{"Location": srv.URL + "/traits/CUSTOM_GOLD"}},
		{name: "trait again", method: "PUT", path: "/traits/CUSTOM_GOLD", mv: "1.15", status: 204, hdr: map[string]string{"Cache-Control": "no-cache"}},
		{name: "traits before 1.6", method: "GET", path: "/traits", mv: "1.5", status: 404},
		{name: "list traits", method: "GET", path: "/traits?name=in:CUSTOM_GOLD,HW_CPU_X86_AVX", mv: "1.6", status: 200,
			has: []string{`"traits":["CUSTOM_GOLD","HW_CPU_X86_AVX"]`}},
		{name: "bad name filter", method: "GET", path: "/traits?name=CUSTOM", mv: "1.6", status: 400, has: []string{`Got: \"CUSTOM\"`}},
		{name: "bad associated", method: "GET", path: "/traits?associated=yes", mv: "1.6", status: 400, has: []string{`only accepts \"true\" or \"false\"`}},
		{name: "set rp traits", method: "PUT", path: "/resource_providers/" + rpA + "/traits", mv: "1.6",
			body: `{"traits": ["CUSTOM_GOLD"], "resource_provider_generation": 0}`, status: 200, has: []string{`"resource_provider_generation":1`}},
		{name: "set rp traits stale", method: "PUT", path: "/resource_providers/" + rpA + "/traits", mv: "1.23",
			body: `{"traits": [], "resource_provider_generation": 0}`, status: 409, has: []string{"placement.concurrent_update"}},
		{name: "trait in use", method: "DELETE", path: "/traits/CUSTOM_GOLD", mv: "1.6", status: 409, has: []string{"The trait CUSTOM_GOLD is in use by a resource provider."}},
		{name: "rc create", method: "PUT", path: "/resource_classes/CUSTOM_X", mv: "1.7", status: 201},
		{name: "rc bad name", method: "PUT", path: "/resource_classes/X", mv: "1.7", status: 400, has: []string{"JSON does not validate: 'X' does not match '^CUSTOM_[A-Z0-9_]+$'"}},
		{name: "rc rename", method: "PUT", path: "/resource_classes/CUSTOM_X", mv: "1.6", body: `{"name": "CUSTOM_Y"}`, status: 200,
			has: []string{`"name":"CUSTOM_Y"`}, noHdr: []string{"Cache-Control", "Last-Modified"}},
		{name: "rc list", method: "GET", path: "/resource_classes", mv: "1.2", status: 200, has: []string{`{"links":[{"rel":"self","href":"/resource_classes/VCPU"}],"name":"VCPU"}`}},
		{name: "aggregates 1.1 body", method: "PUT", path: "/resource_providers/" + rpA + "/aggregates", mv: "1.1", body: `["` + rpB + `"]`,
			status: 200, has: []string{`"aggregates":["` + rpB + `"]`}},
		{name: "aggregates 1.1 keeps generation", method: "GET", path: "/resource_providers/" + rpA, mv: "1.1", status: 200, has: []string{`"generation":1`}},
		{name: "aggregates duplicate", method: "PUT", path: "/resource_providers/" + rpA + "/aggregates", mv: "1.1", body: `["` + rpB + `", "` + rpB + `"]`,
			status: 400, has: []string{"has non-unique elements"}},
		{name: "aggregates 1.19", method: "PUT", path: "/resource_providers/" + rpA + "/aggregates", mv: "1.19",
			body: `{"aggregates": [], "resource_provider_generation": 1}`, status: 200, has: []string{`"resource_provider_generation":2`}},
		{name: "aggregates 1.0 content type first", method: "PUT", path: "/resource_providers/" + rpA + "/aggregates", mv: "1.0",
			body: `[]`, headers: map[string]string{"Content-Type": "text/plain"}, status: 415},
	})
}

func TestWebobDetail(t *testing.T) {
	r := httptest.NewRequest("DELETE", "/x", nil)
	r.Header.Set("Accept", "text/plain")
	for _, tc := range []struct {
		status int
		msg    string
		want   string
	}{
		{404, "", "The resource could not be found.\n\n   "},
		{400, "a\nb\r<br/>c <!-- d --> <em>e</em>", "The server could not comply with the request since it is either malformed or otherwise incorrect.\n\n a b\nc  d  e  "},
		{405, "m", "The method DELETE is not allowed for this resource. \n\n m"},
		{406, "Only application/json is provided", "The resource could not be generated that was acceptable to your browser (content of type text/plain. \n\n Only application/json is provided"},
		{415, "m", "The request media type None is not supported by this server. \n\n m"},
	} {
		if got := webobDetail(r, tc.status, tc.msg); got != tc.want {
			t.Errorf("webobDetail(%d, %q) = %q, want %q", tc.status, tc.msg, got, tc.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 1.5: "1.5", 16: "16.0", 0.0001: "0.0001", 0.00001: "1e-05",
		1e16: "1e+16", 3.40282e38: "3.40282e+38", 123456789012345.6: "123456789012345.6", 0: "0.0"} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
	b, _ := json.Marshal(map[string]pyFloat{"r": 2})
	if string(b) != `{"r":2.0}` {
		t.Errorf("marshal: %s", b)
	}
}

func TestPolicyModes(t *testing.T) {
	id := func(roles string, system bool, project string) context.Context {
		i := &auth.Identity{UserID: "u", ProjectID: project, Roles: auth.SplitRoles(roles)}
		if system {
			i.SystemScope, i.ProjectID = "all", ""
		}
		return auth.WithIdentity(context.Background(), i)
	}
	const list, create, usages = "placement:resource_providers:list", "placement:resource_providers:create", "placement:usages"
	for _, tc := range []struct {
		mode, rule string
		ctx        context.Context
		target     string
		allowed    bool
	}{
		{"legacy", list, id("admin", false, "p"), "", true},
		{"legacy", list, id("reader", true, ""), "", true}, // new default OR role:admin
		{"legacy", create, id("reader", true, ""), "", false},
		{"legacy", list, id("member,reader", false, "p"), "", false},
		{"legacy", usages, id("reader", false, "p"), "p", true},
		{"secure", list, id("admin", false, "p"), "", false}, // scope
		{"secure", list, id("reader", true, ""), "", true},
		{"secure", create, id("admin", true, ""), "", true},
		{"secure", create, id("reader", true, ""), "", false},
		{"secure", usages, id("reader", false, "p"), "p", true},
		{"secure", usages, id("reader", false, "p"), "q", false},
		{"open", create, id("", false, "p"), "", true},
	} {
		err := NewPolicy(tc.mode).Authorize(tc.ctx, tc.rule, tc.target)
		if (err == nil) != tc.allowed {
			t.Errorf("%s %s: %v, want allowed=%v", tc.mode, tc.rule, err, tc.allowed)
		}
	}
}
