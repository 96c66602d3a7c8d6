// Package novainstance_test runs instance reservations end to end with a
// real Nova that uses Leasehold as its Placement: a real Keystone, then
// Leasehold (keystone auth, the nova compute driver, SQLite), then
// nova-box (Nova's API, conductor, scheduler and fake computes
// compute1..3 in one process, from ../shared/reference/openstack-harness)
// whose computes register their resource providers in Leasehold's
// Placement and whose scheduler asks Leasehold for allocation
// candidates. No Leasehold or Blazar scheduler filter runs: the private
// flavor's resources:CUSTOM_RESERVATION_<id>=1 alone keeps its servers on
// the reserved hosts (seed blazar-placement-instance-reservation).
//
// nova-box installs Nova's in-process Placement; testdata/
// leasehold_placement.py, loaded as a pass-all scheduler filter
// (NOVA_BOX_FILTERS imports it before the fixture is installed), replaces
// that fixture by one that does nothing, and NOVA_BOX_CONF points
// [placement] at Leasehold with the service user's password login.
//
// Leasehold starts before Nova (Nova's computes register their providers
// when they start), so its [nova] endpoint_override names a proxy in this
// process that forwards to nova-box once it is up.
//
// Everything is started once for the package and stopped in TestMain.
// Without the Debian packages the tests skip with a loud message, unless
// LEASEHOLD_REQUIRE_NOVA=1 (CI), which makes that a failure. SHARED_DIR
// names the folder holding reference/openstack-harness (default:
// ../shared next to the checkout).
package novainstance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/server"
	"github.com/leasehold/leasehold/tests/internal/kstest"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure.
const EnvRequireNova = novatest.EnvRequireNova

// hookFilter is testdata/leasehold_placement.py's pass-all filter, whose
// import points nova-box at Leasehold's Placement.
const hookFilter = "leasehold_placement.AllHostsFilter"

// novaHosts are nova-box's fake computes.
var novaHosts = []string{"compute1", "compute2", "compute3"}

// Env is the package's Keystone, Leasehold and Nova.
type Env struct {
	*novatest.Env
	// LH is Leasehold's base URL (Blazar under /v1, Placement under
	// /placement).
	LH string
	// Other is a member of a second project ("other").
	OtherUser, OtherPassword string

	proxy *httptest.Server
	nova  atomic.Pointer[url.URL]
}

// env is the package's environment beyond novatest's, filled in by
// suite's hooks.
var env = &Env{}

// suite is the package's Keystone, then Leasehold, then a nova-box on
// Leasehold's Placement.
var suite = &novatest.Suite{
	Name:    "tests/novainstance",
	What:    "instance reservations against a real Nova",
	Banner:  "nova-box on Leasehold's Placement",
	Timeout: 6 * time.Minute,
	BeforeNova: func(_ context.Context, t testing.TB, e *novatest.Env) error {
		env.Env = e
		if err := env.addOtherProject(); err != nil {
			return err
		}
		env.proxy = httptest.NewServer(&httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				if u := env.nova.Load(); u != nil {
					r.SetURL(u)
				}
			},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				http.Error(w, "nova-box not reachable: "+err.Error(), http.StatusServiceUnavailable)
			},
		})
		e.OnClose(env.proxy.Close)
		return env.startLeasehold(t)
	},
	Options: func(e *novatest.Env) (novatest.Options, error) {
		testdata, err := filepath.Abs("testdata")
		if err != nil {
			return novatest.Options{}, err
		}
		return novatest.Options{
			Hosts:      novaHosts,
			Filters:    []string{hookFilter},
			PythonPath: []string{testdata},
			Conf:       placementConf(e.KS, env.LH+"/placement"),
		}, nil
	},
	AfterNova: func(e *novatest.Env) error {
		u, err := url.Parse(e.Nova.URL)
		if err != nil {
			return err
		}
		u.Path = "" // the proxy keeps the request's /v2.1/... path
		env.nova.Store(u)
		return nil
	},
}

func TestMain(m *testing.M) {
	code := m.Run()
	suite.Close()
	os.Exit(code)
}

// RequireEnv returns the package's Keystone, Leasehold and Nova, starting
// them on first use (t's temporary directory is not used: Leasehold's
// database outlives the test that started it).
func RequireEnv(t testing.TB) *Env {
	t.Helper()
	suite.Require(t)
	return env
}

// placementConf is nova.conf's [placement] section: Leasehold's
// Placement, reached as the service user (Leasehold's Placement policy
// wants the admin role, which the suite gives it).
func placementConf(k *kstest.Keystone, endpoint string) string {
	return "[placement]\n" + novatest.ServiceAuth(k) + "region_name = RegionOne\nvalid_interfaces = public\n" +
		"endpoint_override = " + endpoint + "\n"
}

// addOtherProject creates project "other" with a member "other": a
// second tenant, with no admin role (Nova shows an admin every flavor).
func (e *Env) addOtherProject() error {
	k := e.KS
	admin, err := k.Issue("admin", k.AdminPassword, "admin")
	if err != nil {
		return err
	}
	member, err := novatest.RoleID(k, admin, "member")
	if err != nil {
		return err
	}
	var p struct {
		Project struct{ ID string } `json:"project"`
	}
	if err := k.Call("POST", "/projects", admin, map[string]any{"project": map[string]any{"name": "other", "domain_id": "default"}}, &p); err != nil {
		return err
	}
	e.OtherUser, e.OtherPassword = "other", "other-"+p.Project.ID[:8]
	var u struct {
		User struct{ ID string } `json:"user"`
	}
	if err := k.Call("POST", "/users", admin, map[string]any{"user": map[string]any{"name": e.OtherUser, "domain_id": "default",
		"password": e.OtherPassword, "default_project_id": p.Project.ID}}, &u); err != nil {
		return err
	}
	return k.Call("PUT", "/projects/"+p.Project.ID+"/users/"+u.User.ID+"/roles/"+member, admin, nil, nil)
}

// startLeasehold builds Leasehold in-process (keystone auth, the nova
// driver through the proxy, SQLite in a temporary directory) and runs it
// until the suite closes.
func (e *Env) startLeasehold(t testing.TB) error {
	dir, err := os.MkdirTemp("", "novainstance.")
	if err != nil {
		return err
	}
	conf := novatest.LeaseholdConf(e.KS, dir, "endpoint_override = "+e.proxy.URL+"/v2.1\ntimeout = 10\nserver_delete_timeout = 120\n")
	cfg := kstest.LoadConfig(t, dir, conf, EnvRequireNova)
	if cfg.Compute.Driver != config.ComputeNova {
		return fmt.Errorf("compute driver %q", cfg.Compute.Driver)
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stopped := make(chan struct{}) // closed once Run returned, read or not
	go func() {
		done <- s.Run(ctx)
		_ = os.RemoveAll(dir)
		close(stopped)
	}()
	e.OnClose(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "tests/novainstance: Leasehold did not stop within 30s")
		}
	})
	select {
	case <-s.Ready:
	case err := <-done:
		return fmt.Errorf("leasehold stopped: %v", err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("leasehold not ready within 30s")
	}
	e.LH = "http://" + s.Addrs[0]
	return nil
}

var apiClient = &http.Client{Timeout: 60 * time.Second}

// call makes one API call on base+path as tok (with extra headers) and
// returns the status and body, decoding a 2xx body into out.
func call(t testing.TB, method, url, tok string, hdr map[string]string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Auth-Token", tok)
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

// blazar is one Blazar API call (…/v1 + path), failing unless want.
func (e *Env) blazar(t testing.TB, method, path, tok string, want int, body, out any) string {
	t.Helper()
	code, b := call(t, method, e.LH+"/v1"+path, tok, nil, body, out)
	if code != want {
		t.Fatalf("%s /v1%s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// placementVersion is the microversion of the tests' Placement reads.
const placementVersion = "placement 1.39"

// placement is one Placement API read (…/placement + path), failing
// unless want.
func (e *Env) placement(t testing.TB, path, tok string, want int, out any) string {
	t.Helper()
	code, b := call(t, "GET", e.LH+"/placement"+path, tok, map[string]string{"OpenStack-API-Version": placementVersion}, nil, out)
	if code != want {
		t.Fatalf("GET /placement%s: %d %s, want %d", path, code, b, want)
	}
	return b
}
