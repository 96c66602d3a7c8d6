package config

import (
	"fmt"
	"strings"
)

// The auth strategies [api] auth_strategy (or --auth, LEASEHOLD_AUTH)
// accepts. "noauth2", Placement's spelling, is read as AuthNoAuth.
const (
	AuthKeystone = "keystone"
	AuthNoAuth   = "noauth"
)

// KeystoneAuthtoken is the [keystone_authtoken] section, with the option
// names keystonemiddleware reads, so the section of an existing
// blazar.conf or placement.conf can be used as it is. In YAML/TOML it
// nests under keystone_authtoken:, and LEASEHOLD_KEYSTONE_AUTHTOKEN_<KEY>
// environment variables set single options.
type KeystoneAuthtoken struct {
	// WWWAuthenticateURI is the Keystone address a 401 points clients at
	// (WWW-Authenticate: Keystone uri="…"); AuthURL when empty.
	WWWAuthenticateURI string `mapstructure:"www_authenticate_uri"`
	// AuthURL is the identity endpoint the service user logs in at.
	AuthURL string `mapstructure:"auth_url"`
	// AuthType must be "password" (the only plugin supported).
	AuthType string `mapstructure:"auth_type"`
	// The service user's credentials and scope. A user or project domain
	// may be given by name or by id.
	Username          string `mapstructure:"username"`
	Password          string `mapstructure:"password"`
	ProjectName       string `mapstructure:"project_name"`
	UserDomainName    string `mapstructure:"user_domain_name"`
	UserDomainID      string `mapstructure:"user_domain_id"`
	ProjectDomainName string `mapstructure:"project_domain_name"`
	ProjectDomainID   string `mapstructure:"project_domain_id"`
	// RegionName and Interface pick the identity endpoint in the service
	// user's catalog that tokens are validated at.
	RegionName string `mapstructure:"region_name"`
	Interface  string `mapstructure:"interface"`
	// TokenCacheTime is how long, in seconds, a validated token is
	// trusted without asking Keystone again (never past its expiry); -1
	// disables the cache.
	TokenCacheTime int `mapstructure:"token_cache_time"`
	// TokenCacheSize bounds the number of cached tokens (Leasehold's own
	// option; least recently used tokens are dropped first).
	TokenCacheSize int `mapstructure:"token_cache_size"`
	// ServiceTokenRoles are the roles an X-Service-Token must carry (one
	// of them) to count as a service token.
	ServiceTokenRoles []string `mapstructure:"service_token_roles"`
	// ServiceTokenRolesRequired refuses (401) a service token without one
	// of ServiceTokenRoles; when false such a token is accepted with a
	// warning and no service roles, as keystonemiddleware does.
	ServiceTokenRolesRequired bool `mapstructure:"service_token_roles_required"`
	// CAFile verifies Keystone's TLS certificate; Insecure skips the check.
	CAFile   string `mapstructure:"cafile"`
	Insecure bool   `mapstructure:"insecure"`
	// HTTPTimeout bounds one call to Keystone, in seconds.
	HTTPTimeout int `mapstructure:"http_connect_timeout"`
}

func init() {
	for k, v := range map[string]any{
		"keystone_authtoken.www_authenticate_uri":         "",
		"keystone_authtoken.auth_url":                     "",
		"keystone_authtoken.auth_type":                    "",
		"keystone_authtoken.username":                     "",
		"keystone_authtoken.password":                     "",
		"keystone_authtoken.project_name":                 "",
		"keystone_authtoken.user_domain_name":             "",
		"keystone_authtoken.user_domain_id":               "",
		"keystone_authtoken.project_domain_name":          "",
		"keystone_authtoken.project_domain_id":            "",
		"keystone_authtoken.region_name":                  "",
		"keystone_authtoken.interface":                    "internal",
		"keystone_authtoken.token_cache_time":             300,
		"keystone_authtoken.token_cache_size":             10000,
		"keystone_authtoken.service_token_roles":          []string{"service"},
		"keystone_authtoken.service_token_roles_required": false,
		"keystone_authtoken.cafile":                       "",
		"keystone_authtoken.insecure":                     false,
		"keystone_authtoken.http_connect_timeout":         10,
	} {
		defaults[k] = v
	}
}

// normalizeAuth checks the strategy name and the value ranges of
// [keystone_authtoken]. Whether keystone has every option it needs is
// KeystoneAuthtoken.Check's job, done when the server starts, so that
// commands that do not serve (db sync) run without them.
func (c *Config) normalizeAuth() error {
	switch strings.ToLower(strings.TrimSpace(c.Auth)) {
	case "noauth", "noauth2":
		c.Auth = AuthNoAuth
	case "keystone":
		c.Auth = AuthKeystone
	default:
		return fmt.Errorf("config: auth %q is not supported (supported: keystone, noauth)", c.Auth)
	}
	k := &c.KeystoneAuthtoken
	k.ServiceTokenRoles = splitList(k.ServiceTokenRoles)
	if k.TokenCacheTime < -1 {
		return fmt.Errorf("config: keystone_authtoken.token_cache_time %d: want seconds, or -1 for no cache", k.TokenCacheTime)
	}
	if k.TokenCacheSize < 1 {
		return fmt.Errorf("config: keystone_authtoken.token_cache_size %d: want a positive count", k.TokenCacheSize)
	}
	if k.HTTPTimeout < 1 {
		return fmt.Errorf("config: keystone_authtoken.http_connect_timeout %d: want positive seconds", k.HTTPTimeout)
	}
	return nil
}

// Check reports, for auth_strategy = keystone, every option the
// service user cannot do without, by its [keystone_authtoken] name, in
// one error; nil when the section is usable.
func (k KeystoneAuthtoken) Check() error {
	return checkPasswordAuth("auth_strategy = keystone needs", "keystone_authtoken", passwordAuth{
		k.AuthType, k.AuthURL, k.Username, k.Password, k.ProjectName,
		k.UserDomainName, k.UserDomainID, k.ProjectDomainName, k.ProjectDomainID,
	})
}

// passwordAuth are keystoneauth's password-plugin options, as every
// section that logs in to Keystone names them.
type passwordAuth struct {
	authType, authURL, username, password, projectName string
	userDomainName, userDomainID                       string
	projectDomainName, projectDomainID                 string
}

// checkPasswordAuth names every missing option of section in one error
// ("config: <who> these [section] options, …"), and refuses auth types
// other than password.
func checkPasswordAuth(who, section string, a passwordAuth) error {
	var missing []string
	need := func(name, val string) {
		if strings.TrimSpace(val) == "" {
			missing = append(missing, name)
		}
	}
	need("auth_url", a.authURL)
	need("auth_type", a.authType)
	need("username", a.username)
	need("password", a.password)
	need("project_name", a.projectName)
	if a.userDomainName == "" && a.userDomainID == "" {
		missing = append(missing, "user_domain_name")
	}
	if a.projectDomainName == "" && a.projectDomainID == "" {
		missing = append(missing, "project_domain_name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("config: %s these [%s] options, which are missing or empty: %s", who, section, strings.Join(missing, ", "))
	}
	if a.authType != "password" {
		return fmt.Errorf("config: [%s] auth_type = %q is not supported (supported: password)", section, a.authType)
	}
	return nil
}
