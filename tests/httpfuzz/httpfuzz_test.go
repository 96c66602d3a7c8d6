package httpfuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/server"
)

// The knobs, as flags (go test ./tests/httpfuzz -args -httpfuzz.n=…) or
// environment variables (LEASEHOLD_HTTPFUZZ_N, …; make fuzz sets them).
// The defaults are the CI slice: 10^4 requests from seed 1.
var (
	flagN        = flag.Int("httpfuzz.n", envInt("LEASEHOLD_HTTPFUZZ_N", 10_000), "requests to send")
	flagSeed     = flag.Uint64("httpfuzz.seed", uint64(envInt("LEASEHOLD_HTTPFUZZ_SEED", 1)), "generator seed (0: from the clock, printed)")
	flagDuration = flag.Duration("httpfuzz.duration", envDuration("LEASEHOLD_HTTPFUZZ_DURATION", 5*time.Minute), "stop sending after this long (a run cut short before its n requests fails)")
	flagWorkers  = flag.Int("httpfuzz.workers", envInt("LEASEHOLD_HTTPFUZZ_WORKERS", 1), "concurrent senders (each its own generator, seed+i)")
	flagDeadline = flag.Duration("httpfuzz.deadline", 15*time.Second, "per-request deadline: longer is a hang")
)

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

// maxFailures stops a run that keeps failing; distinct failures (by
// method, route, status) are reported once each.
const maxFailures = 40

// errorCounter counts the server's error-level log records (each 5xx is
// logged) without printing 10^6 access-log lines.
type errorCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	last []string
}

func (c *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (c *errorCounter) Handle(_ context.Context, r slog.Record) error {
	c.n.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	c.mu.Lock()
	if len(c.last) < 20 {
		c.last = append(c.last, b.String())
	}
	c.mu.Unlock()
	return nil
}
func (c *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *errorCounter) WithGroup(string) slog.Handler      { return c }

// startServer runs the whole service (pkg/server) on loopback listeners
// with a fresh database and noauth; it returns the main and Placement
// base URLs and a channel that gets Run's result if the server stops.
func startServer(t *testing.T) (mainURL, placementURL string, done <-chan error) {
	t.Helper()
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = dbtest.URL(t)
	cfg.Listen, cfg.PlacementListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Auth = "noauth" // the fuzzer names its callers by token
	cfg.ShutdownTimeout = 10 * time.Second
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Error("the server did not stop within a minute of its context ending")
		}
	})
	select {
	case <-s.Ready:
	case err := <-ch:
		t.Fatalf("Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the server did not start listening")
	}
	return "http://" + s.Addrs[0], "http://" + s.Addrs[1], ch
}

type result struct {
	status int
	header http.Header
	body   []byte
}

type sender struct {
	client             *http.Client
	mainURL, placement string
}

func (s *sender) send(req Request) (*result, error) {
	base := s.mainURL
	if req.Target == PlacementRoot {
		base = s.placement
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	// Opaque sends the generated path byte for byte.
	path, query, _ := strings.Cut(req.Path, "?")
	u.Opaque, u.RawQuery = path, query
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequest(req.Method, base, body)
	if err != nil {
		return nil, err
	}
	hr.URL = u
	hr.Header = req.Header.Clone()
	resp, err := s.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	return &result{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// TestHTTPFuzz sends generated requests over both APIs to one server and
// fails on a 5xx, a body that is not the API's shape, a hang (no answer
// within the per-request deadline), a dropped connection, the server
// stopping, or the time bound ending the run before its n requests.
func TestHTTPFuzz(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n, workers := *flagN, max(*flagWorkers, 1)
	t.Logf("httpfuzz: seed %d, %d requests, %d worker(s), time bound %s (reproduce: go test ./tests/httpfuzz -run TestHTTPFuzz -args -httpfuzz.seed=%d -httpfuzz.n=%d -httpfuzz.workers=%d)",
		seed, n, workers, *flagDuration, seed, n, workers)

	logs := &errorCounter{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(prev) })

	mainURL, placementURL, done := startServer(t)
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	snd := &sender{client: &http.Client{Transport: tr, Timeout: *flagDeadline}, mainURL: mainURL, placement: placementURL}

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		perAPI   = map[API]int{}
		perRoute = map[string]*[6]int{} // by status class 1xx..5xx
		fivexx   int
		failures []string
		seen     = map[string]bool{}
		sent     atomic.Int64
	)
	fail := func(key, msg string) (stop bool) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[key] {
			seen[key] = true
			failures = append(failures, msg)
		}
		return len(failures) >= maxFailures
	}

	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration)
	defer cancel()
	stopAll := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopAll) }) }
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := New(seed + uint64(w))
			setup(t, g, snd)
			for {
				if next.Add(1) > int64(n) {
					return
				}
				select {
				case <-stopAll:
					return
				case <-ctx.Done():
					return
				default:
				}
				req := g.Next()
				res, err := snd.send(req)
				if k := sent.Add(1); testing.Verbose() && n >= 100_000 && k%int64(n/10) == 0 {
					mu.Lock()
					t.Logf("httpfuzz: %d requests sent in %s, %d 5xx, %d failures", k, time.Since(start).Round(time.Second), fivexx, len(failures))
					mu.Unlock()
				}
				if err != nil {
					what := "no answer"
					var ue *url.Error
					if errors.As(err, &ue) && ue.Timeout() {
						what = fmt.Sprintf("hang (no answer within %s)", *flagDeadline)
					}
					if fail("err "+req.Method+" "+req.Route, fmt.Sprintf("%s: %v\nseed %d worker %d\n%s", what, err, seed, w, req)) {
						stop()
					}
					select {
					case err := <-done:
						fail("died", fmt.Sprintf("the server stopped: %v", err))
						stop()
						return
					default:
					}
					continue
				}
				mu.Lock()
				statuses[res.status]++
				perAPI[req.API]++
				rk := string(req.API) + " " + req.Route
				if perRoute[rk] == nil {
					perRoute[rk] = &[6]int{}
				}
				perRoute[rk][min(res.status/100, 5)]++
				if res.status >= 500 {
					fivexx++
				}
				mu.Unlock()
				g.LearnFrom(req, res.status, res.body)
				msg := check(req, res)
				if msg == "" && workers == 1 && req.API == Blazar && res.status == http.StatusConflict &&
					bytes.Contains(res.body, []byte("Too many concurrent bookings")) {
					// One sender: nothing runs concurrently, so running
					// out of booking retries is a bug, not a conflict.
					msg = "conflict: retries exhausted with nothing running concurrently"
				}
				if msg != "" {
					key := fmt.Sprintf("%s %s %d %s", req.Method, req.Route, res.status, firstWord(msg))
					body := res.body
					if len(body) > 2048 {
						body = body[:2048]
					}
					if fail(key, fmt.Sprintf("%s\nseed %d worker %d\nrequest:\n%s\nresponse: %d %s\n%s", msg, seed, w, req, res.status, res.header.Get("Content-Type"), body)) {
						stop()
					}
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)

	// The server must still answer.
	if res, err := snd.send(Request{Method: "GET", Path: "/healthcheck", Header: http.Header{}}); err != nil || res.status != 200 {
		fail("health", fmt.Sprintf("after the run GET /healthcheck: %v %v", err, res))
	}

	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var hist strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&hist, " %d:%d", c, statuses[c])
	}
	total := sent.Load()
	t.Logf("httpfuzz: seed %d: %d requests sent in %s (%.0f/s; blazar %d, placement %d), %d 5xx, %d server error log records",
		seed, total, took.Round(time.Millisecond), float64(total)/took.Seconds(), perAPI[Blazar], perAPI[Placement], fivexx, logs.n.Load())
	t.Logf("httpfuzz: statuses:%s", hist.String())
	if testing.Verbose() {
		rks := make([]string, 0, len(perRoute))
		for k := range perRoute {
			rks = append(rks, k)
		}
		sort.Strings(rks)
		var b strings.Builder
		for _, k := range rks {
			c := perRoute[k]
			fmt.Fprintf(&b, "\n  %-55s 2xx %6d  3xx %6d  4xx %6d  5xx %d", k, c[2], c[3], c[4], c[5])
		}
		t.Logf("httpfuzz: answers by route:%s", b.String())
	}
	if ctx.Err() != nil && total < int64(n) {
		// A slice that did not run is not a pass: raise the bound or
		// lower n rather than read this as n clean requests.
		t.Errorf("httpfuzz: time bound %s reached after %d of %d requests: the run was cut short", *flagDuration, total, n)
	}
	if len(failures) > 0 {
		for _, l := range logs.last {
			t.Logf("server error log: %s", l)
		}
		for i, f := range failures {
			t.Errorf("failure %d of %d:\n%s", i+1, len(failures), f)
		}
	}
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// setup creates a few resources with valid requests so that the fuzzed
// paths find existing ids: providers with inventory, hosts, a lease.
func setup(t *testing.T, g *Generator, snd *sender) {
	do := func(api API, tgt Target, method, path, route string, body any) {
		b, err := marshal(body)
		if err != nil {
			t.Error(err)
			return
		}
		h := http.Header{"X-Auth-Token": {"admin"}, "Content-Type": {"application/json"}}
		if api == Placement {
			h.Set("OpenStack-API-Version", "placement latest")
		}
		req := Request{API: api, Target: tgt, Method: method, Path: path, Route: route, Header: h, Body: b}
		res, err := snd.send(req)
		if err != nil {
			t.Errorf("setup %s %s: %v", method, path, err)
			return
		}
		if res.status >= 300 {
			t.Errorf("setup %s %s: %d %s", method, path, res.status, res.body)
			return
		}
		g.LearnFrom(req, res.status, res.body)
	}
	for range 3 {
		u := g.UUID()
		do(Placement, PlacementRoot, "POST", "/resource_providers", "/resource_providers", map[string]any{"name": "setup-" + u, "uuid": u})
		do(Placement, PlacementRoot, "PUT", "/resource_providers/"+u+"/inventories", "", map[string]any{
			"resource_provider_generation": 0,
			"inventories":                  map[string]any{"VCPU": map[string]any{"total": 16}, "MEMORY_MB": map[string]any{"total": 32768}, "DISK_GB": map[string]any{"total": 500}},
		})
		c := g.UUID()
		do(Placement, PlacementRoot, "PUT", "/allocations/"+c, "/allocations/{consumer}", map[string]any{
			"allocations": map[string]any{u: map[string]any{"resources": map[string]any{"VCPU": 1}}},
			"project_id":  g.UUID(), "user_id": g.UUID(), "consumer_generation": nil, "consumer_type": "INSTANCE",
		})
	}
	for range 6 {
		do(Blazar, Main, "POST", "/v1/os-hosts", "/v1/os-hosts", map[string]any{"name": "setup-" + g.word() + g.UUID()[:8], "gpu": "true", "vcpus": "8"})
	}
	net := g.UUID()
	for i := range 2 {
		do(Blazar, Main, "POST", "/v1/floatingips", "/v1/floatingips", map[string]any{"floating_network_id": net, "floating_ip_address": fmt.Sprintf("198.51.100.%d", 10+i+10*g.rng.IntN(20))})
	}
	for i := range 4 {
		res := map[string]any{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}
		if i%2 == 1 {
			res = map[string]any{"resource_type": "virtual:floatingip", "network_id": net, "amount": 1}
		}
		year := 2040 + i + 10*g.rng.IntN(5)
		do(Blazar, Main, "POST", "/v1/leases", "/v1/leases", map[string]any{
			"name": "setup-" + g.UUID(), "start_date": fmt.Sprintf("%d-01-01 12:00", year), "end_date": fmt.Sprintf("%d-01-02 12:00", year),
			"events": []any{}, "reservations": []any{res},
		})
	}
}

// check returns why res is not an answer the API may give to req, or "".
func check(req Request, res *result) string {
	if res.status >= 500 {
		return fmt.Sprintf("server error %d", res.status)
	}
	if req.Method == "HEAD" || len(res.body) == 0 {
		if res.status >= 400 && req.Method != "HEAD" {
			return fmt.Sprintf("empty error body for %d", res.status)
		}
		return ""
	}
	ct := res.header.Get("Content-Type")
	isJSON := strings.HasPrefix(ct, "application/json")
	var doc any
	if isJSON {
		if err := json.Unmarshal(res.body, &doc); err != nil {
			return fmt.Sprintf("body: Content-Type %s but not JSON: %v", ct, err)
		}
	}
	if res.status < 400 {
		return ""
	}
	obj, _ := doc.(map[string]any)
	switch req.API {
	case Blazar:
		if !isJSON || obj == nil {
			return fmt.Sprintf("error-shape: Blazar error %d is not a JSON object (Content-Type %q)", res.status, ct)
		}
		if _, ok := obj["error_message"].(string); ok {
			return ""
		}
		if e, ok := obj["error"].(map[string]any); ok && e["message"] != nil {
			return ""
		}
		return fmt.Sprintf("error-shape: Blazar error %d has neither error_message nor error.message", res.status)
	case Placement:
		if res.status == http.StatusUnauthorized && obj != nil && obj["title"] == "Unauthorized" {
			return "" // noauth2's own 401 document
		}
		switch {
		case isJSON:
			errs, _ := obj["errors"].([]any)
			if len(errs) != 1 {
				return fmt.Sprintf("error-shape: Placement error %d without one item in errors", res.status)
			}
			item, _ := errs[0].(map[string]any)
			st, _ := item["status"].(float64)
			if int(st) != res.status {
				return fmt.Sprintf("error-shape: Placement error %d says status %v", res.status, item["status"])
			}
			if _, ok := item["detail"].(string); !ok {
				return fmt.Sprintf("error-shape: Placement error %d without a detail", res.status)
			}
		case strings.HasPrefix(ct, "text/html"):
			if !bytes.Contains(res.body, []byte("<h1>"+strconv.Itoa(res.status))) {
				return fmt.Sprintf("error-shape: Placement HTML error %d without its status heading", res.status)
			}
		case strings.HasPrefix(ct, "text/plain"):
			if !bytes.HasPrefix(res.body, []byte(strconv.Itoa(res.status)+" ")) {
				return fmt.Sprintf("error-shape: Placement text error %d does not start with its status line", res.status)
			}
		default:
			return fmt.Sprintf("error-shape: Placement error %d with Content-Type %q", res.status, ct)
		}
	}
	return ""
}
