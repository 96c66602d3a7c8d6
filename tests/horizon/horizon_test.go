package horizon_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/server"
)

// The hypervisors the Nova stub reports: the admin turns the first into
// a host through the form; the second is made a host over the API for
// the member's lease.
const (
	formHost     = "hz-compute-1"
	leaseHost    = "hz-compute-2"
	instanceHost = "hz-compute-3"
)

// TestHorizon drives the blazar-dashboard panels in a real browser: the
// admin creates, updates and deletes a host through the Hosts forms; the
// member creates a host lease through the Create Lease form, finds it in
// the list, opens its detail and the Host Calendar, updates and deletes
// it. The lease is the member's project's (asked over the API), and
// Horizon answers no request with a 5xx.
func TestHorizon(t *testing.T) {
	k := requireHorizon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()

	work := t.TempDir()
	shots := filepath.Join(work, "shots")
	if keep := os.Getenv("LEASEHOLD_HORIZON_SHOTS"); keep != "" {
		shots = keep
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s (set LEASEHOLD_HORIZON_SHOTS=dir to keep them)", shots)

	lh := startLeasehold(t, k)
	k.register(t, "reservation", lh.URL+"/v1")
	nova := novaStub(t)
	k.register(t, "compute", nova.URL+"/v2.1")

	for deadline := time.Now().Add(30 * time.Second); !k.catalogHas(t, "reservation", "compute"); {
		if time.Now().After(deadline) {
			t.Fatal("Keystone's catalog lacks the reservation or compute endpoint 30 s after registering them")
		}
		time.Sleep(500 * time.Millisecond)
	}
	hz := startHorizon(ctx, t, k, work)
	t.Logf("Keystone, Leasehold and Horizon up after %s", time.Since(t0).Round(time.Millisecond))

	admin := k.issue(t, "admin", k.AdminPassword, "admin")
	drive(ctx, t, hz, shots, "admin-hosts", "admin", k.AdminPassword, "--host", formHost)
	if code, body := api(t, lh.URL, admin, "GET", "/v1/os-hosts", ""); code != 200 || strings.Contains(body, formHost) {
		t.Errorf("GET /v1/os-hosts after the admin deleted %s in Horizon: %d %s", formHost, code, body)
	}
	t.Logf("admin host forms done after %s", time.Since(t0).Round(time.Millisecond))

	if code, body := api(t, lh.URL, admin, "POST", "/v1/os-hosts", `{"name": "`+leaseHost+`"}`); code != 201 {
		t.Fatalf("POST /v1/os-hosts: %d %s", code, body)
	}
	start := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Minute)
	name := fmt.Sprintf("hz-lease-%d", time.Now().UnixNano()%1e6)
	out := drive(ctx, t, hz, shots, "member-create", "demo", k.DemoPassword,
		"--lease-name", name, "--start", start.Format("2006-01-02 15:04"), "--end", start.Add(2*time.Hour).Format("2006-01-02 15:04"))
	leaseID := out["lease_id"]
	if leaseID == "" {
		t.Fatalf("member-create found no lease id: %v", out)
	}
	code, body := api(t, lh.URL, admin, "GET", "/v1/leases/"+leaseID, "")
	var got struct {
		Lease struct {
			Name      string `json:"name"`
			ProjectID string `json:"project_id"`
			UserID    string `json:"user_id"`
		} `json:"lease"`
	}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("GET /v1/leases/%s: %d %v %s", leaseID, code, err, body)
	}
	if got.Lease.Name != name || got.Lease.ProjectID != k.DemoProjectID || got.Lease.UserID != k.DemoUserID {
		t.Errorf("the lease made in Horizon: name %q project %q user %q, want %q in the member's project %s, user %s",
			got.Lease.Name, got.Lease.ProjectID, got.Lease.UserID, name, k.DemoProjectID, k.DemoUserID)
	}
	t.Logf("member lease created after %s", time.Since(t0).Round(time.Millisecond))

	drive(ctx, t, hz, shots, "member-rest", "demo", k.DemoPassword, "--lease-name", name, "--lease-id", leaseID,
		"--host", leaseHost, "--start", start.Format("2006-01-02 15:04"))
	if code, body := api(t, lh.URL, admin, "GET", "/v1/leases/"+leaseID, ""); code != 404 {
		t.Errorf("GET /v1/leases/%s after the member deleted it in Horizon: %d %s", leaseID, code, body)
	}
	t.Logf("member lease forms done after %s", time.Since(t0).Round(time.Millisecond))

	// An instance lease through the same form: Virtual Instance, two
	// instances on one host (affinity), on a host with room for them.
	if code, body := api(t, lh.URL, admin, "POST", "/v1/os-hosts", `{"name": "`+instanceHost+`", "vcpus": "8", "memory_mb": "16384", "local_gb": "100"}`); code != 201 {
		t.Fatalf("POST /v1/os-hosts %s: %d %s", instanceHost, code, body)
	}
	iname := name + "-instances"
	out = drive(ctx, t, hz, shots, "member-instance", "demo", k.DemoPassword,
		"--lease-name", iname, "--start", start.Format("2006-01-02 15:04"), "--end", start.Add(2*time.Hour).Format("2006-01-02 15:04"))
	if out["lease_id"] == "" {
		t.Errorf("member-instance found no lease id: %v", out)
	} else if code, body := api(t, lh.URL, admin, "GET", "/v1/leases/"+out["lease_id"], ""); code != 404 {
		t.Errorf("GET /v1/leases/%s after the member deleted the instance lease in Horizon: %d %s", out["lease_id"], code, body)
	}
	t.Logf("member instance lease done after %s", time.Since(t0).Round(time.Millisecond))

	hz.check(t)
	pngs, _ := filepath.Glob(filepath.Join(shots, "*.png"))
	t.Logf("%d screenshots; whole test %s", len(pngs), time.Since(t0).Round(time.Millisecond))
}

// startLeasehold serves Leasehold with keystone auth on loopback, with
// testdata/policy.yaml (members may read hosts for the Host Calendar).
func startLeasehold(t *testing.T, k *keystone) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	policy, err := filepath.Abs(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conf := "[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\n" +
		"[oslo_policy]\npolicy_file = " + policy + "\n"
	cfg := kstest.LoadConfig(t, dir, conf, EnvRequireHorizon)
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); _ = s.DB().Close() })
	return srv
}

// novaStub answers the one Nova call the Create Hosts form makes, the
// hypervisor list, and 404s anything else (logged, so a new call the
// plugin makes shows up in the test's output).
func novaStub(t *testing.T) *httptest.Server {
	t.Helper()
	hv := func(id int, name string) map[string]any {
		return map[string]any{"id": id, "hypervisor_hostname": name, "state": "up", "status": "enabled",
			"hypervisor_type": "QEMU", "hypervisor_version": 7002000, "host_ip": "192.0.2." + fmt.Sprint(id),
			"vcpus": 8, "memory_mb": 16384, "local_gb": 100, "vcpus_used": 0, "memory_mb_used": 512, "local_gb_used": 0,
			"free_ram_mb": 15872, "free_disk_gb": 100, "current_workload": 0, "running_vms": 0, "disk_available_least": 100,
			"cpu_info": `{"arch": "x86_64"}`, "service": map[string]any{"host": name, "id": id, "disabled_reason": nil}}
	}
	body, _ := json.Marshal(map[string]any{"hypervisors": []any{hv(1, formHost), hv(2, leaseHost)}})
	var srv *httptest.Server
	var version []byte
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v2.1/os-hypervisors/detail":
			_, _ = w.Write(body)
			return
		case r.Method == http.MethodGet && (r.URL.Path == "/v2.1" || r.URL.Path == "/v2.1/"):
			// novaclient's version discovery.
			_, _ = w.Write(version)
			return
		}
		t.Logf("nova stub: no answer for %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}))
	version, _ = json.Marshal(map[string]any{"version": map[string]any{"id": "v2.1", "status": "CURRENT",
		"version": "2.79", "min_version": "2.1", "updated": "2013-07-23T11:33:21Z",
		"links": []any{map[string]string{"rel": "self", "href": srv.URL + "/v2.1/"}}}})
	t.Cleanup(srv.Close)
	return srv
}

// api makes one request to Leasehold as token tok.
func api(t *testing.T, base, tok, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("X-Auth-Token", tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := kstest.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// horizon is a running `manage.py runserver`.
type horizon struct {
	URL, log string
}

// startHorizon runs Debian's Horizon with the test's own settings module
// (testdata/leasehold_horizon_settings.py, copied to a temporary
// directory on PYTHONPATH with the vendored blazar-dashboard) and waits,
// at most 90 s, for its login page.
func startHorizon(ctx context.Context, t *testing.T, k *keystone, work string) *horizon {
	t.Helper()
	py := filepath.Join(work, "py")
	if err := os.MkdirAll(py, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "leasehold_horizon_settings.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(py, "leasehold_horizon_settings.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	h := &horizon{URL: "http://" + addr, log: filepath.Join(work, "horizon.log")}
	logf, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command("/usr/bin/python3", "/usr/share/openstack-dashboard/manage.py", "runserver", "--noreload", "--insecure", addr)
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+py+string(os.PathListSeparator)+filepath.Join(sharedDir(), "vendor", "blazar-dashboard"),
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONWARNINGS=ignore",
		"DJANGO_SETTINGS_MODULE=leasehold_horizon_settings",
		"LH_KEYSTONE_URL="+k.URL,
		"LH_WORK_DIR="+work,
	)
	cmd.Dir = work
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		})
	}
	t.Cleanup(stop)
	c := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := c.Get(h.URL + "/auth/login/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b, _ := os.ReadFile(h.log)
			t.Fatalf("Horizon's login page did not answer 200 within 90 s (last: %v)\n%s", err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runserver's access lines: [date] "GET /path HTTP/1.1" 200 1234
var statusRE = regexp.MustCompile(`"[A-Z]+ [^"]*" (\d{3}) `)

// check fails the test when Horizon answered any request with a 5xx.
func (h *horizon) check(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		m := statusRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		if m[1][0] == '5' {
			t.Errorf("Horizon answered a 5xx: %s", strings.TrimSpace(line))
		}
	}
	if n == 0 {
		t.Errorf("no request lines in Horizon's log %s", h.log)
	}
	if t.Failed() {
		t.Logf("Horizon's log:\n%s", b)
	} else {
		t.Logf("Horizon answered %d requests, none with a 5xx", n)
	}
}

// drive runs one phase of testdata/drive.py in headless Chromium and
// returns the JSON object it prints last.
func drive(ctx context.Context, t *testing.T, h *horizon, shots, phase, user, password string, args ...string) map[string]string {
	t.Helper()
	started := time.Now()
	script, _ := filepath.Abs(filepath.Join("testdata", "drive.py"))
	// One phase takes well under a minute on an idle machine; the bound
	// leaves room for Horizon's development server on two cores busy
	// with the other suites (a page then takes 15 s). The whole test is
	// bounded by ctx.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pctx, "/usr/bin/python3", append([]string{script, phase,
		"--url", h.URL, "--user", user, "--password", password, "--shots", shots}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		log, _ := os.ReadFile(h.log)
		t.Fatalf("drive.py %s: %v\nstdout:\n%s\nstderr:\n%s\nHorizon's log:\n%s", phase, err, stdout.String(), stderr.String(), log)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	out := map[string]string{}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("drive.py %s: last line is not JSON: %v\n%s", phase, err, stdout.String())
	}
	t.Logf("drive.py %s: %d screenshots in %s", phase, strings.Count(stdout.String(), "screenshot "), time.Since(started).Round(time.Millisecond))
	return out
}
