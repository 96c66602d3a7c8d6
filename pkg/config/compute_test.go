package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNovaFromOsloFile(t *testing.T) {
	cleanEnv(t)
	text := `[compute]
driver = nova
[nova]
auth_type = password
auth_url = https://keystone.example/identity/v3
username = blazar
password = s3cret
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionTwo
endpoint_type = internalURL
cafile = /etc/ssl/nova.pem
aggregate_freepool_name = spare
blazar_az_prefix = lh_
az_aware = true
timeout = 5
`
	c := mustLoad(t, "--config", writeFile(t, "blazar.conf", text))
	want := Nova{
		AuthType: "password", AuthURL: "https://keystone.example/identity/v3", Username: "blazar", Password: "s3cret",
		ProjectName: "service", UserDomainName: "Default", ProjectDomainName: "Default", RegionName: "RegionTwo",
		EndpointType: "internal", CAFile: "/etc/ssl/nova.pem", Timeout: 5, AggregateFreepoolName: "spare",
		BlazarOwner: "blazar:owner", BlazarAZPrefix: "lh_", AZAware: true, ServerDeleteTimeout: 600, HostStatusInterval: 60,
	}
	if c.Compute.Driver != ComputeNova {
		t.Errorf("compute.driver = %q, want nova", c.Compute.Driver)
	}
	if diff := cmp.Diff(want, c.Nova); diff != "" {
		t.Errorf("[nova] (-want +got):\n%s", diff)
	}
	if err := c.Nova.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
}

func TestComputeDefaultsAndEnv(t *testing.T) {
	cleanEnv(t)
	c := mustLoad(t)
	if c.Compute.Driver != ComputeStandalone || c.Nova.AggregateFreepoolName != "freepool" || c.Nova.BlazarOwner != "blazar:owner" ||
		c.Nova.BlazarAZPrefix != "blazar_" || !c.Nova.AZAware || c.Nova.EndpointType != "internal" {
		t.Errorf("defaults: %+v %+v", c.Compute, c.Nova)
	}
	t.Setenv("LEASEHOLD_COMPUTE_DRIVER", "Nova")
	t.Setenv("LEASEHOLD_NOVA_AUTH_URL", "http://127.0.0.1:5000/v3")
	c = mustLoad(t)
	if c.Compute.Driver != ComputeNova || c.Nova.AuthURL != "http://127.0.0.1:5000/v3" {
		t.Errorf("env not applied: %+v %+v", c.Compute, c.Nova)
	}
}

func TestComputeRefused(t *testing.T) {
	for _, tc := range []struct {
		env, val, want string
	}{
		{"LEASEHOLD_COMPUTE_DRIVER", "libvirt", `compute.driver "libvirt" is not supported`},
		{"LEASEHOLD_NOVA_ENDPOINT_TYPE", "private", "nova.endpoint_type"},
		{"LEASEHOLD_NOVA_TIMEOUT", "0", "nova.timeout"},
		{"LEASEHOLD_NOVA_HOST_STATUS_INTERVAL", "-1", "nova.host_status_interval"},
		{"LEASEHOLD_NOVA_AGGREGATE_FREEPOOL_NAME", " ", "aggregate_freepool_name"},
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
}

func TestNovaCheckNamesEveryMissingOption(t *testing.T) {
	err := Nova{UserDomainID: "default"}.Check()
	want := "auth_url, auth_type, username, password, project_name, project_domain_name"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Check() = %v, want the missing options %s", err, want)
	}
	n := Nova{AuthType: "token", AuthURL: "u", Username: "u", Password: "p", ProjectName: "p", UserDomainName: "d", ProjectDomainName: "d"}
	if err := n.Check(); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("Check(auth_type token) = %v, want not supported", err)
	}
}
