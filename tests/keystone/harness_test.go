// Package keystone_test checks Leasehold's token validation against a
// real Keystone (Debian's python3-keystone, started once for the package
// by ../shared/reference/openstack-harness/keystone-up.sh, stopped in
// TestMain). Without python3-keystone the tests that need it skip with a
// loud message, unless LEASEHOLD_REQUIRE_KEYSTONE=1 (CI), which makes
// that a failure. SHARED_DIR names the folder holding
// reference/openstack-harness (default: ../shared next to the checkout).
package keystone_test

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
	"syscall"
	"testing"
	"time"
)

// EnvRequireKeystone makes a missing Keystone a test failure.
const EnvRequireKeystone = "LEASEHOLD_REQUIRE_KEYSTONE"

// tokenCacheTime is the token_cache_time of these tests, in seconds.
const tokenCacheTime = 5

// Keystone is the running Keystone and its accounts.
type Keystone struct {
	URL, Dir, Port                string
	AdminPassword, DemoPassword   string
	ServiceUser, ServicePassword  string
	ReaderPassword                string
	AdminProjectID, DemoProjectID string
	DemoUserID, ServiceUserID     string
	ReaderUserID                  string
	harness                       string
	restartMu                     sync.Mutex
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
		out, err := exec.Command(filepath.Join(ks.harness, "keystone-down.sh"), ks.Dir).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "keystone-down.sh: %v\n%s", err, out)
		}
	}
	os.Exit(code)
}

func harnessDir() string {
	shared := os.Getenv("SHARED_DIR")
	if shared == "" {
		_, file, _, _ := runtime.Caller(0)
		shared = filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	}
	return filepath.Join(shared, "reference", "openstack-harness")
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
	h := harnessDir()
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
	cmd := exec.CommandContext(ctx, filepath.Join(h, "keystone-up.sh"))
	// One worker process: with Keystone's cache on, a revocation is then
	// seen by every validation at once (the harness's advice).
	cmd.Env = append(os.Environ(), "KS_NO_INSTALL=1", "KS_CACHE=1", "KS_PROCESSES=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	k := &Keystone{harness: h}
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
	k.URL, k.Port = vars["KS_URL"], vars["KS_PORT"]
	k.AdminPassword, k.DemoPassword = vars["admin_password"], vars["demo_password"]
	k.ServiceUser, k.ServicePassword = vars["service_user"], vars["service_password"]
	k.AdminProjectID, k.DemoProjectID = vars["KS_ADMIN_PROJECT_ID"], vars["KS_DEMO_PROJECT_ID"]
	k.DemoUserID, k.ServiceUserID = vars["KS_DEMO_USER_ID"], vars["KS_SERVICE_USER_ID"]
	ksErr = k.addReader()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

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
	if err := k.call("GET", "/roles?name=reader", admin, nil, &roles); err != nil || len(roles.Roles) != 1 {
		return fmt.Errorf("role reader: %v %+v", err, roles)
	}
	var user struct {
		User struct{ ID string } `json:"user"`
	}
	body := map[string]any{"user": map[string]any{"name": "reader", "domain_id": "default", "password": k.ReaderPassword, "default_project_id": k.DemoProjectID}}
	if err := k.call("POST", "/users", admin, body, &user); err != nil {
		return err
	}
	k.ReaderUserID = user.User.ID
	return k.call("PUT", "/projects/"+k.DemoProjectID+"/users/"+user.User.ID+"/roles/"+roles.Roles[0].ID, admin, nil, nil)
}

// call makes one Keystone API call as token tok.
func (k *Keystone) call(method, path, tok string, body, out any) error {
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

var keystoneHTTP = &http.Client{Timeout: 60 * time.Second}

// Issue returns a new project-scoped token of user (password login).
func (k *Keystone) Issue(user, password, project string) (string, error) {
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "domain": map[string]string{"id": "default"}, "password": password}}},
		"scope": map[string]any{"project": map[string]any{"name": project, "domain": map[string]string{"id": "default"}}},
	}}
	b, _ := json.Marshal(body)
	resp, err := keystoneHTTP.Post(k.URL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("token for %s: %d", user, resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token"), nil
}

// MustIssue is Issue, failing the test on error.
func (k *Keystone) MustIssue(t testing.TB, user, password, project string) string {
	t.Helper()
	tok, err := k.Issue(user, password, project)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Revoke revokes tok (as admin).
func (k *Keystone) Revoke(t testing.TB, tok string) {
	t.Helper()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	req, _ := http.NewRequest("DELETE", k.URL+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", admin)
	req.Header.Set("X-Subject-Token", tok)
	resp, err := keystoneHTTP.Do(req)
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
	out, err := exec.Command(filepath.Join(k.harness, "keystone-down.sh"), k.Dir, "--keep").CombinedOutput()
	if err != nil {
		t.Fatalf("keystone-down.sh: %v\n%s", err, out)
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
