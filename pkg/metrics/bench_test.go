package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/httpx"
)

// BenchmarkMiddleware measures what metrics add to one request: the same
// chi route served bare, through httpx.Instrument with an observer that
// does nothing, and with the real counter and histogram. The difference
// between sub-benchmarks is the per-request overhead.
func BenchmarkMiddleware(b *testing.B) {
	mux := chi.NewRouter()
	mux.Get("/leases/{lease_id}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "lease_id")
		w.WriteHeader(http.StatusOK)
	})
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	nop := func(string, string, string, int, time.Duration) {}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", mux},
		{"instrument-nop", httpx.Instrument("blazar", "/v1", nop, nil)(mux)},
		{"instrument-prometheus", httpx.Instrument("blazar", "/v1", m.ObserveRequest, nil)(mux)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/leases/6b1ee2e4-0b9c-4d3e-9d2a-2f7f0c0a9e1d", nil)
			w := discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkObserveRequest is the observer alone (label lookup, counter
// and histogram update).
func BenchmarkObserveRequest(b *testing.B) {
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest("placement", "/resource_providers/{uuid}", "GET", 200, 150*time.Microsecond)
	}
}

// discard is a ResponseWriter that keeps nothing (httptest.Recorder's
// buffering would dominate the numbers).
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
