// Package horizon_test runs Debian's Horizon (openstack-dashboard) with
// the unmodified blazar-dashboard plugin against Leasehold with Keystone
// auth, and drives it in headless Chromium with selenium: the admin's
// host forms and a member's lease forms, lease detail and Host Calendar.
//
// Keystone is started once for the package by
// ../shared/reference/openstack-harness/keystone-up.sh (as tests/keystone
// does). Horizon runs with `manage.py runserver` and a settings module of
// the test's own in a temporary directory: nothing under /etc is written.
// Without the packages the test skips loudly, unless
// LEASEHOLD_REQUIRE_HORIZON=1 (CI), which makes that a failure.
// SHARED_DIR names the folder holding reference/openstack-harness and
// vendor/blazar-dashboard (default: ../shared next to the checkout).
package horizon_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequireHorizon makes missing packages a test failure.
const EnvRequireHorizon = "LEASEHOLD_REQUIRE_HORIZON"

// keystone is the running Keystone (tests/internal/kstest).
type keystone struct{ *kstest.Keystone }

var (
	ksOnce sync.Once
	ks     *keystone
	ksErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if ks != nil {
		if err := ks.Down(false); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

func sharedDir() string { return kstest.SharedDir() }

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// missing says what this machine lacks to run the test ("" when nothing).
func missing() string {
	var lack []string
	for _, f := range []struct{ path, what string }{
		{"/usr/bin/keystone-manage", "python3-keystone"},
		{"/usr/lib/uwsgi/plugins/python3_plugin.so", "uwsgi-plugin-python3"},
		{"/usr/share/openstack-dashboard/manage.py", "openstack-dashboard"},
		{"/usr/bin/chromium", "chromium"},
		{"/usr/bin/chromedriver", "chromium-driver"},
		{"/usr/lib/python3/dist-packages/selenium", "python3-selenium"},
		{"/usr/lib/python3/dist-packages/blazarclient", "python3-blazarclient"},
		{filepath.Join(sharedDir(), "reference", "openstack-harness", "keystone-up.sh"), "keystone-up.sh (set SHARED_DIR)"},
		{filepath.Join(sharedDir(), "vendor", "blazar-dashboard", "blazar_dashboard"), "vendor/blazar-dashboard (set SHARED_DIR)"},
	} {
		if !fileExists(f.path) {
			lack = append(lack, f.what)
		}
	}
	if len(lack) == 0 {
		return ""
	}
	return "missing " + strings.Join(lack, ", ") + " (scripts/deps.sh installs the packages): the Horizon test does not run"
}

// requireHorizon skips the test loudly (or fails it under
// LEASEHOLD_REQUIRE_HORIZON=1) when the packages are missing, and
// returns the package's Keystone, starting it on first use.
func requireHorizon(t *testing.T) *keystone {
	t.Helper()
	if m := missing(); m != "" {
		fmt.Fprintf(os.Stderr, "\n%s\n### %s\n%s\n\n", strings.Repeat("#", 80), m, strings.Repeat("#", 80))
		if os.Getenv(EnvRequireHorizon) == "1" {
			t.Fatalf("%s (%s=1: the Horizon test must run)", m, EnvRequireHorizon)
		}
		t.Skip("SKIPPED LOUDLY: " + m)
	}
	ksOnce.Do(startKeystone)
	if ksErr != nil {
		t.Fatalf("starting Keystone: %v", ksErr)
	}
	return ks
}

func startKeystone() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := kstest.Start(ctx)
	if k != nil {
		ks = &keystone{k} // stopped by TestMain whatever happens next
	}
	ksErr = err
}

// issue returns a new project-scoped token of user (password login).
func (k *keystone) issue(t *testing.T, user, password, project string) string {
	t.Helper()
	return k.MustIssue(t, user, password, project)
}

// catalogHas reports whether a new admin token's catalog lists every
// service type in types.
func (k *keystone) catalogHas(t *testing.T, types ...string) bool {
	t.Helper()
	var tok struct {
		Token struct {
			Catalog []struct{ Type string } `json:"catalog"`
		} `json:"token"`
	}
	if _, err := k.Login("admin", k.AdminPassword, "admin", &tok); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range tok.Token.Catalog {
		seen[c.Type] = true
	}
	for _, typ := range types {
		if !seen[typ] {
			return false
		}
	}
	return true
}

// register adds a service of type typ with public endpoint url to the
// catalog for the test.
func (k *keystone) register(t *testing.T, typ, url string) {
	t.Helper()
	k.Register(t, typ, typ, url)
}
