package keystone_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// register adds a service of type typ with a public endpoint url to the
// catalog for the test.
func (k *Keystone) register(t *testing.T, typ, url string) {
	t.Helper()
	k.Register(t, typ, typ+"-"+t.Name(), url)
}

// cli runs a python client with the OS_* variables of openrc (a file of
// keystone-up.sh's) and no others: password auth through Keystone, the
// endpoint from its catalog.
func (k *Keystone) cli(t *testing.T, openrc, name string, args ...string) string {
	t.Helper()
	out, stderr, err := k.cliRun(t, openrc, name, args...)
	if err != nil {
		t.Fatalf("%s %s (%s): %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), openrc, err, out, stderr)
	}
	return out
}

// cliRun is cli returning the failure instead of failing the test.
func (k *Keystone) cliRun(t *testing.T, openrc, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv(EnvRequireKeystone) == "1" {
			t.Fatalf("%s is not installed (%s=1)", name, EnvRequireKeystone)
		}
		t.Skipf("SKIPPED LOUDLY: %s is not installed (python3-blazarclient, python3-openstackclient, python3-osc-placement)", name)
	}
	vars := map[string]string{}
	if err := kstest.ReadVars(filepath.Join(k.Dir, openrc), vars); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OS_") {
			env = append(env, kv)
		}
	}
	for key, v := range vars {
		env = append(env, key+"="+v)
	}
	if _, ok := vars["OS_AUTH_TYPE"]; !ok {
		// blazar's own shell loads the auth plugin by name and has no
		// default (openstack's defaults to password).
		env = append(env, "OS_AUTH_TYPE=password")
	}
	env = append(env, "PYTHONWARNINGS=ignore", "COLUMNS=200")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return string(out), errb.String(), err
}

// TestRealClients: python-blazarclient as the member and osc-placement
// as the admin, logged in with passwords through Keystone, finding
// Leasehold in Keystone's catalog (reservation …/v1, placement
// …/placement), on a server with keystone auth.
func TestRealClients(t *testing.T) {
	k := RequireKeystone(t)
	s := newServerConf(t, k, "")
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	k.register(t, "reservation", srv.URL+"/v1")
	k.register(t, "placement", srv.URL+"/placement")
	c := client{h: s.Handler(), tokens: tokens(t, k)}
	f := &fixtures{c: c}
	f.host(t)
	other, _ := f.lease(t, asMemberB)

	k.cli(t, "demo-openrc", "blazar", "lease-create",
		"--physical-reservation", "min=1,max=1,hypervisor_properties=,resource_properties=",
		"--start-date", "2050-01-01 00:00", "--end-date", "2050-01-01 01:00", "cli-lease")
	var listed []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	out := k.cli(t, "demo-openrc", "blazar", "lease-list", "-f", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("lease-list: %v\n%s", err, out)
	}
	if len(listed) != 1 || listed[0].Name != "cli-lease" || listed[0].ID == other {
		t.Fatalf("the member's lease-list: %+v, want its one lease cli-lease", listed)
	}
	var shown struct {
		ProjectID string `json:"project_id"`
		UserID    string `json:"user_id"`
	}
	out = k.cli(t, "demo-openrc", "blazar", "lease-show", "-f", "json", listed[0].ID)
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("lease-show: %v\n%s", err, out)
	}
	if shown.ProjectID != k.DemoProjectID || shown.UserID != k.DemoUserID {
		t.Errorf("lease-show: project %s user %s, want the member's %s, %s", shown.ProjectID, shown.UserID, k.DemoProjectID, k.DemoUserID)
	}

	// B's member (an openrc written like the harness's) lists only its
	// own lease and is told nothing of A's.
	_, pwB := k.ProjectB(t)
	memberB := filepath.Join(k.Dir, "memberb-openrc")
	rc := strings.NewReplacer("OS_USERNAME=demo", "OS_USERNAME=memberb", "OS_PROJECT_NAME=demo", "OS_PROJECT_NAME=projb", "OS_PASSWORD="+k.DemoPassword, "OS_PASSWORD="+pwB)
	demoRC, err := os.ReadFile(filepath.Join(k.Dir, "demo-openrc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(memberB, []byte(rc.Replace(string(demoRC))), 0o600); err != nil {
		t.Fatal(err)
	}
	out = k.cli(t, "memberb-openrc", "blazar", "lease-list", "-f", "json")
	if strings.Contains(out, "cli-lease") || !strings.Contains(out, other) {
		t.Errorf("B's member lease-list: %s, want its own lease only", out)
	}
	if out, stderr, err := k.cliRun(t, "memberb-openrc", "blazar", "lease-show", listed[0].ID); err == nil || strings.Contains(out+stderr, "cli-lease") {
		t.Errorf("lease-show of A's lease as B's member: %v\n%s%s", err, out, stderr)
	}

	rp := "22222222-3333-4444-8555-666666666666"
	c.must(t, asAdmin, "POST", "/placement/resource_providers", `{"name": "cli-rp", "uuid": "`+rp+`"}`, 200, "")
	var providers []struct {
		UUID string `json:"uuid"`
		Name string `json:"name"`
	}
	out = k.cli(t, "admin-openrc", "openstack", "--os-placement-api-version", "1.39", "resource", "provider", "list", "-f", "json")
	if err := json.Unmarshal([]byte(out), &providers); err != nil {
		t.Fatalf("resource provider list: %v\n%s", err, out)
	}
	// The Blazar host is a provider too (with its blazar_ child).
	names := map[string]string{}
	for _, p := range providers {
		names[p.Name] = p.UUID
	}
	if names["cli-rp"] != rp || names["mx-1"] == "" || len(providers) != 3 {
		t.Errorf("openstack resource provider list as admin: %+v, want cli-rp, the host mx-1 and blazar_mx-1", providers)
	}
	if out, stderr, err := k.cliRun(t, "demo-openrc", "openstack", "--os-placement-api-version", "1.39", "resource", "provider", "list"); err == nil || !strings.Contains(stderr, "403") {
		t.Errorf("openstack resource provider list as the member: %v, want a 403 (legacy policy)\n%s%s", err, out, stderr)
	}
}
