// Package keystone_test checks Leasehold's token validation against a
// real Keystone (Debian's python3-keystone, started once for the package
// by ../shared/reference/openstack-harness/keystone-up.sh, stopped in
// TestMain). Without python3-keystone the tests that need it skip with a
// loud message, unless LEASEHOLD_REQUIRE_KEYSTONE=1 (CI), which makes
// that a failure. SHARED_DIR names the folder holding
// reference/openstack-harness (default: ../shared next to the checkout).
package keystone_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvRequireKeystone makes a missing Keystone a test failure.
const EnvRequireKeystone = "LEASEHOLD_REQUIRE_KEYSTONE"

// tokenCacheTime is the token_cache_time of these tests, in seconds.
const tokenCacheTime = 5

// Keystone is the running Keystone, its accounts and the reader user
// these tests add.
type Keystone struct {
	*kstest.Keystone
	ReaderPassword string
	ReaderUserID   string
	restartMu      sync.Mutex
}

var (
	ksOnce sync.Once
	ks     *Keystone
	ksSkip string
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

// RequireKeystone returns the package's Keystone, starting it on first
// use; it skips the test loudly (or fails it under
// LEASEHOLD_REQUIRE_KEYSTONE=1) when Keystone cannot run here.
func RequireKeystone(t testing.TB) *Keystone {
	t.Helper()
	ksOnce.Do(startKeystone)
	if ksSkip != "" {
		if os.Getenv(EnvRequireKeystone) == "1" {
			t.Fatalf("%s (%s=1: Keystone tests must run)", ksSkip, EnvRequireKeystone)
		}
		t.Skip("SKIPPED LOUDLY: " + ksSkip)
	}
	if ksErr != nil {
		t.Fatalf("starting Keystone: %v", ksErr)
	}
	return ks
}

func startKeystone() {
	h := kstest.HarnessDir()
	switch {
	case !fileExists("/usr/bin/keystone-manage"):
		ksSkip = "python3-keystone is not installed (apt-get install python3-keystone uwsgi-plugin-python3; scripts/deps.sh does it): the tests against a real Keystone do not run"
	case !fileExists("/usr/lib/uwsgi/plugins/python3_plugin.so"):
		ksSkip = "uwsgi-plugin-python3 is not installed: the tests against a real Keystone do not run"
	case !fileExists(filepath.Join(h, "keystone-up.sh")):
		ksSkip = "keystone-up.sh not found in " + h + " (set SHARED_DIR)"
	}
	if ksSkip != "" {
		fmt.Fprintf(os.Stderr, "\n%s\n### %s\n%s\n\n", strings.Repeat("#", 80), ksSkip, strings.Repeat("#", 80))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := kstest.Start(ctx)
	if k != nil {
		ks = &Keystone{Keystone: k} // stopped by TestMain whatever happens next
	}
	if err != nil {
		ksErr = err
		return
	}
	ksErr = ks.addReader()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// addReader creates user "reader" with role reader on project demo.
func (k *Keystone) addReader() error {
	admin, err := k.Issue("admin", k.AdminPassword, "admin")
	if err != nil {
		return err
	}
	k.ReaderPassword = "reader-" + k.Port
	var roles struct {
		Roles []struct{ ID string } `json:"roles"`
	}
	if err := k.Call("GET", "/roles?name=reader", admin, nil, &roles); err != nil || len(roles.Roles) != 1 {
		return fmt.Errorf("role reader: %v %+v", err, roles)
	}
	var user struct {
		User struct{ ID string } `json:"user"`
	}
	body := map[string]any{"user": map[string]any{"name": "reader", "domain_id": "default", "password": k.ReaderPassword, "default_project_id": k.DemoProjectID}}
	if err := k.Call("POST", "/users", admin, body, &user); err != nil {
		return err
	}
	k.ReaderUserID = user.User.ID
	return k.Call("PUT", "/projects/"+k.DemoProjectID+"/users/"+user.User.ID+"/roles/"+roles.Roles[0].ID, admin, nil, nil)
}

// Revoke revokes tok (as admin).
func (k *Keystone) Revoke(t testing.TB, tok string) {
	t.Helper()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	req, _ := http.NewRequest("DELETE", k.URL+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", admin)
	req.Header.Set("X-Subject-Token", tok)
	resp, err := kstest.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
}

// Stop stops the Keystone server, keeping its directory (and so its
// database and fernet keys) for Start.
func (k *Keystone) Stop(t testing.TB) {
	t.Helper()
	k.restartMu.Lock()
	defer k.restartMu.Unlock()
	if err := k.Down(true); err != nil {
		t.Fatal(err)
	}
	if k.up() {
		t.Fatal("Keystone still answers after keystone-down.sh")
	}
}

// Start starts Keystone again on the same port and directory, as
// keystone-up.sh does, and waits (at most a minute) until it answers.
func (k *Keystone) Start(t testing.TB) {
	t.Helper()
	k.restartMu.Lock()
	defer k.restartMu.Unlock()
	logf, err := os.OpenFile(filepath.Join(k.Dir, "server.log"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("uwsgi", "--plugin", "python3", "--http-socket", "127.0.0.1:"+k.Port,
		"--wsgi-file", "/usr/bin/keystone-wsgi-public", "--master", "--processes", "1", "--threads", "1",
		"--add-header", "Connection: close", "--buffer-size", "65535",
		"--env", "OS_KEYSTONE_CONFIG_DIR="+k.Dir, "--die-on-term", "--need-app", "--no-orphans",
		"--pidfile", filepath.Join(k.Dir, "server.pid"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }() // reaped when keystone-down.sh stops it
	deadline := time.Now().Add(time.Minute)
	for !k.up() {
		if time.Now().After(deadline) {
			t.Fatal("Keystone did not answer within a minute of its restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *Keystone) up() bool {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(k.URL)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
