// Package metrics is Leasehold's Prometheus instrumentation: one registry
// (never the global default) built by the composition root, the request,
// lease event and outbox observers it hands to the services, and
// collectors that count leases and outbox rows with one bounded query per
// scrape.
package metrics

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/policy"
)

// Namespace prefixes every Leasehold metric.
const Namespace = "leasehold"

// DefaultQueryTimeout bounds each scrape-time query when Config leaves
// it zero.
const DefaultQueryTimeout = 2 * time.Second

// Config configures New.
type Config struct {
	// DB is the database the scrape-time queries read and whose pool
	// statistics are exported; nil leaves both out.
	DB *sql.DB
	// QueryTimeout bounds each scrape-time query (default
	// DefaultQueryTimeout): a slow database makes a scrape incomplete,
	// never a scrape that hangs.
	QueryTimeout time.Duration
}

// Metrics holds the registry and the instruments the services report to.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	eventLag *prometheus.HistogramVec
	// Outbox handler runs, and of them those that failed and will run
	// again (retries) or failed for good (failures).
	outboxRuns, outboxRetries, outboxFailures prometheus.Counter
	// The cost of each allocation candidates search.
	candidates, candidateSteps prometheus.Histogram
}

// Request duration buckets: Leasehold answers most requests in well under
// a millisecond to tens of milliseconds, so the default buckets (from
// 5 ms) would put nearly everything in the first one.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Event lag buckets: on time is well under a second; a stopped manager
// or a blocked lease makes minutes or hours.
var lagBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600}

// Search cost buckets: 1, 4, 16, … 4^12 ≈ 16.8M (16 × the default
// search cap of one million).
var costBuckets = prometheus.ExponentialBuckets(1, 4, 13)

// New builds the registry with every Leasehold collector, the Go runtime
// and process collectors, and (with cfg.DB) the pool statistics and the
// lease and outbox gauges.
func New(cfg Config) (*Metrics, error) {
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP requests served, by API, route pattern, method and status code.",
		}, []string{"api", "route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by API, route pattern, method and status code.",
			Buckets: durationBuckets,
		}, []string{"api", "route", "method", "status"}),
		eventLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "lease_event_lag_seconds",
			Help:    "Time from a lease event's due time to the moment this process starts running it, by event type.",
			Buckets: lagBuckets,
		}, []string{"event_type"}),
		outboxRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "outbox_runs_total",
			Help: "Outbox action handler runs in this process (a run handed back at shutdown is not counted).",
		}),
		outboxRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "outbox_retries_total",
			Help: "Outbox action runs that failed and will be retried after a backoff.",
		}),
		outboxFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "outbox_failures_total",
			Help: "Outbox action runs that failed for good: the action is FAILED and kept for the operator.",
		}),
		candidates: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "allocation_candidates_generated",
			Help:    "Candidates each GET /allocation_candidates search generated (before limit).",
			Buckets: costBuckets,
		}),
		candidateSteps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "allocation_candidates_search_steps",
			Help:    "Partial provider combinations each GET /allocation_candidates search walked (its cost; bounded by allocation_candidates_search_cap).",
			Buckets: costBuckets,
		}),
	}
	cs := []prometheus.Collector{
		m.requests, m.duration, m.eventLag, m.outboxRuns, m.outboxRetries, m.outboxFailures,
		m.candidates, m.candidateSteps,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if cfg.DB != nil {
		cs = append(cs,
			collectors.NewDBStatsCollector(cfg.DB, "main"),
			newCountCollector(cfg.DB, cfg.QueryTimeout, prometheus.NewDesc(
				prometheus.BuildFQName(Namespace, "", "leases"),
				"Leases in the database, by status (counted at scrape time).",
				[]string{"status"}, nil),
				"SELECT status, COUNT(*) FROM leases GROUP BY status", leaseStatuses),
			newCountCollector(cfg.DB, cfg.QueryTimeout, prometheus.NewDesc(
				prometheus.BuildFQName(Namespace, "", "outbox_actions"),
				"Outbox actions waiting, running or given up, by status (counted at scrape time).",
				[]string{"status"}, nil),
				"SELECT status, COUNT(*) FROM outbox GROUP BY status", outboxStatuses),
		)
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registry returns the registry (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text (or negotiated)
// format. A collector that fails (the database is down) is logged and
// left out; the rest of the page is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      errorLog{},
		Registry:      m.reg, // promhttp_metric_handler_errors_total
	})
}

// errorLog sends promhttp's errors to slog.
type errorLog struct{}

func (errorLog) Println(v ...any) { slog.Warn("metrics scrape", "error", v) }

// ObserveRequest is an httpx.RequestObserver.
func (m *Metrics) ObserveRequest(api, route, method string, status int, elapsed time.Duration) {
	code := statusText(status)
	m.requests.WithLabelValues(api, route, method, code).Inc()
	m.duration.WithLabelValues(api, route, method, code).Observe(elapsed.Seconds())
}

// ObserveEventLag is the lease event manager's ObserveLag hook.
func (m *Metrics) ObserveEventLag(eventType string, lag time.Duration) {
	switch eventType {
	case leases.EventStart, leases.EventEnd, leases.EventBeforeEnd:
	default:
		eventType = "other" // keep the label set bounded
	}
	m.eventLag.WithLabelValues(eventType).Observe(lag.Seconds())
}

// ObserveOutboxRun is the outbox worker's OnRun hook.
func (m *Metrics) ObserveOutboxRun(_ string, o outbox.RunOutcome) {
	m.outboxRuns.Inc()
	switch o {
	case outbox.RunRetry:
		m.outboxRetries.Inc()
	case outbox.RunFailed:
		m.outboxFailures.Inc()
	}
}

// ObserveCandidates is the Placement service's ObserveCandidates hook.
func (m *Metrics) ObserveCandidates(generated, steps int) {
	m.candidates.Observe(float64(generated))
	m.candidateSteps.Observe(float64(steps))
}

// statusCodes holds the status label of every valid HTTP code, so a
// request does not format (and allocate) one.
var statusCodes = func() (t [600]string) {
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusText(code int) string {
	if code >= 100 && code < len(statusCodes) {
		return statusCodes[code]
	}
	return "other"
}

// Known statuses are always exported (0 when no row has them) so a
// status that empties drops to 0 instead of vanishing.
var (
	leaseStatuses = []string{
		leases.StatusPending, leases.StatusActive, leases.StatusTerminated, leases.StatusError,
		leases.StatusCreating, leases.StatusStarting, leases.StatusUpdating, leases.StatusTerminating,
		leases.StatusDeleting,
	}
	outboxStatuses = []string{outbox.StatusPending, outbox.StatusClaimed, outbox.StatusFailed}
)

// maxStatuses bounds the label values one count query may export: the
// status columns hold a handful of values, and anything beyond this is a
// corrupt table, not something to page in a time series each.
const maxStatuses = 32

// countCollector exports one gauge per status from a GROUP BY query run
// at scrape time.
type countCollector struct {
	db      *sql.DB
	timeout time.Duration
	desc    *prometheus.Desc
	query   string
	known   []string
}

func newCountCollector(db *sql.DB, timeout time.Duration, desc *prometheus.Desc, query string, known []string) *countCollector {
	return &countCollector{db: db, timeout: timeout, desc: desc, query: query, known: known}
}

// Describe implements prometheus.Collector.
func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.count()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, s := range c.known {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), s)
		delete(counts, s)
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), s)
	}
}

func (c *countCollector) count() (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := c.db.QueryContext(ctx, c.query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := make(map[string]int64, len(c.known))
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		if len(counts) >= maxStatuses {
			return nil, errors.New("more than 32 distinct statuses; not exported")
		}
		counts[s] = n
	}
	return counts, rows.Err()
}

// PolicyRule is the rule that guards /metrics on the main listener
// (admin by default). It joins Blazar's rules, so a policy file may point
// it at any of them (rule:admin, rule:admin_or_owner, …).
func PolicyRule() policy.Rule {
	return policy.Rule{
		Name:        RuleGet,
		Check:       "rule:admin",
		Description: "Read the Prometheus metrics served at /metrics on the main listener.",
		Operations:  []policy.Operation{{Method: "GET", Path: "/metrics"}},
	}
}

// RuleGet names PolicyRule.
const RuleGet = "leasehold:metrics:get"

// TokenCacheStats are the token cache's counters as AddTokenCache reads
// them.
type TokenCacheStats struct {
	Hits, Misses, KeystoneCalls uint64
	Entries                     int
}

// AddTokenCache exports the Keystone token cache's counters, read from
// stats at every scrape: hits, misses, Keystone validation calls and the
// entries held.
func (m *Metrics) AddTokenCache(stats func() TokenCacheStats) error {
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "token_cache_hits_total",
			Help: "Token validations answered from the token cache.",
		}, func() float64 { return float64(stats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "token_cache_misses_total",
			Help: "Token validations the token cache could not answer (each called Keystone or waited for a concurrent call about the same token).",
		}, func() float64 { return float64(stats().Misses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "keystone_token_validations_total",
			Help: "Token validations asked of Keystone.",
		}, func() float64 { return float64(stats().KeystoneCalls) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "token_cache_entries",
			Help: "Token validation results held in the token cache.",
		}, func() float64 { return float64(stats().Entries) }),
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
