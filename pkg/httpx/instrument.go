package httpx

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// UnmatchedRoute is the route reported for a request no route matched
// (404, 405): one value, however many distinct paths are asked.
const UnmatchedRoute = "unmatched"

// RequestObserver is told about every finished request: the API that
// served it, the route pattern that matched (never the raw path), the
// method, the status and how long it took. It must not block.
type RequestObserver func(api, route, method string, status int, elapsed time.Duration)

// Instrument reports every request the wrapped handler serves to obs
// under api. The route is prefix followed by the pattern of the chi
// router that matched (so /v1/leases/{lease_id}, not the lease's id),
// SetRoute's value for a handler outside a router, or UnmatchedRoute.
//
// It works by placing a fresh chi routing context in the request before
// the router sees it: a chi router uses a context it finds instead of its
// pooled one, so the matched pattern is still readable here after it
// returns.
func Instrument(api, prefix string, obs RequestObserver, now func() time.Time) func(http.Handler) http.Handler {
	if now == nil {
		now = time.Now
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := now()
			// One allocation carries the routing context, SetRoute's
			// slot and the status recorder.
			st := &instrumented{Context: r.Context(), rec: StatusRecorder{ResponseWriter: w}}
			st.rctx.URLParams.Keys, st.rctx.URLParams.Values = st.keys[:0], st.values[:0]
			st.rctx.RoutePatterns = st.patterns[:0]
			next.ServeHTTP(&st.rec, r.WithContext(st))
			status := st.rec.Status
			if status == 0 {
				status = http.StatusOK
			}
			route := UnmatchedRoute
			if st.fixed != "" {
				route = st.fixed
			} else if p := st.rctx.RoutePattern(); p != "" {
				route = prefix + p
			}
			obs(api, route, method(r.Method), status, now().Sub(start))
		})
	}
}

// instrumented is the context of a request Instrument serves: its parent
// plus chi's routing context and the route SetRoute names.
type instrumented struct {
	context.Context
	rctx  chi.Context
	fixed string
	rec   StatusRecorder
	// Room for the routing context's usual few parameters and patterns
	// (chi's own pooled context reuses its slices; a fresh one would
	// grow each from nil).
	keys, values, patterns [4]string
}

// routeKey finds the instrumented context for SetRoute.
type routeKey struct{}

// Value implements context.Context.
func (c *instrumented) Value(key any) any {
	switch key {
	case chi.RouteCtxKey:
		return &c.rctx
	case routeKey{}:
		return c
	}
	return c.Context.Value(key)
}

// SetRoute names the route of a request served outside a chi router (the
// version document, the metrics page) for Instrument; it is reported as
// given, without Instrument's prefix. route must be a constant, never
// something taken from the request.
func SetRoute(r *http.Request, route string) {
	if c, ok := r.Context().Value(routeKey{}).(*instrumented); ok {
		c.fixed = route
	}
}

// method bounds the method label to the methods the APIs know; anything
// else a client invents is "other".
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
