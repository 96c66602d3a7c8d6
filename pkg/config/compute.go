package config

import (
	"fmt"
	"strings"
	"time"
)

// The compute drivers [compute] driver accepts.
const (
	// ComputeStandalone keeps no compute service in step (laptops, demos,
	// sites that only want reservations on record): the default.
	ComputeStandalone = "standalone"
	// ComputeNova keeps Nova's host aggregates in step with the
	// reservations, as Blazar does.
	ComputeNova = "nova"
)

// Compute is the [compute] section: which compute service the reserved
// hosts run in.
type Compute struct {
	Driver string `mapstructure:"driver"`
}

// Nova is the [nova] section: the keystoneauth options every OpenStack
// service uses to reach Nova (the names of an existing blazar.conf's
// [nova] section), and Blazar's Nova options.
type Nova struct {
	// AuthType must be "password".
	AuthType string `mapstructure:"auth_type"`
	AuthURL  string `mapstructure:"auth_url"`
	// The user Leasehold calls Nova as (it needs Nova's admin rules:
	// aggregates, hypervisors, every project's servers), and its scope.
	// A domain may be given by name or by id.
	Username          string `mapstructure:"username"`
	Password          string `mapstructure:"password"`
	ProjectName       string `mapstructure:"project_name"`
	UserDomainName    string `mapstructure:"user_domain_name"`
	UserDomainID      string `mapstructure:"user_domain_id"`
	ProjectDomainName string `mapstructure:"project_domain_name"`
	ProjectDomainID   string `mapstructure:"project_domain_id"`
	// RegionName and EndpointType (public, internal or admin; the
	// keystoneauth spellings publicURL, internalURL, adminURL too) pick
	// Nova's endpoint in the catalog (internal by default, as upstream).
	RegionName   string `mapstructure:"region_name"`
	EndpointType string `mapstructure:"endpoint_type"`
	// EndpointOverride, when set, is used instead of the catalog's
	// compute endpoint (keystoneauth's option of that name).
	EndpointOverride string `mapstructure:"endpoint_override"`
	// CAFile verifies Keystone's and Nova's TLS certificates; Insecure
	// skips the check.
	CAFile   string `mapstructure:"cafile"`
	Insecure bool   `mapstructure:"insecure"`
	// Timeout bounds one HTTP call to Nova or Keystone, in seconds.
	Timeout int `mapstructure:"timeout"`

	// AggregateFreepoolName is the aggregate of unreserved hosts.
	AggregateFreepoolName string `mapstructure:"aggregate_freepool_name"`
	// BlazarOwner is the reservation aggregate's metadata key holding
	// the project id, which the BlazarFilter reads.
	BlazarOwner string `mapstructure:"blazar_owner"`
	// BlazarAZPrefix prefixes the availability zone of every reservation
	// aggregate (BlazarAZPrefix + reservation id, as upstream), which is
	// how the BlazarFilter tells reservation pools from other aggregates.
	BlazarAZPrefix string `mapstructure:"blazar_az_prefix"`
	// AZAware records each host's availability zone when it is
	// registered (upstream's default, true).
	AZAware bool `mapstructure:"az_aware"`
	// ServerDeleteTimeout bounds the wait for a reserved host's servers
	// to be deleted at the end of a lease, in seconds.
	ServerDeleteTimeout int `mapstructure:"server_delete_timeout"`
	// HostStatusInterval is how often, in seconds, the hosts' status is
	// read from Nova (a host down or disabled is marked and not
	// reservable until it is back); 0 never reads it.
	HostStatusInterval int `mapstructure:"host_status_interval"`
}

func init() {
	for k, v := range map[string]any{
		"compute.driver":               "standalone",
		"nova.auth_type":               "",
		"nova.auth_url":                "",
		"nova.username":                "",
		"nova.password":                "",
		"nova.project_name":            "",
		"nova.user_domain_name":        "",
		"nova.user_domain_id":          "",
		"nova.project_domain_name":     "",
		"nova.project_domain_id":       "",
		"nova.region_name":             "",
		"nova.endpoint_type":           "internal",
		"nova.endpoint_override":       "",
		"nova.cafile":                  "",
		"nova.insecure":                false,
		"nova.timeout":                 30,
		"nova.aggregate_freepool_name": "freepool",
		"nova.blazar_owner":            "blazar:owner",
		"nova.blazar_az_prefix":        "blazar_",
		"nova.az_aware":                true,
		"nova.server_delete_timeout":   600,
		"nova.host_status_interval":    60,
	} {
		defaults[k] = v
	}
}

// normalizeCompute checks the driver name and the value ranges of
// [nova]; whether the nova driver has every option it needs is
// Nova.Check's job, done when the server starts.
func (c *Config) normalizeCompute() error {
	switch d := strings.ToLower(strings.TrimSpace(c.Compute.Driver)); d {
	case "", ComputeStandalone:
		c.Compute.Driver = ComputeStandalone
	case ComputeNova:
		c.Compute.Driver = ComputeNova
	default:
		return fmt.Errorf("config: compute.driver %q is not supported (supported: standalone, nova)", c.Compute.Driver)
	}
	n := &c.Nova
	switch strings.ToLower(strings.TrimSpace(n.EndpointType)) {
	case "", "public", "publicurl":
		n.EndpointType = "public"
	case "internal", "internalurl":
		n.EndpointType = "internal"
	case "admin", "adminurl":
		n.EndpointType = "admin"
	default:
		return fmt.Errorf("config: nova.endpoint_type %q: want public, internal or admin", n.EndpointType)
	}
	if n.Timeout < 1 {
		return fmt.Errorf("config: nova.timeout %d: want positive seconds", n.Timeout)
	}
	if n.ServerDeleteTimeout < 1 {
		return fmt.Errorf("config: nova.server_delete_timeout %d: want positive seconds", n.ServerDeleteTimeout)
	}
	if n.HostStatusInterval < 0 {
		return fmt.Errorf("config: nova.host_status_interval %d: want seconds, or 0 to never read host status", n.HostStatusInterval)
	}
	if strings.TrimSpace(n.AggregateFreepoolName) == "" {
		return fmt.Errorf("config: nova.aggregate_freepool_name must not be empty")
	}
	if strings.TrimSpace(n.BlazarOwner) == "" {
		return fmt.Errorf("config: nova.blazar_owner must not be empty")
	}
	return nil
}

// HTTPTimeout is Timeout as a duration.
func (n Nova) HTTPTimeout() time.Duration { return time.Duration(n.Timeout) * time.Second }

// Check reports, for compute driver nova, every [nova] option Leasehold
// cannot reach Nova without, by name, in one error; nil when the section
// is usable.
func (n Nova) Check() error {
	return checkPasswordAuth("compute driver nova needs", "nova", passwordAuth{
		n.AuthType, n.AuthURL, n.Username, n.Password, n.ProjectName,
		n.UserDomainName, n.UserDomainID, n.ProjectDomainName, n.ProjectDomainID,
	})
}
