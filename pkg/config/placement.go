package config

import (
	"fmt"
	"strings"
	"time"
)

// ExternalPlacement are the keystoneauth options of [placement] (the
// names an existing blazar.conf's [placement] section uses) that point
// instance reservations at an external Placement service: with them, the
// reservation classes, the blazar_<hostname> child providers and their
// inventories are written there, through the outbox, instead of in
// Leasehold's built-in Placement. Without them (the default) the
// built-in Placement is used.
type ExternalPlacement struct {
	// AuthType must be "password".
	AuthType string `mapstructure:"auth_type"`
	AuthURL  string `mapstructure:"auth_url"`
	// The user Leasehold calls Placement as (Placement's admin rules:
	// providers, inventories, resource classes) and its scope. A domain
	// may be given by name or by id.
	Username          string `mapstructure:"username"`
	Password          string `mapstructure:"password"`
	ProjectName       string `mapstructure:"project_name"`
	UserDomainName    string `mapstructure:"user_domain_name"`
	UserDomainID      string `mapstructure:"user_domain_id"`
	ProjectDomainName string `mapstructure:"project_domain_name"`
	ProjectDomainID   string `mapstructure:"project_domain_id"`
	// RegionName picks the catalog's region; ValidInterfaces (a list, as
	// keystoneauth's valid_interfaces) or EndpointType (one interface,
	// the older name) the interfaces tried in order. Both empty: internal,
	// then public (keystoneauth's default for Placement).
	RegionName      string   `mapstructure:"region_name"`
	EndpointType    string   `mapstructure:"endpoint_type"`
	ValidInterfaces []string `mapstructure:"valid_interfaces"`
	// EndpointOverride, when set, is used instead of the catalog's
	// placement endpoint.
	EndpointOverride string `mapstructure:"endpoint_override"`
	// CAFile verifies Keystone's and Placement's TLS certificates;
	// Insecure skips the check.
	CAFile   string `mapstructure:"cafile"`
	Insecure bool   `mapstructure:"insecure"`
	// Timeout bounds one HTTP call to Placement or Keystone, in seconds.
	Timeout int `mapstructure:"timeout"`
}

func init() {
	for k, v := range map[string]any{
		"placement.auth_type":           "",
		"placement.auth_url":            "",
		"placement.username":            "",
		"placement.password":            "",
		"placement.project_name":        "",
		"placement.user_domain_name":    "",
		"placement.user_domain_id":      "",
		"placement.project_domain_name": "",
		"placement.project_domain_id":   "",
		"placement.region_name":         "",
		"placement.endpoint_type":       "",
		"placement.valid_interfaces":    []string{},
		"placement.endpoint_override":   "",
		"placement.cafile":              "",
		"placement.insecure":            false,
		"placement.timeout":             30,
	} {
		defaults[k] = v
	}
}

// Enabled reports whether an external Placement is configured: any of
// the options naming a login or an endpoint is set. Whether the section
// is complete is Check's job.
func (p ExternalPlacement) Enabled() bool {
	for _, v := range []string{p.AuthType, p.AuthURL, p.Username, p.Password, p.ProjectName, p.EndpointOverride} {
		if strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}

// Check reports, for an external Placement, every [placement] option
// Leasehold cannot reach it without, by name, in one error; nil when the
// section is usable (or no external Placement is configured).
func (p ExternalPlacement) Check() error {
	if !p.Enabled() {
		return nil
	}
	return checkPasswordAuth("an external Placement needs", "placement", passwordAuth{
		p.AuthType, p.AuthURL, p.Username, p.Password, p.ProjectName,
		p.UserDomainName, p.UserDomainID, p.ProjectDomainName, p.ProjectDomainID,
	})
}

// HTTPTimeout is Timeout as a duration.
func (p ExternalPlacement) HTTPTimeout() time.Duration { return time.Duration(p.Timeout) * time.Second }

// normalizeExternalPlacement checks the value ranges and spellings of
// the external Placement options (normalising the interface names).
func (c *Config) normalizeExternalPlacement() error {
	p := &c.Placement.ExternalPlacement
	p.ValidInterfaces = splitList(p.ValidInterfaces)
	var ifs []string
	if et := strings.TrimSpace(p.EndpointType); et != "" {
		ifs = append(ifs, et)
	}
	ifs = append(ifs, p.ValidInterfaces...)
	for i, name := range ifs {
		n, err := interfaceName(name)
		if err != nil {
			return err
		}
		ifs[i] = n
	}
	switch {
	case p.EndpointType != "":
		p.EndpointType = ifs[0]
		p.ValidInterfaces = ifs[1:]
	default:
		p.ValidInterfaces = ifs
	}
	if p.Timeout < 1 {
		return fmt.Errorf("config: placement.timeout %d: want positive seconds", p.Timeout)
	}
	return nil
}

// Interfaces are the catalog interfaces to try, in order.
func (p ExternalPlacement) Interfaces() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(p.EndpointType)
	for _, s := range p.ValidInterfaces {
		add(s)
	}
	if len(out) == 0 {
		return []string{"internal", "public"}
	}
	return out
}

// interfaceName is keystoneauth's interface name in the catalog's
// spelling (public, internal or admin).
func interfaceName(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "public", "publicurl":
		return "public", nil
	case "internal", "internalurl":
		return "internal", nil
	case "admin", "adminurl":
		return "admin", nil
	}
	return "", fmt.Errorf("config: placement interface %q (endpoint_type / valid_interfaces): want public, internal or admin", s)
}
