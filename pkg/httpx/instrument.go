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
			rctx := chi.NewRouteContext()
			fixed := new(string)
			ctx := context.WithValue(context.WithValue(r.Context(), chi.RouteCtxKey, rctx), routeKey{}, fixed)
			rec := &StatusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r.WithContext(ctx))
			status := rec.Status
			if status == 0 {
				status = http.StatusOK
			}
			route := UnmatchedRoute
			if *fixed != "" {
				route = *fixed
			} else if p := rctx.RoutePattern(); p != "" {
				route = prefix + p
			}
			obs(api, route, method(r.Method), status, now().Sub(start))
		})
	}
}

// routeKey holds, in a request Instrument serves, where SetRoute writes.
type routeKey struct{}

// SetRoute names the route of a request served outside a chi router (the
// version document, the metrics page) for Instrument; it is reported
// as given, without Instrument's prefix. route must be a
// constant, never something taken from the request.
func SetRoute(r *http.Request, route string) {
	if p, ok := r.Context().Value(routeKey{}).(*string); ok {
		*p = route
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
