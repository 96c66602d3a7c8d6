package keystone_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/identity/keystonetest"
	"github.com/leasehold/leasehold/pkg/server"
)

const benchRP = "6f3b0c8e-2a47-4c3e-9a59-6d0c2a0c1e11"

// benchServer builds Leasehold with auth (an [api] auth_strategy and,
// for keystone, its [keystone_authtoken] lines) and creates provider
// benchRP with token admin.
func benchServer(b *testing.B, authConf, admin string) http.Handler {
	dir := b.TempDir()
	conf := "[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" + authConf
	s, err := server.New(context.Background(), loadConfig(b, dir, conf))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.DB().Close() })
	h := s.Handler()
	r := httptest.NewRequest("POST", "/placement/resource_providers", strings.NewReader(`{"name": "compute-1", "uuid": "`+benchRP+`"}`))
	r.Header.Set("X-Auth-Token", admin)
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusCreated {
		b.Fatalf("create provider: %d %s", rec.Code, rec.Body)
	}
	return h
}

func getProvider(b *testing.B, h http.Handler, tok string) {
	r := httptest.NewRequest("GET", "/placement/resource_providers/"+benchRP, nil)
	r.Header.Set("X-Auth-Token", tok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		b.Fatalf("GET provider: %d %s", rec.Code, rec.Body)
	}
}

// BenchmarkGetProvider is GET /placement/resource_providers/{uuid}
// in-process: with noauth, and with Keystone and 1,000 distinct tokens,
// all in the cache (the Keystone here is the in-process stand-in: a
// cached token never reaches it, and the stand-in mints 1,000 tokens
// instantly where the real one takes ~0.3 s each).
func BenchmarkGetProvider(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the access log is not what is measured
	b.Cleanup(func() { slog.SetDefault(prev) })
	b.Run("noauth", func(b *testing.B) {
		h := benchServer(b, "[api]\nauth_strategy = noauth\n", "admin")
		start := time.Now()
		for b.Loop() {
			getProvider(b, h, "admin")
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	})
	b.Run("keystone-1000-cached-tokens", func(b *testing.B) {
		ks := keystonetest.New()
		b.Cleanup(ks.Close)
		ks.AcceptPrefix("tok-", "admin", "member", "reader")
		h := benchServer(b, "[api]\nauth_strategy = keystone\n[keystone_authtoken]\nauth_url = "+ks.AuthURL()+
			"\nauth_type = password\nusername = svc\npassword = pw\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n", "tok-admin")
		toks := make([]string, 1000)
		for i := range toks {
			toks[i] = fmt.Sprintf("tok-%04d-%s", i, strings.Repeat("x", 180)) // fernet-sized
			getProvider(b, h, toks[i])
		}
		calls := ks.Validations()
		start := time.Now()
		i := 0
		for b.Loop() {
			getProvider(b, h, toks[i%len(toks)])
			i++
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		if n := ks.Validations() - calls; n != 0 {
			b.Errorf("%d Keystone calls for cached tokens, want 0", n)
		}
	})
}

// BenchmarkRealKeystoneCallsPerToken sends each new token (issued by the
// real Keystone, outside the timer) from 10 concurrent clients at once
// and reports the Keystone validations per distinct token (target 1);
// ns/op is then the wait of those 10 clients for one real validation.
// Run it with a small -benchtime such as 10x: each token costs Keystone
// a password login.
func BenchmarkRealKeystoneCallsPerToken(b *testing.B) {
	k := RequireKeystone(b)
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
	ct := &countingTransport{next: http.DefaultTransport}
	v, err := identity.NewKeystone(authtoken(k), identity.Options{HTTPClient: &http.Client{Transport: ct, Timeout: 30 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := v.Authenticate(req(k.MustIssue(b, "demo", k.DemoPassword, "demo"))); err != nil {
		b.Fatal(err)
	}
	before, n := ct.validations.Load(), 0
	for b.Loop() {
		b.StopTimer()
		tok := k.MustIssue(b, "demo", k.DemoPassword, "demo")
		b.StartTimer()
		n++
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := v.Authenticate(req(tok)); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(ct.validations.Load()-before)/float64(n), "keystone-calls/token")
}
