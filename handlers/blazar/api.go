// Package blazar serves the OpenStack Blazar v1 API (reservation service,
// microversion 1.0) under /v1, plus the version document at / and
// /versions. Handlers decode, check policy, call the services in pkg/blazar
// and plugins/, and encode; they never touch SQL.
package blazar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/policy"
)

var apiVersion = microversion.Version{Major: 1, Minor: 0}

// handlerFunc returns its error for one renderer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Router is the /v1 router the resource files register on.
type Router struct {
	mux    *chi.Mux
	policy *policy.Enforcer
}

// NewRouter returns an empty Blazar router deciding by Blazar's default
// policy (NewRouterWithPolicy for the configured one).
func NewRouter() *Router { return NewRouterWithPolicy(defaultEnforcer) }

// NewRouterWithPolicy returns an empty Blazar router whose handlers ask
// enf, with the not-found and method-not-allowed bodies Blazar's
// werkzeug layer gives.
func NewRouterWithPolicy(enf *policy.Enforcer) *Router {
	rt := &Router{mux: chi.NewRouter(), policy: enf}
	rt.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeWerkzeug(w, http.StatusNotFound, "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.")
	})
	rt.mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeWerkzeug(w, http.StatusMethodNotAllowed, "The method is not allowed for the requested URL.")
	})
	return rt
}

// Handle registers h for method and pattern (under /v1), also with the
// ".json" suffix Blazar accepts on every route.
func (rt *Router) Handle(method, pattern string, h handlerFunc) {
	fn := func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			RenderError(w, r, err)
		}
	}
	rt.mux.MethodFunc(method, pattern, fn)
	rt.mux.MethodFunc(method, pattern+".json", fn)
}

// Handler wraps the router with Blazar's pipeline: identity, microversion,
// panic recovery, and the router's policy in the request context for the
// handlers' checks. It expects to be mounted at /v1 with the prefix
// removed.
func (rt *Router) Handler(authn Authenticator) http.Handler {
	var h http.Handler = rt.mux
	next := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(withEnforcer(r.Context(), rt.policy)))
	})
	h = httpx.Recover(func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		writeBlazar(w, status, "Internal Server Error", "INTERNAL_SERVER_ERROR")
	})(h)
	h = microversionMiddleware(h)
	h = authMiddleware(authn, h)
	return h
}

func microversionMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := microversion.Negotiate(r.Header.Values("Openstack-Api-Version"), "reservation", apiVersion, apiVersion)
		if err != nil {
			var na *microversion.ErrNotAcceptable
			if errors.As(err, &na) {
				writeWerkzeug(w, http.StatusNotAcceptable, "Version "+na.Requested+" was requested but the requested version is not supported for this resource.")
				return
			}
			writeWerkzeug(w, http.StatusBadRequest, "API Version String "+err.Error()+" is of invalid format. Must be of format MajorNum.MinorNum.")
			return
		}
		w.Header().Set("Openstack-Api-Version", "reservation "+v.String())
		w.Header().Add("Vary", "OpenStack-API-Version")
		next.ServeHTTP(w, r.WithContext(microversion.WithVersion(r.Context(), v)))
	})
}

// Authenticator turns request headers into an identity, or refuses with
// an *errs.Error (Unauthorized, or Unavailable when the identity service
// cannot answer): identity.Keystone or NoAuth.
type Authenticator = identity.Authenticator

// NoAuth is Blazar in noauth mode, failing closed (identity.NoAuth): token
// "admin" is the admin of project admin, "user:project" a member of
// project (X-User-Id, X-Project-Id and X-Roles then rename the caller),
// and any other token, or none, is refused with 401.
type NoAuth struct{}

// Authenticate implements Authenticator.
func (NoAuth) Authenticate(r *http.Request) (*auth.Identity, error) {
	return identity.NoAuth{}.Authenticate(r)
}

func authMiddleware(authn Authenticator, next http.Handler) http.Handler {
	challenge := ""
	if c, ok := authn.(identity.Challenger); ok {
		challenge = c.Challenge()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := authn.Authenticate(r)
		if err == nil && id == nil {
			err = errs.Unavailablef("The request could not be authenticated.")
		}
		if err != nil {
			if !errs.Is(err, errs.Unauthorized) {
				RenderError(w, r, err) // Keystone unavailable: 503, never a pass
				return
			}
			httpx.WriteUnauthorized(w, challenge)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

// RenderError writes err as Blazar's error body
// {"error_code": <status>, "error_message": <message>, "error_name": <status>}
// — the one place a Blazar error becomes HTTP. error_name repeats the
// status (upstream's quirk) unless the error carries a Code; anything
// that is not an *errs.Error is an internal error, logged and hidden.
// A client that went away gets nothing (499 in the metrics).
func RenderError(w http.ResponseWriter, r *http.Request, err error) {
	if httpx.ClientGone(r) {
		httpx.WriteClientGone(w, r, err)
		return
	}
	e := errs.As(err)
	if e == nil || e.Kind == errs.Internal {
		// A database that cannot be reached is a 503, not a bug.
		e = db.AsUnavailable(err)
	}
	if e == nil {
		slog.ErrorContext(r.Context(), "internal error", "err", err)
		writeBlazar(w, http.StatusInternalServerError, "Internal Server Error", "INTERNAL_SERVER_ERROR")
		return
	}
	status := httpx.Status(e.Kind)
	if status >= 500 {
		slog.ErrorContext(r.Context(), "request failed", "err", err)
	}
	var name any = status
	if e.Code != "" {
		name = e.Code
	}
	writeBlazar(w, status, e.Msg, name)
}

func writeBlazar(w http.ResponseWriter, status int, msg string, name any) {
	b, _ := json.Marshal(map[string]any{"error_code": status, "error_message": msg, "error_name": name})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeWerkzeug(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": status, "error_message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// WriteJSON writes body with status.
func WriteJSON(w http.ResponseWriter, status int, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// DecodeBody reads a JSON object body: a missing Content-Type counts as
// JSON, another type is a 400, an empty body is {}. Unknown fields are
// left for the caller to reject (Blazar whitelists per call).
func DecodeBody(r *http.Request, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return errs.BadRequestf("Content type %s is not supported; use application/json.", ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return errs.BadRequestf("Could not read the request body: %s", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return errs.BadRequestf("Malformed JSON in request body: %s", err)
	}
	return nil
}

// Versions handles GET / and GET /versions: 300 with the versions document.
func Versions(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	doc := map[string]any{"versions": []map[string]any{{
		"id": "v1.0", "status": "CURRENT", "min_version": "1.0", "max_version": "1.0",
		"links": []map[string]string{{"href": scheme + "://" + r.Host + "/v1", "rel": "self"}},
	}}}
	_ = WriteJSON(w, http.StatusMultipleChoices, doc)
}

// NotFound answers a path outside every API (and /v1 itself) with a
// werkzeug-style 404 body.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"error": 404, "error_message": "The requested URL was not found on the server."}`))
}
