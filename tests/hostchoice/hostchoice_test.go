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
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/server"
)

// api is a running server and its client.
type api struct {
	t   *testing.T
	url string
	c   *http.Client
}

// start serves Leasehold in-process with [physical:host]
// failure_domains = rack and migration_classes = hv, plus extra flags.
func start(t *testing.T, extra ...string) *api {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse(append([]string{"--database", dbtest.URL(t), "--auth", "noauth", "--log-level", "error"}, extra...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Blazar.PhysicalHost.FailureDomains = []string{"rack"}
	cfg.Blazar.PhysicalHost.MigrationClasses = []string{"hv"}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		if err := s.DB().Close(); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
	return &api{t: t, url: srv.URL, c: srv.Client()}
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

// TestSpreadOverRacks: issue 14's operator report. Three hosts on rack
// a, one on rack b (the capability "rack", configured as a failure
// domain): a min=max=2 lease gets one host of each rack.
func TestSpreadOverRacks(t *testing.T) {
	a := start(t)
	rackOf := map[string]string{}
	for i, rack := range []string{"a", "a", "a", "b"} {
		id := a.addHost(fmt.Sprintf("compute-%d", i+1), map[string]any{"rack": rack})
		rackOf[id] = rack
	}
	l := a.hostLease("spread", future(0), future(4), 2, 2, "")
	got := a.hostsOf(l["id"].(string))
	racks := map[string]bool{}
	for _, id := range got {
		racks[rackOf[id]] = true
	}
	if len(got) != 2 || len(racks) != 2 {
		t.Fatalf("lease hosts %v on racks %v, want one on each of a and b", got, racks)
	}
}
