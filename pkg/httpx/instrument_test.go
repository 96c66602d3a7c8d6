package httpx

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

type observed struct {
	API, Route, Method string
	Status             int
	Elapsed            time.Duration
}

// fakeClock advances by step on every reading, so the elapsed time
// Instrument reports is known without the wall clock.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Unix(0, 0)
	return func() time.Time { t = t.Add(step); return t }
}

func testRouter() http.Handler {
	mux := chi.NewRouter()
	mux.Get("/leases/{lease_id}", func(w http.ResponseWriter, r *http.Request) {
		// The handler still sees its own URL parameter.
		w.Header().Set("X-Lease", chi.URLParam(r, "lease_id"))
	})
	mux.Post("/leases", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	return http.StripPrefix("/v1", mux)
}

func TestInstrument(t *testing.T) {
	var got []observed
	obs := func(api, route, method string, status int, elapsed time.Duration) {
		got = append(got, observed{api, route, method, status, elapsed})
	}
	h := Instrument("blazar", "/v1", obs, fakeClock(time.Millisecond))(testRouter())
	fixed := Instrument("blazar", "/v1", obs, fakeClock(time.Millisecond))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r, "/versions")
		w.WriteHeader(http.StatusMultipleChoices)
	}))
	tests := []struct {
		name, method, path string
		h                  http.Handler
		want               observed
	}{
		{"pattern, not the id", "GET", "/v1/leases/6b1ee2e4-0b9c-4d3e-9d2a-2f7f0c0a9e1d", h, observed{"blazar", "/v1/leases/{lease_id}", "GET", 200, time.Millisecond}},
		{"status written", "POST", "/v1/leases", h, observed{"blazar", "/v1/leases", "POST", 201, time.Millisecond}},
		{"not found", "GET", "/v1/nothing/here", h, observed{"blazar", UnmatchedRoute, "GET", 404, time.Millisecond}},
		{"method not allowed", "DELETE", "/v1/leases", h, observed{"blazar", UnmatchedRoute, "DELETE", 405, time.Millisecond}},
		{"invented method", "BREW", "/v1/leases", h, observed{"blazar", UnmatchedRoute, "other", 405, time.Millisecond}},
		{"fixed route, no prefix", "GET", "/versions", fixed, observed{"blazar", "/versions", "GET", 300, time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if diff := cmp.Diff([]observed{tc.want}, got); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
			if rec.Code != tc.want.Status {
				t.Errorf("client saw %d, observer %d", rec.Code, tc.want.Status)
			}
		})
	}
	// The routed handler still had its parameter.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/leases/abc", nil))
	if rec.Header().Get("X-Lease") != "abc" {
		t.Errorf("URL parameter through Instrument = %q, want abc", rec.Header().Get("X-Lease"))
	}
}

// TestInstrumentBoundedRoutes: 100 distinct ids, found or not, give one
// route label each way, never a label per path.
func TestInstrumentBoundedRoutes(t *testing.T) {
	routes := map[string]int{}
	obs := func(api, route, method string, status int, elapsed time.Duration) { routes[route]++ }
	h := Instrument("blazar", "/v1", obs, nil)(testRouter())
	for i := range 100 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", fmt.Sprintf("/v1/leases/id-%d", i), nil))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", fmt.Sprintf("/v1/missing-%d/x", i), nil))
	}
	want := map[string]int{"/v1/leases/{lease_id}": 100, UnmatchedRoute: 100}
	if diff := cmp.Diff(want, routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// TestSetRouteOutsideInstrument is a no-op rather than a panic.
func TestSetRouteOutsideInstrument(t *testing.T) {
	SetRoute(httptest.NewRequest("GET", "/", nil), "/x")
}

// TestInstrumentRouteIsAPattern: whatever path and method a client sends,
// the route reported is one of the router's patterns (with the prefix)
// or UnmatchedRoute, and the method one of a fixed few: the label set
// cannot grow with the input.
func TestInstrumentRouteIsAPattern(t *testing.T) {
	allowed := map[string]bool{"/v1/leases/{lease_id}": true, "/v1/leases": true, UnmatchedRoute: true}
	methods := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true, "other": true}
	var route, meth string
	h := Instrument("blazar", "/v1", func(_, r, m string, _ int, _ time.Duration) { route, meth = r, m }, nil)(testRouter())
	rapid.Check(t, func(t *rapid.T) {
		segs := rapid.SliceOfN(rapid.SampledFrom([]string{"leases", "v1", "x", "{lease_id}", "..", "%2F", "", "a.json", "*"}), 0, 5).Draw(t, "segments")
		path := "/" + strings.Join(segs, "/")
		m := rapid.SampledFrom([]string{"GET", "POST", "DELETE", "BREW", "PROPFIND"}).Draw(t, "method")
		req := httptest.NewRequest("GET", "/", nil)
		req.Method, req.URL.Path, req.URL.RawPath = m, path, ""
		route, meth = "", ""
		h.ServeHTTP(httptest.NewRecorder(), req)
		if !allowed[route] {
			t.Fatalf("%s %s reported as route %q", m, path, route)
		}
		if !methods[meth] {
			t.Fatalf("method %q reported as %q", m, meth)
		}
	})
}
