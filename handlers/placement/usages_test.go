package placement

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

func TestQueryPairs(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  [][2]string
	}{
		{"", nil},
		{"project_id=p", [][2]string{{"project_id", "p"}}},
		{"project_id=&user_id=u", [][2]string{{"project_id", ""}, {"user_id", "u"}}},
		{"a=1&a=2&&b", [][2]string{{"a", "1"}, {"a", "2"}, {"b", ""}}},
		{"consumer_type=A%5FB&x=a+b", [][2]string{{"consumer_type", "A_B"}, {"x", "a b"}}},
	} {
		r := httptest.NewRequest("GET", "/usages?"+tc.query, nil)
		got, err := queryPairs(r)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("queryPairs(%q) (-want +got):\n%s", tc.query, diff)
		}
	}
	r := httptest.NewRequest("GET", "/usages", nil)
	r.URL.RawQuery = "project_id=%zz"
	if _, err := queryPairs(r); err == nil {
		t.Error("bad escape: no error")
	}
}

// FuzzQueryPairs: whatever the query, pairs decode without panicking and
// agree with net/url on the values of each key.
func FuzzQueryPairs(f *testing.F) {
	for _, s := range []string{"project_id=p&user_id=u", "a=%41&a=", "&&=&", "x=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/usages", nil)
		r.URL.RawQuery = raw
		pairs, err := queryPairs(r)
		want, werr := url.ParseQuery(raw)
		if err != nil || werr != nil {
			return
		}
		got := url.Values{}
		for _, p := range pairs {
			got[p[0]] = append(got[p[0]], p[1])
		}
		if diff := cmp.Diff(want, got); diff != "" && len(want) > 0 {
			t.Fatalf("%q (-url.ParseQuery +queryPairs):\n%s", raw, diff)
		}
	})
}

func TestAmountDecode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true}, {"2.0", 2, true}, {"1e3", 1000, true}, {"-4", -4, true},
		{"1.5", 0, false}, {`"1"`, 0, false}, {"null", 0, false}, {"true", 0, false}, {"1e300", 0, false},
		{"99999999999999999999", 0, false},
	} {
		var a amount
		err := json.Unmarshal([]byte(tc.in), &a)
		if (err == nil) != tc.ok || (tc.ok && int64(a) != tc.want) {
			t.Errorf("amount %s = %d, %v; want %d ok=%v", tc.in, a, err, tc.want, tc.ok)
		}
	}
}

// FuzzAmountDecode: an amount decodes only to the integer its JSON
// number denotes.
func FuzzAmountDecode(f *testing.F) {
	for _, s := range []string{"1", "2.0", "-0", "1e2", "1.25", "null", "[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a amount
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			return
		}
		var f64 float64
		if err := json.Unmarshal([]byte(in), &f64); err != nil {
			t.Fatalf("%q decoded as amount %d but is not a number: %v", in, a, err)
		}
		if float64(int64(a)) != f64 && f64 == float64(int64(f64)) {
			t.Fatalf("%q decoded as %d, want %v", in, a, f64)
		}
	})
}

// TestAllocationAndUsageShapes checks the per-microversion response
// shapes of GET /allocations/{c}, GET /resource_providers/{u}/allocations
// and GET /usages, and the error statuses of bad writes, through the API.
func TestAllocationAndUsageShapes(t *testing.T) {
	srv, svc := allocServer(t, dbtest.Open(t))
	rp := seedProvider(t, svc, "shapes", 10)
	const c = "5eed0000-0000-4000-8000-000000000001"
	put := func(mv string, body map[string]any) apiResult {
		t.Helper()
		res, err := call(srv.Client(), "PUT", srv.URL+"/allocations/"+c, mv, body)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := put("1.38", map[string]any{"allocations": map[string]any{rp: map[string]any{"resources": map[string]int{"VCPU": 3}}},
		"project_id": "p", "user_id": "u", "consumer_generation": nil, "consumer_type": "INSTANCE"}); res.status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", res.status, res.body)
	}
	alloc := map[string]any{rp: map[string]any{"generation": float64(1), "resources": map[string]any{"VCPU": float64(3)}}}
	for _, tc := range []struct {
		method, path, mv string
		want             map[string]any
	}{
		{"GET", "/allocations/" + c, "1.11", map[string]any{"allocations": alloc}},
		{"GET", "/allocations/" + c, "1.12", map[string]any{"allocations": alloc, "project_id": "p", "user_id": "u"}},
		{"GET", "/allocations/" + c, "1.28", map[string]any{"allocations": alloc, "project_id": "p", "user_id": "u", "consumer_generation": float64(1)}},
		{"GET", "/allocations/" + c, "1.38", map[string]any{"allocations": alloc, "project_id": "p", "user_id": "u", "consumer_generation": float64(1), "consumer_type": "INSTANCE"}},
		{"GET", "/allocations/0ff00000-0000-4000-8000-000000000000", "1.38", map[string]any{"allocations": map[string]any{}}},
		{"GET", "/resource_providers/" + rp + "/allocations", "1.27", map[string]any{"resource_provider_generation": float64(1),
			"allocations": map[string]any{c: map[string]any{"resources": map[string]any{"VCPU": float64(3)}}}}},
		{"GET", "/resource_providers/" + rp + "/allocations", "1.28", map[string]any{"resource_provider_generation": float64(1),
			"allocations": map[string]any{c: map[string]any{"resources": map[string]any{"VCPU": float64(3)}, "consumer_generation": float64(1)}}}},
		{"GET", "/resource_providers/" + rp + "/usages", "1.0", map[string]any{"resource_provider_generation": float64(1), "usages": map[string]any{"VCPU": float64(3)}}},
		{"GET", "/usages?project_id=p", "1.9", map[string]any{"usages": map[string]any{"VCPU": float64(3)}}},
		{"GET", "/usages?project_id=p", "1.38", map[string]any{"usages": map[string]any{"INSTANCE": map[string]any{"VCPU": float64(3), "consumer_count": float64(1)}}}},
		{"GET", "/usages?project_id=p&consumer_type=unknown", "1.38", map[string]any{"usages": map[string]any{}}},
	} {
		res, err := call(srv.Client(), tc.method, srv.URL+tc.path, tc.mv, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusOK {
			t.Errorf("%s %s @%s: %d %s", tc.method, tc.path, tc.mv, res.status, res.body)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s @%s (-want +got):\n%s", tc.method, tc.path, tc.mv, diff)
		}
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		mv     string
		body   any
		status int
	}{
		{"malformed consumer", "PUT", "/allocations/not-a-uuid", "1.12", map[string]any{"allocations": map[string]any{rp: map[string]any{"resources": map[string]int{"VCPU": 1}}}, "project_id": "p", "user_id": "u"}, 400},
		{"unknown provider", "PUT", "/allocations/" + c, "1.12", map[string]any{"allocations": map[string]any{"0ff00000-0000-4000-8000-000000000000": map[string]any{"resources": map[string]int{"VCPU": 1}}}, "project_id": "p", "user_id": "u"}, 400},
		{"over capacity", "PUT", "/allocations/" + c, "1.12", map[string]any{"allocations": map[string]any{rp: map[string]any{"resources": map[string]int{"VCPU": 11}}}, "project_id": "p", "user_id": "u"}, 409},
		{"stale generation", "PUT", "/allocations/" + c, "1.28", map[string]any{"allocations": map[string]any{rp: map[string]any{"resources": map[string]int{"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": 9}, 409},
		{"post before 1.13", "POST", "/allocations", "1.12", map[string]any{c: map[string]any{}}, 404},
		{"usages before 1.9", "GET", "/usages?project_id=p", "1.8", nil, 404},
		{"delete unknown", "DELETE", "/allocations/0ff00000-0000-4000-8000-000000000000", "1.0", nil, 404},
	} {
		res, err := call(srv.Client(), tc.method, srv.URL+tc.path, tc.mv, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if res.status != tc.status || !json.Valid(res.body) {
			t.Errorf("%s: %d %s, want %d with a JSON error body", tc.name, res.status, res.body, tc.status)
		}
	}
}
