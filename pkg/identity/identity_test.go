package identity

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/identity/keystonetest"
)

func TestNoAuth(t *testing.T) {
	admin := []string{"admin", "member", "reader"}
	member := []string{"member", "reader"}
	tests := []struct {
		name    string
		headers map[string]string
		want    *auth.Identity // nil: 401
	}{
		{"no token", nil, nil},
		{"headers without a token", map[string]string{"X-User-Id": "u", "X-Project-Id": "p"}, nil},
		{"other token", map[string]string{"X-Auth-Token": "anything-at-all"}, nil},
		{"old noauth client token", map[string]string{"X-Auth-Token": "notused"}, nil},
		{"empty project", map[string]string{"X-Auth-Token": "user:"}, nil},
		{"empty user", map[string]string{"X-Auth-Token": ":project"}, nil},
		{"two colons", map[string]string{"X-Auth-Token": "a:b:c"}, nil},
		{"admin", map[string]string{"X-Auth-Token": "admin"},
			&auth.Identity{UserID: "admin", ProjectID: "admin", Roles: admin}},
		{"user:project", map[string]string{"X-Auth-Token": "u1:p1"},
			&auth.Identity{UserID: "u1", ProjectID: "p1", Roles: member}},
		{"admin:project", map[string]string{"X-Auth-Token": "admin:p1"},
			&auth.Identity{UserID: "admin", ProjectID: "p1", Roles: admin}},
		{"headers rename", map[string]string{"X-Auth-Token": "u1:p1", "X-User-Id": "u2", "X-Project-Id": "p2", "X-Roles": "reader, custom"},
			&auth.Identity{UserID: "u2", ProjectID: "p2", Roles: []string{"reader", "custom"}}},
		{"admin token, member roles", map[string]string{"X-Auth-Token": "admin", "X-Roles": "member"},
			&auth.Identity{UserID: "admin", ProjectID: "admin", Roles: []string{"member"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/leases", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			got, err := NoAuth{}.Authenticate(r)
			if tc.want == nil {
				if got != nil || !errs.Is(err, errs.Unauthorized) {
					t.Fatalf("Authenticate = %+v, %v; want Unauthorized", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.UserName, tc.want.ProjectName, tc.want.IsAdminProject = tc.want.UserID, tc.want.ProjectID, true
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1234": true, "[::1]:1234": true, "localhost:80": true, "127.1.2.3:0": true,
		":1234": false, "0.0.0.0:1234": false, "[::]:1234": false, "10.0.0.5:1234": false, "ctl.example:1234": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestTokenCacheModel checks the cache against a map model: it never
// holds more than its size, and a hit is always the latest value put for
// the key, not yet expired.
func TestTokenCacheModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 5).Draw(t, "size")
		c := newTokenCache(size)
		type val struct {
			n       int
			expires time.Time
		}
		model := map[tokenKey]val{}
		now := time.Unix(1_000_000, 0)
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			key := keyOf(fmt.Sprint(rapid.IntRange(0, 7).Draw(t, "key")))
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				exp := now.Add(time.Duration(rapid.IntRange(1, 10).Draw(t, "ttl")) * time.Second)
				c.put(key, result{id: &auth.Identity{UserID: fmt.Sprint(i)}}, exp)
				model[key] = val{i, exp}
			case 1:
				res, ok := c.get(key, now)
				if ok {
					m, inModel := model[key]
					if !inModel || res.id.UserID != fmt.Sprint(m.n) || !now.Before(m.expires) {
						t.Fatalf("get returned %s, model has %+v (present %v) at %v", res.id.UserID, m, inModel, now)
					}
				}
			case 2:
				now = now.Add(time.Duration(rapid.IntRange(1, 4).Draw(t, "advance")) * time.Second)
			}
			if n := c.len(); n > size {
				t.Fatalf("cache holds %d entries, limit %d", n, size)
			}
		}
	})
}

func TestTokenCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newTokenCache(2)
	now := time.Unix(0, 0)
	exp := now.Add(time.Hour)
	a, b, d := keyOf("a"), keyOf("b"), keyOf("d")
	c.put(a, result{id: &auth.Identity{UserID: "a"}}, exp)
	c.put(b, result{id: &auth.Identity{UserID: "b"}}, exp)
	if _, ok := c.get(a, now); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put(d, result{id: &auth.Identity{UserID: "d"}}, exp)
	if _, ok := c.get(b, now); ok {
		t.Error("b (least recently used) was kept")
	}
	if _, ok := c.get(a, now); !ok {
		t.Error("a was evicted")
	}
}

func newFake(t *testing.T) *keystonetest.Server {
	f := keystonetest.New()
	t.Cleanup(f.Close)
	return f
}

// clock is a settable clock for the cache.
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

func newTestKeystone(t *testing.T, f *keystonetest.Server, edit func(*config.KeystoneAuthtoken)) (*Keystone, *clock) {
	t.Helper()
	cfg := config.KeystoneAuthtoken{
		AuthURL: f.AuthURL(), AuthType: "password", Username: "svc", Password: "pw", ProjectName: "service",
		UserDomainName: "Default", ProjectDomainName: "Default", Interface: "internal", RegionName: "RegionOne",
		TokenCacheTime: 60, TokenCacheSize: 100, ServiceTokenRoles: []string{"service"}, HTTPTimeout: 5,
	}
	if edit != nil {
		edit(&cfg)
	}
	clk := &clock{now: time.Now()}
	k, err := NewKeystone(cfg, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return k, clk
}

func request(tok string, extra ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		r.Header.Set(extra[i], extra[i+1])
	}
	return r
}

func TestKeystoneValidationAndCache(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("tok-member", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member", "reader"))

	id, err := k.Authenticate(request("tok-member"))
	if err != nil {
		t.Fatal(err)
	}
	want := &auth.Identity{
		UserID: "u1", UserName: "u1-name", UserDomainID: "default", UserDomainName: "Default",
		ProjectID: "p1", ProjectName: "p1-name", ProjectDomainID: "default", ProjectDomainName: "Default",
		Roles: []string{"member", "reader"}, IsAdminProject: true,
	}
	if diff := cmp.Diff(want, id); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	if _, err := k.Authenticate(request("tok-member")); err != nil || f.Validations() != 1 {
		t.Fatalf("second request: err %v, %d Keystone validations; want nil, 1 (cached)", err, f.Validations())
	}
	// Revoked in Keystone: still trusted until token_cache_time is over.
	f.Revoke("tok-member")
	clk.Add(59 * time.Second)
	if _, err := k.Authenticate(request("tok-member")); err != nil {
		t.Fatalf("within token_cache_time: %v", err)
	}
	clk.Add(time.Second)
	if _, err := k.Authenticate(request("tok-member")); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("revoked, after token_cache_time: %v, want Unauthorized", err)
	}
	if n := f.Validations(); n != 2 {
		t.Errorf("%d validations, want 2", n)
	}
	// A refused token is cached too.
	if _, err := k.Authenticate(request("tok-member")); !errs.Is(err, errs.Unauthorized) || f.Validations() != 2 {
		t.Errorf("refused token again: %v after %d validations; want Unauthorized from the cache", err, f.Validations())
	}
	if f.Logins() != 1 {
		t.Errorf("%d service logins, want 1", f.Logins())
	}
}

func TestKeystoneCacheNeverPastExpiry(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("short", keystonetest.Token("u1", "p1", clk.Now().Add(10*time.Second), "member"))
	if _, err := k.Authenticate(request("short")); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Second) // expires_at, well before token_cache_time
	if _, err := k.Authenticate(request("short")); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("at expires_at: %v, want Unauthorized (Keystone still lists it, our clock says expired)", err)
	}
	if n := f.Validations(); n != 2 {
		t.Errorf("%d validations, want 2 (the expired entry was not served from the cache)", n)
	}
}

func TestKeystoneErrors(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("good", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	f.Add("expired", keystonetest.Token("u1", "p1", clk.Now().Add(-time.Minute), "member"))
	for _, tc := range []struct {
		name string
		r    *http.Request
		want errs.Kind
	}{
		{"no token", request(""), errs.Unauthorized},
		{"bogus", request("bogus"), errs.Unauthorized},
		{"expired by our clock", request("expired"), errs.Unauthorized},
		{"huge", request(string(make([]byte, maxTokenLen+1))), errs.Unauthorized},
		{"bad service token", request("good", "X-Service-Token", "bogus"), errs.Unauthorized},
	} {
		if id, err := k.Authenticate(tc.r); id != nil || !errs.Is(err, tc.want) {
			t.Errorf("%s: %+v, %v; want %v", tc.name, id, err, tc.want)
		}
	}
	f.SetDown(true)
	if id, err := k.Authenticate(request("new-while-down")); id != nil || !errs.Is(err, errs.Unavailable) {
		t.Errorf("Keystone down: %+v, %v; want Unavailable", id, err)
	}
	if _, err := k.Authenticate(request("good")); err != nil {
		t.Errorf("cached good token while Keystone is down: %v, want served from the cache", err)
	}
	f.Add("good2", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	if _, err := k.Authenticate(request("good2")); !errs.Is(err, errs.Unavailable) {
		t.Errorf("uncached good token while down: %v, want Unavailable", err)
	}
	f.SetDown(false)
	f.Add("new-while-down", keystonetest.Token("u2", "p2", clk.Now().Add(time.Hour), "member"))
	if _, err := k.Authenticate(request("new-while-down")); err != nil {
		t.Errorf("after recovery: %v (an outage must not be cached)", err)
	}
}

func TestKeystoneDownAtFirstUse(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("good", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	f.SetDown(true)
	if _, err := k.Authenticate(request("good")); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("service login impossible: %v, want Unavailable", err)
	}
	f.SetDown(false)
	if _, err := k.Authenticate(request("good")); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestKeystoneServiceToken(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	exp := clk.Now().Add(time.Hour)
	f.Add("user", keystonetest.Token("u1", "p1", exp, "member"))
	f.Add("nova", keystonetest.Token("nova-user", "service-project", exp, "service", "admin"))
	f.Add("plain", keystonetest.Token("u3", "p3", exp, "member"))
	id, err := k.Authenticate(request("user", "X-Service-Token", "nova"))
	if err != nil {
		t.Fatal(err)
	}
	if id.UserID != "u1" || id.ServiceUserID != "nova-user" || !cmp.Equal(id.ServiceRoles, []string{"service", "admin"}) {
		t.Errorf("with a service token: %+v", id)
	}
	if id, err := k.Authenticate(request("user")); err != nil || id.ServiceRoles != nil {
		t.Errorf("the cached identity was changed by the service token: %+v, %v", id, err)
	}
	if id, err := k.Authenticate(request("user", "X-Service-Token", "plain")); err != nil || id.ServiceRoles != nil {
		t.Errorf("service token without service roles, not required: %+v, %v; want accepted without service roles", id, err)
	}
	kr, _ := newTestKeystone(t, f, func(c *config.KeystoneAuthtoken) { c.ServiceTokenRolesRequired = true })
	if _, err := kr.Authenticate(request("user", "X-Service-Token", "plain")); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("service token without service roles, required: %v, want Unauthorized", err)
	}
}

func TestKeystoneSystemAndDomainScope(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	sys := keystonetest.Token("admin", "", clk.Now().Add(time.Hour), "admin")
	sys["system"] = map[string]any{"all": true}
	f.Add("system", sys)
	dom := keystonetest.Token("dadmin", "", clk.Now().Add(time.Hour), "admin")
	dom["domain"] = map[string]any{"id": "d1", "name": "D1"}
	dom["is_admin_project"] = false
	f.Add("domain", dom)
	if id, err := k.Authenticate(request("system")); err != nil || id.SystemScope != "all" || id.ProjectID != "" || !id.IsSystem() {
		t.Errorf("system token: %+v, %v", id, err)
	}
	if id, err := k.Authenticate(request("domain")); err != nil || id.DomainID != "d1" || id.DomainName != "D1" || id.IsAdminProject {
		t.Errorf("domain token: %+v, %v", id, err)
	}
}

func TestKeystoneSingleFlight(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("new", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	// Log the service user in first so that only validations are gated.
	f.Add("warm", keystonetest.Token("u0", "p0", clk.Now().Add(time.Hour), "member"))
	if _, err := k.Authenticate(request("warm")); err != nil {
		t.Fatal(err)
	}
	entered, release := f.Hold()
	defer release()
	const n = 10
	var wg sync.WaitGroup
	errsC := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := k.Authenticate(request("new"))
			errsC <- err
		})
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no validation reached Keystone")
	}
	// Release only when the other nine wait on the call in progress, so
	// that a missing single flight would show as more calls.
	deadline := time.Now().Add(10 * time.Second)
	for k.Waiting() < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests wait on the Keystone call", k.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	close(errsC)
	for err := range errsC {
		if err != nil {
			t.Error(err)
		}
	}
	if got := f.Validations(); got != 2 { // warm + one for the 10
		t.Errorf("%d Keystone validations for 10 concurrent requests with one new token, want 1", got-1)
	}
}

func TestKeystoneWaiterCancelled(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("warm", keystonetest.Token("u0", "p0", clk.Now().Add(time.Hour), "member"))
	f.Add("slow", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	if _, err := k.Authenticate(request("warm")); err != nil {
		t.Fatal(err)
	}
	entered, release := f.Hold()
	defer release()
	first := make(chan error, 1)
	go func() { _, err := k.Authenticate(request("slow")); first <- err }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.Authenticate(request("slow").WithContext(ctx)); !errs.Is(err, errs.Unavailable) {
		t.Errorf("cancelled waiter: %v, want Unavailable", err)
	}
	release()
	if err := <-first; err != nil {
		t.Errorf("the first caller: %v", err)
	}
}

func TestNewKeystoneRefusesIncompleteConfig(t *testing.T) {
	_, err := NewKeystone(config.KeystoneAuthtoken{AuthURL: "http://k/v3", AuthType: "password"}, Options{})
	if err == nil || !cmp.Equal(err.Error(), "config: auth_strategy = keystone needs these [keystone_authtoken] options, which are missing or empty: username, password, project_name, user_domain_name, project_domain_name") {
		t.Fatalf("NewKeystone = %v", err)
	}
}

// TestKeystoneCacheStats: the counters the metrics export follow what
// happened: a first validation misses and calls Keystone, a repeat hits,
// an expired entry misses and calls again, a refused token is a hit the
// second time; Keystone calls equal the fake's validations.
func TestKeystoneCacheStats(t *testing.T) {
	f := newFake(t)
	k, clk := newTestKeystone(t, f, nil)
	f.Add("tok", keystonetest.Token("u1", "p1", clk.Now().Add(time.Hour), "member"))
	steps := []struct {
		advance time.Duration
		revoke  bool
		want    CacheStats
	}{
		{0, false, CacheStats{Misses: 1, KeystoneCalls: 1, Entries: 1}},
		{0, false, CacheStats{Hits: 1, Misses: 1, KeystoneCalls: 1, Entries: 1}},
		{time.Minute, true, CacheStats{Hits: 1, Misses: 2, KeystoneCalls: 2, Entries: 1}},
		{0, false, CacheStats{Hits: 2, Misses: 2, KeystoneCalls: 2, Entries: 1}},
	}
	for i, s := range steps {
		clk.Add(s.advance)
		if s.revoke {
			f.Revoke("tok")
		}
		_, _ = k.Authenticate(request("tok"))
		if diff := cmp.Diff(s.want, k.CacheStats()); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
	}
	if got := k.CacheStats().KeystoneCalls; got != uint64(f.Validations()) {
		t.Errorf("%d Keystone calls counted, the fake saw %d", got, f.Validations())
	}
}
