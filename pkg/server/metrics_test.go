package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/config"
)

// get sends GET url with headers and returns the status.
func get(t *testing.T, url string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scrape reads url in the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin") // the main listener's /metrics needs an admin
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return mfs
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestMetricsListener runs the built server with [metrics] listen and
// checks end to end: requests are counted by route pattern (never the
// path with its ids, whatever 100 distinct ids are asked), on both
// listeners; the lease and outbox gauges count the rows; /metrics is not
// on the main listener when on_main is off.
func TestMetricsListener(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.Metrics.Listen = "127.0.0.1:0" })
	if s.MetricsAddr == "" {
		t.Fatal("no metrics listener bound")
	}
	main, plc := "http://"+s.Addrs[0], "http://"+s.Addrs[1]
	tok := []string{"X-Auth-Token", "admin"}
	for i := range 100 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		for _, u := range []string{main + "/v1/leases/" + id, main + "/placement/resource_providers/" + id, plc + "/resource_providers/" + id, main + "/v1/no-such-" + id} {
			if st := get(t, u, tok...); st != http.StatusNotFound {
				t.Fatalf("GET %s = %d, want 404", u, st)
			}
		}
	}
	for _, u := range []string{main + "/v1/leases", main + "/", main + "/versions", plc + "/"} {
		get(t, u, tok...)
	}
	if st := get(t, plc+"/allocation_candidates?resources=VCPU:1", "X-Auth-Token", "admin", "OpenStack-API-Version", "placement 1.10"); st != http.StatusOK {
		t.Errorf("GET /allocation_candidates = %d", st)
	}
	if st := get(t, main+"/metrics"); st != http.StatusNotFound {
		t.Errorf("GET /metrics on the main listener with on_main off = %d, want 404", st)
	}

	now := time.Now().UTC().Truncate(time.Second)
	for i, st := range []string{"ACTIVE", "ACTIVE", "PENDING"} {
		l := models.Lease{ID: fmt.Sprintf("10000000-0000-0000-0000-%012d", i), Name: fmt.Sprint("m", i),
			StartDate: now, EndDate: now.Add(time.Hour), Status: st, CreatedAt: now}
		if err := s.DB().DB.Create(&l).Error; err != nil {
			t.Fatal(err)
		}
	}
	// A FAILED row stays put: the worker never runs it again.
	if err := s.DB().DB.Create(&models.OutboxAction{Kind: "k", OrderKey: "o", Status: "FAILED", CreatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}

	mfs := scrape(t, "http://"+s.MetricsAddr+"/metrics")
	reqs := mfs["leasehold_http_requests_total"]
	if reqs == nil {
		t.Fatalf("no leasehold_http_requests_total; families: %d", len(mfs))
	}
	got := map[string]float64{}
	routes := map[string]bool{}
	for _, m := range reqs.GetMetric() {
		key := strings.Join([]string{label(m, "api"), label(m, "route"), label(m, "method"), label(m, "status")}, " ")
		got[key] = m.GetCounter().GetValue()
		routes[label(m, "route")] = true
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), "00000000-0000") {
				t.Errorf("label %s=%q carries a raw id", l.GetName(), l.GetValue())
			}
		}
	}
	want := map[string]float64{
		"blazar /v1/leases/{lease_id} GET 404":         100,
		"placement /resource_providers/{uuid} GET 404": 200, // main and Placement listener
		"blazar unmatched GET 404":                     101, // and /metrics on main
		"blazar /v1/leases GET 200":                    1,
		"blazar / GET 300":                             1,
		"blazar /versions GET 300":                     1,
		"placement / GET 200":                          1,
		"placement /allocation_candidates GET 200":     1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leasehold_http_requests_total (-want +got):\n%s", diff)
	}
	if len(routes) > 7 {
		t.Errorf("%d route labels after 400 requests over 100 ids: %v", len(routes), routes)
	}
	if d := mfs["leasehold_http_request_duration_seconds"]; d == nil || len(d.GetMetric()) != len(reqs.GetMetric()) {
		t.Error("the duration histogram does not have one series per request counter")
	}

	gauge := func(name, status string) float64 {
		for _, m := range mfs[name].GetMetric() {
			if label(m, "status") == status {
				return m.GetGauge().GetValue()
			}
		}
		t.Errorf("no %s{status=%q}", name, status)
		return -1
	}
	if a, p := gauge("leasehold_leases", "ACTIVE"), gauge("leasehold_leases", "PENDING"); a != 2 || p != 1 {
		t.Errorf("leasehold_leases ACTIVE=%v PENDING=%v, want 2 and 1", a, p)
	}
	if f := gauge("leasehold_outbox_actions", "FAILED"); f != 1 {
		t.Errorf("leasehold_outbox_actions FAILED=%v, want 1", f)
	}
	var names []string
	for n := range mfs {
		names = append(names, n)
	}
	for _, n := range []string{"leasehold_allocation_candidates_generated", "leasehold_allocation_candidates_search_steps"} {
		if h := mfs[n]; h == nil || h.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
			t.Errorf("%s: want one search observed, have %v", n, h)
		}
	}
	// (The event lag histogram has no series until an event runs.)
	for _, n := range []string{"leasehold_outbox_runs_total", "leasehold_outbox_retries_total",
		"leasehold_outbox_failures_total", "go_sql_open_connections", "go_sql_wait_count_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !slices.Contains(names, n) {
			t.Errorf("no %s in the scrape", n)
		}
	}
	// The metrics listener serves nothing else.
	if st := get(t, "http://"+s.MetricsAddr+"/v1/leases"); st != http.StatusNotFound {
		t.Errorf("GET /v1/leases on the metrics listener = %d, want 404", st)
	}
}

// TestMetricsOnMain: with on_main, /metrics on the main listener answers
// callers leasehold:metrics:get admits (admin) and refuses others.
func TestMetricsOnMain(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.Metrics.OnMain = true })
	if s.MetricsAddr != "" {
		t.Errorf("a metrics listener was bound without [metrics] listen: %s", s.MetricsAddr)
	}
	u := "http://" + s.Addrs[0] + "/metrics"
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"admin", []string{"X-Auth-Token", "admin"}, http.StatusOK},
		{"member", []string{"X-Auth-Token", "u1:p1", "X-Roles", "member,reader"}, http.StatusForbidden},
	} {
		if got := get(t, u, tc.headers...); got != tc.want {
			t.Errorf("%s: GET /metrics = %d, want %d", tc.name, got, tc.want)
		}
	}
	if mfs := scrape(t, u); mfs["go_goroutines"] == nil {
		t.Error("no go_goroutines on the main listener's /metrics")
	}
}

// TestMetricsListenerBusy: a [metrics] listen address that cannot be
// bound stops Run with an error naming it, and the listeners already
// bound are closed.
func TestMetricsListenerBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
	cfg.Auth = config.AuthNoAuth
	cfg.Listen, cfg.Metrics.Listen = "127.0.0.1:0", busy.Addr().String()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DB().Close() })
	err = s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), busy.Addr().String()) || !strings.Contains(err.Error(), "/metrics") {
		t.Fatalf("Run = %v, want an error naming the metrics address", err)
	}
	if len(s.Addrs) == 0 {
		t.Fatal("the main listener was never bound")
	}
	if c, err := net.DialTimeout("tcp", s.Addrs[0], 10*time.Second); err == nil {
		c.Close()
		t.Errorf("the main listener %s still accepts after Run failed", s.Addrs[0])
	}
}

// TestMetricsOnMainPolicyFile: the policy file reaches
// leasehold:metrics:get (here: only a monitor role may scrape), and
// naming it does not disturb either API's enforcer.
func TestMetricsOnMainPolicyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("\"leasehold:metrics:get\": \"role:monitor\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, func(c *config.Config) {
		c.Metrics.OnMain = true
		c.OsloPolicy.PolicyFile = file
	})
	u := "http://" + s.Addrs[0] + "/metrics"
	monitor := []string{"X-Auth-Token", "prom:ops", "X-Roles", "monitor"}
	if got := get(t, u, monitor...); got != http.StatusOK {
		t.Errorf("monitor: GET /metrics = %d, want 200", got)
	}
	if got := get(t, u, "X-Auth-Token", "admin"); got != http.StatusForbidden {
		t.Errorf("admin without monitor: GET /metrics = %d, want 403", got)
	}
	if got := get(t, "http://"+s.Addrs[0]+"/v1/leases", "X-Auth-Token", "admin"); got != http.StatusOK {
		t.Errorf("GET /v1/leases as admin = %d with the metrics rule in the policy file", got)
	}
}
