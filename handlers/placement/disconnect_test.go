package placement

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/placement"
)

// levelCounter counts the default logger's records by level while a test
// runs.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (l *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level]++
	return nil
}
func (l *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levelCounter) WithGroup(string) slog.Handler      { return l }

// TestClientGoneRendersNothing: a request whose client went away (its
// context canceled) before the database answered gets no error body,
// 499 for the metrics, and only debug lines in the log, not an
// "internal error" 500.
func TestClientGoneRendersNothing(t *testing.T) {
	svc := placement.NewService(dbtest.Open(t), placement.Config{})
	h := New(svc, config.Placement{PolicyMode: "legacy"}, config.CORS{}).Handler()
	for _, path := range []string{"/resource_providers", "/resource_providers?resources=VCPU:1", "/allocation_candidates?resources=VCPU:1",
		"/traits", "/resource_providers/00000000-0000-0000-0000-000000000000"} {
		t.Run(path, func(t *testing.T) {
			logs := &levelCounter{n: map[slog.Level]int{}}
			prev := slog.Default()
			slog.SetDefault(slog.New(logs))
			defer slog.SetDefault(prev)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
			req.Header.Set("X-Auth-Token", "admin")
			req.Header.Set("OpenStack-API-Version", "placement 1.39")
			w := httptest.NewRecorder()
			rec := &httpx.StatusRecorder{ResponseWriter: w}
			h.ServeHTTP(rec, req)
			if rec.Status != httpx.StatusClientClosedRequest || w.Body.Len() != 0 {
				t.Errorf("status %d body %q, want 499 and no body", rec.Status, w.Body)
			}
			if logs.n[slog.LevelDebug] == 0 || logs.n[slog.LevelWarn]+logs.n[slog.LevelError] != 0 {
				t.Errorf("log records by level %v, want debug lines only", logs.n)
			}
		})
	}
}
