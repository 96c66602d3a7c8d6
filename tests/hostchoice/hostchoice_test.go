// Package hostchoice_test drives issue 14's host-choice features over
// HTTP against Leasehold served in-process (pkg/server, standalone compute
// driver, noauth): failure-domain spread from host capabilities, the
// earliest-window extension, and healing after a host is made
// non-reservable or deleted by force. The database is a fresh SQLite
// file, or a throw-away MariaDB database when LEASEHOLD_TEST_MYSQL_DSN is
// set (pkg/db/dbtest).
package hostchoice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
)

// api is a running server and its client.
type api struct {
	t   testing.TB
	url string
	c   *http.Client
}

// start serves Leasehold in-process with [physical:host]
// failure_domains = rack, migration_classes = hv and allow_migration
// allow.
func start(t testing.TB, allow ...string) *api {
	t.Helper()
	return startWith(t, func(cfg *config.Config) { cfg.Blazar.PhysicalHost.AllowMigration = allow })
}

// startWith is start with the configuration edited by edit.
func startWith(t testing.TB, edit func(*config.Config)) *api {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse([]string{"--database", dbtest.URL(t), "--auth", "noauth", "--log-level", "error"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Blazar.PhysicalHost.FailureDomains = []string{"rack"}
	cfg.Blazar.PhysicalHost.MigrationClasses = []string{"hv"}
	edit(cfg)
	cfg.Listen, cfg.PlacementListen = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	s := lhtest.Run(t, cfg)
	return &api{t: t, url: "http://" + s.Addrs[0], c: &http.Client{}}
}

// do sends body (JSON) as the noauth admin and decodes the answer into a
// generic value; it returns the status.
func (a *api) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			a.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

// must is do that fails the test unless the status is want.
func (a *api) must(want int, method, path string, body any) map[string]any {
	a.t.Helper()
	code, out := a.do(method, path, body)
	if code != want {
		a.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

// addHost registers a host with the given capabilities; it returns its id.
func (a *api) addHost(name string, caps map[string]any) string {
	a.t.Helper()
	body := map[string]any{"name": name, "vcpus": 64, "memory_mb": 196608, "local_gb": 2000}
	for k, v := range caps {
		body[k] = v
	}
	out := a.must(http.StatusCreated, "POST", "/v1/os-hosts", body)
	return fmt.Sprint(out["host"].(map[string]any)["id"])
}

// hostLease creates a lease of one physical:host reservation; it
// returns the lease.
func (a *api) hostLease(name string, start, end time.Time, min, max int, resourceProps string) map[string]any {
	a.t.Helper()
	out := a.must(http.StatusCreated, "POST", "/v1/leases", map[string]any{
		"name": name, "start_date": start.Format("2006-01-02 15:04"), "end_date": end.Format("2006-01-02 15:04"),
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": min, "max": max,
			"hypervisor_properties": "", "resource_properties": resourceProps}},
		"events": []any{},
	})
	return out["lease"].(map[string]any)
}

// hostsOf are the ids of the hosts allocated to lease id, sorted.
func (a *api) hostsOf(leaseID string) []string {
	a.t.Helper()
	out := a.must(http.StatusOK, "GET", "/v1/os-hosts/allocations?lease_id="+leaseID, nil)
	var ids []string
	for _, x := range out["allocations"].([]any) {
		al := x.(map[string]any)
		if len(al["reservations"].([]any)) > 0 {
			ids = append(ids, fmt.Sprint(al["resource_id"]))
		}
	}
	sort.Strings(ids)
	return ids
}

// future is a fixed time ahead of the wall clock, on a whole hour.
func future(hours int) time.Time {
	return time.Now().UTC().Truncate(time.Hour).Add(time.Duration(48+hours) * time.Hour)
}

// TestSpreadOverRacks: a min=max=N reservation spans N failure domains
// (the capability "rack", configured as one) when N have a free host,
// though the lowest ids are on one rack. Issue 14's operator report: three
// hosts on rack a, one on rack b, N=2. And N=3 over racks a, b and c,
// with a host of rack b already busy in the window.
func TestSpreadOverRacks(t *testing.T) {
	for _, tc := range []struct {
		racks []string
		busy  int // one-host leases on rack b booked first
		n     int
	}{
		{racks: []string{"a", "a", "a", "b"}, n: 2},
		{racks: []string{"a", "a", "a", "b", "b", "c", "c"}, busy: 1, n: 3},
	} {
		t.Run(fmt.Sprint(tc.racks, tc.n), func(t *testing.T) {
			a := start(t)
			rackOf := map[string]string{}
			for i, rack := range tc.racks {
				id := a.addHost(fmt.Sprintf("compute-%d", i+1), map[string]any{"rack": rack})
				rackOf[id] = rack
			}
			for i := 0; i < tc.busy; i++ {
				b := a.hostLease(fmt.Sprintf("busy-%d", i), future(0), future(4), 1, 1, `["==", "$rack", "b"]`)
				if got := a.hostsOf(b["id"].(string)); len(got) != 1 || rackOf[got[0]] != "b" {
					t.Fatalf("busy lease hosts %v, want one on rack b", got)
				}
			}
			l := a.hostLease("spread", future(0), future(4), tc.n, tc.n, "")
			got := a.hostsOf(l["id"].(string))
			racks := map[string]bool{}
			for _, id := range got {
				racks[rackOf[id]] = true
			}
			if len(got) != tc.n || len(racks) != tc.n {
				t.Fatalf("lease hosts %v on racks %v, want %d hosts on %d racks", got, racks, tc.n, tc.n)
			}
		})
	}
}

// earliest asks POST /v1/leases/earliest for a physical:host reservation
// of min hosts; it returns the status and the answer.
func (a *api) earliest(after time.Time, notAfter *time.Time, seconds, min int) (int, map[string]any) {
	a.t.Helper()
	body := map[string]any{"after": after.Format("2006-01-02 15:04"), "duration": seconds,
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": min, "max": min,
			"hypervisor_properties": "", "resource_properties": ""}}}
	if notAfter != nil {
		body["not_after"] = notAfter.Format("2006-01-02 15:04")
	}
	return a.do("POST", "/v1/leases/earliest", body)
}

// TestEarliestWindow: three hosts; a lease holds two of them over
// [T, T+4h), another the third over [T+1h, T+6h). The earliest windows
// after T: 1 h on one host at T (the third host's free hour), 2 h on one
// host at T+4h, 2 h on three hosts at T+6h; a lease created for the last
// one is accepted; a limit before it is a 409, bad input a 400.
func TestEarliestWindow(t *testing.T) {
	a := start(t)
	for i := 1; i <= 3; i++ {
		a.addHost(fmt.Sprintf("compute-%d", i), nil)
	}
	T := future(0)
	a.hostLease("two", T, T.Add(4*time.Hour), 2, 2, "")
	a.hostLease("one", T.Add(time.Hour), T.Add(6*time.Hour), 1, 1, "")
	for _, tc := range []struct {
		seconds, min int
		want         time.Time
	}{{3600, 1, T}, {7200, 1, T.Add(4 * time.Hour)}, {7200, 3, T.Add(6 * time.Hour)}} {
		code, out := a.earliest(T, nil, tc.seconds, tc.min)
		if code != http.StatusOK {
			t.Fatalf("earliest %ds on %d hosts: status %d: %v", tc.seconds, tc.min, code, out)
		}
		e := out["earliest"].(map[string]any)
		want := tc.want.Format("2006-01-02T15:04:05.000000")
		wantEnd := tc.want.Add(time.Duration(tc.seconds) * time.Second).Format("2006-01-02T15:04:05.000000")
		if e["start_date"] != want || e["end_date"] != wantEnd {
			t.Errorf("earliest %ds on %d hosts: %v – %v, want %s – %s", tc.seconds, tc.min, e["start_date"], e["end_date"], want, wantEnd)
		}
		res := e["reservations"].([]any)[0].(map[string]any)
		if got := res["resources"].([]any); len(got) != tc.min {
			t.Errorf("earliest %ds on %d hosts: resources %v", tc.seconds, tc.min, got)
		}
	}
	// An after in the past means now: the answer is a window a lease can
	// still be created for.
	before := time.Now().UTC().Truncate(time.Minute)
	if code, out := a.earliest(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), nil, 3600, 1); code != http.StatusOK {
		t.Errorf("earliest after 2001: status %d: %v", code, out)
	} else if s := out["earliest"].(map[string]any)["start_date"].(string); s < before.Format("2006-01-02T15:04:05.000000") || s >= T.Format("2006-01-02T15:04:05.000000") {
		t.Errorf("earliest after 2001 starts %s, want from now (%s) on, before %s", s, before, T)
	}
	// The client follows the answer with a create.
	at := T.Add(6 * time.Hour)
	a.hostLease("follows", at, at.Add(2*time.Hour), 3, 3, "")
	// Now the three hosts are busy until T+8h.
	limit := T.Add(7 * time.Hour)
	if code, out := a.earliest(T, &limit, 7200, 3); code != http.StatusConflict {
		t.Errorf("earliest with a limit before any window: status %d, want 409: %v", code, out)
	}
	for _, body := range []map[string]any{
		{"duration": 0, "reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}}},
		{"duration": "1h", "reservations": []any{}},
		{"duration": 60},
		{"duration": 60, "reservations": []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "x", "amount": 1}}},
		{"duration": 60, "after": "tomorrow", "reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}}},
	} {
		if code, out := a.do("POST", "/v1/leases/earliest", body); code != http.StatusBadRequest {
			t.Errorf("POST /v1/leases/earliest %v: status %d, want 400: %v", body, code, out)
		}
	}
	// A lease created at "earliest": the window the search finds, T+8h.
	three := map[string]any{"resource_type": "physical:host", "min": 3, "max": 3, "hypervisor_properties": "", "resource_properties": ""}
	l := a.must(http.StatusCreated, "POST", "/v1/leases", map[string]any{"name": "asap", "start_date": "earliest",
		"after": T.Format("2006-01-02 15:04"), "duration": 3600, "reservations": []any{three}})["lease"].(map[string]any)
	if want := T.Add(8 * time.Hour).Format("2006-01-02T15:04:05.000000"); l["start_date"] != want {
		t.Errorf("lease at earliest starts %v, want %s", l["start_date"], want)
	}
	if want := T.Add(9 * time.Hour).Format("2006-01-02T15:04:05.000000"); l["end_date"] != want {
		t.Errorf("lease at earliest ends %v, want %s", l["end_date"], want)
	}
	if got := a.hostsOf(l["id"].(string)); len(got) != 3 {
		t.Errorf("lease at earliest holds %v, want 3 hosts", got)
	}
	for _, body := range []map[string]any{
		{"name": "x", "start_date": "earliest", "end_date": "2030-01-01 12:00", "duration": 60, "reservations": []any{three}},
		{"name": "x", "start_date": "earliest", "reservations": []any{three}},
		{"name": "x", "start_date": "earliest", "duration": 60},
	} {
		if code, out := a.do("POST", "/v1/leases", body); code != http.StatusBadRequest {
			t.Errorf("POST /v1/leases %v: status %d, want 400: %v", body, code, out)
		}
	}
	// GET /v1/leases/earliest is still the lease named "earliest".
	if code, _ := a.do("GET", "/v1/leases/earliest", nil); code != http.StatusNotFound {
		t.Errorf("GET /v1/leases/earliest: status %d, want 404", code)
	}
}

// lease reads lease id.
func (a *api) lease(id string) map[string]any {
	a.t.Helper()
	return a.must(http.StatusOK, "GET", "/v1/leases/"+id, nil)["lease"].(map[string]any)
}

// waitStatus waits (bounded) until lease id has status want.
func (a *api) waitStatus(id, want string) {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := a.lease(id)
		if l["status"] == want {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("lease %s: status %v after 30s, want %s", id, l["status"], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flags are a lease's degraded flag and its first reservation's
// missing_resources and resources_changed.
func (a *api) flags(id string) [3]bool {
	a.t.Helper()
	l := a.lease(id)
	r := l["reservations"].([]any)[0].(map[string]any)
	return [3]bool{l["degraded"].(bool), r["missing_resources"].(bool), r["resources_changed"].(bool)}
}

// TestHealing: four hosts, racks a (1, 2) and b (3, 4), migration class
// hv=x except host 4 (hv=y, which may not receive x). An active lease
// holds host 1 and a future one hosts 1 and 3.
//
// Host 1 made non-reservable (PUT reservable=false): the active lease
// moves to host 3 (flagged resources_changed, lease degraded); the
// future one moves to host 2 (rack a: its other host is on rack b; not
// flagged, as upstream flags only active reservations).
//
// Host 3 deleted by force while reserved: the active lease moves to host
// 2; the future one has nowhere to go (host 2 is its own, host 1 is out,
// host 4 cannot receive class x): it loses the host and is flagged
// missing_resources, its lease degraded. Host 3 is gone.
func TestHealing(t *testing.T) {
	a := start(t)
	ids := map[string]string{}
	for i, c := range []map[string]any{
		{"rack": "a", "hv": "x"}, {"rack": "a", "hv": "x"}, {"rack": "b", "hv": "x"}, {"rack": "b", "hv": "y"},
	} {
		ids[fmt.Sprint(i+1)] = a.addHost(fmt.Sprintf("compute-%d", i+1), c)
	}
	if fmt.Sprint(ids) != "map[1:1 2:2 3:3 4:4]" {
		t.Fatalf("host ids %v", ids)
	}
	T := future(0)
	pending := a.hostLease("future", T, T.Add(4*time.Hour), 2, 2, "")["id"].(string)
	if got := a.hostsOf(pending); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("future lease hosts %v, want [1 3] (one per rack, lowest ids)", got)
	}
	now := a.must(http.StatusCreated, "POST", "/v1/leases", map[string]any{
		"name": "now", "start_date": "now", "end_date": T.Add(-time.Hour).Format("2006-01-02 15:04"),
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": ""}},
		"events": []any{},
	})["lease"].(map[string]any)["id"].(string)
	a.waitStatus(now, "ACTIVE")
	if got := a.hostsOf(now); fmt.Sprint(got) != "[1]" {
		t.Fatalf("active lease hosts %v, want [1] (bounded by the future lease: the tighter fit)", got)
	}

	a.must(http.StatusOK, "PUT", "/v1/os-hosts/1", map[string]any{"reservable": false})
	if got := a.hostsOf(now); fmt.Sprint(got) != "[3]" {
		t.Errorf("after host 1 left: active lease hosts %v, want [3]", got)
	}
	if got := a.hostsOf(pending); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("after host 1 left: future lease hosts %v, want [2 3]", got)
	}
	if got := a.flags(now); got != [3]bool{true, false, true} {
		t.Errorf("active lease degraded, missing_resources, resources_changed = %v, want true, false, true", got)
	}
	if got := a.flags(pending); got != [3]bool{false, false, false} {
		t.Errorf("future lease degraded, missing_resources, resources_changed = %v, want all false", got)
	}

	// A plain delete of a reserved host is still refused.
	a.must(http.StatusConflict, "DELETE", "/v1/os-hosts/3", nil)
	a.must(http.StatusBadRequest, "DELETE", "/v1/os-hosts/3?force=maybe", nil)
	a.must(http.StatusNoContent, "DELETE", "/v1/os-hosts/3?force=true", nil)
	a.must(http.StatusNotFound, "GET", "/v1/os-hosts/3", nil)
	if got := a.hostsOf(now); fmt.Sprint(got) != "[2]" {
		t.Errorf("after host 3 was deleted: active lease hosts %v, want [2]", got)
	}
	if got := a.hostsOf(pending); fmt.Sprint(got) != "[2]" {
		t.Errorf("after host 3 was deleted: future lease hosts %v, want [2] (host 4 cannot receive class x)", got)
	}
	if got := a.flags(pending); got != [3]bool{true, true, false} {
		t.Errorf("future lease degraded, missing_resources, resources_changed = %v, want true, true, false", got)
	}
	if got := a.flags(now); got != [3]bool{true, false, true} {
		t.Errorf("active lease degraded, missing_resources, resources_changed = %v, want true, false, true", got)
	}
}

// TestHealingAllowMigration: a future lease on host 1 (hv=x) when host 1
// leaves: host 2 (hv=y) takes it only when allow_migration lets y
// receive x; otherwise the lease is missing_resources.
func TestHealingAllowMigration(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		want  string
		flags [3]bool
	}{
		{nil, "[]", [3]bool{true, true, false}},
		{[]string{"hv:x::hv:y"}, "[2]", [3]bool{false, false, false}},
	} {
		t.Run(fmt.Sprint(tc.allow), func(t *testing.T) {
			a := start(t, tc.allow...)
			a.addHost("compute-1", map[string]any{"hv": "x"})
			a.addHost("compute-2", map[string]any{"hv": "y"})
			T := future(0)
			id := a.hostLease("future", T, T.Add(time.Hour), 1, 1, "")["id"].(string) // host 1: the lower id
			if got := a.hostsOf(id); fmt.Sprint(got) != "[1]" {
				t.Fatalf("lease hosts %v, want [1]", got)
			}
			a.must(http.StatusOK, "PUT", "/v1/os-hosts/1", map[string]any{"reservable": false})
			if got := a.hostsOf(id); fmt.Sprint(got) != tc.want {
				t.Errorf("after host 1 left: lease hosts %v, want %s", got, tc.want)
			}
			if got := a.flags(id); got != tc.flags {
				t.Errorf("degraded, missing_resources, resources_changed = %v, want %v", got, tc.flags)
			}
		})
	}
}

// TestEarliestWindowTogether: two reservations of 2 hosts each over four
// hosts, host 4 busy over [T, T+2h): each fits alone at T, both together
// only from T+2h, on four different hosts. Three reservations of 2 never
// fit four hosts: 409.
func TestEarliestWindowTogether(t *testing.T) {
	a := start(t)
	for i := 1; i <= 4; i++ {
		a.addHost(fmt.Sprintf("compute-%d", i), nil)
	}
	T := future(0)
	a.hostLease("busy", T, T.Add(2*time.Hour), 1, 1, `["==", "$hypervisor_hostname", "compute-4"]`)
	two := map[string]any{"resource_type": "physical:host", "min": 2, "max": 2, "hypervisor_properties": "", "resource_properties": ""}
	out := a.must(http.StatusOK, "POST", "/v1/leases/earliest", map[string]any{
		"after": T.Format("2006-01-02 15:04"), "duration": 3600, "reservations": []any{two, two}})
	e := out["earliest"].(map[string]any)
	if want := T.Add(2 * time.Hour).Format("2006-01-02T15:04:05.000000"); e["start_date"] != want {
		t.Errorf("start %v, want %s", e["start_date"], want)
	}
	seen := map[string]bool{}
	for _, r := range e["reservations"].([]any) {
		for _, h := range r.(map[string]any)["resources"].([]any) {
			seen[h.(string)] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("hosts of the two reservations %v, want four different ones", seen)
	}
	if code, out := a.do("POST", "/v1/leases/earliest", map[string]any{
		"after": T.Format("2006-01-02 15:04"), "duration": 3600, "reservations": []any{two, two, two}}); code != http.StatusConflict {
		t.Errorf("three reservations of 2 on four hosts: status %d, want 409: %v", code, out)
	}
}

// TestBigHostReserve: one small host and seven big ones (1 TiB), the
// default reserve of 15 % of the bigger hosts (one of the seven). With
// the small host booked, a small request gets big hosts while more than
// one stays free, then a 409 that says why, while a request that needs a
// big host still gets the last one; the earliest window for the small
// request starts when the small host is free again.
func TestBigHostReserve(t *testing.T) {
	a := start(t)
	a.addHost("small-1", nil)
	big := map[string]bool{}
	for i := 1; i <= 7; i++ {
		big[a.addHost(fmt.Sprintf("big-%d", i), map[string]any{"memory_mb": 1 << 20})] = true
	}
	T := future(0)
	first := a.hostLease("small", T, T.Add(4*time.Hour), 1, 1, "")
	if got := a.hostsOf(first["id"].(string)); len(got) != 1 || big[got[0]] {
		t.Fatalf("the first small lease got %v, want the small host", got)
	}
	six := a.hostLease("six", T, T.Add(4*time.Hour), 6, 6, "")
	if got := a.hostsOf(six["id"].(string)); len(got) != 6 {
		t.Fatalf("six big hosts wanted, got %v", got)
	}
	code, out := a.do("POST", "/v1/leases", map[string]any{
		"name": "one-more", "start_date": T.Format("2006-01-02 15:04"), "end_date": T.Add(4 * time.Hour).Format("2006-01-02 15:04"),
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": ""}},
		"events": []any{},
	})
	if msg := fmt.Sprint(out); code != http.StatusConflict || !strings.Contains(msg, "1 of them a bigger host kept for the requests only bigger hosts serve") {
		t.Fatalf("a small lease over the reserve: %d %s, want 409 naming the kept host", code, msg)
	}
	bigOnly := a.hostLease("big", T, T.Add(4*time.Hour), 1, 1, `[">=", "$memory_mb", "1048576"]`)
	if got := a.hostsOf(bigOnly["id"].(string)); len(got) != 1 || !big[got[0]] {
		t.Fatalf("the big lease got %v, want the last big host", got)
	}
	code, out = a.earliest(T, nil, 3600, 1)
	if code != http.StatusOK {
		t.Fatalf("earliest: %d %v", code, out)
	}
	if got, want := out["earliest"].(map[string]any)["start_date"], T.Add(4*time.Hour).Format("2006-01-02T15:04:05.000000"); got != want {
		t.Errorf("earliest start %v, want %v (the small host free again)", got, want)
	}
}
