package blazar

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/httpx"
)

// logRecords collects the records of the default logger while a test
// runs (the tests of this package do not run in parallel).
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// levels counts the records by level and message.
func (l *logRecords) levels() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, r := range l.recs {
		out[r.Level.String()+" "+r.Message]++
	}
	return out
}

func captureLogs(t *testing.T) *logRecords {
	t.Helper()
	l := &logRecords{}
	prev := slog.Default()
	slog.SetDefault(slog.New(l))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return l
}

// TestClientGoneRendersNothing: a request whose client went away before
// the listing's queries ran (its context canceled) is answered with
// nothing, 499 for the metrics, and one debug line instead of an
// "internal error" and a 500.
func TestClientGoneRendersNothing(t *testing.T) {
	h := newLeasesServer(t)
	for _, path := range []string{"/leases", "/os-hosts/allocations", "/os-hosts", "/leases/00000000-0000-0000-0000-000000000000"} {
		t.Run(path, func(t *testing.T) {
			logs := captureLogs(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
			req.Header.Set("X-Auth-Token", "admin")
			w := httptest.NewRecorder()
			rec := &httpx.StatusRecorder{ResponseWriter: w}
			h.ServeHTTP(rec, req)
			if rec.Status != httpx.StatusClientClosedRequest || w.Body.Len() != 0 {
				t.Errorf("status %d body %q, want 499 and no body", rec.Status, w.Body)
			}
			if got := logs.levels(); got["DEBUG client closed the request"] != 1 || len(got) != 1 {
				t.Errorf("log records %v, want one debug line", got)
			}
		})
	}
}

// TestClientDisconnectMidRequest: over a real connection, a client that
// hangs up while its request is being served is counted as 499 by the
// metrics middleware, and nothing is logged above debug.
func TestClientDisconnectMidRequest(t *testing.T) {
	logs := captureLogs(t)
	started := make(chan struct{})
	rt := NewRouter()
	rt.Handle(http.MethodGet, "/slow", func(w http.ResponseWriter, r *http.Request) error {
		close(started)
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
			return fmt.Errorf("the client's disconnect was not seen")
		}
		// What a database read cut short returns.
		return fmt.Errorf("load: %w", r.Context().Err())
	})
	statuses := make(chan int, 1)
	h := httpx.Instrument("blazar", "/v1", func(_, _, _ string, status int, _ time.Duration) { statuses <- status }, nil)(rt.Handler(NoAuth{}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	done := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("got an answer: %s", resp.Status)
		}
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	cancel()
	select {
	case status := <-statuses:
		if status != httpx.StatusClientClosedRequest {
			t.Errorf("metrics status %d, want 499", status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request was never counted")
	}
	if err := <-done; ctx.Err() == nil || err == nil {
		t.Errorf("client: %v, want its own cancellation", err)
	}
	if got := logs.levels(); got["DEBUG client closed the request"] != 1 || len(got) != 1 {
		t.Errorf("log records %v, want one debug line", got)
	}
}
