package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/errs"
)

// maxTokenLen bounds the tokens sent to Keystone (fernet tokens are
// under 300 bytes; keystonemiddleware's limit on headers is similar).
const maxTokenLen = 8 << 10

// Options are what tests and the composition root may inject.
type Options struct {
	// Now is the cache's clock (time.Now when nil).
	Now func() time.Time
	// HTTPClient carries every call to Keystone; when nil one is built
	// from the cafile, insecure and http_connect_timeout options.
	HTTPClient *http.Client
	// Logger gets the warnings (slog.Default when nil).
	Logger *slog.Logger
}

// Keystone validates tokens with Keystone as the service user.
type Keystone struct {
	cfg       config.KeystoneAuthtoken
	challenge string
	now       func() time.Time
	http      *http.Client
	log       *slog.Logger
	ttl       time.Duration // <0: no cache
	cache     *tokenCache
	flights   flightGroup
	// stats counts cache hits, misses and Keystone calls (CacheStats).
	hits, misses, calls atomic.Uint64

	mu  sync.Mutex
	svc *gophercloud.ServiceClient // the identity endpoint, logged in; nil until the first use
	// svcUserID is the service user's id (the trustee of lease trusts),
	// read from its login.
	svcUserID string
	// trusts are the trust-scoped logins (trusts.go).
	trusts trustClients
}

// NewKeystone checks cfg (every missing option named in one error) and
// returns the validator. It does not call Keystone: the service user
// logs in at the first request, so the service starts while Keystone is
// down and answers 503 until it is back.
func NewKeystone(cfg config.KeystoneAuthtoken, opts Options) (*Keystone, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	k := &Keystone{cfg: cfg, now: opts.Now, http: opts.HTTPClient, log: opts.Logger}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.Default()
	}
	if k.http == nil {
		c, err := httpClient(cfg)
		if err != nil {
			return nil, err
		}
		k.http = c
	}
	uri := cfg.WWWAuthenticateURI
	if uri == "" {
		uri = cfg.AuthURL
	}
	k.challenge = `Keystone uri="` + uri + `"`
	k.ttl = time.Duration(cfg.TokenCacheTime) * time.Second
	size := cfg.TokenCacheSize
	if size < 1 {
		size = 1
	}
	k.cache = newTokenCache(size)
	return k, nil
}

func httpClient(cfg config.KeystoneAuthtoken) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	if cfg.CAFile != "" || cfg.Insecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure} //nolint:gosec // insecure is the operator's explicit choice
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("config: [keystone_authtoken] cafile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("config: [keystone_authtoken] cafile %s: no PEM certificate found", cfg.CAFile)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	timeout := time.Duration(cfg.HTTPTimeout) * time.Second
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

// Challenge implements Challenger: the WWW-Authenticate value of a 401.
func (k *Keystone) Challenge() string { return k.challenge }

// CacheLen is the number of token results held (for tests and metrics).
func (k *Keystone) CacheLen() int { return k.cache.len() }

// CacheStats are the token cache's counters since start.
type CacheStats struct {
	// Hits are validations answered from the cache; Misses those that
	// were not (they called Keystone, or waited for a concurrent call
	// about the same token).
	Hits, Misses uint64
	// KeystoneCalls are the token validations asked of Keystone.
	KeystoneCalls uint64
	// Entries are the results held now.
	Entries int
}

// CacheStats returns the token cache's counters (for metrics).
func (k *Keystone) CacheStats() CacheStats {
	return CacheStats{Hits: k.hits.Load(), Misses: k.misses.Load(), KeystoneCalls: k.calls.Load(), Entries: k.cache.len()}
}

// Waiting is the number of requests waiting for a Keystone call that
// another request with the same token started.
func (k *Keystone) Waiting() int { return k.flights.waiting() }

// Authenticate implements Authenticator: X-Auth-Token is the user's
// token; X-Service-Token, when present, must be valid too and gives the
// identity its service roles.
func (k *Keystone) Authenticate(r *http.Request) (*auth.Identity, error) {
	tok := r.Header.Get("X-Auth-Token")
	if tok == "" {
		return nil, unauthorized("no X-Auth-Token")
	}
	user, err := k.Validate(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	id := *user // the cached identity is shared: hand out a copy
	if stok := r.Header.Get("X-Service-Token"); stok != "" {
		svc, err := k.Validate(r.Context(), stok)
		if err != nil {
			if errs.Is(err, errs.Unauthorized) {
				return nil, unauthorized("invalid X-Service-Token")
			}
			return nil, err
		}
		if slices.ContainsFunc(svc.Roles, func(role string) bool {
			return slices.ContainsFunc(k.cfg.ServiceTokenRoles, func(want string) bool { return strings.EqualFold(role, want) })
		}) {
			id.ServiceUserID, id.ServiceProjectID, id.ServiceRoles = svc.UserID, svc.ProjectID, svc.Roles
		} else if k.cfg.ServiceTokenRolesRequired {
			return nil, unauthorized("the X-Service-Token has none of service_token_roles")
		} else {
			k.log.WarnContext(r.Context(), "an X-Service-Token without any of [keystone_authtoken] service_token_roles was ignored; set service_token_roles_required = true to refuse such requests",
				"service_user_id", svc.UserID, "service_token_roles", k.cfg.ServiceTokenRoles)
		}
	}
	return &id, nil
}

// Validate returns the identity of tok: from the cache when a result is
// fresh, else from Keystone, with one Keystone call for all concurrent
// callers holding the same token.
func (k *Keystone) Validate(ctx context.Context, tok string) (*auth.Identity, error) {
	if len(tok) > maxTokenLen {
		return nil, unauthorized("token longer than 8 KiB")
	}
	key := keyOf(tok)
	if res, ok := k.cache.get(key, k.now()); ok {
		k.hits.Add(1)
		return res.id, res.err
	}
	k.misses.Add(1)
	res := k.flights.do(ctx, key, func() result {
		// Another flight may have filled the cache since the look-up.
		if res, ok := k.cache.get(key, k.now()); ok {
			return res
		}
		// The call is shared: the first caller leaving must not cancel it
		// for the others (the HTTP client's timeout bounds it).
		k.calls.Add(1)
		res, expires := k.fetch(context.WithoutCancel(ctx), tok)
		// Valid and refused tokens are cached, outages are not.
		if k.ttl > 0 && (res.err == nil || errs.Is(res.err, errs.Unauthorized)) {
			if until := k.now().Add(k.ttl); expires.IsZero() || until.Before(expires) {
				expires = until
			}
			k.cache.put(key, res, expires)
		}
		return res
	}, func(err error) result {
		return result{err: errs.Wrap(errs.Unavailable, err, "The request was cancelled while the identity service validated the token.")}
	})
	if res.id == nil && res.err == nil {
		return nil, errs.Unavailablef("The token could not be validated.")
	}
	return res.id, res.err
}

// tokenBody is the part of Keystone's GET /v3/auth/tokens answer read.
type tokenBody struct {
	Token struct {
		ExpiresAt string         `json:"expires_at"`
		User      idName         `json:"user"`
		Project   *idName        `json:"project"`
		Domain    *idName        `json:"domain"`
		System    map[string]any `json:"system"`
		Roles     []idName       `json:"roles"`
		// is_admin_project is absent unless Keystone has an admin
		// project configured; absent means true (keystoneauth's reading).
		IsAdminProject *bool `json:"is_admin_project"`
	} `json:"token"`
}

type idName struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Domain struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"domain"`
}

// fetch asks Keystone about tok. It returns the identity and the token's
// expiry, or an Unauthorized result (Keystone does not accept the token,
// or it has expired by our clock) or an Unavailable one.
func (k *Keystone) fetch(ctx context.Context, tok string) (result, time.Time) {
	sc, err := k.client(ctx)
	if err != nil {
		k.log.ErrorContext(ctx, "the Keystone service user cannot log in; answering 503", "auth_url", k.cfg.AuthURL, "username", k.cfg.Username, "err", err)
		return result{err: errs.Wrap(errs.Unavailable, err, "The identity service is unavailable; try again later.")}, time.Time{}
	}
	var body tokenBody
	_, err = sc.Get(ctx, sc.ServiceURL("auth", "tokens")+"?nocatalog", &body, &gophercloud.RequestOpts{
		MoreHeaders: map[string]string{"X-Subject-Token": tok},
		OkCodes:     []int{http.StatusOK, http.StatusNonAuthoritativeInfo},
	})
	if err != nil {
		switch status := statusOf(err); {
		case status == http.StatusNotFound || status == http.StatusBadRequest:
			return result{err: unauthorized(fmt.Sprintf("Keystone answered %d to the token", status))}, time.Time{}
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			// The service user's own token is refused even after a fresh
			// login, or it may not validate tokens: a configuration
			// problem the operator must see, not the caller's fault.
			k.log.ErrorContext(ctx, "Keystone refuses the service user's token validation; answering 503", "status", status, "username", k.cfg.Username, "err", err)
			k.reset(sc)
		default:
			k.log.WarnContext(ctx, "Keystone token validation failed; answering 503", "status", status, "err", err)
		}
		return result{err: errs.Wrap(errs.Unavailable, err, "The identity service is unavailable; try again later.")}, time.Time{}
	}
	id, expires, err := identityOf(&body)
	if err != nil {
		k.log.ErrorContext(ctx, "Keystone's token answer cannot be read; answering 503", "err", err)
		return result{err: errs.Wrap(errs.Unavailable, err, "The identity service gave an answer that cannot be read.")}, time.Time{}
	}
	if !k.now().Before(expires) {
		return result{err: unauthorized("token expired at " + expires.Format(time.RFC3339))}, time.Time{}
	}
	return result{id: id}, expires
}

func identityOf(b *tokenBody) (*auth.Identity, time.Time, error) {
	t := &b.Token
	expires, err := time.Parse(time.RFC3339Nano, t.ExpiresAt)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("expires_at %q: %w", t.ExpiresAt, err)
	}
	if t.User.ID == "" {
		return nil, time.Time{}, errors.New("the token has no user")
	}
	id := &auth.Identity{
		UserID: t.User.ID, UserName: t.User.Name,
		UserDomainID: t.User.Domain.ID, UserDomainName: t.User.Domain.Name,
		IsAdminProject: t.IsAdminProject == nil || *t.IsAdminProject,
	}
	if p := t.Project; p != nil {
		id.ProjectID, id.ProjectName = p.ID, p.Name
		id.ProjectDomainID, id.ProjectDomainName = p.Domain.ID, p.Domain.Name
	}
	if d := t.Domain; d != nil {
		id.DomainID, id.DomainName = d.ID, d.Name
	}
	if all, _ := t.System["all"].(bool); all {
		id.SystemScope = "all"
	}
	for _, r := range t.Roles {
		id.Roles = append(id.Roles, r.Name)
	}
	return id, expires, nil
}

// statusOf is the HTTP status in a gophercloud error, 0 when there is
// none (a network error, a failed re-login).
func statusOf(err error) int {
	var sc interface{ GetStatusCode() int }
	if errors.As(err, &sc) {
		return sc.GetStatusCode()
	}
	return 0
}

// client returns the logged-in identity client, logging the service user
// in on first use (or after reset). gophercloud logs in again by itself
// when Keystone answers 401 to the service token (expiry).
func (k *Keystone) client(ctx context.Context) (*gophercloud.ServiceClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.svc != nil {
		return k.svc, nil
	}
	c := k.cfg
	pc, err := openstack.NewClient(c.AuthURL)
	if err != nil {
		return nil, err
	}
	pc.HTTPClient = *k.http
	opts := gophercloud.AuthOptions{
		IdentityEndpoint: c.AuthURL, Username: c.Username, Password: c.Password,
		DomainName: c.UserDomainName, DomainID: c.UserDomainID, AllowReauth: true,
		Scope: &gophercloud.AuthScope{ProjectName: c.ProjectName, DomainName: c.ProjectDomainName, DomainID: c.ProjectDomainID},
	}
	if opts.DomainID != "" {
		opts.DomainName = ""
	}
	if opts.Scope.DomainID != "" {
		opts.Scope.DomainName = ""
	}
	if err := openstack.Authenticate(ctx, pc, opts); err != nil {
		return nil, err
	}
	uid, err := serviceUserID(pc)
	if err != nil {
		return nil, fmt.Errorf("the service user's login: %w", err)
	}
	avail := gophercloud.AvailabilityInternal
	switch strings.ToLower(strings.TrimSuffix(c.Interface, "URL")) {
	case "public":
		avail = gophercloud.AvailabilityPublic
	case "admin":
		avail = gophercloud.AvailabilityAdmin
	}
	sc, err := openstack.NewIdentityV3(pc, gophercloud.EndpointOpts{Region: c.RegionName, Availability: avail})
	if err != nil {
		return nil, fmt.Errorf("identity endpoint (interface %s, region %q) in the service user's catalog: %w", avail, c.RegionName, err)
	}
	k.svc, k.svcUserID = sc, uid
	return sc, nil
}

// reset makes the next validation log the service user in afresh.
func (k *Keystone) reset(sc *gophercloud.ServiceClient) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.svc == sc {
		k.svc = nil
	}
}
