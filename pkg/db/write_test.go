package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// balances is a little ledger for the write tests: accounts whose
// balance must never go below zero.
func balances(t testing.TB, d *db.DB, accounts int) {
	t.Helper()
	if err := d.Exec("CREATE TABLE wtest_accounts (id BIGINT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	for i := range accounts {
		if err := d.Exec("INSERT INTO wtest_accounts (id, balance) VALUES (?, 0)", i).Error; err != nil {
			t.Fatal(err)
		}
	}
}

var errOverdrawn = errors.New("overdrawn")

// move adds delta to an account inside tx, then checks the balance:
// the write happens before the check, so a refusal must be undone.
func move(tx *gorm.DB, account int, delta int64) error {
	if err := tx.Exec("UPDATE wtest_accounts SET balance = balance + ? WHERE id = ?", delta, account).Error; err != nil {
		return err
	}
	var bal int64
	if err := tx.Raw("SELECT balance FROM wtest_accounts WHERE id = ?", account).Scan(&bal).Error; err != nil {
		return err
	}
	if bal < 0 {
		return errOverdrawn
	}
	return nil
}

func readBalances(t testing.TB, d *db.DB) map[int]int64 {
	t.Helper()
	rows, err := d.Raw("SELECT id, balance FROM wtest_accounts").Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var id int
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// TestWriteConcurrentFailuresIsolated sends many concurrent writes, some
// of which fail after writing: the failures leave nothing behind and the
// others are all committed.
func TestWriteConcurrentFailuresIsolated(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			balances(t, d, 4)
			const n = 200
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Every third write withdraws more than was ever
					// deposited: it must fail and leave no trace.
					delta := int64(10)
					if i%3 == 0 {
						delta = -1_000_000
					}
					errs[i] = d.Write(context.Background(), func(tx *gorm.DB) error {
						return move(tx, i%4, delta)
					})
				}()
			}
			wg.Wait()
			want := map[int]int64{}
			for i, err := range errs {
				if i%3 == 0 {
					if !errors.Is(err, errOverdrawn) {
						t.Errorf("write %d: got %v, want overdrawn", i, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
				want[i%4] += 10
			}
			if diff := cmp.Diff(want, readBalances(t, d)); diff != "" {
				t.Errorf("balances (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteBatchesSeeEarlierWrites holds the writer busy so that the next
// writes queue up and run as one batch: each sees the earlier ones, so a
// withdrawal succeeds exactly while the deposits before it cover it.
func TestWriteBatchesSeeEarlierWrites(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	balances(t, d, 1)
	release := make(chan struct{})
	started := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- d.Write(context.Background(), func(tx *gorm.DB) error {
			close(started)
			<-release
			return move(tx, 0, 5)
		})
	}()
	<-started
	// Queued behind the first write: +5 (first) then -3, -3, +10, -8, -8.
	deltas := []int64{-3, -3, 10, -8, -8}
	want := []error{nil, errOverdrawn, nil, nil, errOverdrawn}
	results := make([]chan error, len(deltas))
	for i, delta := range deltas {
		results[i] = make(chan error, 1)
		// Queue them in order: each is queued before the next starts.
		queued := db.QueuedWrites(d)
		go func() {
			results[i] <- d.Write(context.Background(), func(tx *gorm.DB) error { return move(tx, 0, delta) })
		}()
		for db.QueuedWrites(d) == queued {
			// wait until this write is in the queue
			runtime.Gosched()
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	cancelledRes := make(chan error, 1)
	go func() {
		cancelledRes <- d.Write(cancelled, func(tx *gorm.DB) error { ran = true; return nil })
	}()
	for db.QueuedWrites(d) != len(deltas)+1 {
		runtime.Gosched()
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range deltas {
		if got := <-results[i]; !errors.Is(got, want[i]) {
			t.Errorf("write %d (%+d): got %v, want %v", i, deltas[i], got, want[i])
		}
	}
	if err := <-cancelledRes; !errors.Is(err, context.Canceled) || ran {
		t.Errorf("cancelled queued write: err %v, ran %v; want context.Canceled, not run", err, ran)
	}
	if diff := cmp.Diff(map[int]int64{0: 5 - 3 + 10 - 8}, readBalances(t, d)); diff != "" {
		t.Errorf("balances (-want +got):\n%s", diff)
	}
	if b := db.WriteBatches(d); b != 2 {
		t.Errorf("%d batches, want 2 (the first write, then the queued ones together)", b)
	}
}

// TestWritePanicReachesCaller: a panicking write panics in its caller and
// its writes are undone; the writer keeps working.
func TestWritePanicReachesCaller(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			balances(t, d, 1)
			func() {
				defer func() {
					if v := recover(); v == nil {
						t.Error("no panic")
					}
				}()
				_ = d.Write(context.Background(), func(tx *gorm.DB) error {
					if err := move(tx, 0, 7); err != nil {
						return err
					}
					panic("boom")
				})
			}()
			if err := d.Write(context.Background(), func(tx *gorm.DB) error { return move(tx, 0, 1) }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[int]int64{0: 1}, readBalances(t, d)); diff != "" {
				t.Errorf("balances (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteNested refuses a Write inside a Write instead of deadlocking.
func TestWriteNested(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			balances(t, d, 1)
			var inner error
			err := d.Write(context.Background(), func(tx *gorm.DB) error {
				inner = d.Write(tx.Statement.Context, func(tx *gorm.DB) error { return nil })
				return nil
			})
			if err != nil || inner == nil {
				t.Errorf("outer %v, inner %v; want nil and an error", err, inner)
			}
		})
	}
}

// TestWriteAfterClose fails cleanly.
func TestWriteAfterClose(t *testing.T) {
	d, err := db.Open(context.Background(), "sqlite:///"+t.TempDir()+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), func(tx *gorm.DB) error { return tx.Exec("CREATE TABLE x (a INTEGER)").Error }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), func(tx *gorm.DB) error { return nil }); err == nil {
		t.Error("write after Close succeeded")
	}
}

// TestWriteBatchedEqualsSequential is the group-commit property: whatever
// way concurrent writes are batched, the database ends as if the writes
// had run one at a time in the order the writer (last) ran them, each
// write succeeding or failing exactly as it would have then.
func TestWriteBatchedEqualsSequential(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	balances(t, d, 3)
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		if err := d.Exec("UPDATE wtest_accounts SET balance = 0").Error; err != nil {
			rt.Fatal(err)
		}
		type op struct {
			account int
			delta   int64
			bad     bool // fails after writing, whatever the balance
		}
		ops := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) op {
			return op{
				account: rapid.IntRange(0, 2).Draw(rt, "account"),
				delta:   rapid.Int64Range(-20, 20).Draw(rt, "delta"),
				bad:     rapid.IntRange(0, 9).Draw(rt, "bad") == 0,
			}
		}), 1, 40).Draw(rt, "ops")
		var mu sync.Mutex
		var order []int // op indexes in the order the writer ran them
		errs := make([]error, len(ops))
		var wg sync.WaitGroup
		for i, o := range ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = d.Write(context.Background(), func(tx *gorm.DB) error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					if err := move(tx, o.account, o.delta); err != nil {
						return err
					}
					if o.bad {
						return fmt.Errorf("op %d refused", i)
					}
					return nil
				})
			}()
		}
		wg.Wait()
		// A write may run twice (its batch is run again with savepoints
		// after a failure behind it); its last run is the one that
		// counts, and the last runs, in order, are the sequential history.
		runs := make([]int, len(ops))
		last := make([]int, len(ops))
		for pos, i := range order {
			runs[i]++
			last[i] = pos
		}
		var seq []int
		for i, n := range runs {
			if n < 1 || n > 2 {
				rt.Fatalf("write %d ran %d times (runs %v)", i, n, order)
			}
			seq = append(seq, i)
		}
		sort.Slice(seq, func(a, b int) bool { return last[seq[a]] < last[seq[b]] })
		model := map[int]int64{0: 0, 1: 0, 2: 0}
		for _, i := range seq {
			o := ops[i]
			wantOK := !o.bad && model[o.account]+o.delta >= 0
			if wantOK {
				model[o.account] += o.delta
			}
			if gotOK := errs[i] == nil; gotOK != wantOK {
				rt.Fatalf("op %d %+v: error %v, sequential run says ok=%v", i, o, errs[i], wantOK)
			}
		}
		if diff := cmp.Diff(model, readBalances(t, d)); diff != "" {
			rt.Fatalf("balances differ from the sequential run (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkWriteParallel measures durable writes from concurrent callers
// (one small UPDATE each): on SQLite they share commits through the group
// writer; compare -cpu 1 (little to group) with more.
func BenchmarkWriteParallel(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			balances(b, d, 64)
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					account := int(next.Add(1) % 64)
					if err := d.Write(context.Background(), func(tx *gorm.DB) error { return move(tx, account, 1) }); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestWriteIsolationMySQL: a write asking for READ COMMITTED runs on the
// pool whose sessions default to it (the session variable shows it; a
// level set for one transaction does not), and one asking for nothing
// keeps the server's default.
func TestWriteIsolationMySQL(t *testing.T) {
	if dbtest.MySQLServer() == "" {
		t.Skip("needs " + dbtest.EnvMySQLDSN)
	}
	d := dbtest.OpenDialect(t, db.MySQL)
	level := func(tx *gorm.DB) string {
		var s string
		if err := tx.Raw("SELECT @@tx_isolation").Scan(&s).Error; err != nil {
			if err := tx.Raw("SELECT @@transaction_isolation").Scan(&s).Error; err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	for _, tc := range []struct {
		opts []*sql.TxOptions
		want string
	}{
		{[]*sql.TxOptions{{Isolation: sql.LevelReadCommitted}}, "READ-COMMITTED"},
		{nil, "REPEATABLE-READ"},
	} {
		var got string
		if err := d.Write(context.Background(), func(tx *gorm.DB) error { got = level(tx); return nil }, tc.opts...); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("options %+v: isolation %s, want %s", tc.opts, got, tc.want)
		}
	}
}
