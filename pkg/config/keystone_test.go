package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeystoneAuthtokenFromOsloFile(t *testing.T) {
	cleanEnv(t)
	text := `[api]
auth_strategy = keystone
[keystone_authtoken]
www_authenticate_uri = https://keystone.example/identity
auth_url = https://keystone.example/identity/v3
auth_type = password
username = blazar
password = s3cret
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionTwo
token_cache_time = 60
service_token_roles = service, nova
service_token_roles_required = true
cafile = /etc/ssl/keystone.pem
insecure = false
`
	c := mustLoad(t, "--config", writeFile(t, "blazar.conf", text))
	want := KeystoneAuthtoken{
		WWWAuthenticateURI: "https://keystone.example/identity", AuthURL: "https://keystone.example/identity/v3",
		AuthType: "password", Username: "blazar", Password: "s3cret", ProjectName: "service",
		UserDomainName: "Default", ProjectDomainName: "Default", RegionName: "RegionTwo", Interface: "internal",
		TokenCacheTime: 60, TokenCacheSize: 10000, ServiceTokenRoles: []string{"service", "nova"},
		ServiceTokenRolesRequired: true, CAFile: "/etc/ssl/keystone.pem", HTTPTimeout: 10,
	}
	if c.Auth != AuthKeystone {
		t.Errorf("Auth = %q, want keystone", c.Auth)
	}
	if diff := cmp.Diff(want, c.KeystoneAuthtoken); diff != "" {
		t.Errorf("[keystone_authtoken] (-want +got):\n%s", diff)
	}
	if err := c.KeystoneAuthtoken.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
}

func TestKeystoneAuthtokenDefaultsAndEnv(t *testing.T) {
	cleanEnv(t)
	t.Setenv("LEASEHOLD_AUTH", "keystone")
	t.Setenv("LEASEHOLD_KEYSTONE_AUTHTOKEN_AUTH_URL", "http://127.0.0.1:5000/v3")
	t.Setenv("LEASEHOLD_KEYSTONE_AUTHTOKEN_TOKEN_CACHE_TIME", "-1")
	c := mustLoad(t)
	k := c.KeystoneAuthtoken
	if c.Auth != AuthKeystone || k.AuthURL != "http://127.0.0.1:5000/v3" || k.TokenCacheTime != -1 {
		t.Errorf("env not applied: auth %q, %+v", c.Auth, k)
	}
	if diff := cmp.Diff([]string{"service"}, k.ServiceTokenRoles); diff != "" || k.ServiceTokenRolesRequired {
		t.Errorf("service token defaults: roles %v, required %v", k.ServiceTokenRoles, k.ServiceTokenRolesRequired)
	}
}

func TestAuthStrategyNames(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"noauth", AuthNoAuth}, {"noauth2", AuthNoAuth}, {"keystone", AuthKeystone}, {"Keystone", AuthKeystone},
	} {
		cleanEnv(t)
		if c := mustLoad(t, "--auth", tc.in); c.Auth != tc.want {
			t.Errorf("--auth %s: Auth = %q, want %q", tc.in, c.Auth, tc.want)
		}
	}
}

func TestKeystoneAuthtokenCheck(t *testing.T) {
	full := KeystoneAuthtoken{
		AuthURL: "http://k/v3", AuthType: "password", Username: "u", Password: "p", ProjectName: "service",
		UserDomainName: "Default", ProjectDomainID: "default",
	}
	tests := []struct {
		name    string
		edit    func(*KeystoneAuthtoken)
		wantErr string // "" for none
	}{
		{"complete", func(*KeystoneAuthtoken) {}, ""},
		{"empty section", func(k *KeystoneAuthtoken) { *k = KeystoneAuthtoken{} },
			"missing or empty: auth_url, auth_type, username, password, project_name, user_domain_name, project_domain_name"},
		{"no password", func(k *KeystoneAuthtoken) { k.Password = " " }, "missing or empty: password"},
		{"domains by id", func(k *KeystoneAuthtoken) { k.UserDomainName, k.UserDomainID = "", "default" }, ""},
		{"no user domain", func(k *KeystoneAuthtoken) { k.UserDomainName = "" }, "missing or empty: user_domain_name"},
		{"other plugin", func(k *KeystoneAuthtoken) { k.AuthType = "v3applicationcredential" }, `auth_type = "v3applicationcredential" is not supported`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := full
			tc.edit(&k)
			err := k.Check()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestKeystoneAuthtokenInvalidValues(t *testing.T) {
	for _, tc := range []struct{ env, val, wantErr string }{
		{"LEASEHOLD_KEYSTONE_AUTHTOKEN_TOKEN_CACHE_TIME", "-2", "token_cache_time -2"},
		{"LEASEHOLD_KEYSTONE_AUTHTOKEN_TOKEN_CACHE_SIZE", "0", "token_cache_size 0"},
		{"LEASEHOLD_KEYSTONE_AUTHTOKEN_HTTP_CONNECT_TIMEOUT", "0", "http_connect_timeout 0"},
	} {
		cleanEnv(t)
		t.Setenv(tc.env, tc.val)
		if c, err := load(t); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s=%s: Load = %+v, %v; want error containing %q", tc.env, tc.val, c, err, tc.wantErr)
		}
	}
}

// TestSamplesKeystoneAuthtoken: both shipped samples carry a complete
// [keystone_authtoken] (TestSamples checks that they agree).
func TestSamplesKeystoneAuthtoken(t *testing.T) {
	cleanEnv(t)
	for _, name := range []string{"leasehold.conf.sample", "leasehold.yaml.sample"} {
		c := mustLoad(t, "--config", sample(t, name))
		k := c.KeystoneAuthtoken
		if err := k.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if k.Username != "blazar" || k.TokenCacheTime != 300 || !cmp.Equal(k.ServiceTokenRoles, []string{"service"}) {
			t.Errorf("%s: [keystone_authtoken] %+v", name, k)
		}
	}
}
