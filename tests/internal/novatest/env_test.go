package novatest

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/tests/internal/kstest"
)

// TestLeaseholdConf: the conf the suites give Leasehold loads as keystone
// auth and the nova driver, both as the service user, with the suite's
// [nova] extras and its appended sections.
func TestLeaseholdConf(t *testing.T) {
	k := &kstest.Keystone{URL: "http://127.0.0.1:5000/v3", ServiceUser: "leasehold", ServicePassword: "pw-1"}
	dir := t.TempDir()
	conf := LeaseholdConf(k, dir, "endpoint_override = http://127.0.0.1:1/v2.1\ntimeout = 7\n") + "[events]\nclaim_timeout = 20s\n"
	cfg := kstest.LoadConfig(t, dir, conf)
	got := struct {
		Auth, Database, Driver            string
		KSUser, KSPassword, KSURL         string
		NovaUser, NovaPassword, NovaURL   string
		NovaProject, NovaDomain, Override string
		NovaTimeout                       int
	}{
		cfg.Auth, cfg.Database, cfg.Compute.Driver,
		cfg.KeystoneAuthtoken.Username, cfg.KeystoneAuthtoken.Password, cfg.KeystoneAuthtoken.AuthURL,
		cfg.Nova.Username, cfg.Nova.Password, cfg.Nova.AuthURL,
		cfg.Nova.ProjectName, cfg.Nova.UserDomainName, cfg.Nova.EndpointOverride,
		cfg.Nova.Timeout,
	}
	want := got
	want.Auth, want.Database, want.Driver = config.AuthKeystone, "sqlite:///"+filepath.Join(dir, "lh.db"), config.ComputeNova
	want.KSUser, want.KSPassword, want.KSURL = "leasehold", "pw-1", k.URL
	want.NovaUser, want.NovaPassword, want.NovaURL = "leasehold", "pw-1", k.URL
	want.NovaProject, want.NovaDomain, want.Override = "service", "Default", "http://127.0.0.1:1/v2.1"
	want.NovaTimeout = 7
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("loaded config (-want +got):\n%s", d)
	}
}

// TestCloseOrder: Close runs the cleanups newest first and tolerates an
// environment whose Keystone and nova-box never started.
func TestCloseOrder(t *testing.T) {
	var ran []int
	s := &Suite{env: &Env{}}
	s.env.AddNova(nil)
	for i := range 3 {
		s.env.OnClose(func() { ran = append(ran, i) })
	}
	s.Close()
	if d := cmp.Diff([]int{2, 1, 0}, ran); d != "" {
		t.Errorf("cleanup order (-want +got):\n%s", d)
	}
	(&Suite{}).Close() // never started: nothing to stop
}

// TestWhySkipPrereq: a suite's own missing file is its skip reason once
// the shared prerequisites are met.
func TestWhySkipPrereq(t *testing.T) {
	s := &Suite{What: "x", Prereqs: []Prereq{{Path: filepath.Join(t.TempDir(), "absent"), Why: "absent is missing"}}}
	got := s.whySkip()
	if got == "" {
		t.Fatal("no skip reason with a missing prerequisite")
	}
	base := (&Suite{What: "x"}).whySkip()
	if base == "" && got != "absent is missing" {
		t.Errorf("whySkip = %q, want the suite's own reason", got)
	}
	if base != "" && got != base {
		t.Errorf("whySkip = %q, want the shared reason %q first", got, base)
	}
}
