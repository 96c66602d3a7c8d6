package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// Write runs fn as one durable write transaction and returns once its
// outcome is known: nil only after the commit that holds fn's writes has
// returned (with SQLite's synchronous=FULL and InnoDB's flush at commit,
// after the fsync). An error from fn undoes exactly fn's writes and is
// returned as is.
//
// On SQLite the write goes through the database's group-commit writer:
// one goroutine owns a write connection and runs the writes that arrive
// while it is busy back to back in one transaction, then commits them
// with one COMMIT (one fsync) and answers them all. A write that fails
// is undone alone: the batch is run again with a SAVEPOINT per write
// (see attempt). Every fn sees the effects of the writes before it in the
// batch, exactly as if they had committed one by one, so generation and
// capacity checks stay exact. A crash before the COMMIT returns loses
// only writes nobody has been told about.
//
// On MySQL fn runs in its own transaction (opts, e.g. READ COMMITTED, are
// honoured; SQLite ignores them: its transactions are serializable);
// InnoDB already group-commits concurrent transactions. Either way a write
// that loses a lock conflict, or whose fn asks for it with ErrRetry, runs
// again (WriteRetry).
//
// fn may be run more than once (a retry after a lock conflict, or alone
// again after a batch it shared failed as a whole), so it must not have
// effects outside tx that a second run would repeat. It must do all its
// reads through tx (a read on another connection does not see the
// uncommitted batch) and must not call Write itself (that is an error:
// the writer would wait for itself). The context of fn's tx keeps ctx's
// values but not its cancellation: once fn has started, it runs to its
// end, because interrupting a SQLite statement would roll back the whole
// batch. A write whose ctx ends while it is still queued is not run and
// returns ctx.Err(). A panic in fn is re-raised in the caller's goroutine.
func (d *DB) Write(ctx context.Context, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	return d.WriteRetry(ctx, nil, fn, opts...)
}

// ErrRetry, wrapped in the error a write function returns, asks WriteRetry
// to run the write again: it lost a race with a concurrent writer (a
// booking seen only inside the transaction) and nothing of it is kept.
var ErrRetry = errors.New("db: write lost to a concurrent writer, run it again")

// Attempt describes the attempt a WriteRetry's before hook prepares.
type Attempt struct {
	// N counts from 1.
	N int
	// Prev is the retryable error that ended the previous attempt (nil on
	// the first).
	Prev error
}

// MaxWriteAttempts bounds the runs of one write that keeps losing lock
// conflicts (MySQL deadlock or lock wait timeout, SQLite still busy) or
// asking for a retry (ErrRetry); the last error is returned.
const MaxWriteAttempts = 32

// WriteRetry is the one retry layer of every write, at the transaction
// boundary: it runs before (if not nil; outside any transaction, in the
// caller's goroutine) and then fn as one write transaction (see Write),
// and does both again, after a short jittered pause, while the attempt
// ends in a lock conflict or in an error wrapping ErrRetry, up to
// MaxWriteAttempts runs (a write still losing lock conflicts after them
// is an errs.Conflict around the last one). before is where a caller
// re-reads what a lost race made stale (its cached view) and plans
// again; its own errors end the write. A write whose ctx ends is not run
// again.
func (d *DB) WriteRetry(ctx context.Context, before func(ctx context.Context, a Attempt) error, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	if ctx.Value(inWriteKey{}) != nil {
		return errNestedWrite
	}
	var prev error
	for n := 1; ; n++ {
		if before != nil {
			if err := before(ctx, Attempt{N: n, Prev: prev}); err != nil {
				return err
			}
		}
		err := d.writeOnce(ctx, fn, opts...)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if n >= MaxWriteAttempts {
			if IsLockConflict(err) {
				return tooManyConflicts(err)
			}
			return err
		}
		prev = err
		retryPause(ctx, n)
	}
}

func retryable(err error) bool { return errors.Is(err, ErrRetry) || IsLockConflict(err) }

// retryPause spreads the retries of writers that clashed, growing with
// the attempt up to about 10 ms, so the same two do not collide again.
func retryPause(ctx context.Context, attempt int) {
	d := time.Duration(rand.Int64N(int64(min(attempt, 10))*int64(time.Millisecond) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// writeOnce runs fn once: in the SQLite group-commit writer, or in a
// transaction of its own.
func (d *DB) writeOnce(ctx context.Context, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	if d.Dialect != SQLite || d.memory {
		return d.writeTx(ctx, fn, opts...)
	}
	w := d.writer()
	if w == nil {
		return errClosed
	}
	return w.submit(ctx, fn)
}

// maxBatch bounds the writes that share one SQLite commit.
const maxBatch = 128

var (
	errNestedWrite = errors.New("db: Write called inside a Write (the writer would wait for itself)")
	errClosed      = errors.New("db: database is closed")
)

// inWriteKey marks the context of a running write.
type inWriteKey struct{}

// IsLockConflict reports a MySQL deadlock (1213) or lock wait timeout
// (1205), or SQLITE_BUSY/SQLITE_LOCKED left after the busy timeout: the
// transaction did not happen and may be run again. On MariaDB Galera a
// certification failure (a write set that conflicts with one committed
// through another node first, or a local transaction aborted by a
// replicated one) is reported as 1213 too ("WSREP detected
// deadlock/conflict and aborted the transaction"), at any statement or at
// COMMIT, so it is retried the same way.
func IsLockConflict(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}

// writeTx runs fn in a transaction of its own.
func (d *DB) writeTx(ctx context.Context, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	wctx := context.WithValue(ctx, inWriteKey{}, true)
	g := d.DB
	if d.rc != nil && len(opts) == 1 && opts[0] != nil && opts[0].Isolation == sql.LevelReadCommitted && !opts[0].ReadOnly {
		g, opts = d.rc, nil // its sessions are READ COMMITTED already
	}
	return g.WithContext(wctx).Transaction(fn, opts...)
}

// PanicError carries a panic raised by a write function on the writer
// goroutine back to the caller, which re-panics with it.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string { return fmt.Sprintf("write panicked: %v\n%s", p.Value, p.Stack) }

// groupWriter is the SQLite group-commit writer of one DB.
type groupWriter struct {
	d    *DB
	mu   sync.Mutex
	q    []*writeReq
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// conn is the write connection, used by loop only.
	conn *sql.Conn
	// batches counts the batches run (for tests and metrics).
	batches atomic.Int64
	// stmts are the writer's prepared statements, used by loop only.
	stmts stmtCache
}

type writeReq struct {
	ctx context.Context
	fn  func(tx *gorm.DB) error
	res chan error
}

// writer starts the group writer on first use; nil once closed.
func (d *DB) writer() *groupWriter {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.closed {
		return nil
	}
	if d.w == nil {
		d.w = &groupWriter{d: d, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		go d.w.loop()
	}
	return d.w
}

// stopWriter stops the group writer (after the writes already queued)
// and keeps new ones out.
func (d *DB) stopWriter() {
	d.wmu.Lock()
	w := d.w
	d.closed = true
	d.wmu.Unlock()
	if w != nil {
		close(w.stop)
		<-w.done
	}
}

func (w *groupWriter) submit(ctx context.Context, fn func(tx *gorm.DB) error) error {
	r := &writeReq{ctx: ctx, fn: fn, res: make(chan error, 1)}
	w.mu.Lock()
	w.q = append(w.q, r)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	err := <-r.res
	var pe *PanicError
	if errors.As(err, &pe) {
		panic(pe)
	}
	return err
}

// take removes up to maxBatch queued writes.
func (w *groupWriter) take() []*writeReq {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.q), maxBatch)
	if n == 0 {
		return nil
	}
	batch := make([]*writeReq, n)
	copy(batch, w.q)
	rest := copy(w.q, w.q[n:])
	clear(w.q[rest:])
	w.q = w.q[:rest]
	return batch
}

// loop owns the write connection: SQLite's page cache belongs to a
// connection and survives between transactions only while no other
// connection writes, so one long-lived writer keeps it warm.
func (w *groupWriter) loop() {
	defer close(w.done)
	defer w.dropConn()
	for {
		batch := w.take()
		if batch == nil {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				// Answer what raced with the stop.
				for b := w.take(); b != nil; b = w.take() {
					for _, r := range b {
						r.res <- errClosed
					}
				}
				return
			}
		}
		w.runBatch(batch)
	}
}

// getConn returns the writer's connection, taking one from the pool if
// it has none.
func (w *groupWriter) getConn() (*sql.Conn, error) {
	if w.conn != nil {
		return w.conn, nil
	}
	sqlDB, err := w.d.DB.DB()
	if err != nil {
		return nil, err
	}
	c, err := sqlDB.Conn(context.Background())
	if err != nil {
		return nil, fmt.Errorf("db: write connection: %w", err)
	}
	w.conn = c
	return c, nil
}

// dropConn gives the connection back after a failure (a fresh one is
// taken for the next transaction).
func (w *groupWriter) dropConn() {
	w.stmts.reset()
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// runBatch runs batch in one transaction and answers every write.
func (w *groupWriter) runBatch(batch []*writeReq) {
	// Writes whose caller has gone while they were queued are not run.
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.res <- err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	conn, err := w.getConn()
	if err != nil {
		for _, r := range live {
			r.res <- err
		}
		return
	}
	results, err := w.attempt(conn, live)
	if err == nil {
		for i, r := range live {
			r.res <- results[i]
		}
		return
	}
	w.dropConn()
	if len(live) == 1 {
		// Alone, the write's own error says more than what it left behind
		// (SQLite may have rolled the transaction back under it).
		if results != nil && results[0] != nil {
			err = results[0]
		}
		live[0].res <- err
		return
	}
	// The batch failed as a whole (nothing of it is committed): run each
	// write alone so that one cannot fail the others.
	for _, r := range live {
		w.runBatch([]*writeReq{r})
	}
}

// attempt runs writes in one transaction on conn and commits it.
// results[i] is write i's own outcome; err, when not nil, failed the
// whole transaction (rolled back, nothing committed).
//
// A write that fails must leave nothing behind, while the others stay.
// Savepoints do that, but while one is open SQLite copies every page it
// changes into a sub-journal, so writes run without them first. When a
// write fails at the head of what is left of the batch, the transaction
// (holding nothing yet) is rolled back and the rest goes on in a new one;
// when it fails behind writes that succeeded, the transaction is rolled
// back and the batch from there run again with a savepoint per write
// (each write then runs at most twice, and the earlier ones see and
// leave the same state as before: nothing else can write in between).
func (w *groupWriter) attempt(conn *sql.Conn, writes []*writeReq) (results []error, err error) {
	w.batches.Add(1)
	sqlDB, err := w.d.DB.DB()
	if err != nil {
		return nil, err
	}
	results = make([]error, len(writes))
	head := 0           // writes[:head] are answered: each failed alone
	savepoints := false // a savepoint per write
	for head < len(writes) {
		failedAt, err := w.run(conn, sqlDB, writes, results, head, savepoints)
		if err != nil {
			return results, err
		}
		if failedAt < 0 {
			return results, nil
		}
		if failedAt == head {
			head++
		} else {
			savepoints = true
		}
	}
	return results, nil
}

// run runs writes[from:] in one transaction, with a savepoint per write
// or none. Without savepoints it stops at the first write that fails,
// rolls back and returns its index; otherwise it commits and returns -1.
func (w *groupWriter) run(conn *sql.Conn, sqlDB *sql.DB, writes []*writeReq, results []error, from int, savepoints bool) (failedAt int, err error) {
	bg := context.Background()
	tx, err := conn.BeginTx(bg, nil)
	if err != nil {
		return -1, fmt.Errorf("db: begin write batch: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
			// A failed COMMIT can leave SQLite's transaction open.
			_, _ = conn.ExecContext(bg, "ROLLBACK")
		}
	}()
	g := w.d.DB.Session(&gorm.Session{NewDB: true, Context: bg})
	pool := &writeTx{tx: tx, pool: sqlDB, stmts: &w.stmts}
	g.Statement.ConnPool = pool
	for i := from; i < len(writes); i++ {
		r := writes[i]
		if savepoints {
			if _, err := pool.ExecContext(bg, "SAVEPOINT lh_write"); err != nil {
				return -1, fmt.Errorf("db: savepoint: %w", err)
			}
		}
		ctx := context.WithValue(context.WithoutCancel(r.ctx), inWriteKey{}, true)
		results[i] = call(g.Session(&gorm.Session{NewDB: true, Context: ctx}), r.fn)
		if !savepoints {
			if results[i] != nil {
				return i, nil // rolled back by the deferred function
			}
			continue
		}
		if results[i] != nil {
			if _, err := pool.ExecContext(bg, "ROLLBACK TO lh_write"); err != nil {
				return -1, fmt.Errorf("db: rollback to savepoint: %w", err)
			}
		}
		// RELEASE fails if SQLite ended the transaction under the write
		// (an I/O error, a full disk): then the batch fails as a whole.
		if _, err := pool.ExecContext(bg, "RELEASE lh_write"); err != nil {
			return -1, fmt.Errorf("db: release savepoint: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return -1, fmt.Errorf("db: commit write batch: %w", err)
	}
	committed = true
	return -1, nil
}

// call runs fn, turning a panic into a *PanicError.
func call(tx *gorm.DB, fn func(tx *gorm.DB) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(tx)
}

// stmtCache holds the writer's prepared statements by SQL text. They are
// prepared on the pool, not in a transaction (a statement prepared in a
// transaction dies with it), and each batch's transaction runs them with
// Tx.StmtContext, which reuses their handle on the writer's connection:
// SQLite parses and plans each distinct statement once instead of on
// every run.
type stmtCache struct {
	m map[string]*sql.Stmt
}

// maxCachedStmts bounds the cache: IN lists and multi-row INSERTs make
// new SQL texts; past the bound the cache starts over.
const maxCachedStmts = 256

func (c *stmtCache) get(ctx context.Context, pool *sql.DB, q string) (*sql.Stmt, error) {
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if c.m == nil || len(c.m) >= maxCachedStmts {
		c.reset()
		c.m = make(map[string]*sql.Stmt)
	}
	st, err := pool.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) reset() {
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m = nil
}

// writeTx is the gorm.ConnPool of a write batch: the batch's transaction
// running cached prepared statements.
type writeTx struct {
	tx    *sql.Tx
	pool  *sql.DB
	stmts *stmtCache
}

func (p *writeTx) stmt(ctx context.Context, q string) *sql.Stmt {
	st, err := p.stmts.get(ctx, p.pool, q)
	if err != nil {
		return nil
	}
	return p.tx.StmtContext(ctx, st)
}

// PrepareContext prepares q in the transaction.
func (p *writeTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return p.tx.PrepareContext(ctx, q)
}

// ExecContext runs q with the cached statement for it.
func (p *writeTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q with the cached statement for it.
func (p *writeTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q with the cached statement for it.
func (p *writeTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, q, args...)
}

// Commit and Rollback belong to the writer; a write function that calls
// them (through GORM) gets an error. Having them tells GORM that this is
// a transaction, so a nested tx.Transaction becomes a savepoint.
func (p *writeTx) Commit() error   { return errWriterOwnsTx }
func (p *writeTx) Rollback() error { return errWriterOwnsTx }

var errWriterOwnsTx = errors.New("db: a write function cannot end the write batch's transaction")
