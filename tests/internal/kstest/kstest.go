// Package kstest starts the real Keystone that tests/keystone and
// tests/horizon run against (../shared/reference/openstack-harness's
// keystone-up.sh) and talks to its API: tokens, catalog entries, the
// configuration Leasehold reads. SHARED_DIR names the folder holding
// reference/openstack-harness (default: ../shared next to the checkout).
package kstest

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
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
)

// SharedDir is the shared folder beside the checkout (or SHARED_DIR).
func SharedDir() string {
	if s := os.Getenv("SHARED_DIR"); s != "" {
		return s
	}
	_, file, _, _ := runtime.Caller(0) // tests/internal/kstest/kstest.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared")
}

// HarnessDir holds keystone-up.sh and keystone-down.sh.
func HarnessDir() string { return filepath.Join(SharedDir(), "reference", "openstack-harness") }

// Keystone is a running Keystone and the accounts keystone-up.sh made.
type Keystone struct {
	URL, Dir, Port                string
	AdminPassword, DemoPassword   string
	ServiceUser, ServicePassword  string
	AdminProjectID, DemoProjectID string
	DemoUserID, ServiceUserID     string
}

// Start runs keystone-up.sh with one worker process (every validation
// then sees a revocation or a catalog change at once) and Keystone's
// cache on. The Keystone is returned whenever its directory is known,
// also with an error, so the caller can stop it.
func Start(ctx context.Context) (*Keystone, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(HarnessDir(), "keystone-up.sh"))
	cmd.Env = append(os.Environ(), "KS_NO_INSTALL=1", "KS_CACHE=1", "KS_PROCESSES=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	k := &Keystone{}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KS_DIR="); ok {
			k.Dir = v
		}
	}
	if k.Dir == "" {
		k = nil
	}
	if err != nil {
		return k, fmt.Errorf("keystone-up.sh: %v\n%s", err, stderr.String())
	}
	vars := map[string]string{}
	for _, f := range []string{"env.sh", "passwords"} {
		if err := ReadVars(filepath.Join(k.Dir, f), vars); err != nil {
			return k, err
		}
	}
	k.URL, k.Port = vars["KS_URL"], vars["KS_PORT"]
	k.AdminPassword, k.DemoPassword = vars["admin_password"], vars["demo_password"]
	k.ServiceUser, k.ServicePassword = vars["service_user"], vars["service_password"]
	k.AdminProjectID, k.DemoProjectID = vars["KS_ADMIN_PROJECT_ID"], vars["KS_DEMO_PROJECT_ID"]
	k.DemoUserID, k.ServiceUserID = vars["KS_DEMO_USER_ID"], vars["KS_SERVICE_USER_ID"]
	return k, nil
}

// Down stops the Keystone; keep keeps its directory (and so its database
// and keys) for a restart.
func (k *Keystone) Down(keep bool) error {
	args := []string{k.Dir}
	if keep {
		args = append(args, "--keep")
	}
	out, err := exec.Command(filepath.Join(HarnessDir(), "keystone-down.sh"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("keystone-down.sh: %v\n%s", err, out)
	}
	return nil
}

// ReadVars reads KEY=value lines (optionally "export KEY=value").
func ReadVars(path string, into map[string]string) error {
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

// HTTP is the client of every Keystone call (bounded).
var HTTP = &http.Client{Timeout: 60 * time.Second}

// Call makes one Keystone API call as token tok.
func (k *Keystone) Call(method, path, tok string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, k.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", tok)
	resp, err := HTTP.Do(req)
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

// Login is a password login of user scoped to project; it returns the
// token and, when out is not nil, decodes the token body into it.
func (k *Keystone) Login(user, password, project string, out any) (string, error) {
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "domain": map[string]string{"id": "default"}, "password": password}}},
		"scope": map[string]any{"project": map[string]any{"name": project, "domain": map[string]string{"id": "default"}}},
	}}
	b, _ := json.Marshal(body)
	resp, err := HTTP.Post(k.URL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "", fmt.Errorf("token for %s: %d", user, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return "", err
		}
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.Header.Get("X-Subject-Token"), nil
}

// Issue returns a new project-scoped token of user (password login).
func (k *Keystone) Issue(user, password, project string) (string, error) {
	return k.Login(user, password, project, nil)
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

// Register adds a service of type typ named name with a public endpoint
// url in RegionOne to the catalog, and removes both when the test ends.
func (k *Keystone) Register(t testing.TB, typ, name, url string) {
	t.Helper()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	var svc struct {
		Service struct{ ID string } `json:"service"`
	}
	if err := k.Call("POST", "/services", admin, map[string]any{"service": map[string]any{"type": typ, "name": name}}, &svc); err != nil {
		t.Fatal(err)
	}
	var ep struct {
		Endpoint struct{ ID string } `json:"endpoint"`
	}
	body := map[string]any{"endpoint": map[string]any{"service_id": svc.Service.ID, "interface": "public", "region_id": "RegionOne", "url": url}}
	if err := k.Call("POST", "/endpoints", admin, body, &ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := k.Issue("admin", k.AdminPassword, "admin")
		if err == nil {
			err = k.Call("DELETE", "/endpoints/"+ep.Endpoint.ID, admin, nil, nil)
		}
		if err == nil {
			err = k.Call("DELETE", "/services/"+svc.Service.ID, admin, nil, nil)
		}
		if err != nil {
			t.Errorf("removing %s from the catalog: %v", typ, err)
		}
	})
}

// LoadConfig writes conf as dir/leasehold.conf and loads it as `serve
// --config` does, with every LEASEHOLD_* variable of the environment but
// keep cleared (they would override the file).
func LoadConfig(t testing.TB, dir, conf string, keep ...string) *config.Config {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LEASEHOLD_") && !contains(keep, name) {
			t.Setenv(name, "")
		}
	}
	path := filepath.Join(dir, "leasehold.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
