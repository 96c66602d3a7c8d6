package keystone_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/server"
)

// countingTransport counts the validations (GET …/auth/tokens) sent to
// Keystone and can hold them until released.
type countingTransport struct {
	next        http.RoundTripper
	validations atomic.Int64
	mu          sync.Mutex
	gate        chan struct{}
	entered     chan struct{}
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/auth/tokens") {
		c.validations.Add(1)
		c.mu.Lock()
		gate, entered := c.gate, c.entered
		c.mu.Unlock()
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
	}
	return c.next.RoundTrip(r)
}

// clock is the token cache's clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func authtoken(k *Keystone) config.KeystoneAuthtoken {
	return config.KeystoneAuthtoken{
		WWWAuthenticateURI: k.URL, AuthURL: k.URL, AuthType: "password",
		Username: k.ServiceUser, Password: k.ServicePassword, ProjectName: "service",
		UserDomainName: "Default", ProjectDomainName: "Default", RegionName: "RegionOne", Interface: "internal",
		TokenCacheTime: tokenCacheTime, TokenCacheSize: 1000, ServiceTokenRoles: []string{"service"}, HTTPTimeout: 30,
	}
}

// validator is a Keystone validator with an injected clock and a
// counting transport.
func validator(t *testing.T, k *Keystone) (*identity.Keystone, *clock, *countingTransport) {
	t.Helper()
	ct := &countingTransport{next: http.DefaultTransport}
	clk := &clock{now: time.Now()}
	v, err := identity.NewKeystone(authtoken(k), identity.Options{Now: clk.Now, HTTPClient: &http.Client{Transport: ct, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return v, clk, ct
}

func req(tok string, hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

// view is the part of an identity the tests compare.
type view struct {
	UserName, ProjectName, ProjectID, UserDomain, ProjectDomain string
	Roles                                                       []string
	IsAdminProject                                              bool
}

func viewOf(id *auth.Identity) view {
	roles := slices.Clone(id.Roles)
	slices.Sort(roles)
	return view{id.UserName, id.ProjectName, id.ProjectID, id.UserDomainName, id.ProjectDomainName, roles, id.IsAdminProject}
}

func TestTokens(t *testing.T) {
	k := RequireKeystone(t)
	v, _, _ := validator(t, k)
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	demo := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	reader := k.MustIssue(t, "reader", k.ReaderPassword, "demo")
	tests := []struct {
		name string
		r    *http.Request
		want *view // nil: Unauthorized
	}{
		{"no token", req(""), nil},
		{"bogus", req("gAAAAABbogus-token"), nil},
		{"noauth's admin token", req("admin"), nil},
		{"noauth's user:project token", req("demo:demo"), nil},
		{"admin", req(admin), &view{"admin", "admin", k.AdminProjectID, "Default", "Default", []string{"admin", "member", "reader"}, true}},
		{"member", req(demo), &view{"demo", "demo", k.DemoProjectID, "Default", "Default", []string{"member", "reader"}, true}},
		{"reader", req(reader), &view{"reader", "demo", k.DemoProjectID, "Default", "Default", []string{"reader"}, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Authenticate(tc.r)
			if tc.want == nil {
				if id != nil || !errs.Is(err, errs.Unauthorized) {
					t.Fatalf("got %+v, %v; want Unauthorized", id, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tc.want, viewOf(id)); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("service token", func(t *testing.T) {
		svc := k.MustIssue(t, k.ServiceUser, k.ServicePassword, "service")
		id, err := v.Authenticate(req(demo, "X-Service-Token", svc))
		if err != nil {
			t.Fatal(err)
		}
		if id.UserName != "demo" || id.ServiceUserID != k.ServiceUserID || !slices.Contains(id.ServiceRoles, "service") {
			t.Errorf("user %s, service user %s (want %s), service roles %v", id.UserName, id.ServiceUserID, k.ServiceUserID, id.ServiceRoles)
		}
		if _, err := v.Authenticate(req(demo, "X-Service-Token", "bogus")); !errs.Is(err, errs.Unauthorized) {
			t.Errorf("bogus service token: %v, want Unauthorized", err)
		}
	})
}

// TestExpiredToken: a token whose expires_at has passed by the cache's
// clock is refused even though Keystone (on its own clock) still lists it.
func TestExpiredToken(t *testing.T) {
	k := RequireKeystone(t)
	v, clk, ct := validator(t, k)
	tok := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	clk.Add(2 * time.Hour) // keystone-up.sh issues tokens for an hour
	if id, err := v.Authenticate(req(tok)); id != nil || !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("expired token: %+v, %v; want Unauthorized", id, err)
	}
	if n := ct.validations.Load(); n != 1 {
		t.Errorf("%d validations, want 1", n)
	}
}

// TestRevokedTokenAfterCacheTime: a revoked token stays accepted from the
// cache until token_cache_time has passed (the cache's clock is moved,
// nothing sleeps), then Keystone's 404 makes it a 401.
func TestRevokedTokenAfterCacheTime(t *testing.T) {
	k := RequireKeystone(t)
	v, clk, ct := validator(t, k)
	tok := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	if _, err := v.Authenticate(req(tok)); err != nil {
		t.Fatal(err)
	}
	k.Revoke(t, tok)
	clk.Add(tokenCacheTime*time.Second - time.Millisecond)
	if _, err := v.Authenticate(req(tok)); err != nil {
		t.Fatalf("revoked, within token_cache_time: %v; want the cached answer", err)
	}
	clk.Add(time.Millisecond)
	if id, err := v.Authenticate(req(tok)); id != nil || !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("revoked, after token_cache_time: %+v, %v; want Unauthorized", id, err)
	}
	if n := ct.validations.Load(); n != 2 {
		t.Errorf("%d Keystone validations, want 2 (one per cache period)", n)
	}
}

// TestSingleFlight: 10 concurrent requests with one new token make one
// Keystone call. The call is held until the other nine are waiting on it.
func TestSingleFlight(t *testing.T) {
	k := RequireKeystone(t)
	v, _, ct := validator(t, k)
	warm := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	if _, err := v.Authenticate(req(warm)); err != nil { // logs the service user in
		t.Fatal(err)
	}
	tok := k.MustIssue(t, "reader", k.ReaderPassword, "demo")
	before := ct.validations.Load()
	gate, entered := make(chan struct{}), make(chan struct{}, 16)
	ct.mu.Lock()
	ct.gate, ct.entered = gate, entered
	ct.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			ct.mu.Lock()
			ct.gate = nil
			ct.mu.Unlock()
			close(gate)
		}
	}
	defer release()
	const n = 10
	results := make(chan error, n)
	for range n {
		go func() {
			id, err := v.Authenticate(req(tok))
			if err == nil && id.UserName != "reader" {
				err = errs.New(errs.Internal, "wrong identity %+v", id)
			}
			results <- err
		}()
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("no validation reached Keystone")
	}
	deadline := time.Now().Add(time.Minute)
	for v.Waiting() < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests wait on the Keystone call", v.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	release()
	for range n {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	if got := ct.validations.Load() - before; got != 1 {
		t.Errorf("%d Keystone calls for %d concurrent requests with one new token, want 1", got, n)
	}
}

// newServer builds Leasehold from an oslo-style config file with
// auth_strategy = keystone, as `leasehold serve --config` does.
func newServer(t *testing.T, k *Keystone) http.Handler {
	t.Helper()
	dir := t.TempDir()
	conf := "[DEFAULT]\n[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\ntoken_cache_time = 5\n"
	s, err := server.New(context.Background(), loadConfig(t, dir, conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DB().Close() })
	return s.Handler()
}

func loadConfig(t testing.TB, dir, conf string) *config.Config {
	t.Helper()
	return kstest.LoadConfig(t, dir, conf, EnvRequireKeystone)
}

type exchange struct {
	status  int
	body    string
	wwwAuth string
}

func do(h http.Handler, path, tok string) exchange {
	r := httptest.NewRequest("GET", path, nil)
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	b, _ := io.ReadAll(rec.Body)
	return exchange{rec.Code, string(b), rec.Header().Get("WWW-Authenticate")}
}

const keystone401 = `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`

// TestServerWithKeystone: both APIs of a server configured for Keystone.
func TestServerWithKeystone(t *testing.T) {
	k := RequireKeystone(t)
	h := newServer(t, k)
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	demo := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	challenge := `Keystone uri="` + k.URL + `"`
	for _, path := range []string{"/v1/leases", "/v1/os-hosts", "/placement/resource_providers"} {
		for _, tc := range []struct {
			name, tok string
			want      exchange
		}{
			{"no token", "", exchange{401, keystone401, challenge}},
			{"bogus", "gAAAAABbogus", exchange{401, keystone401, challenge}},
			{"noauth admin", "admin", exchange{401, keystone401, challenge}},
		} {
			if got := do(h, path, tc.tok); got != tc.want {
				t.Errorf("GET %s, %s: %+v, want %+v", path, tc.name, got, tc.want)
			}
		}
		if got := do(h, path, admin); got.status != 200 {
			t.Errorf("GET %s as admin: %+v", path, got)
		}
	}
	if got := do(h, "/v1/leases", demo); got.status != 200 {
		t.Errorf("GET /v1/leases as member: %+v", got)
	}
	if got := do(h, "/placement/resource_providers", demo); got.status != 403 {
		t.Errorf("GET /placement/resource_providers as member (legacy policy): %+v, want 403", got)
	}
	if got := do(h, "/placement/", ""); got.status != 200 {
		t.Errorf("Placement's root needs no token: %+v", got)
	}
}

// TestKeystoneStoppedMidRun: with Keystone stopped, a token not in the
// cache is a 503 on both APIs (never a pass), a cached one still works,
// and after Keystone is back the same token is accepted.
func TestKeystoneStoppedMidRun(t *testing.T) {
	k := RequireKeystone(t)
	h := newServer(t, k)
	v, _, _ := validator(t, k)
	cached := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	fresh := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	if _, err := v.Authenticate(req(cached)); err != nil {
		t.Fatal(err)
	}
	k.Stop(t)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			k.Start(t)
		}
	})
	if id, err := v.Authenticate(req(fresh)); id != nil || !errs.Is(err, errs.Unavailable) {
		t.Errorf("new token, Keystone down: %+v, %v; want Unavailable", id, err)
	}
	if _, err := v.Authenticate(req(cached)); err != nil {
		t.Errorf("cached token, Keystone down: %v", err)
	}
	if got := do(h, "/v1/leases", fresh); got.status != 503 || !strings.Contains(got.body, `"error_code": 503`) && !strings.Contains(got.body, `"error_code":503`) {
		t.Errorf("/v1 with Keystone down: %+v, want Blazar's 503", got)
	}
	if got := do(h, "/placement/resource_providers", fresh); got.status != 503 || !strings.Contains(got.body, `"status":503`) {
		t.Errorf("Placement with Keystone down: %+v, want Placement's 503", got)
	}
	k.Start(t)
	restarted = true
	if _, err := v.Authenticate(req(fresh)); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if got := do(h, "/v1/leases", fresh); got.status != 200 {
		t.Errorf("/v1 after the restart: %+v", got)
	}
	if got := do(h, "/placement/resource_providers", fresh); got.status != 200 {
		t.Errorf("Placement after the restart: %+v", got)
	}
}

// TestStartRefusedWithoutOptions: auth_strategy = keystone with an
// incomplete [keystone_authtoken] stops start-up, naming what is missing.
// It needs no Keystone.
func TestStartRefusedWithoutOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ section, want string }{
		{"", "missing or empty: auth_url, auth_type, username, password, project_name, user_domain_name, project_domain_name"},
		{"auth_url = http://127.0.0.1:5000/v3\nauth_type = password\nusername = blazar\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n",
			"missing or empty: password"},
		{"auth_url = http://127.0.0.1:5000/v3\nauth_type = token\nusername = blazar\npassword = x\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n",
			`auth_type = "token" is not supported`},
	} {
		conf := "[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "never.db") + "\n[keystone_authtoken]\n" + tc.section
		s, err := server.New(context.Background(), loadConfig(t, dir, conf))
		if err == nil {
			_ = s.DB().Close()
			t.Fatalf("server started with [keystone_authtoken]\n%s", tc.section)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q, want it to contain %q", err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("the database was opened before the auth configuration was checked")
	}
}

// TestNoAuthWarnsOffLoopback: a noauth server whose listener other
// machines can reach says so in its log at start; on loopback it does not.
func TestNoAuthWarnsOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		listen string
		warn   bool
	}{
		{"127.0.0.1:0", false},
		{"0.0.0.0:0", true},
		{":0", true},
	} {
		var buf strings.Builder
		var mu sync.Mutex
		prev := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)))
		dir := t.TempDir()
		conf := "[api]\nauth_strategy = noauth\n[DEFAULT]\nlisten = " + tc.listen + "\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n"
		s, err := server.New(context.Background(), loadConfig(t, dir, conf))
		slog.SetDefault(prev)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.DB().Close()
		mu.Lock()
		logged := buf.String()
		mu.Unlock()
		if got := strings.Contains(logged, "auth_strategy is noauth on a listener other machines can reach"); got != tc.warn {
			t.Errorf("listen %s: warning logged = %v, want %v\n%s", tc.listen, got, tc.warn, logged)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
