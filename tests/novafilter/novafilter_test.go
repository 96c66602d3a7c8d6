package novafilter_test

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// bootTimeout bounds a boot's wait for ACTIVE or ERROR.
const bootTimeout = 90 * time.Second

// TestFilterUnitTests runs contrib/nova's Python unit tests (Nova's fake
// HostState, a local Keystone-and-Leasehold stub) with Debian's Python.
func TestFilterUnitTests(t *testing.T) {
	if out, err := exec.Command("/usr/bin/python3", "-c", "import nova.tests.unit.scheduler.fakes").CombinedOutput(); err != nil {
		skipLoudly(t, "python3-nova is not installed (scripts/deps.sh installs it): LeaseholdFilter's unit tests do not run: "+strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-m", "unittest", "-v", "test_leasehold_filter")
	cmd.Dir = contribDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_leasehold_filter: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Ran (\d+) tests?`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("no tests ran, or not OK:\n%s", out)
	}
	t.Logf("LeaseholdFilter unit tests: %s passed", m[1])
}

// TestLeaseholdFilter: under LeaseholdFilter in Nova's real scheduler, a
// member's boot with its reservation's hint lands on the reserved host, a
// boot without a hint lands on the host Leasehold does not manage, and
// another project's boot with the hint finds no valid host; the endpoint
// says why. Then it measures what the filter adds to a boot: its call,
// and the median boot-to-ACTIVE with it and in a nova-box without it.
func TestLeaseholdFilter(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	lh := e.StartLeasehold(t)
	e.KS.Register(t, "reservation", "leasehold", lh+"/v1")
	admin := e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin")
	demo := e.KS.MustIssue(t, "demo", e.KS.DemoPassword, "demo")
	service := e.KS.MustIssue(t, e.KS.ServiceUser, e.KS.ServicePassword, "service")

	// compute1 and compute2 are Leasehold's; compute3 is not.
	name := map[string]string{}
	for _, h := range []string{"compute1", "compute2"} {
		var out struct {
			Host struct {
				ID string `json:"id"`
			} `json:"host"`
		}
		mustCall(t, lh, "POST", "/os-hosts", admin, http.StatusCreated, map[string]any{"name": h}, &out)
		name[out.Host.ID] = h
	}
	if _, err := n.WaitAggregate(ctx, admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return slices.Equal(novatest.Membership(as, "compute1"), []string{"freepool"}) &&
			slices.Equal(novatest.Membership(as, "compute2"), []string{"freepool"}) && novatest.Membership(as, "compute3") == nil
	}); err != nil {
		t.Fatalf("Leasehold's hosts in the freepool: %v", err)
	}
	var lease struct {
		Lease struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ProjectID    string `json:"project_id"`
			Reservations []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"reservations"`
		} `json:"lease"`
	}
	mustCall(t, lh, "POST", "/leases", demo, http.StatusCreated, map[string]any{
		"name": "filtered", "start_date": "now", "end_date": "2099-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": ""}},
		"events": []any{},
	}, &lease)
	res := lease.Lease.Reservations[0].ID
	deadline := time.Now().Add(60 * time.Second)
	for lease.Lease.Status != "ACTIVE" || lease.Lease.Reservations[0].Status != "active" {
		if time.Now().After(deadline) {
			t.Fatalf("lease not active after 60s: %+v", lease.Lease)
		}
		time.Sleep(200 * time.Millisecond)
		mustCall(t, lh, "GET", "/leases/"+lease.Lease.ID, demo, http.StatusOK, nil, &lease)
	}
	var allocs struct {
		Allocations []struct {
			ResourceID   string `json:"resource_id"`
			Reservations []struct {
				ID string `json:"id"`
			} `json:"reservations"`
		} `json:"allocations"`
	}
	mustCall(t, lh, "GET", "/os-hosts/allocations", admin, http.StatusOK, nil, &allocs)
	reserved := ""
	for _, a := range allocs.Allocations {
		for _, r := range a.Reservations {
			if r.ID == res {
				reserved = name[a.ResourceID]
			}
		}
	}
	if reserved == "" {
		t.Fatalf("reservation %s holds no host: %+v", res, allocs)
	}
	t.Logf("reservation %s of project %s holds %s", res, lease.Lease.ProjectID, reserved)

	// The endpoint itself, as Nova's service user asks, with reasons.
	var answer struct {
		Hosts    []string          `json:"hosts"`
		Rejected map[string]string `json:"rejected"`
	}
	ask := map[string]any{"project_id": lease.Lease.ProjectID, "scheduler_hints": map[string]any{"reservation": []string{res}},
		"hosts": novaHosts, "explain": true}
	mustCall(t, lh, "POST", "/scheduler/filter", service, http.StatusOK, ask, &answer)
	if !slices.Equal(answer.Hosts, []string{reserved}) || len(answer.Rejected) != 2 {
		t.Errorf("hinted answer %+v, want only %s", answer, reserved)
	}
	ask["project_id"] = e.KS.AdminProjectID
	mustCall(t, lh, "POST", "/scheduler/filter", service, http.StatusOK, ask, &answer)
	if len(answer.Hosts) != 0 || !strings.Contains(answer.Rejected[reserved], "belongs to another project") {
		t.Errorf("another project's hinted answer %+v, want %s refused as another project's", answer, reserved)
	}
	delete(ask, "scheduler_hints")
	mustCall(t, lh, "POST", "/scheduler/filter", service, http.StatusOK, ask, &answer)
	if !slices.Equal(answer.Hosts, []string{"compute3"}) || !strings.Contains(answer.Rejected[reserved], "reserved by reservation "+res) ||
		!strings.Contains(answer.Rejected[otherOf(reserved)], "free pool") {
		t.Errorf("unhinted answer %+v, want compute3 only, %s reserved, the other in the free pool", answer, reserved)
	}
	if code, body := call(t, lh, "POST", "/scheduler/filter", demo, ask, nil); code != http.StatusForbidden {
		t.Errorf("a member asking the filter endpoint: %d %s, want 403", code, body)
	}

	// Boots through Nova's scheduler.
	hinted, err := n.BootAndWait(ctx, demo, "hinted", "1", map[string]any{"reservation": res}, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := n.ServerHost(ctx, admin, hinted.ID); hinted.Status != "ACTIVE" || err != nil || h != reserved {
		t.Errorf("boot with the reservation hint: %+v on %q (%v), want ACTIVE on the reserved %s\n%s", hinted, h, err, reserved, n.LogTail(2000))
	}
	plain, err := n.BootAndWait(ctx, demo, "plain", "1", nil, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := n.ServerHost(ctx, admin, plain.ID); plain.Status != "ACTIVE" || h != "compute3" {
		t.Errorf("boot without a hint: %+v on %q, want ACTIVE on compute3 (not Leasehold's)", plain, h)
	}
	stranger, err := n.BootAndWait(ctx, admin, "stranger", "1", map[string]any{"reservation": res}, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if stranger.Status != "ERROR" || !strings.Contains(stranger.Fault, "No valid host") {
		t.Errorf("another project's boot with the hint: %+v, want ERROR with no valid host", stranger)
	}
	// With LeaseholdFilter as with the BlazarFilter the lease's end
	// deletes its servers and gives the host back to the freepool.
	end := novatest.NextMinute(5 * time.Second)
	mustCall(t, lh, "PUT", "/leases/"+lease.Lease.ID, demo, http.StatusOK, map[string]any{"end_date": end}, nil)
	if err := n.WaitGone(ctx, admin, hinted.ID, 150*time.Second); err != nil {
		t.Fatalf("the lease's server after its end (%s): %v", end, err)
	}
	if _, err := n.WaitAggregate(ctx, admin, 60*time.Second, func(as []novatest.Aggregate) bool {
		return novatest.CountNamed(as, res) == 0 && slices.Equal(novatest.Membership(as, reserved), []string{"freepool"})
	}); err != nil {
		t.Fatalf("the reserved host after the end: %v", err)
	}
	if s, err := n.GetServer(ctx, admin, plain.ID); err != nil || s.Status != "ACTIVE" {
		t.Errorf("the server on the unmanaged host after the end: %+v %v, want it untouched", s, err)
	}
	for _, id := range []string{plain.ID, stranger.ID} {
		deleteServer(t, n, admin, id)
	}

	// The cost. The filter's own call: the endpoint as the filter asks
	// it (every candidate, no hint, not explained), from this process.
	ask = map[string]any{"project_id": lease.Lease.ProjectID, "hosts": novaHosts}
	var calls []time.Duration
	for range 21 {
		t0 := time.Now()
		mustCall(t, lh, "POST", "/scheduler/filter", service, http.StatusOK, ask, nil)
		calls = append(calls, time.Since(t0))
	}
	slices.Sort(calls)
	// A whole boot: boot-to-ACTIVE without a hint here and in a second
	// nova-box that runs Nova's default filters only, alternating between
	// the two so that the machine's load weighs on both alike, after one
	// boot each to warm up.
	plainBox, err := e.startPlainNova(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bootOnce(t, n, demo, admin, "compute3")
	bootOnce(t, plainBox, demo, admin, "")
	var with, without []time.Duration
	for range measuredBoots {
		with = append(with, bootOnce(t, n, demo, admin, "compute3"))
		without = append(without, bootOnce(t, plainBox, demo, admin, ""))
	}
	mw, mo := median(with), median(without)
	t.Logf("the filter endpoint over HTTP (3 candidates, as the filter asks): median %s, max %s of %d calls",
		calls[len(calls)/2].Round(time.Microsecond), calls[len(calls)-1].Round(time.Microsecond), len(calls))
	t.Logf("boot to ACTIVE, median of %d alternating boots: %s with LeaseholdFilter, %s without (difference %s; all: %v vs %v)",
		measuredBoots, mw.Round(time.Millisecond), mo.Round(time.Millisecond), (mw - mo).Round(time.Millisecond), round(with), round(without))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func round(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// otherOf is the registered host that is not h.
func otherOf(h string) string {
	if h == "compute1" {
		return "compute2"
	}
	return "compute1"
}

// startPlainNova starts a second nova-box whose scheduler runs Nova's
// default filters only (TestMain stops it). Its start points the
// catalog's compute endpoint at it; nothing here reads that any more.
func (e *Env) startPlainNova(ctx context.Context) (*novatest.Nova, error) {
	n, err := novatest.Start(ctx, novatest.Options{Keystone: e.KS, Hosts: novaHosts})
	e.AddNova(n)
	return n, err
}

// measuredBoots is how many boots each median is taken over.
const measuredBoots = 7

// bootOnce boots a server without a hint, waits for ACTIVE (on want,
// when set), deletes it and returns the boot-to-ACTIVE time.
func bootOnce(t *testing.T, n *novatest.Nova, tok, admin, want string) time.Duration {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now()
	s, err := n.BootAndWait(ctx, tok, "timed", "1", nil, bootTimeout)
	d := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "ACTIVE" {
		t.Fatalf("timed boot: %+v\n%s", s, n.LogTail(2000))
	}
	if want != "" {
		if h, _ := n.ServerHost(ctx, admin, s.ID); h != want {
			t.Errorf("timed boot landed on %q, want %s", h, want)
		}
	}
	deleteServer(t, n, admin, s.ID)
	return d
}

func deleteServer(t *testing.T, n *novatest.Nova, admin, id string) {
	t.Helper()
	ctx := context.Background()
	if err := n.DeleteServer(ctx, admin, id); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitGone(ctx, admin, id, bootTimeout); err != nil {
		t.Fatal(err)
	}
}
