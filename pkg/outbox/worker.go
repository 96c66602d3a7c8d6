package outbox

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
)

// Config tunes a Worker. The zero value gives the defaults.
type Config struct {
	// ID names this worker in claims (default host-pid-random, at most
	// 64 bytes).
	ID string
	// Poll bounds the sleep between two looks at the table (default
	// 1s): rows enqueued by another process are seen within it.
	Poll time.Duration
	// ClaimTimeout is how old a claim must be to belong to a dead
	// process and be taken back (default 5 minutes).
	ClaimTimeout time.Duration
	// HandlerTimeout bounds each handler call (default and maximum:
	// half of ClaimTimeout), so a live worker never holds a claim long
	// enough for it to be taken back.
	HandlerTimeout time.Duration
	// MaxAttempts is how many runs a row gets; a failure of the last one
	// makes it FAILED (default 10).
	MaxAttempts int
	// KeepRetrying, when set, names the kinds whose handler failures
	// never use up MaxAttempts: such a row is retried after Backoff until
	// it succeeds or fails Permanent (a usage notification waits out a
	// message-bus outage of any length). Claims that expire still count
	// against MaxAttempts, so a row that kills its process every time
	// still ends FAILED.
	KeepRetrying func(kind string) bool
	// Backoff is the wait before run attempt+1 after run attempt (1 for
	// the first) failed (default DefaultBackoff).
	Backoff func(attempt int) time.Duration
	// Concurrency bounds the handlers running at once in this worker
	// (default 8). Rows of one key never run concurrently whatever it is.
	Concurrency int
	// ShutdownWait bounds how long Run, once its context has ended,
	// waits for running handlers to return and their rows to be
	// recorded (default 10s). A handler still running after that keeps
	// its claim until ClaimTimeout.
	ShutdownWait time.Duration
	// OnFailure runs in the transaction that records a failure
	// (final=false: the row will be retried; final=true: it is FAILED),
	// so a caller can mark a lease degraded or in error in the same
	// commit. r is the row as recorded (Status, LastError, NextAt
	// updated). An error rolls the whole record back: the row stays
	// claimed and is taken back after ClaimTimeout.
	OnFailure func(ctx context.Context, tx *gorm.DB, r Record, final bool) error
	// OnSuccess runs in the transaction that completes (deletes) a row,
	// e.g. to clear a lease's degraded flag. An error rolls the
	// completion back as for OnFailure (the action will run again).
	OnSuccess func(ctx context.Context, tx *gorm.DB, r Record) error
	// OnRun, when set, is told the outcome of every handler run (not of
	// a run handed back at shutdown), for metrics. It must not block.
	OnRun func(kind string, o RunOutcome)
}

// RunOutcome is what became of one handler run.
type RunOutcome int

// The outcomes OnRun reports.
const (
	RunSucceeded RunOutcome = iota // the action is done
	RunRetry                       // it failed and will run again
	RunFailed                      // it failed for good: the row is FAILED
)

// DefaultBackoff is exponential from 1s (doubling per attempt, capped at
// 5 minutes) with jitter: a random wait between half and all of it, so
// rows that failed together do not all come back together.
func DefaultBackoff(attempt int) time.Duration {
	d := min(time.Second<<min(max(attempt-1, 0), 16), 5*time.Minute)
	return d/2 + rand.N(d/2+1)
}

// maxChain bounds the rows one goroutine runs back to back in a pass.
const maxChain = 256

// recordTimeout bounds the transaction that records a row's outcome; it
// runs even after the worker's context has ended (a success left
// unrecorded would run again).
const recordTimeout = 30 * time.Second

// readCommitted is the isolation of the worker's writes (single-row
// conditional updates: nothing to gain from REPEATABLE READ's gap locks).
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Worker claims due outbox rows and runs their handlers.
type Worker struct {
	db       *db.DB
	handlers map[string]Handler
	cfg      Config
	now      func() time.Time

	// wake is Notify's signal; freed says a running goroutine ended
	// (a slot is free, or a key unblocked).
	wake, freed chan struct{}

	// mu guards busy, the handler slots in use.
	mu   sync.Mutex
	busy int
	// passMu keeps RunDue passes one at a time.
	passMu sync.Mutex
	// running counts the goroutines running rows (for Run's shutdown).
	running sync.WaitGroup

	// Ran counts the handler runs this worker finished (success or
	// failure); for tests and metrics.
	Ran atomic.Int64
}

// NewWorker returns a worker running handlers (by Action.Kind) on the
// rows of d; now is the clock (time.Now in production).
func NewWorker(d *db.DB, handlers map[string]Handler, cfg Config, now func() time.Time) *Worker {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = 5 * time.Minute
	}
	if cfg.HandlerTimeout <= 0 || cfg.HandlerTimeout > cfg.ClaimTimeout/2 {
		cfg.HandlerTimeout = cfg.ClaimTimeout / 2
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.ShutdownWait <= 0 {
		cfg.ShutdownWait = 10 * time.Second
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = crand.Read(b[:])
		cfg.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if len(cfg.ID) > 64 {
		cfg.ID = cfg.ID[len(cfg.ID)-64:]
	}
	if now == nil {
		now = time.Now
	}
	hs := make(map[string]Handler, len(handlers))
	for k, h := range handlers {
		hs[k] = h
	}
	return &Worker{
		db: d, handlers: hs, cfg: cfg,
		now:  func() time.Time { return now().UTC().Truncate(time.Microsecond) },
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1),
	}
}

// ID is this worker's claim name.
func (w *Worker) ID() string { return w.cfg.ID }

// Notify wakes Run at once: a commit in this process enqueued something.
func (w *Worker) Notify() { signal(w.wake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run claims and runs due rows until ctx ends, then hands back the rows
// it claimed but did not start (another process takes them at once) and
// waits, at most Config.ShutdownWait, for running handlers to return and
// their outcome to be recorded.
func (w *Worker) Run(ctx context.Context) {
	slog.InfoContext(ctx, "outbox worker started", "id", w.cfg.ID)
	for ctx.Err() == nil {
		if err := w.dispatch(ctx, nil); err != nil && ctx.Err() == nil {
			slog.ErrorContext(ctx, "outbox worker", "id", w.cfg.ID, "err", err)
		}
		wait := w.cfg.Poll
		if next, err := w.nextRetry(ctx); err != nil && ctx.Err() == nil {
			slog.ErrorContext(ctx, "outbox worker", "id", w.cfg.ID, "err", err)
		} else if next != nil {
			// A retry due before the next poll is looked at on time.
			wait = min(wait, max(next.Sub(w.now()), time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-w.wake:
		case <-w.freed:
		case <-t.C:
		}
		t.Stop()
	}
	done := make(chan struct{})
	go func() { w.running.Wait(); close(done) }()
	t := time.NewTimer(w.cfg.ShutdownWait)
	defer t.Stop()
	select {
	case <-done:
		slog.InfoContext(context.WithoutCancel(ctx), "outbox worker stopped", "id", w.cfg.ID)
	case <-t.C:
		slog.WarnContext(context.WithoutCancel(ctx), "outbox worker stopped with handlers still running; their rows run again after the claim timeout",
			"id", w.cfg.ID, "claim_timeout", w.cfg.ClaimTimeout)
	}
}

// RunDue is one pass (for tests and tools): it takes back expired
// claims, claims the due rows it has room for and runs them, each
// goroutine going on with its key's next row (or any due row) while
// there is one, and returns when they are all done, with the number of
// handler runs (successes and failures).
func (w *Worker) RunDue(ctx context.Context) (int, error) {
	w.passMu.Lock()
	defer w.passMu.Unlock()
	p := &pass{}
	err := w.dispatch(ctx, p)
	p.wg.Wait()
	return int(p.ran.Load()), err
}

// pass tracks the goroutines one RunDue started.
type pass struct {
	wg  sync.WaitGroup
	ran atomic.Int64
}

// reserve takes up to n free handler slots.
func (w *Worker) reserve(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n = min(n, w.cfg.Concurrency-w.busy)
	w.busy += n
	return n
}

// release gives back n slots; done says a running row's goroutine
// ended, which wakes Run (a slot is free, and a key may be unblocked).
func (w *Worker) release(n int, done bool) {
	w.mu.Lock()
	w.busy -= n
	w.mu.Unlock()
	if done {
		signal(w.freed)
	}
}

// dispatch takes back expired claims, then claims as many due rows as
// there are free slots and starts a goroutine for each.
func (w *Worker) dispatch(ctx context.Context, p *pass) error {
	now := w.now()
	errTake := w.takeBack(ctx, now)
	n := w.reserve(w.cfg.Concurrency)
	if n == 0 {
		return errTake
	}
	claimed, err := w.claimDue(ctx, now, "", n)
	w.release(n-len(claimed), false)
	for _, r := range claimed {
		w.running.Add(1)
		if p != nil {
			p.wg.Add(1)
		}
		go w.chain(ctx, p, r)
	}
	return errors.Join(errTake, err)
}

// chain runs r, then, while there is one and ctx lasts, the next due row
// of r's key (it was waiting for r), or else any due row: the slot stays
// busy while there is work.
func (w *Worker) chain(ctx context.Context, p *pass, r Record) {
	defer w.running.Done()
	if p != nil {
		defer p.wg.Done()
	}
	defer w.release(1, true)
	for i := 1; ; i++ {
		if ctx.Err() != nil {
			w.unclaim(ctx, r) // claimed but not started
			return
		}
		succ := w.execute(ctx, r, i < maxChain)
		w.Ran.Add(1)
		if p != nil {
			p.ran.Add(1)
		}
		if i >= maxChain || ctx.Err() != nil {
			if succ != nil {
				w.unclaim(ctx, *succ)
			}
			return
		}
		if succ != nil {
			r = *succ
			continue
		}
		now := w.now()
		next, err := w.claimDue(ctx, now, r.Key, 1)
		if err == nil && len(next) == 0 {
			next, err = w.claimDue(ctx, now, "", 1)
		}
		if err != nil {
			if ctx.Err() == nil {
				slog.ErrorContext(ctx, "outbox worker", "id", w.cfg.ID, "err", err)
			}
			return
		}
		if len(next) == 0 {
			return
		}
		r = next[0]
	}
}

// execute runs one claimed row's handler and records the outcome. After
// a success, when more is wanted, the same transaction claims the next
// due row of r's key and execute returns it.
func (w *Worker) execute(ctx context.Context, r Record, more bool) *Record {
	var err error
	if h, ok := w.handlers[r.Kind]; ok {
		hctx, hcancel := context.WithTimeout(ctx, w.cfg.HandlerTimeout)
		err = callHandler(hctx, h, r.Payload)
		hcancel()
	} else {
		err = Permanent(fmt.Errorf("no handler for outbox action kind %q (is this process older than the one that enqueued it?)", r.Kind))
	}
	// The outcome is recorded even if ctx has ended meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	switch {
	case err == nil:
		w.observe(r.Kind, RunSucceeded)
		return w.succeed(rctx, r, more && ctx.Err() == nil)
	case ctx.Err() != nil && !IsPermanent(err):
		// Stopped by our shutdown, not by the action: hand it back
		// without counting the attempt.
		w.unclaim(rctx, r)
	default:
		w.fail(rctx, r, err)
	}
	return nil
}

// observe reports a run's outcome to OnRun, if set.
func (w *Worker) observe(kind string, o RunOutcome) {
	if w.cfg.OnRun != nil {
		w.cfg.OnRun(kind, o)
	}
}

// callHandler runs h, turning a panic into an error (a broken handler
// must not take the process down).
func callHandler(ctx context.Context, h Handler, payload []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return h(ctx, payload)
}

// selectColumns lists the outbox columns in models.OutboxAction's order.
const selectColumns = "o.id, o.kind, o.order_key, o.lease_id, o.payload, o.status, o.attempts, o.last_error, o.next_at, o.claimed_by, o.claimed_at, o.created_at, o.updated_at"

// dueHeads selects PENDING rows that are due and head their key: no row
// of the same key with a lower id is PENDING or CLAIMED.
const dueHeads = "SELECT " + selectColumns + " FROM outbox o" +
	" WHERE o.status = 'PENDING' AND (o.next_at IS NULL OR o.next_at <= ?)" +
	" AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.order_key = o.order_key AND p.id < o.id AND p.status IN ('PENDING', 'CLAIMED'))"

// claimDue claims up to limit due head rows (of key, when not ""). A
// candidate is claimed only if it is still PENDING with the attempt count
// read: then nobody ran it in between. It need not be checked to still
// head its key: the rows before it were deleted or FAILED when it was
// read, and neither comes back (Enqueue's per-key lock keeps an
// uncommitted earlier row from appearing later).
func (w *Worker) claimDue(ctx context.Context, now time.Time, key string, limit int) ([]Record, error) {
	cands, err := findDue(w.db.WithContext(ctx), now, key, limit)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	// The claim is not interrupted by ctx: a claim that commits while
	// its caller thinks it failed would hold the row until ClaimTimeout.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var got []Record
	err = w.db.Write(wctx, func(tx *gorm.DB) error {
		var err error
		got, err = w.claimIn(tx, cands, now)
		return err
	}, readCommitted)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return got, nil
}

// findDue reads up to limit due head rows (of key, when not "") through
// g (the pool, or a transaction).
func findDue(g *gorm.DB, now time.Time, key string, limit int) ([]models.OutboxAction, error) {
	q, args := dueHeads, []any{now}
	if key != "" {
		q += " AND o.order_key = ?"
		args = append(args, key)
	}
	q += " ORDER BY o.id LIMIT ?"
	args = append(args, limit)
	var cands []models.OutboxAction
	if err := g.Raw(q, args...).Scan(&cands).Error; err != nil {
		return nil, fmt.Errorf("outbox: find due rows: %w", err)
	}
	return cands, nil
}

// claimIn claims cands in tx and returns those it got.
func (w *Worker) claimIn(tx *gorm.DB, cands []models.OutboxAction, now time.Time) ([]Record, error) {
	var got []Record
	for i := range cands {
		c := &cands[i]
		res := tx.Exec("UPDATE outbox SET status = 'CLAIMED', claimed_by = ?, claimed_at = ?, attempts = attempts + 1, updated_at = ?"+
			" WHERE id = ? AND status = 'PENDING' AND attempts = ?", w.cfg.ID, now, now, c.ID, c.Attempts)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 1 {
			r := recordOf(c)
			r.Status, r.ClaimedBy, r.ClaimedAt, r.UpdatedAt = StatusClaimed, w.cfg.ID, &now, &now
			r.Attempts++
			got = append(got, r)
		}
	}
	return got, nil
}

// finish runs stmt (which must name the claim in its WHERE) and, if it
// changed the row, hook, in one transaction. It reports whether the
// claim still held.
func (w *Worker) finish(ctx context.Context, stmt string, args []any, hook func(tx *gorm.DB) error) (bool, error) {
	var held bool
	err := w.db.Write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(stmt, args...)
		if res.Error != nil {
			return res.Error
		}
		held = res.RowsAffected == 1
		if !held || hook == nil {
			return nil
		}
		return hook(tx)
	}, readCommitted)
	return held, err
}

// succeed deletes a row whose handler succeeded and, when next is set,
// claims the next due row of its key in the same transaction (one commit
// per row instead of two while a key has a backlog) and returns it.
//
// Done rows are not kept: the table stays as small as the work in flight
// (the claim query scans pending rows), and the effect itself is what
// the handler made.
func (w *Worker) succeed(ctx context.Context, r Record, next bool) *Record {
	var succ []Record
	hook := func(tx *gorm.DB) error {
		succ = nil // the transaction may run more than once
		if w.cfg.OnSuccess != nil {
			if err := w.cfg.OnSuccess(ctx, tx, r); err != nil {
				return err
			}
		}
		if !next {
			return nil
		}
		now := w.now()
		cands, err := findDue(tx, now, r.Key, 1)
		if err != nil || len(cands) == 0 {
			return err
		}
		succ, err = w.claimIn(tx, cands, now)
		return err
	}
	held, err := w.finish(ctx, "DELETE FROM outbox WHERE id = ? AND status = 'CLAIMED' AND claimed_by = ? AND attempts = ?",
		[]any{r.ID, r.ClaimedBy, r.Attempts}, hook)
	switch {
	case err != nil:
		slog.ErrorContext(ctx, "outbox action succeeded but could not be recorded; it will run again after the claim timeout",
			"kind", r.Kind, "key", r.Key, "id", r.ID, "attempt", r.Attempts, "err", err)
		return nil
	case !held:
		slog.WarnContext(ctx, "outbox action succeeded after its claim was taken back; it may have run twice",
			"kind", r.Kind, "key", r.Key, "id", r.ID, "attempt", r.Attempts)
		return nil
	}
	if len(succ) == 0 {
		return nil
	}
	return &succ[0]
}

// fail records a handler failure: a retry after Backoff, or FAILED when
// err is permanent or the attempts are used up.
func (w *Worker) fail(ctx context.Context, r Record, err error) {
	final := IsPermanent(err) || (r.Attempts >= w.cfg.MaxAttempts && (w.cfg.KeepRetrying == nil || !w.cfg.KeepRetrying(r.Kind)))
	if final {
		w.observe(r.Kind, RunFailed)
	} else {
		w.observe(r.Kind, RunRetry)
	}
	now := w.now()
	var next *time.Time
	if !final {
		t := now.Add(w.cfg.Backoff(r.Attempts)).Truncate(time.Microsecond)
		next = &t
	}
	w.record(ctx, r, r.ClaimedBy, err.Error(), final, next, now)
}

// record ends claimant's claim on r with a failure: PENDING again (due at
// next, or at once when nil) or FAILED, with msg as last_error, and calls
// OnFailure in the same transaction.
func (w *Worker) record(ctx context.Context, r Record, claimant, msg string, final bool, next *time.Time, now time.Time) {
	msg = clip(msg, maxLastError)
	out := r
	out.LastError, out.NextAt, out.ClaimedBy, out.ClaimedAt, out.UpdatedAt = msg, next, "", nil, &now
	out.Status = StatusPending
	if final {
		out.Status = StatusFailed
	}
	var hook func(tx *gorm.DB) error
	if w.cfg.OnFailure != nil {
		hook = func(tx *gorm.DB) error { return w.cfg.OnFailure(ctx, tx, out, final) }
	}
	held, err := w.finish(ctx, "UPDATE outbox SET status = ?, last_error = ?, next_at = ?, claimed_by = '', claimed_at = NULL, updated_at = ?"+
		" WHERE id = ? AND status = 'CLAIMED' AND claimed_by = ? AND attempts = ?",
		[]any{out.Status, msg, next, now, r.ID, claimant, r.Attempts}, hook)
	attrs := []any{"kind", r.Kind, "key", r.Key, "id", r.ID, "attempt", r.Attempts, "error", msg, "final", final}
	if next != nil {
		attrs = append(attrs, "next_at", next.Format(time.RFC3339Nano))
	}
	switch {
	case err != nil:
		slog.ErrorContext(ctx, "outbox action failed and the failure could not be recorded; it will run again after the claim timeout",
			append(attrs, "record_error", err)...)
	case !held:
		slog.WarnContext(ctx, "outbox action failed after its claim was taken back", attrs...)
	case final:
		slog.ErrorContext(ctx, "outbox action FAILED; kept for the operator", attrs...)
	default:
		slog.WarnContext(ctx, "outbox action failed; will retry", attrs...)
	}
}

// clip makes s valid UTF-8 (MySQL's utf8mb4 columns refuse anything
// else) of at most n bytes, cutting on a character boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unclaim hands a claimed row back untouched (attempt not counted).
func (w *Worker) unclaim(ctx context.Context, r Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	now := w.now()
	if _, err := w.finish(ctx, "UPDATE outbox SET status = 'PENDING', claimed_by = '', claimed_at = NULL, attempts = attempts - 1, updated_at = ?"+
		" WHERE id = ? AND status = 'CLAIMED' AND claimed_by = ? AND attempts = ?",
		[]any{now, r.ID, r.ClaimedBy, r.Attempts}, nil); err != nil {
		slog.ErrorContext(ctx, "outbox: could not hand back a claimed row; it runs after the claim timeout",
			"kind", r.Kind, "key", r.Key, "id", r.ID, "err", err)
	}
}

// takeBack ends claims older than ClaimTimeout: their process died (a
// live one bounds its handlers well within the timeout). The dead run
// counts as a failed attempt (a row that kills its process every time
// ends FAILED), but the row is due at once: a restart is no reason to
// wait.
func (w *Worker) takeBack(ctx context.Context, now time.Time) error {
	stale := now.Add(-w.cfg.ClaimTimeout)
	var rows []models.OutboxAction
	if err := w.db.WithContext(ctx).Raw("SELECT "+selectColumns+" FROM outbox o WHERE o.status = 'CLAIMED' AND o.claimed_at < ? ORDER BY o.id LIMIT 100", stale).
		Scan(&rows).Error; err != nil {
		return fmt.Errorf("outbox: find expired claims: %w", err)
	}
	for i := range rows {
		r := recordOf(&rows[i])
		msg := fmt.Sprintf("claim by %s at %s expired after %s: the process died or hung during the call, which may or may not have taken effect",
			r.ClaimedBy, r.ClaimedAt.Format(time.RFC3339), w.cfg.ClaimTimeout)
		w.record(ctx, r, r.ClaimedBy, msg, r.Attempts >= w.cfg.MaxAttempts, nil, now)
	}
	return nil
}

// nextRetry is the earliest time a retrying row is due after now, or nil.
func (w *Worker) nextRetry(ctx context.Context) (*time.Time, error) {
	var rows []models.OutboxAction
	if err := w.db.WithContext(ctx).Raw("SELECT "+selectColumns+" FROM outbox o WHERE o.status = 'PENDING' AND o.next_at > ? ORDER BY o.next_at LIMIT 1", w.now()).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("outbox: next retry: %w", err)
	}
	if len(rows) == 0 || rows[0].NextAt == nil {
		return nil, nil
	}
	t := rows[0].NextAt.UTC()
	return &t, nil
}
