package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/identity/keystonetest"
)

// TestTokenCacheMetrics: with Keystone auth, /metrics counts the token
// cache's hits and misses and the validations asked of Keystone: three
// requests with one token are one miss, one Keystone call and two hits.
func TestTokenCacheMetrics(t *testing.T) {
	f := keystonetest.New()
	t.Cleanup(f.Close)
	f.Add("tok", keystonetest.Token("u1", "p1", time.Now().Add(time.Hour), "member", "reader"))
	s := startServerWith(t, func(c *config.Config) {
		c.Auth = config.AuthKeystone
		c.Metrics.Listen = "127.0.0.1:0"
		k := &c.KeystoneAuthtoken
		k.AuthURL, k.AuthType, k.Username, k.Password, k.ProjectName = f.AuthURL(), "password", "svc", "pw", "service"
		k.UserDomainName, k.ProjectDomainName = "Default", "Default"
	})
	for range 3 {
		if got := get(t, "http://"+s.Addrs[0]+"/v1/leases", "X-Auth-Token", "tok"); got != 200 {
			t.Fatalf("GET /v1/leases = %d", got)
		}
	}
	mfs := scrape(t, "http://"+s.MetricsAddr+"/metrics")
	for name, want := range map[string]float64{
		"leasehold_token_cache_hits_total":           2,
		"leasehold_token_cache_misses_total":         1,
		"leasehold_keystone_token_validations_total": 1,
		"leasehold_token_cache_entries":              1,
	} {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Errorf("%s missing", name)
			continue
		}
		m := mf.GetMetric()[0]
		got := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := f.Validations(); n != 1 {
		t.Errorf("the fake Keystone saw %d validations, want 1", n)
	}
}
