// Package external is the client of an external OpenStack Placement
// service ([placement] keystoneauth options): the calls instance
// reservations make there when Leasehold's built-in Placement is not the
// one Nova uses. Every call goes through one gophercloud v2 service
// client pinned to microversion 1.39, built once in the composition
// root. Writes are meant to run from outbox actions: each one looks its
// effect up first and succeeds when it is already made, and inventory
// writes respect the provider generation, re-reading and trying again on
// a generation conflict.
package external

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/leasehold/leasehold/pkg/config"
)

// Microversion is the Placement microversion every call is pinned to
// (parent providers need 1.14, PUT of a resource class 1.7, 200 with a
// body on provider create 1.20; 1.39 is the highest Leasehold speaks).
const Microversion = "1.39"

// Client calls one external Placement.
type Client struct {
	sc *gophercloud.ServiceClient
	// conflictRetries bounds the re-reads after generation conflicts
	// within one call (the outbox retries the action after that).
	conflictRetries int
}

// New wraps a Placement service client (its microversion is set to
// Microversion).
func New(sc *gophercloud.ServiceClient) *Client {
	sc.Microversion = Microversion
	return &Client{sc: sc, conflictRetries: 5}
}

// Endpoint is the Placement endpoint the client calls.
func (c *Client) Endpoint() string { return c.sc.Endpoint }

// NewClient logs in to Keystone as [placement]'s user and returns the
// client: endpoint from the service catalog (the interfaces tried in
// order) or endpoint_override, re-authentication when the token expires,
// every HTTP call bounded by [placement] timeout.
func NewClient(ctx context.Context, c config.ExternalPlacement) (*Client, error) {
	if !c.Enabled() {
		return nil, errors.New("placement: no external Placement is configured")
	}
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
		return nil, fmt.Errorf("placement: auth_url %q: %w", c.AuthURL, err)
	}
	pc.HTTPClient = *hc
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		return nil, fmt.Errorf("placement: logging in to Keystone at %s as %s: %w", c.AuthURL, c.Username, err)
	}
	if c.EndpointOverride != "" {
		sc := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: gophercloud.NormalizeURL(c.EndpointOverride), Type: "placement"}
		return New(sc), nil
	}
	var lastErr error
	for _, iface := range c.Interfaces() {
		sc, err := openstack.NewPlacementV1(pc, gophercloud.EndpointOpts{Region: c.RegionName, Availability: gophercloud.Availability(iface)})
		if err == nil {
			return New(sc), nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("placement: no placement endpoint (%v, region %q) in the service catalog of %s: %w", c.Interfaces(), c.RegionName, c.Username, lastErr)
}

// httpClient is the HTTP client of the Keystone and Placement calls.
func httpClient(c config.ExternalPlacement) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" || c.Insecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.Insecure} //nolint:gosec // the operator's choice ([placement] insecure)
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("config: [placement] cafile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("config: [placement] cafile %s holds no PEM certificate", c.CAFile)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr, Timeout: c.HTTPTimeout()}, nil
}

// status is the HTTP status of a failed call (0 when Placement did not
// answer).
func status(err error) int {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e.Actual
	}
	return 0
}
