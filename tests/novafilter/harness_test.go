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
	"os"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/tests/internal/kstest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure.
const EnvRequireNova = novatest.EnvRequireNova

// FilterClass is LeaseholdFilter's class path, found on
// PYTHONPATH=contribDir().
const FilterClass = "leasehold_filter.LeaseholdFilter"

// novaHosts are nova-box's fake computes.
var novaHosts = []string{"compute1", "compute2", "compute3"}

// contribDir is contrib/nova of this checkout (tests run in their
// package's directory).
func contribDir(t testing.TB) string {
	t.Helper()
	d, err := contribPath()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func contribPath() (string, error) { return filepath.Abs(filepath.Join("..", "..", "contrib", "nova")) }

// Env is the package's Keystone and Nova (whose scheduler runs
// LeaseholdFilter).
type Env struct{ *novatest.Env }

// suite is the package's Keystone and a nova-box whose scheduler runs
// LeaseholdFilter.
var suite = &novatest.Suite{
	Name:   "tests/novafilter",
	What:   "the LeaseholdFilter tests against a real Nova",
	Banner: "nova-box with LeaseholdFilter",
	Options: func(e *novatest.Env) (novatest.Options, error) {
		contrib, err := contribPath()
		return novatest.Options{
			Hosts:      novaHosts,
			Filters:    []string{FilterClass},
			PythonPath: []string{contrib},
			Conf:       filterConf(e.KS),
		}, err
	},
}

func TestMain(m *testing.M) {
	code := m.Run()
	suite.Close()
	os.Exit(code)
}

// skipLoudly is novatest.SkipLoudly.
var skipLoudly = novatest.SkipLoudly

// RequireEnv returns the package's Keystone and Nova, starting them on
// first use.
func RequireEnv(t testing.TB) *Env {
	t.Helper()
	return &Env{suite.Require(t)}
}

// filterConf is nova.conf's [leasehold] section: the service user's
// password login. It names no endpoint: Leasehold starts after Nova (its
// nova driver finds Nova in the catalog) and listens on a port chosen
// then, so the test registers it in the catalog as the "reservation"
// service, which the filter looks up on its first request (a picked
// free port could be taken by another process before Leasehold binds it).
func filterConf(k *kstest.Keystone) string {
	return "[leasehold]\n" + novatest.ServiceAuth(k) + "endpoint_type = public\nregion_name = RegionOne\ntimeout = 10\n"
}

// StartLeasehold builds Leasehold in-process (keystone auth, the nova
// driver, SQLite in a temporary directory), runs it until the test ends
// and returns its URL.
func (e *Env) StartLeasehold(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	conf := novatest.LeaseholdConf(e.KS, dir, "timeout = 10\nserver_delete_timeout = 120\n")
	cfg := kstest.LoadConfig(t, dir, conf, EnvRequireNova)
	if cfg.Compute.Driver != config.ComputeNova {
		t.Fatalf("compute driver %q", cfg.Compute.Driver)
	}
	s := lhtest.Run(t, cfg)
	return "http://" + s.Addrs[0]
}

// call and mustCall are lhtest.Call and lhtest.MustCall.
var call, mustCall = lhtest.Call, lhtest.MustCall
