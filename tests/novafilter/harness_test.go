// Package novafilter_test runs Nova's scheduler with Leasehold's own
// filter (contrib/nova: LeaseholdFilter) against Leasehold on the nova
// compute driver with Keystone auth: a real Keystone and nova-box (Nova's
// API, conductor, scheduler and fake computes compute1..3 in one
// process) from ../shared/reference/openstack-harness, started once for
// the package and stopped in TestMain; it also runs the filter's Python
// unit tests. Without the Debian packages the tests skip with a loud
// message, unless LEASEHOLD_REQUIRE_NOVA=1 (CI), which makes that a
// failure. SHARED_DIR names the folder holding reference/openstack-harness
// (default: ../shared next to the checkout).
package novafilter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/tests/internal/kstest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure.
const EnvRequireNova = "LEASEHOLD_REQUIRE_NOVA"

// FilterClass is LeaseholdFilter's class path, found on
// PYTHONPATH=contribDir().
const FilterClass = "leasehold_filter.LeaseholdFilter"

// novaHosts are nova-box's fake computes.
var novaHosts = []string{"compute1", "compute2", "compute3"}

// contribDir is contrib/nova of this checkout (tests run in their
// package's directory).
func contribDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "contrib", "nova"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Env is the package's Keystone and Nova (whose scheduler runs
// LeaseholdFilter).
type Env struct {
	KS   *kstest.Keystone
	Nova *novatest.Nova
	mu   sync.Mutex
	// others are further nova-boxes a test started (stopped by TestMain
	// too, should the test not get to it).
	others []*novatest.Nova
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
		env.mu.Lock()
		boxes := append([]*novatest.Nova{env.Nova}, env.others...)
		env.mu.Unlock()
		for _, n := range boxes {
			if n != nil {
				if err := n.Down(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		}
		if env.KS != nil {
			if err := env.KS.Down(false); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	os.Exit(code)
}

// skipLoudly skips t with why (printed in a banner), or fails it under
// LEASEHOLD_REQUIRE_NOVA=1.
func skipLoudly(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequireNova) == "1" {
		t.Fatalf("%s (%s=1: the Nova tests must run)", why, EnvRequireNova)
	}
	fmt.Fprintf(os.Stderr, "\n%s\n### SKIPPED: %s\n%s\n\n", strings.Repeat("#", 80), why, strings.Repeat("#", 80))
	t.Skip("SKIPPED LOUDLY: " + why)
}

// RequireEnv returns the package's Keystone and Nova, starting them on
// first use.
func RequireEnv(t testing.TB) *Env {
	t.Helper()
	envOnce.Do(func() { startEnv(contribDir(t)) })
	if envSkip != "" {
		skipLoudly(t, envSkip)
	}
	if envErr != nil {
		t.Fatalf("starting Keystone and Nova: %v", envErr)
	}
	return env
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func startEnv(contrib string) {
	switch {
	case !fileExists("/usr/bin/keystone-manage"):
		envSkip = "python3-keystone is not installed (scripts/deps.sh installs it): the LeaseholdFilter tests against a real Nova do not run"
	case !fileExists("/usr/lib/uwsgi/plugins/python3_plugin.so"):
		envSkip = "uwsgi-plugin-python3 is not installed: the LeaseholdFilter tests against a real Nova do not run"
	case !fileExists(filepath.Join(kstest.HarnessDir(), "keystone-up.sh")):
		envSkip = "keystone-up.sh not found in " + kstest.HarnessDir() + " (set SHARED_DIR)"
	default:
		if m := novatest.Missing(); m != "" {
			envSkip = m + ": the LeaseholdFilter tests against a real Nova do not run"
		}
	}
	if envSkip != "" {
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
	if envErr = grantAdmin(k); envErr != nil {
		return
	}
	n, err := novatest.Start(ctx, novatest.Options{
		Keystone:   k,
		Hosts:      novaHosts,
		Filters:    []string{FilterClass},
		PythonPath: []string{contrib},
		Conf:       filterConf(k),
	})
	env.Nova = n
	if err != nil {
		envErr = err
		return
	}
	fmt.Fprintf(os.Stderr, "tests/novafilter: nova-box with LeaseholdFilter up in %s\n", n.StartDuration().Round(time.Millisecond))
}

// filterConf is nova.conf's [leasehold] section: the service user's
// password login. It names no endpoint: Leasehold starts after Nova (its
// nova driver finds Nova in the catalog) and listens on a port chosen
// then, so the test registers it in the catalog as the "reservation"
// service, which the filter looks up on its first request (a picked
// free port could be taken by another process before Leasehold binds it).
func filterConf(k *kstest.Keystone) string {
	return "[leasehold]\nauth_type = password\nauth_url = " + k.URL + "\nusername = " + k.ServiceUser +
		"\npassword = " + k.ServicePassword + "\nproject_name = service\nuser_domain_name = Default\n" +
		"project_domain_name = Default\nendpoint_type = public\nregion_name = RegionOne\ntimeout = 10\n"
}

// grantAdmin gives the service user the admin role on project service:
// Leasehold's nova driver calls Nova's admin APIs as that user, as
// Blazar's user does in a real deployment.
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

// StartLeasehold builds Leasehold in-process (keystone auth, the nova
// driver, SQLite in a temporary directory), runs it until the test ends
// and returns its URL.
func (e *Env) StartLeasehold(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	k := e.KS
	conf := "[DEFAULT]\nlisten = 127.0.0.1:0\n[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\ntoken_cache_time = 60\n" +
		"[compute]\ndriver = nova\n" +
		"[nova]\nauth_type = password\nauth_url = " + k.URL + "\nusername = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\n" +
		"project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\n" +
		"timeout = 10\nserver_delete_timeout = 120\n"
	cfg := kstest.LoadConfig(t, dir, conf, EnvRequireNova)
	if cfg.Compute.Driver != config.ComputeNova {
		t.Fatalf("compute driver %q", cfg.Compute.Driver)
	}
	s := lhtest.Run(t, cfg)
	return "http://" + s.Addrs[0]
}

// call and mustCall are lhtest.Call and lhtest.MustCall.
var call, mustCall = lhtest.Call, lhtest.MustCall
