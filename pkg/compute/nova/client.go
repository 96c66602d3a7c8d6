package nova

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/leasehold/leasehold/pkg/config"
)

// Microversion is the compute API microversion every call is pinned to:
// 2.53+ names hypervisors by UUID and takes hypervisor_hostname_pattern
// as a query, and below 2.88 the hypervisor details still carry vcpus,
// memory_mb and local_gb (which Blazar records for a host).
const Microversion = "2.79"

// NewClient logs in to Keystone as [nova]'s user and returns the compute
// client every Nova call uses: endpoint from the service catalog (or
// endpoint_override), microversion pinned, re-authentication when the
// token expires, every HTTP call bounded by [nova] timeout. The
// composition root builds it once.
func NewClient(ctx context.Context, c config.Nova) (*gophercloud.ServiceClient, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	hc, err := httpClient(c)
	if err != nil {
		return nil, err
	}
	ao := gophercloud.AuthOptions{
		IdentityEndpoint: c.AuthURL,
		Username:         c.Username,
		Password:         c.Password,
		DomainName:       c.UserDomainName,
		DomainID:         c.UserDomainID,
		AllowReauth:      true,
		Scope: &gophercloud.AuthScope{
			ProjectName: c.ProjectName,
			DomainName:  c.ProjectDomainName,
			DomainID:    c.ProjectDomainID,
		},
	}
	if ao.DomainID != "" {
		ao.DomainName = "" // gophercloud takes one of the two
	}
	if ao.Scope.DomainID != "" {
		ao.Scope.DomainName = ""
	}
	pc, err := openstack.NewClient(c.AuthURL)
	if err != nil {
		return nil, fmt.Errorf("nova: auth_url %q: %w", c.AuthURL, err)
	}
	pc.HTTPClient = *hc
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		return nil, fmt.Errorf("nova: logging in to Keystone at %s as %s: %w", c.AuthURL, c.Username, err)
	}
	eo := gophercloud.EndpointOpts{Region: c.RegionName, Availability: gophercloud.Availability(c.EndpointType)}
	var sc *gophercloud.ServiceClient
	if c.EndpointOverride != "" {
		sc = &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: gophercloud.NormalizeURL(c.EndpointOverride), Type: "compute"}
	} else if sc, err = openstack.NewComputeV2(pc, eo); err != nil {
		return nil, fmt.Errorf("nova: no compute endpoint (%s, region %q) in the service catalog of %s: %w", c.EndpointType, c.RegionName, c.Username, err)
	}
	sc.Microversion = Microversion
	return sc, nil
}

// httpClient is the HTTP client of the Keystone and Nova calls.
func httpClient(c config.Nova) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" || c.Insecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.Insecure} //nolint:gosec // the operator's choice ([nova] insecure)
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("config: [nova] cafile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("config: [nova] cafile %s holds no PEM certificate", c.CAFile)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: requestLog{tr}, Timeout: c.HTTPTimeout()}, nil
}

// requestLog logs every Keystone and Nova call at debug level with the
// request id the service answered with, so an operator can follow a
// lease's Nova work into Nova's logs even when nothing failed (failures
// are also logged, at warning level, by the caller that sees them).
type requestLog struct{ next http.RoundTripper }

func (l requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	began := time.Now()
	resp, err := l.next.RoundTrip(r)
	if !slog.Default().Enabled(r.Context(), slog.LevelDebug) {
		return resp, err
	}
	if err != nil {
		slog.DebugContext(r.Context(), "nova: call", "method", r.Method, "url", r.URL.Redacted(), "error", err,
			"duration_ms", time.Since(began).Milliseconds())
		return resp, err
	}
	slog.DebugContext(r.Context(), "nova: call", "method", r.Method, "url", r.URL.Redacted(), "status", resp.StatusCode,
		"request_id", headerRequestID(resp.Header), "duration_ms", time.Since(began).Milliseconds())
	return resp, nil
}

// headerRequestID is the OpenStack request id in h ("" when none).
func headerRequestID(h http.Header) string {
	for _, k := range []string{"X-Openstack-Request-Id", "X-Compute-Request-Id"} {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			return v
		}
	}
	return ""
}

// RequestID is the request id Nova gave the failed call err reports
// ("" when Nova did not answer).
func RequestID(err error) string {
	var e gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &e) || e.ResponseHeader == nil {
		return ""
	}
	return headerRequestID(e.ResponseHeader)
}
