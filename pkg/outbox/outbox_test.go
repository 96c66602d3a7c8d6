package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

// waitLimit bounds every wait for another goroutine or process; reaching
// it fails the test (it is never what a test asserts).
const waitLimit = 2 * time.Minute

// clock is an injected clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// payload is what the tests' actions carry.
type payload struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func act(kind, key string, n int) outbox.Action {
	return outbox.Action{Kind: kind, Key: key, Payload: payload{Key: key, N: n}}
}

// tb is what the helpers need of testing.TB and *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func decode(t tb, raw json.RawMessage) payload {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Errorf("payload %s: %v", raw, err)
	}
	return p
}

func enqueue(t testing.TB, d *db.DB, acts ...outbox.Action) {
	t.Helper()
	if err := d.Write(context.Background(), func(tx *gorm.DB) error { return outbox.Enqueue(tx, acts...) }); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func list(t tb, d *db.DB, status ...string) []outbox.Record {
	t.Helper()
	rs, err := outbox.List(context.Background(), d, status...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func runDue(t testing.TB, w *outbox.Worker) int {
	t.Helper()
	n, err := w.RunDue(context.Background())
	if err != nil {
		t.Fatalf("RunDue: %v", err)
	}
	return n
}

// effects records handler calls in memory, in call order.
type effects struct {
	mu  sync.Mutex
	log []string
}

func (e *effects) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *effects) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// perKey splits a log of "key:n" entries by key, keeping order.
func perKey(log []string) map[string][]string {
	m := map[string][]string{}
	for _, s := range log {
		k, _, _ := strings.Cut(s, ":")
		m[k] = append(m[k], s)
	}
	return m
}

func forDialects(t *testing.T, f func(t *testing.T, d *db.DB)) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) { f(t, dbtest.OpenDialect(t, dialect)) })
	}
}

func TestEnqueueRollbackAndCommit(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		var calls effects
		h := func(_ context.Context, raw json.RawMessage) error {
			p := decode(t, raw)
			calls.add(fmt.Sprintf("%s:%d", p.Key, p.N))
			return nil
		}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w"}, newClock(t0).Now)
		ctx := context.Background()
		errRollback := errors.New("roll back")
		err := d.Write(ctx, func(tx *gorm.DB) error {
			if err := outbox.Enqueue(tx, act("test.effect", "k", 1)); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Write = %v", err)
		}
		if n := runDue(t, w); n != 0 || len(list(t, d)) != 0 || len(calls.get()) != 0 {
			t.Fatalf("after a rollback: ran %d, rows %v, calls %v", n, list(t, d), calls.get())
		}
		enqueue(t, d, act("test.effect", "k", 2))
		if rs := list(t, d); len(rs) != 1 || rs[0].Status != outbox.StatusPending || rs[0].Attempts != 0 {
			t.Fatalf("after the commit: %+v", rs)
		}
		if n := runDue(t, w); n != 1 {
			t.Fatalf("RunDue = %d, want 1", n)
		}
		if n := runDue(t, w); n != 0 {
			t.Fatalf("second RunDue = %d, want 0", n)
		}
		if diff := cmp.Diff([]string{"k:2"}, calls.get()); diff != "" {
			t.Errorf("calls (-want +got): %s", diff)
		}
		if rs := list(t, d); len(rs) != 0 {
			t.Errorf("rows left: %+v", rs)
		}
	})
}

func TestEnqueueRejectsBadActions(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	for _, a := range []outbox.Action{
		{Key: "k"},
		{Kind: "x"},
		{Kind: strings.Repeat("x", 129), Key: "k"},
		{Kind: "x", Key: strings.Repeat("k", 256)},
		{Kind: "x", Key: "k", LeaseID: strings.Repeat("l", 37)},
		{Kind: "x", Key: "k", Payload: func() {}},
		{Kind: "x", Key: "k", Payload: strings.Repeat("p", outbox.MaxPayload)},
	} {
		err := d.Write(context.Background(), func(tx *gorm.DB) error { return outbox.Enqueue(tx, act("ok", "k", 1), a) })
		if err == nil {
			t.Errorf("Enqueue(%+v) = nil, want an error", a)
		}
	}
	if rs := list(t, d); len(rs) != 0 {
		t.Errorf("a refused Enqueue left rows: %+v", rs)
	}
}

func TestOrderPerKey(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		for _, conc := range []int{1, 4} {
			t.Run(fmt.Sprint("concurrency", conc), func(t *testing.T) {
				var calls effects
				h := func(_ context.Context, raw json.RawMessage) error {
					p := decode(t, raw)
					calls.add(fmt.Sprintf("%s:%d", p.Key, p.N))
					return nil
				}
				w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w", Concurrency: conc}, newClock(t0).Now)
				keys := []string{"a", "b", "c", "d", "e"}
				want := map[string][]string{}
				for n := range 6 {
					var acts []outbox.Action
					for _, k := range keys {
						acts = append(acts, act("test.effect", k, n))
						want[k] = append(want[k], fmt.Sprintf("%s:%d", k, n))
					}
					enqueue(t, d, acts...)
				}
				if n := runDue(t, w); n != 30 {
					t.Errorf("RunDue = %d, want 30", n)
				}
				if diff := cmp.Diff(want, perKey(calls.get())); diff != "" {
					t.Errorf("per-key order (-want +got): %s", diff)
				}
			})
		}
	})
}

// TestBlockedKeyDoesNotBlockOthers: key a's first handler blocks while
// b's five rows all complete; a's second row waits for its first.
func TestBlockedKeyDoesNotBlockOthers(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		var calls effects
		started := make(chan struct{})
		unblock := make(chan struct{})
		bDone := make(chan string, 10)
		h := func(ctx context.Context, raw json.RawMessage) error {
			p := decode(t, raw)
			if p.Key == "a" && p.N == 0 {
				close(started)
				select {
				case <-unblock:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			s := fmt.Sprintf("%s:%d", p.Key, p.N)
			calls.add(s)
			if p.Key == "b" {
				bDone <- s
			}
			return nil
		}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w", Poll: time.Hour}, newClock(t0).Now)
		enqueue(t, d, act("test.effect", "a", 0), act("test.effect", "a", 1))
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { w.Run(ctx); close(stopped) }()
		defer func() {
			cancel()
			wait(t, stopped, "Run to return")
		}()
		wait(t, started, "a:0 to start")
		for n := range 5 {
			enqueue(t, d, act("test.effect", "b", n))
			w.Notify()
		}
		for n := range 5 {
			select {
			case s := <-bDone:
				if want := fmt.Sprintf("b:%d", n); s != want {
					t.Errorf("b ran %s, want %s", s, want)
				}
			case <-time.After(waitLimit):
				t.Fatalf("b's rows did not complete while a was blocked; ran %v", calls.get())
			}
		}
		if got := perKey(calls.get())["a"]; len(got) != 0 {
			t.Fatalf("a ran %v while a:0 was still running", got)
		}
		close(unblock)
		deadline := time.Now().Add(waitLimit)
		for len(perKey(calls.get())["a"]) < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("a's rows did not complete after unblocking: %v", calls.get())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if diff := cmp.Diff([]string{"a:0", "a:1"}, perKey(calls.get())["a"]); diff != "" {
			t.Errorf("a (-want +got): %s", diff)
		}
	})
}

func wait(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// hookLog is a table the hooks write in the worker's transaction.
func hookLog(t testing.TB, d *db.DB) {
	t.Helper()
	if err := d.Exec("CREATE TABLE outbox_hook_log (row_id BIGINT NOT NULL, status_seen VARCHAR(13) NOT NULL, final_flag INT NOT NULL, attempts INT NOT NULL, last_error TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
}

// logHook records a failure or success in outbox_hook_log, with the
// row's status as the hook's transaction sees it ("" when deleted).
func logHook(tx *gorm.DB, r outbox.Record, final int) error {
	var status []string
	if err := tx.Raw("SELECT status FROM outbox WHERE id = ?", r.ID).Scan(&status).Error; err != nil {
		return err
	}
	seen := ""
	if len(status) == 1 {
		seen = status[0]
	}
	return tx.Exec("INSERT INTO outbox_hook_log (row_id, status_seen, final_flag, attempts, last_error) VALUES (?, ?, ?, ?, ?)",
		r.ID, seen, final, r.Attempts, r.LastError).Error
}

type hookRow struct {
	RowID      int64
	StatusSeen string
	FinalFlag  int
	Attempts   int
	LastError  string
}

func hookRows(t testing.TB, d *db.DB) []hookRow {
	t.Helper()
	var rows []hookRow
	if err := d.Raw("SELECT row_id, status_seen, final_flag, attempts, last_error FROM outbox_hook_log ORDER BY row_id, attempts").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

func hooks(cfg outbox.Config) outbox.Config {
	cfg.OnFailure = func(_ context.Context, tx *gorm.DB, r outbox.Record, final bool) error {
		f := 0
		if final {
			f = 1
		}
		return logHook(tx, r, f)
	}
	cfg.OnSuccess = func(_ context.Context, tx *gorm.DB, r outbox.Record) error { return logHook(tx, r, -1) }
	return cfg
}

// TestRetryThenSuccess: a handler failing three times then succeeding
// makes one effect; between attempts the row shows its attempts and last
// error, and waits out the backoff on the injected clock; a later row of
// the same key waits for it.
func TestRetryThenSuccess(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		hookLog(t, d)
		var mu sync.Mutex
		calls, made := 0, 0
		var later effects2
		h := func(_ context.Context, raw json.RawMessage) error {
			if decode(t, raw).N == 2 {
				later.add()
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls <= 3 {
				return fmt.Errorf("boom %d", calls)
			}
			made++
			return nil
		}
		clk := newClock(t0)
		backoff := func(attempt int) time.Duration { return time.Duration(attempt) * time.Minute }
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, hooks(outbox.Config{ID: "w", Backoff: backoff}), clk.Now)
		enqueue(t, d, act("test.effect", "k", 1), act("test.effect", "k", 2))
		rows := list(t, d)
		id, id2 := rows[0].ID, rows[1].ID
		due := t0
		for attempt := 1; attempt <= 3; attempt++ {
			if n := runDue(t, w); n != 1 {
				t.Fatalf("attempt %d: RunDue = %d, want 1", attempt, n)
			}
			rs := list(t, d)
			due = due.Add(backoff(attempt))
			want := outbox.Record{ID: id, Kind: "test.effect", Key: "k", Status: outbox.StatusPending, Attempts: attempt,
				LastError: fmt.Sprintf("boom %d", attempt), NextAt: &due}
			got := rs[0]
			got.Payload, got.CreatedAt, got.UpdatedAt = nil, time.Time{}, nil
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("after failure %d (-want +got): %s", attempt, diff)
			}
			if len(rs) != 2 || rs[1].Attempts != 0 || rs[1].Status != outbox.StatusPending {
				t.Fatalf("the later row: %+v", rs)
			}
			// Not before the backoff is over.
			clk.Set(due.Add(-time.Microsecond))
			if n := runDue(t, w); n != 0 {
				t.Fatalf("ran %d rows before the backoff was over", n)
			}
			clk.Set(due)
		}
		if n := runDue(t, w); n != 2 {
			t.Fatalf("last RunDue = %d, want 2 (the success, then the row it held back)", n)
		}
		if calls != 4 || made != 1 || later.n != 1 {
			t.Errorf("calls %d, effects %d, later row %d; want 4, 1, 1", calls, made, later.n)
		}
		if rs := list(t, d); len(rs) != 0 {
			t.Errorf("rows left: %+v", rs)
		}
		want := []hookRow{
			{id, "PENDING", 0, 1, "boom 1"}, {id, "PENDING", 0, 2, "boom 2"}, {id, "PENDING", 0, 3, "boom 3"}, {id, "", -1, 4, "boom 3"},
			{id2, "", -1, 1, ""},
		}
		if diff := cmp.Diff(want, hookRows(t, d)); diff != "" {
			t.Errorf("hooks (-want +got): %s", diff)
		}
	})
}

type effects2 struct {
	mu sync.Mutex
	n  int
}

func (e *effects2) add() {
	e.mu.Lock()
	e.n++
	e.mu.Unlock()
}

// TestPermanentFailure: a Permanent error fails the row at once;
// OnFailure(final) runs in the transaction that marks it FAILED (it sees
// the FAILED status, and when it fails the status is rolled back with
// it); a FAILED row does not block the rows after it.
func TestPermanentFailure(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		hookLog(t, d)
		var ran effects
		h := func(_ context.Context, raw json.RawMessage) error {
			p := decode(t, raw)
			ran.add(fmt.Sprintf("%s:%d", p.Key, p.N))
			if p.N == 1 {
				return outbox.Permanent(errors.New("flavor is gone"))
			}
			return nil
		}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, hooks(outbox.Config{ID: "w"}), newClock(t0).Now)
		enqueue(t, d, act("test.effect", "k", 1), act("test.effect", "k", 2))
		rows := list(t, d)
		if n := runDue(t, w); n != 2 {
			t.Fatalf("RunDue = %d, want 2", n)
		}
		if diff := cmp.Diff([]string{"k:1", "k:2"}, ran.get()); diff != "" {
			t.Errorf("runs (-want +got): %s", diff)
		}
		failed := list(t, d, outbox.StatusFailed)
		if len(failed) != 1 || failed[0].Attempts != 1 || failed[0].LastError != "flavor is gone" || failed[0].NextAt != nil || failed[0].ClaimedBy != "" {
			t.Fatalf("FAILED rows: %+v", failed)
		}
		id := failed[0].ID
		want := []hookRow{{id, "FAILED", 1, 1, "flavor is gone"}, {rows[1].ID, "", -1, 1, ""}}
		if diff := cmp.Diff(want, hookRows(t, d)); diff != "" {
			t.Errorf("hooks (-want +got): %s", diff)
		}
		// FAILED rows stay: more passes leave them alone.
		if n := runDue(t, w); n != 0 || len(list(t, d, outbox.StatusFailed)) != 1 {
			t.Errorf("a FAILED row ran again or went away")
		}
		// The operator retries it (it fails again), then discards it.
		ctx := context.Background()
		if err := outbox.Retry(ctx, d, id); err != nil {
			t.Fatal(err)
		}
		if rs := list(t, d); len(rs) != 1 || rs[0].Status != outbox.StatusPending || rs[0].Attempts != 0 || rs[0].NextAt != nil {
			t.Fatalf("after Retry: %+v", rs)
		}
		if n := runDue(t, w); n != 1 || len(list(t, d, outbox.StatusFailed)) != 1 {
			t.Fatalf("the retried row ran %d times", n)
		}
		if err := outbox.Discard(ctx, d, id); err != nil {
			t.Fatal(err)
		}
		if rs := list(t, d); len(rs) != 0 {
			t.Fatalf("after Discard: %+v", rs)
		}
		for _, f := range []func(context.Context, *db.DB, int64) error{outbox.Retry, outbox.Discard} {
			if err := f(ctx, d, id); !errs.Is(err, errs.NotFound) {
				t.Errorf("on a row that is gone: %v, want NotFound", err)
			}
		}
	})
}

func TestFailureHookErrorRollsBackTheFailure(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		hookLog(t, d)
		h := func(context.Context, json.RawMessage) error { return outbox.Permanent(errors.New("no")) }
		cfg := outbox.Config{ID: "w", OnFailure: func(_ context.Context, tx *gorm.DB, r outbox.Record, final bool) error {
			if err := logHook(tx, r, 1); err != nil {
				return err
			}
			return errors.New("lease row is gone")
		}}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, cfg, newClock(t0).Now)
		enqueue(t, d, act("test.effect", "k", 1))
		runDue(t, w)
		rs := list(t, d)
		if len(rs) != 1 || rs[0].Status != outbox.StatusClaimed || rs[0].ClaimedBy != "w" {
			t.Fatalf("row after a failing hook: %+v (want still CLAIMED: the FAILED status was rolled back)", rs)
		}
		if got := hookRows(t, d); len(got) != 0 {
			t.Errorf("the failed hook's write survived: %+v", got)
		}
	})
}

func TestMaxAttempts(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		hookLog(t, d)
		h := func(context.Context, json.RawMessage) error { return errors.New("compute service unavailable") }
		cfg := hooks(outbox.Config{ID: "w", MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 }})
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, cfg, newClock(t0).Now)
		enqueue(t, d, act("test.effect", "k", 1))
		// With no backoff the row is due again at once: one pass runs it
		// until it fails for good.
		if n := runDue(t, w); n != 3 {
			t.Fatalf("RunDue = %d, want 3", n)
		}
		rs := list(t, d)
		if len(rs) != 1 || rs[0].Status != outbox.StatusFailed || rs[0].Attempts != 3 {
			t.Fatalf("rows: %+v", rs)
		}
		id := rs[0].ID
		e := "compute service unavailable"
		want := []hookRow{{id, "PENDING", 0, 1, e}, {id, "PENDING", 0, 2, e}, {id, "FAILED", 1, 3, e}}
		if diff := cmp.Diff(want, hookRows(t, d)); diff != "" {
			t.Errorf("hooks (-want +got): %s", diff)
		}
	})
}

func TestUnknownKindFails(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		hookLog(t, d)
		w := outbox.NewWorker(d, nil, hooks(outbox.Config{ID: "w"}), newClock(t0).Now)
		enqueue(t, d, outbox.Action{Kind: "nova.frobnicate", Key: "k", LeaseID: "lease-1"})
		if n := runDue(t, w); n != 1 {
			t.Fatalf("RunDue = %d", n)
		}
		rs := list(t, d, outbox.StatusFailed)
		if len(rs) != 1 || !strings.Contains(rs[0].LastError, `no handler for outbox action kind "nova.frobnicate"`) || rs[0].LeaseID != "lease-1" {
			t.Fatalf("FAILED rows: %+v", rs)
		}
		if got := hookRows(t, d); len(got) != 1 || got[0].FinalFlag != 1 {
			t.Errorf("hooks: %+v", got)
		}
	})
}

// TestLongErrorKept: a long error with multi-byte and invalid UTF-8 is
// stored (MySQL's utf8mb4 refuses invalid text), cut on a character
// boundary.
func TestLongErrorKept(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		msg := "\xff" + strings.Repeat("é", 3000)
		h := func(context.Context, json.RawMessage) error { return errors.New(msg) }
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w"}, newClock(t0).Now)
		enqueue(t, d, act("test.effect", "k", 1))
		if n := runDue(t, w); n != 1 {
			t.Fatalf("RunDue = %d", n)
		}
		rs := list(t, d)
		if len(rs) != 1 || rs[0].Attempts != 1 || rs[0].ClaimedBy != "" {
			t.Fatalf("rows: %+v", rs)
		}
		got := rs[0].LastError
		if want := "\uFFFD" + strings.Repeat("é", 1998); got != want {
			t.Errorf("last_error is %d bytes starting %.20q, want %d bytes", len(got), got, len(want))
		}
	})
}

func TestPanickingHandlerIsAFailure(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	h := func(context.Context, json.RawMessage) error { panic("nil map") }
	w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w"}, newClock(t0).Now)
	enqueue(t, d, act("test.effect", "k", 1))
	if n := runDue(t, w); n != 1 {
		t.Fatalf("RunDue = %d", n)
	}
	rs := list(t, d)
	if len(rs) != 1 || rs[0].Status != outbox.StatusPending || !strings.Contains(rs[0].LastError, "handler panicked: nil map") {
		t.Fatalf("rows: %+v", rs)
	}
}

// TestRunStopHandsBack: a handler interrupted by the worker's shutdown
// hands its row back unclaimed, the attempt not counted.
func TestRunStopHandsBack(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		started := make(chan struct{})
		h := func(ctx context.Context, _ json.RawMessage) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w", Poll: time.Hour}, newClock(t0).Now)
		enqueue(t, d, act("test.effect", "k", 1))
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { w.Run(ctx); close(stopped) }()
		wait(t, started, "the handler to start")
		if rs := list(t, d); len(rs) != 1 || rs[0].Status != outbox.StatusClaimed || rs[0].Attempts != 1 {
			t.Fatalf("running row: %+v", rs)
		}
		cancel()
		wait(t, stopped, "Run to return")
		rs := list(t, d)
		if len(rs) != 1 || rs[0].Status != outbox.StatusPending || rs[0].Attempts != 0 || rs[0].ClaimedBy != "" || rs[0].ClaimedAt != nil || rs[0].LastError != "" {
			t.Fatalf("row after shutdown: %+v", rs)
		}
	})
}

// TestNotifyWakesRun: with a poll interval of an hour, Notify is what
// makes Run look.
func TestNotifyWakesRun(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	done := make(chan struct{})
	h := func(context.Context, json.RawMessage) error { close(done); return nil }
	w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w", Poll: time.Hour}, newClock(t0).Now)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.Run(ctx); close(stopped) }()
	defer func() { cancel(); wait(t, stopped, "Run to return") }()
	enqueue(t, d, act("test.effect", "k", 1))
	w.Notify()
	wait(t, done, "the handler after Notify")
}

func TestDefaultBackoff(t *testing.T) {
	for attempt := 1; attempt <= 30; attempt++ {
		full := min(time.Second<<min(attempt-1, 16), 5*time.Minute)
		for range 20 {
			if d := outbox.DefaultBackoff(attempt); d < full/2 || d > full {
				t.Fatalf("DefaultBackoff(%d) = %s, want within [%s, %s]", attempt, d, full/2, full)
			}
		}
	}
}

// TestPropertyOrderAndAttempts: for any actions over a few keys, some in
// transactions that roll back, each failing a chosen number of times
// (or permanently), run to the end with the injected clock:
//   - actions of rolled-back transactions never run;
//   - an action runs until it succeeds, fails permanently, or has had
//     MaxAttempts runs, and then no more: exactly one success for those
//     that can succeed, FAILED (with the runs as attempts) for the rest;
//   - per key, every run of an action comes after every run of the
//     actions enqueued before it.
func TestPropertyOrderAndAttempts(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	const maxAttempts = 3
	rapid.Check(t, func(rt *rapid.T) {
		if err := d.Exec("DELETE FROM outbox").Error; err != nil {
			rt.Fatal(err)
		}
		type spec struct {
			key       string
			failures  int
			permanent bool
		}
		var (
			mu    sync.Mutex
			specs = map[int]spec{}
			calls []int // action ids in call order
		)
		h := func(_ context.Context, raw json.RawMessage) error {
			id := decode(rt, raw).N
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, id)
			s := specs[id]
			runs := 0
			for _, c := range calls {
				if c == id {
					runs++
				}
			}
			switch {
			case s.permanent:
				return outbox.Permanent(errors.New("permanent"))
			case runs <= s.failures:
				return fmt.Errorf("failure %d", runs)
			}
			return nil
		}
		clk := newClock(t0)
		conc := rapid.IntRange(1, 4).Draw(rt, "concurrency")
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{
			ID: "w", MaxAttempts: maxAttempts, Concurrency: conc,
			Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * time.Minute },
		}, clk.Now)
		committed := map[int]bool{}
		next := 0
		for range rapid.IntRange(1, 5).Draw(rt, "transactions") {
			var acts []outbox.Action
			var ids []int
			for range rapid.IntRange(1, 4).Draw(rt, "actions") {
				s := spec{
					key:       rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
					failures:  rapid.IntRange(0, maxAttempts).Draw(rt, "failures"),
					permanent: rapid.IntRange(0, 9).Draw(rt, "permanent") == 0,
				}
				mu.Lock()
				specs[next] = s
				mu.Unlock()
				acts = append(acts, outbox.Action{Kind: "test.effect", Key: s.key, Payload: payload{Key: s.key, N: next}})
				ids = append(ids, next)
				next++
			}
			rollback := rapid.IntRange(0, 4).Draw(rt, "rollback") == 0
			err := d.Write(context.Background(), func(tx *gorm.DB) error {
				if err := outbox.Enqueue(tx, acts...); err != nil {
					return err
				}
				if rollback {
					return errors.New("rollback")
				}
				return nil
			})
			if rollback != (err != nil) {
				rt.Fatalf("Write = %v (rollback %v)", err, rollback)
			}
			for _, id := range ids {
				if !rollback {
					committed[id] = true
				}
			}
		}
		// Enough passes for every action to use all its attempts, one
		// after the other, with the clock past every backoff.
		for range 3 * next * maxAttempts {
			if _, err := w.RunDue(context.Background()); err != nil {
				rt.Fatal(err)
			}
			if len(list(rt, d, outbox.StatusPending, outbox.StatusClaimed)) == 0 {
				break
			}
			clk.Set(clk.Now().Add(maxAttempts * time.Minute))
		}
		if rs := list(rt, d, outbox.StatusPending, outbox.StatusClaimed); len(rs) != 0 {
			rt.Fatalf("rows not done: %+v", rs)
		}
		failed := map[int]outbox.Record{}
		for _, r := range list(rt, d, outbox.StatusFailed) {
			failed[decode(rt, r.Payload).N] = r
		}
		runs := map[int]int{}
		lastOfKey := map[string]int{}
		for _, id := range calls {
			runs[id]++
			k := specs[id].key
			if l, ok := lastOfKey[k]; ok && l > id {
				rt.Fatalf("key %s: action %d ran after action %d (calls %v)", k, id, l, calls)
			}
			lastOfKey[k] = id
		}
		for id := range next {
			s := specs[id]
			want, wantFailed := 0, false
			switch {
			case !committed[id]:
			case s.permanent:
				want, wantFailed = 1, true
			case s.failures >= maxAttempts:
				want, wantFailed = maxAttempts, true
			default:
				want = s.failures + 1
			}
			if runs[id] != want {
				rt.Errorf("action %d %+v (committed %v): %d runs, want %d", id, s, committed[id], runs[id], want)
			}
			if r, ok := failed[id]; ok != wantFailed || ok && r.Attempts != want {
				rt.Errorf("action %d %+v: FAILED row %+v, want FAILED %v after %d runs", id, s, r, wantFailed, want)
			}
		}
	})
}

// TestEnqueueSerialisesAKeyOnMySQL: while one transaction that enqueued
// for a key is open, another enqueueing for the same key cannot go on
// (with no lock wait allowed, it fails with a lock conflict), so the
// later row cannot commit, and run, before the earlier one; a different
// key goes on and runs.
func TestEnqueueSerialisesAKeyOnMySQL(t *testing.T) {
	if dbtest.MySQLServer() == "" {
		t.Skip(dbtest.EnvMySQLDSN + " not set (SQLite runs one write transaction at a time)")
	}
	d := dbtest.OpenDialect(t, db.MySQL)
	var calls effects
	h := func(_ context.Context, raw json.RawMessage) error {
		p := decode(t, raw)
		calls.add(fmt.Sprintf("%s:%d", p.Key, p.N))
		return nil
	}
	w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "w"}, newClock(t0).Now)
	ctx := context.Background()
	enqueued, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	aDone := make(chan error, 1)
	go func() {
		aDone <- d.Write(ctx, func(tx *gorm.DB) error {
			if err := outbox.Enqueue(tx, act("test.effect", "k", 1)); err != nil {
				return err
			}
			close(enqueued)
			<-release
			return nil
		})
	}()
	wait(t, enqueued, "the first transaction to enqueue")
	noWait := func(a outbox.Action) error {
		return d.Write(ctx, func(tx *gorm.DB) error {
			// This session's lock waits end at once (the connection
			// goes back to this test's own pool only).
			if err := tx.Exec("SET SESSION innodb_lock_wait_timeout = 0").Error; err != nil {
				return err
			}
			return outbox.Enqueue(tx, a)
		})
	}
	if err := noWait(act("test.effect", "k", 2)); !db.IsLockConflict(err) {
		t.Fatalf("enqueue for k while k's first transaction is open = %v, want a lock conflict", err)
	}
	if err := noWait(act("test.effect", "other", 1)); err != nil {
		t.Fatalf("enqueue for another key: %v", err)
	}
	if n := runDue(t, w); n != 1 {
		t.Fatalf("RunDue while k's first transaction is open = %d, want 1 (the other key)", n)
	}
	unblock()
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the first transaction did not end")
	}
	if err := noWait(act("test.effect", "k", 2)); err != nil {
		t.Fatalf("enqueue for k after its first transaction: %v", err)
	}
	if n := runDue(t, w); n != 2 {
		t.Fatalf("RunDue = %d, want 2", n)
	}
	if diff := cmp.Diff([]string{"other:1", "k:1", "k:2"}, calls.get()); diff != "" {
		t.Errorf("calls (-want +got): %s", diff)
	}
}

// TestOnRunOutcomes: OnRun hears every handler run with its outcome: a
// retried failure, a success, a failure for good.
func TestOnRunOutcomes(t *testing.T) {
	d := dbtest.Open(t)
	var mu sync.Mutex
	var got []string
	names := map[outbox.RunOutcome]string{outbox.RunSucceeded: "ok", outbox.RunRetry: "retry", outbox.RunFailed: "failed"}
	fails := map[int]int{1: 1, 2: 99} // payload n → failures before success
	calls := map[int]int{}
	h := func(_ context.Context, raw json.RawMessage) error {
		p := decode(t, raw)
		calls[p.N]++
		if calls[p.N] <= fails[p.N] {
			return errors.New("not yet")
		}
		return nil
	}
	cfg := outbox.Config{ID: "w", MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 },
		OnRun: func(kind string, o outbox.RunOutcome) {
			mu.Lock()
			got = append(got, kind+" "+names[o])
			mu.Unlock()
		}}
	w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, cfg, newClock(t0).Now)
	enqueue(t, d, act("test.effect", "k", 1))
	runDue(t, w)
	enqueue(t, d, act("test.effect", "k", 2))
	runDue(t, w)
	want := []string{"test.effect retry", "test.effect ok", "test.effect retry", "test.effect failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OnRun (-want +got):\n%s", diff)
	}
}

// TestKeepRetrying: a kind KeepRetrying names is retried past
// MaxAttempts until it succeeds; other kinds still fail for good.
func TestKeepRetrying(t *testing.T) {
	forDialects(t, func(t *testing.T, d *db.DB) {
		var runs atomic.Int32
		h := func(context.Context, json.RawMessage) error {
			if runs.Add(1) <= 5 {
				return errors.New("message bus unavailable")
			}
			return nil
		}
		down := func(context.Context, json.RawMessage) error { return errors.New("compute service unavailable") }
		cfg := outbox.Config{ID: "w", MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 },
			KeepRetrying: func(kind string) bool { return kind == "test.notify" }}
		w := outbox.NewWorker(d, map[string]outbox.Handler{"test.notify": h, "test.effect": down}, cfg, newClock(t0).Now)
		enqueue(t, d, act("test.notify", "n", 1), act("test.effect", "e", 2))
		if n := runDue(t, w); n != 6+3 {
			t.Fatalf("RunDue = %d, want 6 runs of the notification and 3 of the effect", n)
		}
		rs := list(t, d)
		if len(rs) != 1 || rs[0].Kind != "test.effect" || rs[0].Status != outbox.StatusFailed || rs[0].Attempts != 3 {
			t.Fatalf("rows: %+v, want only the effect, FAILED after 3 attempts", rs)
		}
	})
}
