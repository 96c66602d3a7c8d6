package httpfuzz

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratorReproducible: one seed gives the same requests, another
// seed different ones (the fuzzer's failures are replayed from the seed).
func TestGeneratorReproducible(t *testing.T) {
	run := func(seed uint64) []string {
		g := New(seed)
		var out []string
		for range 500 {
			out = append(out, g.Next().String())
		}
		return out
	}
	a, b := run(7), run(7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("seed 7 twice gave different requests (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, run(8)) {
		t.Fatal("seeds 7 and 8 gave the same requests")
	}
}

// TestGeneratorCoversRoutes: a few thousand requests reach every route of
// both tables on both Placement mounts, with and without bodies, and
// include the header variants the brief asks for.
func TestGeneratorCoversRoutes(t *testing.T) {
	g := New(1)
	routes := map[string]bool{}
	var placementRoot, placementMounted, jsonSuffix, latest, badVersion, truncated, userToken int
	for range 20000 {
		r := g.Next()
		routes[string(r.API)+" "+r.Route] = true
		if r.API == Placement && r.Route != "" {
			if r.Target == PlacementRoot {
				placementRoot++
			} else if strings.HasPrefix(r.Path, "/placement") {
				placementMounted++
			} else {
				t.Fatalf("placement request on the main listener outside /placement: %s", r)
			}
		}
		if r.API == Blazar && strings.Contains(r.Path, ".json") {
			jsonSuffix++
		}
		switch v := r.Header.Get("OpenStack-API-Version"); {
		case strings.HasSuffix(v, " latest"):
			latest++
		case strings.HasSuffix(v, " 1.40") || strings.HasSuffix(v, " 1.x"):
			badVersion++
		}
		if r.Header.Get("X-Auth-Token") == "user:project" {
			userToken++
		}
		if len(r.Body) > 0 && (r.Body[0] == '{' || r.Body[0] == '[') && !json.Valid(r.Body) {
			truncated++
		}
	}
	for _, ep := range endpoints {
		if !routes[string(ep.api)+" "+ep.path] {
			t.Errorf("route %s %s never generated", ep.api, ep.path)
		}
	}
	for name, n := range map[string]int{"placement at /": placementRoot, "placement under /placement": placementMounted,
		".json": jsonSuffix, "latest": latest, "bad version": badVersion, "invalid JSON body": truncated, "user:project": userToken} {
		if n == 0 {
			t.Errorf("no request with %s", name)
		}
	}
}

// TestLearnFrom: ids in created resources' answers join the pools the
// paths are filled from.
func TestLearnFrom(t *testing.T) {
	g := New(1)
	g.LearnFrom(Request{Method: "POST", Route: "/v1/leases"}, 201, []byte(`{"lease": {"id": "L1"}}`))
	g.LearnFrom(Request{Method: "POST", Route: "/v1/os-hosts"}, 201, []byte(`{"host": {"id": 12}}`))
	g.LearnFrom(Request{Method: "POST", Route: "/resource_providers"}, 200, []byte(`{"uuid": "U1"}`))
	g.LearnFrom(Request{Method: "POST", Route: "/resource_classes", Body: []byte(`{"name": "CUSTOM_A"}`)}, 201, nil)
	g.LearnFrom(Request{Method: "PUT", Route: "/allocations/{consumer}", Path: "/placement/allocations/C1?x=1"}, 204, nil)
	g.LearnFrom(Request{Method: "POST", Route: "/resource_providers"}, 400, []byte(`{"uuid": "NOT"}`))
	want := map[string][]string{kLease: {"L1"}, kHost: {"12"}, kRP: {"U1"}, kConsumer: {"C1"}}
	for k, ids := range want {
		if diff := cmp.Diff(ids, g.ids[k]); diff != "" {
			t.Errorf("%s ids (-want +got):\n%s", k, diff)
		}
	}
	if !strings.Contains(strings.Join(g.ids[kRC], ","), "CUSTOM_A") {
		t.Errorf("resource class not learnt: %v", g.ids[kRC])
	}
}

// TestCheck: what the fuzzer accepts and refuses as an answer.
func TestCheck(t *testing.T) {
	js := http.Header{"Content-Type": {"application/json"}}
	html := http.Header{"Content-Type": {"text/html; charset=UTF-8"}}
	text := http.Header{"Content-Type": {"text/plain; charset=UTF-8"}}
	for _, tc := range []struct {
		name   string
		api    API
		method string
		res    result
		bad    string // "" when accepted, else the start of the reason
	}{
		{"blazar 200", Blazar, "GET", result{200, js, []byte(`{"leases": []}`)}, ""},
		{"blazar 500", Blazar, "GET", result{500, js, []byte(`{"error_code": 500, "error_message": "x", "error_name": 500}`)}, "server error"},
		{"blazar 503", Blazar, "GET", result{503, js, nil}, "server error"},
		{"blazar 400", Blazar, "POST", result{400, js, []byte(`{"error_code": 400, "error_message": "bad", "error_name": 400}`)}, ""},
		{"blazar werkzeug 404", Blazar, "GET", result{404, js, []byte(`{"error": 404, "error_message": "nope"}`)}, ""},
		{"blazar 401", Blazar, "GET", result{401, js, []byte(`{"error": {"code": 401, "title": "Unauthorized", "message": "m"}}`)}, ""},
		{"blazar error without message", Blazar, "GET", result{400, js, []byte(`{"error_code": 400}`)}, "error-shape"},
		{"blazar error as text", Blazar, "GET", result{400, text, []byte(`bad`)}, "error-shape"},
		{"blazar empty error", Blazar, "GET", result{404, js, nil}, "empty error body"},
		{"blazar HEAD error", Blazar, "HEAD", result{404, js, nil}, ""},
		{"json that is not", Blazar, "GET", result{200, js, []byte(`{"leases": [`)}, "body"},
		{"placement 400 json", Placement, "PUT", result{400, js, []byte(`{"errors": [{"status": 400, "title": "Bad Request", "detail": "d"}]}`)}, ""},
		{"placement wrong status", Placement, "PUT", result{400, js, []byte(`{"errors": [{"status": 404, "title": "x", "detail": "d"}]}`)}, "error-shape"},
		{"placement no errors", Placement, "PUT", result{409, js, []byte(`{"message": "x"}`)}, "error-shape"},
		{"placement 401 noauth", Placement, "GET", result{401, js, []byte(`{"message": "m", "code": "401 Unauthorized", "title": "Unauthorized"}`)}, ""},
		{"placement html", Placement, "GET", result{404, html, []byte("<html>\n <head>\n  <title>404 Not Found</title>\n </head>\n <body>\n  <h1>404 Not Found</h1>")}, ""},
		{"placement html wrong", Placement, "GET", result{404, html, []byte("<html></html>")}, "error-shape"},
		{"placement text", Placement, "GET", result{406, text, []byte("406 Not Acceptable\n\nx")}, ""},
		{"placement other type", Placement, "GET", result{400, http.Header{"Content-Type": {"application/xml"}}, []byte("<e/>")}, "error-shape"},
		{"placement 500", Placement, "GET", result{500, js, []byte(`{"errors": [{"status": 500, "title": "x", "detail": "d"}]}`)}, "server error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(Request{API: tc.api, Method: tc.method}, &tc.res)
			if tc.bad == "" && got != "" || tc.bad != "" && !strings.HasPrefix(got, tc.bad) {
				t.Errorf("check = %q, want prefix %q", got, tc.bad)
			}
		})
	}
}
