package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExternalPlacementFromOsloFile(t *testing.T) {
	cleanEnv(t)
	text := `[placement]
policy_mode = legacy
auth_type = password
auth_url = https://keystone.example/identity/v3
username = blazar
password = s3cret
project_name = service
user_domain_name = Default
project_domain_id = default
region_name = RegionTwo
valid_interfaces = internalURL, public
cafile = /etc/ssl/placement.pem
timeout = 7
`
	c := mustLoad(t, "--config", writeFile(t, "blazar.conf", text))
	want := ExternalPlacement{
		AuthType: "password", AuthURL: "https://keystone.example/identity/v3", Username: "blazar", Password: "s3cret",
		ProjectName: "service", UserDomainName: "Default", ProjectDomainID: "default", RegionName: "RegionTwo",
		ValidInterfaces: []string{"internal", "public"}, CAFile: "/etc/ssl/placement.pem", Timeout: 7,
	}
	if diff := cmp.Diff(want, c.Placement.ExternalPlacement); diff != "" {
		t.Errorf("[placement] keystoneauth options (-want +got):\n%s", diff)
	}
	if !c.Placement.Enabled() {
		t.Error("Enabled() = false with auth options set")
	}
	if err := c.Placement.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
	if c.Placement.PolicyMode != "legacy" {
		t.Errorf("policy_mode = %q: the built-in options share the section", c.Placement.PolicyMode)
	}
}

func TestExternalPlacementOffByDefault(t *testing.T) {
	cleanEnv(t)
	c := mustLoad(t)
	if c.Placement.Enabled() {
		t.Errorf("Enabled() = true by default: %+v", c.Placement.ExternalPlacement)
	}
	if err := c.Placement.Check(); err != nil {
		t.Errorf("Check() = %v with no external Placement, want nil", err)
	}
	if got, want := c.Placement.Interfaces(), []string{"internal", "public"}; !cmp.Equal(got, want) {
		t.Errorf("Interfaces() = %v, want %v", got, want)
	}
}

func TestExternalPlacementEnv(t *testing.T) {
	cleanEnv(t)
	t.Setenv("LEASEHOLD_PLACEMENT_ENDPOINT_OVERRIDE", "http://127.0.0.1:8778")
	t.Setenv("LEASEHOLD_PLACEMENT_ENDPOINT_TYPE", "adminURL")
	c := mustLoad(t)
	p := c.Placement.ExternalPlacement
	if !p.Enabled() || p.EndpointOverride != "http://127.0.0.1:8778" {
		t.Fatalf("env not applied: %+v", p)
	}
	if got := p.Interfaces(); !cmp.Equal(got, []string{"admin"}) {
		t.Errorf("Interfaces() = %v, want [admin]", got)
	}
	// An endpoint without a login is refused, naming what is missing.
	err := p.Check()
	want := "[placement] options, which are missing or empty: auth_url, auth_type, username, password, project_name, user_domain_name, project_domain_name"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check() = %v, want %q", err, want)
	}
}

func TestExternalPlacementRefused(t *testing.T) {
	for _, tc := range []struct {
		env, val, want string
	}{
		{"LEASEHOLD_PLACEMENT_TIMEOUT", "0", "placement.timeout"},
		{"LEASEHOLD_PLACEMENT_VALID_INTERFACES", "public,private", `placement interface "private"`},
		{"LEASEHOLD_PLACEMENT_ENDPOINT_TYPE", "backdoor", `placement interface "backdoor"`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv(tc.env, tc.val)
			_, err := load(t)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load with %s=%q: %v, want an error containing %q", tc.env, tc.val, err, tc.want)
			}
		})
	}
	p := ExternalPlacement{AuthType: "v3token", AuthURL: "u", Username: "u", Password: "p", ProjectName: "p", UserDomainID: "d", ProjectDomainID: "d", Timeout: 1}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "[placement] auth_type") {
		t.Errorf("Check(auth_type v3token) = %v, want not supported", err)
	}
}
