// Package nova_test runs Leasehold on the nova compute driver against a
// real Keystone and a real Nova (nova-box: API, conductor, scheduler and
// fake computes compute1..3 in one process) whose scheduler runs the
// unmodified upstream BlazarFilter, started once for the package by
// ../shared/reference/openstack-harness (keystone-up.sh, nova-box.sh)
// and stopped in TestMain. Without the Debian packages the tests skip
// with a loud message, unless LEASEHOLD_REQUIRE_NOVA=1 (CI), which makes
// that a failure. SHARED_DIR names the folder holding
// reference/openstack-harness and vendor/blazar-nova (default: ../shared
// next to the checkout).
package nova_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/server"
	"github.com/leasehold/leasehold/tests/internal/kstest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure.
const EnvRequireNova = "LEASEHOLD_REQUIRE_NOVA"

// novaHosts are nova-box's fake computes.
var novaHosts = []string{"compute1", "compute2", "compute3"}

// Env is the package's Keystone and Nova.
type Env struct {
	KS   *kstest.Keystone
	Nova *novatest.Nova
}

var (
	envOnce sync.Once
	env     *Env
	envSkip string
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if env.Nova != nil {
			if err := env.Nova.Down(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		if env.KS != nil {
			if err := env.KS.Down(false); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// RequireEnv returns the package's Keystone and Nova, starting them on
// first use; it skips the test loudly (or fails it under
// LEASEHOLD_REQUIRE_NOVA=1) when they cannot run here.
func RequireEnv(t testing.TB) *Env {
	t.Helper()
	envOnce.Do(startEnv)
	if envSkip != "" {
		if os.Getenv(EnvRequireNova) == "1" {
			t.Fatalf("%s (%s=1: the Nova tests must run)", envSkip, EnvRequireNova)
		}
		t.Skip("SKIPPED LOUDLY: " + envSkip)
	}
	if envErr != nil {
		t.Fatalf("starting Keystone and Nova: %v", envErr)
	}
	return env
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func startEnv() {
	switch {
	case !fileExists("/usr/bin/keystone-manage"):
		envSkip = "python3-keystone is not installed (scripts/deps.sh installs it): the tests against a real Nova do not run"
	case !fileExists("/usr/lib/uwsgi/plugins/python3_plugin.so"):
		envSkip = "uwsgi-plugin-python3 is not installed: the tests against a real Nova do not run"
	case !fileExists(filepath.Join(kstest.HarnessDir(), "keystone-up.sh")):
		envSkip = "keystone-up.sh not found in " + kstest.HarnessDir() + " (set SHARED_DIR)"
	case !fileExists(filepath.Join(novatest.BlazarNovaDir(), "blazarnova", "scheduler", "filters", "blazar_filter.py")):
		envSkip = "the upstream BlazarFilter is not in " + novatest.BlazarNovaDir() + " (set SHARED_DIR)"
	default:
		if m := novatest.Missing(); m != "" {
			envSkip = m + ": the tests against a real Nova do not run"
		}
	}
	if envSkip != "" {
		fmt.Fprintf(os.Stderr, "\n%s\n### %s\n%s\n\n", strings.Repeat("#", 80), envSkip, strings.Repeat("#", 80))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env = &Env{}
	k, err := kstest.Start(ctx)
	env.KS = k // stopped by TestMain whatever happens next
	if err != nil {
		envErr = err
		return
	}
	// Leasehold calls Nova as the service user, which needs Nova's
	// admin rules (aggregates, hypervisors, every project's servers), as
	// Blazar's user does in a real deployment.
	if envErr = grantAdmin(k); envErr != nil {
		return
	}
	n, err := novatest.Start(ctx, novatest.Options{
		Keystone:   k,
		Hosts:      novaHosts,
		Filters:    []string{novatest.BlazarFilter},
		PythonPath: []string{novatest.BlazarNovaDir()},
	})
	if n != nil {
		env.Nova = n
	}
	if err != nil {
		envErr = err
		return
	}
	fmt.Fprintf(os.Stderr, "tests/nova: nova-box with the BlazarFilter up in %s\n", n.StartDuration().Round(time.Millisecond))
}

// grantAdmin gives the service user the admin role on project service.
func grantAdmin(k *kstest.Keystone) error {
	admin, err := k.Issue("admin", k.AdminPassword, "admin")
	if err != nil {
		return err
	}
	var roles struct {
		Roles []struct{ ID string } `json:"roles"`
	}
	if err := k.Call("GET", "/roles?name=admin", admin, nil, &roles); err != nil || len(roles.Roles) != 1 {
		return fmt.Errorf("role admin: %v %+v", err, roles)
	}
	var projects struct {
		Projects []struct{ ID string } `json:"projects"`
	}
	if err := k.Call("GET", "/projects?name=service", admin, nil, &projects); err != nil || len(projects.Projects) != 1 {
		return fmt.Errorf("project service: %v %+v", err, projects)
	}
	return k.Call("PUT", "/projects/"+projects.Projects[0].ID+"/users/"+k.ServiceUserID+"/roles/"+roles.Roles[0].ID, admin, nil, nil)
}

// leaseholdConf is an oslo-style config of Leasehold with keystone auth
// and the nova compute driver, its database in dir; extra is appended.
func (e *Env) leaseholdConf(dir, extra string) string {
	k := e.KS
	return "[DEFAULT]\nlisten = 127.0.0.1:0\n[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\ntoken_cache_time = 60\n" +
		"[compute]\ndriver = nova\n" +
		"[nova]\nauth_type = password\nauth_url = " + k.URL + "\nusername = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\n" +
		"project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\n" +
		// Short: the tests freeze Nova, and each call then waits this long.
		"timeout = 3\nserver_delete_timeout = 120\n" +
		"[events]\nclaim_timeout = 20s\n" + extra
}

// Leasehold is a Leasehold serving on a loopback port.
type Leasehold struct {
	URL string
	S   *server.Server
}

// StartLeasehold builds Leasehold in-process from leaseholdConf and runs
// it until the test ends.
func (e *Env) StartLeasehold(t testing.TB, extra string) *Leasehold {
	t.Helper()
	dir := t.TempDir()
	cfg := kstest.LoadConfig(t, dir, e.leaseholdConf(dir, extra), EnvRequireNova)
	if cfg.Compute.Driver != config.ComputeNova {
		t.Fatalf("compute driver %q", cfg.Compute.Driver)
	}
	s := lhtest.Run(t, cfg)
	return &Leasehold{URL: "http://" + s.Addrs[0], S: s}
}

// Tokens are the tokens of the test users, issued once per test.
type Tokens struct{ Admin, Demo string }

func (e *Env) Tokens(t testing.TB) Tokens {
	t.Helper()
	return Tokens{
		Admin: e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin"),
		Demo:  e.KS.MustIssue(t, "demo", e.KS.DemoPassword, "demo"),
	}
}

// call and mustCall are lhtest.Call and lhtest.MustCall.
var call, mustCall = lhtest.Call, lhtest.MustCall

// Lease is what these tests read of a lease.
type Lease struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Degraded     bool   `json:"degraded"`
	ProjectID    string `json:"project_id"`
	Reservations []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"reservations"`
}

// createHostLease creates a lease of one host starting now and ending
// at end, as tok.
func createHostLease(t testing.TB, base, tok, name, end string) Lease {
	t.Helper()
	var out struct{ Lease Lease }
	mustCall(t, base, "POST", "/leases", tok, http.StatusCreated, map[string]any{
		"name": name, "start_date": "now", "end_date": end,
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": ""}},
		"events": []any{},
	}, &out)
	if len(out.Lease.Reservations) != 1 {
		t.Fatalf("lease %+v", out.Lease)
	}
	return out.Lease
}

func getLease(t testing.TB, base, tok, id string) Lease {
	t.Helper()
	var out struct{ Lease Lease }
	mustCall(t, base, "GET", "/leases/"+id, tok, http.StatusOK, nil, &out)
	return out.Lease
}

// waitLease polls lease id until ok accepts it (bounded).
func waitLease(t testing.TB, base, tok, id string, timeout time.Duration, what string, ok func(Lease) bool) Lease {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := getLease(t, base, tok, id)
		if ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s not %s after %s: %+v", id, what, timeout, l)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// registerHost registers a Nova host with Leasehold (admin) and returns
// its id.
func registerHost(t testing.TB, base, admin, name string) string {
	t.Helper()
	var out struct {
		Host struct {
			ID string `json:"id"`
		} `json:"host"`
	}
	mustCall(t, base, "POST", "/os-hosts", admin, http.StatusCreated, map[string]any{"name": name}, &out)
	return out.Host.ID
}

// Lease dates and aggregate membership: novatest's helpers.
var (
	nextMinute = novatest.NextMinute
	membership = novatest.Membership
	countNamed = novatest.CountNamed
)
