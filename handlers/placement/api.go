// Package placement serves the OpenStack Placement API (microversions
// 1.0–1.39) over HTTP. Handlers decode, check policy, call pkg/placement
// and encode; they never touch SQL.
package placement

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/cors"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

var (
	minVersion = microversion.Version{Major: 1, Minor: 0}
	maxVersion = microversion.Version{Major: 1, Minor: 39}
)

// MaxVersion is the highest microversion served.
func MaxVersion() microversion.Version { return maxVersion }

// API is the Placement HTTP API.
type API struct {
	svc    *placement.Service
	policy *Policy
	cfg    config.Placement
	cors   config.CORS
	// started is the Last-Modified of responses that have no DB timestamp.
	started time.Time
	mux     *chi.Mux
	methods map[string][]string // route pattern → methods in declaration order
	// authn validates tokens (Keystone); nil is Placement's noauth2.
	authn identity.Authenticator
}

// Option configures New.
type Option func(*API)

// WithPolicy makes the API decide by pol (built from the policy engine
// and the operator's policy file).
func WithPolicy(pol *Policy) Option { return func(a *API) { a.policy = pol } }

// WithAuthenticator makes the API authenticate requests with authn
// (identity.Keystone) instead of noauth2.
func WithAuthenticator(authn identity.Authenticator) Option {
	return func(a *API) { a.authn = authn }
}

// New builds the API on svc: by default it decides with the built-in
// policy of cfg.PolicyMode and authenticates with noauth2.
func New(svc *placement.Service, cfg config.Placement, corsCfg config.CORS, opts ...Option) *API {
	pol := NewPolicy(cfg.PolicyMode)
	a := &API{
		svc: svc, policy: pol, cfg: cfg, cors: corsCfg,
		started: time.Now().UTC(), mux: chi.NewRouter(), methods: map[string][]string{},
	}
	for _, o := range opts {
		o(a)
	}
	a.routes()
	return a
}

// handlerFunc is a handler that returns its error for one renderer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route registers h for method and pattern, available from microversion
// since; below it the route answers 404 as upstream does.
func (a *API) route(method, pattern string, since microversion.Version, h handlerFunc) {
	a.methods[pattern] = append(a.methods[pattern], method)
	a.mux.MethodFunc(method, pattern, func(w http.ResponseWriter, r *http.Request) {
		if microversion.FromContext(r.Context()).Less(since) {
			renderError(w, r, errOf(errs.NotFound, ""))
			return
		}
		if err := h(w, r); err != nil {
			renderError(w, r, err)
		}
	})
}

// Handler returns the API as an http.Handler to mount at the service
// root (the caller strips any /placement prefix).
func (a *API) Handler() http.Handler {
	var h http.Handler = a.mux
	h = contentHeaderCheck(h)
	h = a.microversionMiddleware(h)
	h = httpx.Recover(renderPanic)(h)
	h = a.authMiddleware(h)
	if len(a.cors.AllowedOrigin) > 0 {
		h = a.corsMiddleware(h)
	}
	h = forceJSONAccept(h)
	return h
}

func (a *API) routes() {
	a.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		renderError(w, r, escaped(errOf(errs.NotFound, "")))
	})
	a.mux.MethodNotAllowed(a.methodNotAllowed)
	v := func(minor int) microversion.Version { return microversion.Version{Major: 1, Minor: minor} }

	a.route("GET", "/", v(0), a.root)
	a.registerResourceProviderRoutes(v)
	a.registerInventoryRoutes(v)
	a.registerUsageRoutes(v)
	a.registerAggregateRoutes(v)
	a.registerTraitRoutes(v)
	a.registerResourceClassRoutes(v)
	a.registerAllocationRoutes(v)
	a.registerAllocationCandidateRoutes(v)
	a.registerReshaperRoutes(v)
}

// methodNotAllowed answers 405 with an Allow header listing the methods
// declared for the matched path, in declaration order (as upstream's
// ROUTE_DECLARATIONS).
func (a *API) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{"GET", "PUT", "POST", "DELETE", "PATCH"} {
		rctx := chi.NewRouteContext()
		if a.mux.Match(rctx, m, r.URL.Path) {
			allowed = a.methods[rctx.RoutePattern()]
			break
		}
	}
	err := &httpError{
		err:     errOf(errs.MethodNotAllowed, "The method specified is not allowed for this resource."),
		headers: map[string]string{"Allow": strings.Join(allowed, ", ")},
	}
	renderError(w, r, err)
}

// contentHeaderCheck is PlacementHandler's check of every request before
// routing: a Content-Length must be an integer, and a body needs a
// Content-Type.
func contentHeaderCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clen := r.Header.Get("Content-Length")
		if bad := r.Header.Get(httpx.BadContentLengthHeader); bad != "" {
			clen = bad
		}
		if clen != "" {
			n, ok := placement.PyInt(clen)
			if !ok {
				w.Header().Set("Connection", "close")
				renderError(w, r, escaped(errOf(errs.BadRequest, "content-length header must be an integer")))
				return
			}
			if n.Sign() > 0 && r.Header.Get("Content-Type") == "" {
				renderError(w, r, escaped(errOf(errs.BadRequest, "content-type header required when content-length > 0")))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// forceJSONAccept makes a missing or */* Accept mean application/json, as
// placement's request-log middleware does, so errors are JSON.
func forceJSONAccept(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if acc := r.Header.Get("Accept"); acc == "" || acc == "*/*" {
			r.Header.Set("Accept", "application/json")
		}
		next.ServeHTTP(w, r)
	})
}

// microversionMiddleware negotiates the version and echoes it with Vary.
func (a *API) microversionMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := microversion.Negotiate(r.Header.Values("Openstack-Api-Version"), "placement", minVersion, maxVersion)
		if err != nil {
			if _, ok := err.(*microversion.ErrNotAcceptable); ok {
				renderError(w, r, &httpError{err: errOf(errs.NotAcceptable, "Invalid microversion: "+err.Error()), versions: true})
				return
			}
			renderError(w, r, errOf(errs.BadRequest, "Invalid microversion: "+err.Error()))
			return
		}
		h := w.Header()
		h["Openstack-Api-Version"] = versionHeader(v)
		h["Vary"] = append(h["Vary"], "openstack-api-version")
		next.ServeHTTP(w, r.WithContext(microversion.WithVersion(r.Context(), v)))
	})
}

// versionHeaders are the OpenStack-API-Version values of the versions
// served, made once.
var versionHeaders = func() [][]string {
	out := make([][]string, maxVersion.Minor+1)
	for i := range out {
		out[i] = []string{"placement " + microversion.Version{Major: 1, Minor: i}.String()}
	}
	return out
}()

func versionHeader(v microversion.Version) []string {
	if v.Major == 1 && v.Minor >= 0 && v.Minor < len(versionHeaders) {
		return versionHeaders[v.Minor]
	}
	return []string{"placement " + v.String()}
}

// authMiddleware implements Placement's noauth2: every path but the root
// needs an X-Auth-Token; "user[:project]" names the caller, token
// "admin" gets the admin role, X-Roles overrides the roles, and
// OpenStack-System-Scope: all makes the token system-scoped.
func (a *API) authMiddleware(next http.Handler) http.Handler {
	if a.authn != nil {
		return a.tokenAuthMiddleware(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || r.URL.Path == "" {
			next.ServeHTTP(w, r)
			return
		}
		tok := r.Header.Get("X-Auth-Token")
		if tok == "" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Www-Authenticate", "Keystone uri='noauth'")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message": "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.", "code": "401 Unauthorized", "title": "Unauthorized"}`))
			return
		}
		user, project, _ := strings.Cut(tok, ":")
		if project == "" {
			project = user
		}
		id := &auth.Identity{UserID: user, ProjectID: project}
		if p := r.Header.Get("X-Project-Id"); p != "" {
			id.ProjectID = p
		}
		if roles, ok := r.Header["X-Roles"]; ok {
			id.Roles = auth.SplitRoles(strings.Join(roles, ","))
		} else if user == "admin" {
			id.Roles = []string{"admin"}
		}
		if strings.EqualFold(r.Header.Get("Openstack-System-Scope"), "all") {
			id.SystemScope = "all"
			id.ProjectID = ""
		}
		next.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

// tokenAuthMiddleware authenticates every path but the root with
// a.authn: a refused token is keystonemiddleware's 401 with its
// WWW-Authenticate challenge, an identity service that cannot answer is
// a 503 in Placement's error body.
func (a *API) tokenAuthMiddleware(next http.Handler) http.Handler {
	challenge := ""
	if c, ok := a.authn.(identity.Challenger); ok {
		challenge = c.Challenge()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || r.URL.Path == "" {
			next.ServeHTTP(w, r)
			return
		}
		id, err := a.authn.Authenticate(r)
		if err == nil && id == nil {
			err = errOf(errs.Unavailable, "The request could not be authenticated.")
		}
		if err != nil {
			if !errs.Is(err, errs.Unauthorized) {
				renderError(w, r, err)
				return
			}
			httpx.WriteUnauthorized(w, challenge)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

// corsMiddleware applies oslo.middleware-style CORS when configured.
func (a *API) corsMiddleware(next http.Handler) http.Handler {
	c := cors.New(cors.Options{
		AllowedOrigins:   a.cors.AllowedOrigin,
		AllowCredentials: a.cors.AllowCredentials,
		ExposedHeaders:   a.cors.ExposeHeaders,
		MaxAge:           a.cors.MaxAge,
		// oslo.middleware answers a preflight with 200.
		OptionsSuccessStatus: http.StatusOK,
		AllowedMethods:       a.cors.AllowMethods,
		AllowedHeaders:       a.cors.AllowHeaders,
	})
	return c.Handler(next)
}

// ctxVersion is a short accessor.
func ctxVersion(ctx context.Context) microversion.Version { return microversion.FromContext(ctx) }
