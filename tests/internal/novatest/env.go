package novatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/tests/internal/kstest"
)

// EnvRequireNova makes a missing Keystone or Nova a test failure (CI sets
// it when scripts/deps.sh could install the packages).
const EnvRequireNova = "LEASEHOLD_REQUIRE_NOVA"

// Prereq is a file a suite needs besides Keystone's and nova-box's, and
// why the suite skips without it.
type Prereq struct {
	Path, Why string
}

// Suite describes a test package's environment: a real Keystone whose
// service user has the admin role, then a nova-box, started once on
// first use and stopped by Close from TestMain.
type Suite struct {
	// Name prefixes the start-up line, e.g. "tests/nova".
	Name string
	// What is what does not run without the environment, for the skip
	// message ("the tests against a real Nova").
	What string
	// Banner names the nova-box in the start-up line ("nova-box with the
	// BlazarFilter").
	Banner string
	// Prereqs are checked after Keystone's packages and the harness.
	Prereqs []Prereq
	// Timeout bounds the whole start (default 5 minutes).
	Timeout time.Duration
	// BeforeNova, when set, runs once Keystone is up and the service user
	// is admin, before nova-box starts (t is the first test's: its
	// temporary directory ends with it).
	BeforeNova func(ctx context.Context, t testing.TB, e *Env) error
	// Options are nova-box's options (required); Keystone is set to the
	// suite's when left nil.
	Options func(e *Env) (Options, error)
	// AfterNova, when set, runs once nova-box is up.
	AfterNova func(e *Env) error

	once sync.Once
	env  *Env
	skip string
	err  error
}

// Env is a suite's running Keystone and nova-box.
type Env struct {
	KS   *kstest.Keystone
	Nova *Nova

	mu sync.Mutex
	// others are further nova-boxes a test started (stopped by Close,
	// should the test not get to it).
	others []*Nova
	// cleanups run in reverse order on Close, after the nova-boxes stop
	// and before Keystone does.
	cleanups []func()
}

// AddNova has Close stop n too (nil is ignored).
func (e *Env) AddNova(n *Nova) {
	if n == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.others = append(e.others, n)
}

// OnClose has Close run f after the nova-boxes stop, before Keystone.
func (e *Env) OnClose(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// Require returns the suite's environment, starting it on first use; it
// skips the test loudly (or fails it under LEASEHOLD_REQUIRE_NOVA=1)
// when the environment cannot run here.
func (s *Suite) Require(t testing.TB) *Env {
	t.Helper()
	s.once.Do(func() { s.start(t) })
	if s.skip != "" {
		SkipLoudly(t, s.skip)
	}
	if s.err != nil {
		msg := ""
		if s.env != nil && s.env.Nova != nil {
			msg = "\n" + s.env.Nova.LogTail(4000)
		}
		t.Fatalf("starting Keystone and Nova: %v%s", s.err, msg)
	}
	return s.env
}

// SkipLoudly skips t with why (printed in a banner), or fails it under
// LEASEHOLD_REQUIRE_NOVA=1.
func SkipLoudly(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequireNova) == "1" {
		t.Fatalf("%s (%s=1: the Nova tests must run)", why, EnvRequireNova)
	}
	fmt.Fprintf(os.Stderr, "\n%s\n### SKIPPED: %s\n%s\n\n", strings.Repeat("#", 80), why, strings.Repeat("#", 80))
	t.Skip("SKIPPED LOUDLY: " + why)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// whySkip says why the suite cannot run here ("" when it can).
func (s *Suite) whySkip() string {
	switch {
	case !fileExists("/usr/bin/keystone-manage"):
		return "python3-keystone is not installed (scripts/deps.sh installs it): " + s.What + " do not run"
	case !fileExists("/usr/lib/uwsgi/plugins/python3_plugin.so"):
		return "uwsgi-plugin-python3 is not installed: " + s.What + " do not run"
	case !fileExists(filepath.Join(kstest.HarnessDir(), "keystone-up.sh")):
		return "keystone-up.sh not found in " + kstest.HarnessDir() + " (set SHARED_DIR)"
	}
	for _, p := range s.Prereqs {
		if !fileExists(p.Path) {
			return p.Why
		}
	}
	if m := Missing(); m != "" {
		return m + ": " + s.What + " do not run"
	}
	return ""
}

func (s *Suite) start(t testing.TB) {
	if s.skip = s.whySkip(); s.skip != "" {
		return
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e := &Env{}
	s.env = e
	k, err := kstest.Start(ctx)
	e.KS = k // stopped by Close whatever happens next
	if err != nil {
		s.err = err
		return
	}
	// Leasehold calls Nova's admin APIs (aggregates, hypervisors, every
	// project's servers) as the service user, as Blazar's user does in a
	// real deployment; Nova calls Leasehold's Placement as that user too.
	if s.err = GrantServiceAdmin(k); s.err != nil {
		return
	}
	if s.BeforeNova != nil {
		if s.err = s.BeforeNova(ctx, t, e); s.err != nil {
			return
		}
	}
	if s.Options == nil {
		s.err = fmt.Errorf("%s: novatest.Suite has no Options", s.Name)
		return
	}
	o, err := s.Options(e)
	if err != nil {
		s.err = err
		return
	}
	if o.Keystone == nil {
		o.Keystone = k
	}
	n, err := Start(ctx, o)
	if n != nil {
		e.Nova = n
	}
	if err != nil {
		s.err = err
		return
	}
	if s.AfterNova != nil {
		if s.err = s.AfterNova(e); s.err != nil {
			return
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %s up in %s\n", s.Name, s.Banner, n.StartDuration().Round(time.Millisecond))
}

// Close stops what the suite started: the nova-boxes, then the cleanups
// (newest first), then Keystone. TestMain calls it after m.Run.
func (s *Suite) Close() {
	e := s.env
	if e == nil {
		return
	}
	e.mu.Lock()
	boxes := append([]*Nova{e.Nova}, e.others...)
	cleanups := e.cleanups
	e.mu.Unlock()
	for _, n := range boxes {
		if n != nil {
			if err := n.Down(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	if e.KS != nil {
		if err := e.KS.Down(false); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// GrantServiceAdmin gives Keystone's service user the admin role on
// project service.
func GrantServiceAdmin(k *kstest.Keystone) error {
	admin, err := k.Issue("admin", k.AdminPassword, "admin")
	if err != nil {
		return err
	}
	role, err := RoleID(k, admin, "admin")
	if err != nil {
		return err
	}
	var projects struct {
		Projects []struct{ ID string } `json:"projects"`
	}
	if err := k.Call("GET", "/projects?name=service", admin, nil, &projects); err != nil || len(projects.Projects) != 1 {
		return fmt.Errorf("project service: %v %+v", err, projects)
	}
	return k.Call("PUT", "/projects/"+projects.Projects[0].ID+"/users/"+k.ServiceUserID+"/roles/"+role, admin, nil, nil)
}

// RoleID is the id of Keystone role name, read with token admin.
func RoleID(k *kstest.Keystone, admin, name string) (string, error) {
	var roles struct {
		Roles []struct{ ID string } `json:"roles"`
	}
	if err := k.Call("GET", "/roles?name="+name, admin, nil, &roles); err != nil || len(roles.Roles) != 1 {
		return "", fmt.Errorf("role %s: %v %+v", name, err, roles)
	}
	return roles.Roles[0].ID, nil
}

// LeaseholdConf is an oslo-style config of Leasehold with keystone auth
// as k's service user, its SQLite database in dir, and the nova compute
// driver, whose [nova] section ends with novaExtra (timeouts, an
// endpoint override); a caller appends further sections.
func LeaseholdConf(k *kstest.Keystone, dir, novaExtra string) string {
	return "[DEFAULT]\nlisten = 127.0.0.1:0\n[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\ntoken_cache_time = 60\n" +
		"[compute]\ndriver = nova\n" +
		"[nova]\n" + ServiceAuth(k) + "region_name = RegionOne\n" + novaExtra
}

// ServiceAuth is the keystoneauth password login of k's service user
// (project service), the body of an oslo config section such as
// nova.conf's [placement].
func ServiceAuth(k *kstest.Keystone) string {
	return "auth_type = password\nauth_url = " + k.URL + "\nusername = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\n" +
		"project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n"
}
