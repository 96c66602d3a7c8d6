package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// gather returns name → label set (k=v,… in label order) → value for
// every gauge, counter and histogram (its sample count) in reg.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		byLabels := map[string]float64{}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			byLabels[strings.Join(ls, ",")] = value(mf.GetType(), m)
		}
		out[mf.GetName()] = byLabels
	}
	return out
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// TestCountsReflectRows: the lease and outbox gauges count the rows by
// status at scrape time on both dialects, every known status is exported
// (0 when empty), and a status the code does not know is still counted.
func TestCountsReflectRows(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			sqlDB, err := d.DB.DB()
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Config{DB: sqlDB})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Second)
			leaseStatus := map[string]int{"PENDING": 3, "ACTIVE": 2, "ERROR": 1, "MYSTERY": 1}
			i := 0
			for status, n := range leaseStatus {
				for range n {
					i++
					l := models.Lease{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Name: fmt.Sprint("l", i),
						StartDate: now, EndDate: now.Add(time.Hour), Status: status, CreatedAt: now}
					if err := d.DB.Create(&l).Error; err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, st := range []string{outbox.StatusPending, outbox.StatusPending, outbox.StatusFailed} {
				if err := d.DB.Create(&models.OutboxAction{Kind: "k", OrderKey: "o", Status: st, CreatedAt: now}).Error; err != nil {
					t.Fatal(err)
				}
			}
			got := gather(t, m.Registry())
			wantLeases := map[string]float64{
				"status=PENDING": 3, "status=ACTIVE": 2, "status=ERROR": 1, "status=MYSTERY": 1,
				"status=TERMINATED": 0, "status=CREATING": 0, "status=STARTING": 0, "status=UPDATING": 0,
				"status=TERMINATING": 0, "status=DELETING": 0,
			}
			if diff := cmp.Diff(wantLeases, got["leasehold_leases"]); diff != "" {
				t.Errorf("leasehold_leases (-want +got):\n%s", diff)
			}
			wantOutbox := map[string]float64{"status=PENDING": 2, "status=CLAIMED": 0, "status=FAILED": 1}
			if diff := cmp.Diff(wantOutbox, got["leasehold_outbox_actions"]); diff != "" {
				t.Errorf("leasehold_outbox_actions (-want +got):\n%s", diff)
			}
			// Pool statistics come from the same *sql.DB.
			if _, ok := got["go_sql_open_connections"]["db_name=main"]; !ok {
				t.Errorf("no go_sql_open_connections{db_name=main}; have %v", keys(got))
			}
			for _, name := range []string{"go_sql_in_use_connections", "go_sql_idle_connections", "go_sql_wait_count_total", "go_sql_wait_duration_seconds_total", "go_goroutines", "process_open_fds"} {
				if _, ok := got[name]; !ok && (name != "process_open_fds" || processMetricsSupported()) {
					t.Errorf("no %s", name)
				}
			}

			// A row deleted is gone from the next scrape.
			if err := d.DB.Where("status = ?", "MYSTERY").Delete(&models.Lease{}).Error; err != nil {
				t.Fatal(err)
			}
			if _, ok := gather(t, m.Registry())["leasehold_leases"]["status=MYSTERY"]; ok {
				t.Error("a status with no rows left is still exported")
			}
		})
	}
}

// processMetricsSupported: the process collector reads /proc.
func processMetricsSupported() bool { return runtime.GOOS == "linux" }

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestScrapeSurvivesDatabaseDown: with the database closed, a scrape
// still answers 200 with the process's own metrics; only the gauges that
// need the database are missing.
func TestScrapeSurvivesDatabaseDown(t *testing.T) {
	d := dbtest.Open(t)
	sqlDB, err := d.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{DB: sqlDB, QueryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRequest("blazar", "/v1/leases", "GET", 200, time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d:\n%s", rec.Code, body)
	}
	if !strings.Contains(string(body), `leasehold_http_requests_total{api="blazar",method="GET",route="/v1/leases",status="200"} 1`) {
		t.Errorf("request counter missing from a scrape with the database down:\n%s", body)
	}
	if strings.Contains(string(body), "leasehold_leases{") {
		t.Error("lease gauge exported with the database closed")
	}
}

// TestObservers: the event lag histogram, outbox counters and request
// instruments record what their hooks are told, with bounded labels.
func TestObservers(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveEventLag("start_lease", 300*time.Millisecond)
	m.ObserveEventLag("start_lease", 2*time.Second)
	m.ObserveEventLag("end_lease", 0)
	m.ObserveEventLag("something_new", time.Second)
	for _, o := range []outbox.RunOutcome{outbox.RunSucceeded, outbox.RunSucceeded, outbox.RunRetry, outbox.RunRetry, outbox.RunRetry, outbox.RunFailed} {
		m.ObserveOutboxRun("host.reserve", o)
	}
	m.ObserveRequest("placement", "/resource_providers/{uuid}", "GET", 200, time.Millisecond)
	m.ObserveRequest("placement", "/resource_providers/{uuid}", "GET", 200, time.Millisecond)
	m.ObserveRequest("placement", "/resource_providers/{uuid}", "GET", 404, time.Millisecond)
	m.ObserveRequest("blazar", "unmatched", "other", 999, time.Millisecond)
	m.ObserveCandidates(1000, 5000)
	m.ObserveCandidates(0, 3)

	got := gather(t, m.Registry())
	tests := []struct {
		name string
		want map[string]float64
	}{
		{"leasehold_lease_event_lag_seconds", map[string]float64{"event_type=start_lease": 2, "event_type=end_lease": 1, "event_type=other": 1}},
		{"leasehold_outbox_runs_total", map[string]float64{"": 6}},
		{"leasehold_outbox_retries_total", map[string]float64{"": 3}},
		{"leasehold_outbox_failures_total", map[string]float64{"": 1}},
		{"leasehold_allocation_candidates_generated", map[string]float64{"": 2}},
		{"leasehold_allocation_candidates_search_steps", map[string]float64{"": 2}},
		{"leasehold_http_requests_total", map[string]float64{
			"api=placement,method=GET,route=/resource_providers/{uuid},status=200": 2,
			"api=placement,method=GET,route=/resource_providers/{uuid},status=404": 1,
			"api=blazar,method=other,route=unmatched,status=other":                 1,
		}},
		{"leasehold_http_request_duration_seconds", map[string]float64{
			"api=placement,method=GET,route=/resource_providers/{uuid},status=200": 2,
			"api=placement,method=GET,route=/resource_providers/{uuid},status=404": 1,
			"api=blazar,method=other,route=unmatched,status=other":                 1,
		}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, got[tc.name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	// The lag buckets place 300ms under 0.5 and 2s under 2.
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() != "leasehold_lease_event_lag_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if mt.GetLabel()[0].GetValue() != "start_lease" {
				continue
			}
			for _, b := range mt.GetHistogram().GetBucket() {
				want := uint64(0)
				if b.GetUpperBound() >= 0.3 {
					want++
				}
				if b.GetUpperBound() >= 2 {
					want++
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("start_lease bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
			}
		}
	}
}

// TestTokenCacheMetrics: the token cache counters are read at every
// scrape, so each scrape shows the values of that moment.
func TestTokenCacheMetrics(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := TokenCacheStats{Hits: 7, Misses: 3, KeystoneCalls: 2, Entries: 2}
	if err := m.AddTokenCache(func() TokenCacheStats { return st }); err != nil {
		t.Fatal(err)
	}
	read := func() []float64 {
		g := gather(t, m.Registry())
		return []float64{g["leasehold_token_cache_hits_total"][""], g["leasehold_token_cache_misses_total"][""],
			g["leasehold_keystone_token_validations_total"][""], g["leasehold_token_cache_entries"][""]}
	}
	if diff := cmp.Diff([]float64{7, 3, 2, 2}, read()); diff != "" {
		t.Errorf("first scrape (-want +got):\n%s", diff)
	}
	st = TokenCacheStats{Hits: 9, Misses: 4, KeystoneCalls: 3, Entries: 1}
	if diff := cmp.Diff([]float64{9, 4, 3, 1}, read()); diff != "" {
		t.Errorf("second scrape (-want +got):\n%s", diff)
	}
	if err := m.AddTokenCache(func() TokenCacheStats { return st }); err == nil {
		t.Error("registering the token cache twice was accepted")
	}
}
