package identity

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/identity/keystonetest"
)

func benchKeystone(b *testing.B) (*Keystone, *keystonetest.Server) {
	f := keystonetest.New()
	b.Cleanup(f.Close)
	f.AcceptPrefix("tok-", "member", "reader")
	k, err := NewKeystone(config.KeystoneAuthtoken{
		AuthURL: f.AuthURL(), AuthType: "password", Username: "svc", Password: "pw", ProjectName: "service",
		UserDomainName: "Default", ProjectDomainName: "Default", Interface: "internal",
		TokenCacheTime: 300, TokenCacheSize: 10000, ServiceTokenRoles: []string{"service"}, HTTPTimeout: 5,
	}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return k, f
}

// BenchmarkCachedToken is the per-request cost of authenticating a token
// already in the cache (the hash, the LRU look-up, the identity copy),
// with its median per request as p50-ns.
func BenchmarkCachedToken(b *testing.B) {
	k, _ := benchKeystone(b)
	r := request("tok-cached-0123456789abcdef")
	if _, err := k.Authenticate(r); err != nil {
		b.Fatal(err)
	}
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := k.Authenticate(r); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkKeystoneCallsPerToken sends each new token from 10 concurrent
// clients at once and reports the Keystone validations per distinct
// token (the target is 1).
func BenchmarkKeystoneCallsPerToken(b *testing.B) {
	k, f := benchKeystone(b)
	if _, err := k.Authenticate(request("tok-warm")); err != nil {
		b.Fatal(err)
	}
	before := f.Validations()
	n := 0
	for b.Loop() {
		tok := fmt.Sprintf("tok-%d", n)
		n++
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				<-start
				if _, err := k.Authenticate(request(tok)); err != nil {
					b.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	b.ReportMetric(float64(f.Validations()-before)/float64(n), "keystone-calls/token")
}
