// Package extplacement_test runs instance reservations against the REAL
// upstream Placement (Debian python3-placement 8.0.0 under uwsgi, its
// own SQLite database) behind a real Keystone (tests/internal/kstest),
// as a deployment with its own Placement runs Leasehold: [placement]
// holds the keystoneauth options of the service user, the endpoint comes
// from Keystone's catalog, and the classes, child providers and
// inventories of the reservations are written there through the outbox.
// The tests read the outcome over the upstream Placement API.
//
// Keystone, Placement and Leasehold (in-process, noauth for its own API,
// standalone compute driver, SQLite) are started once for the package on
// first use and stopped in TestMain. Without the Debian packages the
// tests skip with a loud message, unless LEASEHOLD_REQUIRE_PLACEMENT=1
// (CI), which makes that a failure. SHARED_DIR names the folder holding
// reference/openstack-harness (default: ../shared next to the checkout).
package extplacement_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/server"
	"github.com/leasehold/leasehold/tests/internal/kstest"
)

// EnvRequirePlacement makes missing packages a test failure.
const EnvRequirePlacement = "LEASEHOLD_REQUIRE_PLACEMENT"

// startTimeout bounds the start of each server.
const startTimeout = 90 * time.Second

// Env is the package's Keystone, upstream Placement and Leasehold.
type Env struct {
	KS *kstest.Keystone
	// Placement is the upstream Placement's base URL.
	Placement string
	// LH is Leasehold's base URL (Blazar under /v1).
	LH string
	// Server is the in-process Leasehold.
	Server *server.Server

	dir, port string
	mu        sync.Mutex
	proc      *exec.Cmd
	exited    chan struct{}
	closers   []func()
}

var (
	once   sync.Once
	env    *Env
	envErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		env.close()
	}
	os.Exit(code)
}

// missingPackages names what the suite needs and the machine lacks.
func missingPackages() []string {
	var out []string
	for f, pkg := range map[string]string{
		"/usr/bin/placement-api":                             "python3-placement",
		"/usr/lib/uwsgi/plugins/python3_plugin.so":           "uwsgi-plugin-python3",
		"/usr/bin/keystone-manage":                           "python3-keystone",
		filepath.Join(kstest.HarnessDir(), "keystone-up.sh"): "SHARED_DIR's reference/openstack-harness",
	} {
		if _, err := os.Stat(f); err != nil {
			out = append(out, pkg+" ("+f+")")
		}
	}
	return out
}

// RequireEnv returns the package's environment, starting it on first
// use; it skips (loudly) without the packages unless
// LEASEHOLD_REQUIRE_PLACEMENT=1.
func RequireEnv(t testing.TB) *Env {
	t.Helper()
	if miss := missingPackages(); len(miss) > 0 {
		msg := "tests/extplacement: the real Placement + Keystone suite needs " + strings.Join(miss, ", ")
		if os.Getenv(EnvRequirePlacement) == "1" {
			t.Fatalf("%s (%s=1)", msg, EnvRequirePlacement)
		}
		fmt.Fprintf(os.Stderr, "\n################ SKIPPED: %s ################\n\n", msg)
		t.Skip(msg)
	}
	once.Do(func() {
		env = &Env{}
		envErr = env.start(t)
	})
	if envErr != nil {
		t.Fatalf("tests/extplacement: starting Keystone, Placement and Leasehold: %v", envErr)
	}
	return env
}

func (e *Env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func (e *Env) onClose(f func()) { e.closers = append(e.closers, f) }

func (e *Env) start(t testing.TB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*startTimeout)
	defer cancel()
	k, err := kstest.Start(ctx)
	if k != nil {
		e.onClose(func() { _ = k.Down(false) })
	}
	if err != nil {
		return err
	}
	e.KS = k
	admin, err := k.Issue("admin", k.AdminPassword, "admin")
	if err != nil {
		return err
	}
	// Placement's rules want the admin role of the service user that
	// Leasehold calls it as.
	if err := e.grantAdmin(admin); err != nil {
		return err
	}
	if e.dir, err = os.MkdirTemp("", "extplacement."); err != nil {
		return err
	}
	e.onClose(func() { _ = os.RemoveAll(e.dir) })
	if e.port, err = freePort(); err != nil {
		return err
	}
	e.Placement = "http://127.0.0.1:" + e.port
	if err := e.writePlacementConf(); err != nil {
		return err
	}
	e.onClose(e.StopPlacement)
	if err := e.StartPlacement(); err != nil {
		return err
	}
	if err := e.registerPlacement(admin); err != nil {
		return err
	}
	return e.startLeasehold(t)
}

// grantAdmin gives the service user the admin role on project service.
func (e *Env) grantAdmin(admin string) error {
	k := e.KS
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

// registerPlacement adds Placement to Keystone's catalog (public, RegionOne).
func (e *Env) registerPlacement(admin string) error {
	k := e.KS
	var svc struct {
		Service struct{ ID string } `json:"service"`
	}
	if err := k.Call("POST", "/services", admin, map[string]any{"service": map[string]any{"type": "placement", "name": "placement"}}, &svc); err != nil {
		return err
	}
	body := map[string]any{"endpoint": map[string]any{"service_id": svc.Service.ID, "interface": "public", "region_id": "RegionOne", "url": e.Placement}}
	return k.Call("POST", "/endpoints", admin, body, nil)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// writePlacementConf writes placement.conf: keystonemiddleware against
// the suite's Keystone (as the service user), SQLite in the suite's
// directory (kept across restarts of the server).
func (e *Env) writePlacementConf() error {
	k := e.KS
	conf := "[DEFAULT]\ndebug = False\nuse_stderr = True\n" +
		"[api]\nauth_strategy = keystone\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\n" +
		"[placement_database]\nconnection = sqlite:///" + filepath.Join(e.dir, "placement.db") + "\nsync_on_startup = True\n" +
		"[oslo_policy]\npolicy_file = " + filepath.Join(e.dir, "no-such-policy.yaml") + "\n"
	return os.WriteFile(filepath.Join(e.dir, "placement.conf"), []byte(conf), 0o600)
}

// StartPlacement starts the upstream Placement on the suite's port and
// waits (bounded) until it answers.
func (e *Env) StartPlacement() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil {
		return errors.New("placement is already running")
	}
	logf, err := os.OpenFile(filepath.Join(e.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command("uwsgi", "--plugins", "python3", "--http-socket", "127.0.0.1:"+e.port,
		"--wsgi-file", "/usr/bin/placement-api", "--master", "--processes", "1", "--threads", "1",
		"--die-on-term", "--need-app", "--buffer-size", "65535", "--disable-logging",
		"--add-header", "Connection: close")
	cmd.Env = append(os.Environ(), "OS_PLACEMENT_CONFIG_DIR="+e.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	e.proc, e.exited = cmd, exited
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get(e.Placement + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("placement exited at start; see %s:\n%s", filepath.Join(e.dir, "server.log"), e.placementLog())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("placement not answering on %s after %s:\n%s", e.Placement, startTimeout, e.placementLog())
		}
	}
}

// StopPlacement stops the upstream Placement (its database stays).
func (e *Env) StopPlacement() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil {
		return
	}
	pgid := e.proc.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-e.exited
	}
	e.proc = nil
}

func (e *Env) placementLog() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// startLeasehold builds Leasehold in-process with [placement] pointing
// at the upstream Placement through Keystone's catalog, and runs it until
// the suite closes.
func (e *Env) startLeasehold(t testing.TB) error {
	k := e.KS
	dir := filepath.Join(e.dir, "leasehold")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	conf := "[DEFAULT]\nlisten = 127.0.0.1:0\n[api]\nauth_strategy = noauth2\n" +
		"[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[placement]\nauth_type = password\nauth_url = " + k.URL + "\nusername = " + k.ServiceUser +
		"\npassword = " + k.ServicePassword + "\nproject_name = service\nuser_domain_name = Default\n" +
		"project_domain_name = Default\nregion_name = RegionOne\nvalid_interfaces = internal,public\ntimeout = 10\n"
	cfg := kstest.LoadConfig(t, dir, conf, EnvRequirePlacement)
	if !cfg.Placement.Enabled() {
		return errors.New("[placement] not read as an external Placement")
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	e.onClose(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "tests/extplacement: Leasehold did not stop within 30s")
		}
	})
	select {
	case <-s.Ready:
	case err := <-done:
		return fmt.Errorf("leasehold stopped: %v", err)
	case <-time.After(startTimeout):
		return fmt.Errorf("leasehold not ready within %s", startTimeout)
	}
	e.Server = s
	e.LH = "http://" + s.Addrs[0]
	return nil
}

var apiClient = &http.Client{Timeout: 60 * time.Second}

// call makes one API call and returns the status and body, decoding a
// 2xx body into out.
func call(t testing.TB, method, url string, hdr map[string]string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// blazar is one Blazar API call on Leasehold (noauth: token "admin"),
// failing unless want.
func (e *Env) blazar(t testing.TB, method, path string, want int, body, out any) string {
	t.Helper()
	code, b := call(t, method, e.LH+"/v1"+path, map[string]string{"X-Auth-Token": "admin"}, body, out)
	if code != want {
		t.Fatalf("%s /v1%s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// placementVersion is the microversion of the tests' Placement calls.
const placementVersion = "placement 1.39"

// admin is a Keystone token of the admin user (project admin).
func (e *Env) admin(t testing.TB) string {
	t.Helper()
	return e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin")
}

// placement is one call on the upstream Placement as tok; it returns the
// status and body.
func (e *Env) placement(t testing.TB, method, path, tok string, body, out any) (int, string) {
	t.Helper()
	return call(t, method, e.Placement+path, map[string]string{"X-Auth-Token": tok, "OpenStack-API-Version": placementVersion}, body, out)
}

// mustPlacement is placement, failing unless want.
func (e *Env) mustPlacement(t testing.TB, method, path, tok string, want int, body, out any) string {
	t.Helper()
	code, b := e.placement(t, method, path, tok, body, out)
	if code != want {
		t.Fatalf("%s %s on Placement: %d %s, want %d", method, path, code, b, want)
	}
	return b
}
