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
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/server"
	"github.com/leasehold/leasehold/tests/internal/kstest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure.
const EnvRequireNova = novatest.EnvRequireNova

// novaHosts are nova-box's fake computes.
var novaHosts = []string{"compute1", "compute2", "compute3"}

// Env is the package's Keystone and Nova.
type Env struct{ *novatest.Env }

// suite is the package's Keystone and a nova-box whose scheduler runs
// the upstream BlazarFilter.
var suite = &novatest.Suite{
	Name:   "tests/nova",
	What:   "the tests against a real Nova",
	Banner: "nova-box with the BlazarFilter",
	Prereqs: []novatest.Prereq{{
		Path: filepath.Join(novatest.BlazarNovaDir(), "blazarnova", "scheduler", "filters", "blazar_filter.py"),
		Why:  "the upstream BlazarFilter is not in " + novatest.BlazarNovaDir() + " (set SHARED_DIR)",
	}},
	Options: func(*novatest.Env) (novatest.Options, error) {
		return novatest.Options{
			Hosts:      novaHosts,
			Filters:    []string{novatest.BlazarFilter},
			PythonPath: []string{novatest.BlazarNovaDir()},
		}, nil
	},
}

func TestMain(m *testing.M) {
	code := m.Run()
	suite.Close()
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
	return &Env{suite.Require(t)}
}

// leaseholdConf is an oslo-style config of Leasehold with keystone auth
// and the nova compute driver, its database in dir; extra is appended.
func (e *Env) leaseholdConf(dir, extra string) string {
	// Short: the tests freeze Nova, and each call then waits this long.
	return novatest.LeaseholdConf(e.KS, dir, "timeout = 3\nserver_delete_timeout = 120\n") +
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
