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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequireHorizon makes missing packages a test failure.
const EnvRequireHorizon = "LEASEHOLD_REQUIRE_HORIZON"

// keystone is the running Keystone and its accounts.
type keystone struct {
	URL, Dir                      string
	AdminPassword, DemoPassword   string
	ServiceUser, ServicePassword  string
	AdminProjectID, DemoProjectID string
	DemoUserID                    string
	harness                       string
}

var (
	ksOnce sync.Once
	ks     *keystone
	ksErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if ks != nil {
		out, err := exec.Command(filepath.Join(ks.harness, "keystone-down.sh"), ks.Dir).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "keystone-down.sh: %v\n%s", err, out)
		}
	}
	os.Exit(code)
}

func sharedDir() string {
	if s := os.Getenv("SHARED_DIR"); s != "" {
		return s
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
}

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
	h := filepath.Join(sharedDir(), "reference", "openstack-harness")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h, "keystone-up.sh"))
	// One worker process: each uwsgi worker caches the catalog, and a
	// second one may hand Horizon a catalog from before the test's
	// endpoints were registered.
	cmd.Env = append(os.Environ(), "KS_NO_INSTALL=1", "KS_CACHE=1", "KS_PROCESSES=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	k := &keystone{harness: h}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KS_DIR="); ok {
			k.Dir = v
		}
	}
	if k.Dir != "" {
		ks = k // stopped by TestMain whatever happens next
	}
	if err != nil {
		ksErr = fmt.Errorf("keystone-up.sh: %v\n%s", err, stderr.String())
		return
	}
	vars := map[string]string{}
	for _, f := range []string{"env.sh", "passwords"} {
		if err := readVars(filepath.Join(k.Dir, f), vars); err != nil {
			ksErr = err
			return
		}
	}
	k.URL = vars["KS_URL"]
	k.AdminPassword, k.DemoPassword = vars["admin_password"], vars["demo_password"]
	k.ServiceUser, k.ServicePassword = vars["service_user"], vars["service_password"]
	k.AdminProjectID, k.DemoProjectID = vars["KS_ADMIN_PROJECT_ID"], vars["KS_DEMO_PROJECT_ID"]
	k.DemoUserID = vars["KS_DEMO_USER_ID"]
}

// readVars reads KEY=value lines (optionally "export KEY=value").
func readVars(path string, into map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			into[k] = v
		}
	}
	return sc.Err()
}

var keystoneHTTP = &http.Client{Timeout: 30 * time.Second}

// call makes one Keystone API call as token tok.
func (k *keystone) call(method, path, tok string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, k.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", tok)
	resp, err := keystoneHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// issue returns a new project-scoped token of user (password login).
func (k *keystone) issue(t *testing.T, user, password, project string) string {
	t.Helper()
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "domain": map[string]string{"id": "default"}, "password": password}}},
		"scope": map[string]any{"project": map[string]any{"name": project, "domain": map[string]string{"id": "default"}}},
	}}
	b, _ := json.Marshal(body)
	resp, err := keystoneHTTP.Post(k.URL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("token for %s: %d", user, resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token")
}

// catalogHas reports whether a new admin token's catalog lists every
// service type in types.
func (k *keystone) catalogHas(t *testing.T, types ...string) bool {
	t.Helper()
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": "admin", "domain": map[string]string{"id": "default"}, "password": k.AdminPassword}}},
		"scope": map[string]any{"project": map[string]any{"name": "admin", "domain": map[string]string{"id": "default"}}},
	}}
	b, _ := json.Marshal(body)
	resp, err := keystoneHTTP.Post(k.URL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		Token struct {
			Catalog []struct{ Type string } `json:"catalog"`
		} `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
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

// register adds a service of type typ with public endpoint url in
// RegionOne to Keystone's catalog and removes both when the test ends.
func (k *keystone) register(t *testing.T, typ, url string) {
	t.Helper()
	admin := k.issue(t, "admin", k.AdminPassword, "admin")
	var svc struct {
		Service struct{ ID string } `json:"service"`
	}
	if err := k.call("POST", "/services", admin, map[string]any{"service": map[string]any{"type": typ, "name": typ}}, &svc); err != nil {
		t.Fatal(err)
	}
	var ep struct {
		Endpoint struct{ ID string } `json:"endpoint"`
	}
	body := map[string]any{"endpoint": map[string]any{"service_id": svc.Service.ID, "interface": "public", "region_id": "RegionOne", "url": url}}
	if err := k.call("POST", "/endpoints", admin, body, &ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin := k.issue(t, "admin", k.AdminPassword, "admin")
		err := k.call("DELETE", "/endpoints/"+ep.Endpoint.ID, admin, nil, nil)
		if err == nil {
			err = k.call("DELETE", "/services/"+svc.Service.ID, admin, nil, nil)
		}
		if err != nil {
			t.Errorf("removing %s from the catalog: %v", typ, err)
		}
	})
}
