package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// The multi-process tests re-run this test binary as a helper process
// (TestHelperProcess) with these variables set.
const (
	envHelper   = "LEASEHOLD_OUTBOX_HELPER" // the helper's mode
	envHelperDB = "LEASEHOLD_OUTBOX_HELPER_DB"
	envHelperID = "LEASEHOLD_OUTBOX_HELPER_ID"
)

// effectsTable records each handler execution (seq is the order in
// which they committed).
const effectsTable = `CREATE TABLE outbox_effects (
 seq INTEGER NOT NULL PRIMARY KEY AUTO_INCREMENT, order_key VARCHAR(64) NOT NULL, n INT NOT NULL, phase VARCHAR(16) NOT NULL, worker VARCHAR(64) NOT NULL)`

func createEffects(t testing.TB, d *db.DB) {
	t.Helper()
	q := effectsTable
	if d.Dialect == db.SQLite {
		q = strings.Replace(q, "INTEGER NOT NULL PRIMARY KEY AUTO_INCREMENT", "INTEGER PRIMARY KEY AUTOINCREMENT", 1)
	}
	if err := d.Exec(q).Error; err != nil {
		t.Fatal(err)
	}
}

// recordEffect writes one effect row in its own transaction.
func recordEffect(ctx context.Context, d *db.DB, p payload, phase, worker string) error {
	return d.Write(ctx, func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO outbox_effects (order_key, n, phase, worker) VALUES (?, ?, ?, ?)", p.Key, p.N, phase, worker).Error
	})
}

type effectRow struct {
	Seq      int64
	OrderKey string
	N        int
	Phase    string
	Worker   string
}

func effectRows(t testing.TB, d *db.DB) []effectRow {
	t.Helper()
	var rows []effectRow
	if err := d.Raw("SELECT seq, order_key, n, phase, worker FROM outbox_effects ORDER BY seq").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

func helperRan(t testing.TB, d *db.DB) bool {
	var n int64
	if err := d.Raw("SELECT COUNT(*) FROM outbox_effects WHERE worker = 'helper'").Scan(&n).Error; err != nil {
		t.Error(err)
		return true
	}
	return n > 0
}

// TestHelperProcess is not a test: it is the second process of the
// multi-process tests, and does nothing unless envHelper is set.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper process for the multi-process tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := db.Open(ctx, os.Getenv(envHelperDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	id := os.Getenv(envHelperID)
	var (
		handlers map[string]outbox.Handler
		cfg      = outbox.Config{ID: id, Poll: 20 * time.Millisecond}
		now      func() time.Time
	)
	switch mode {
	case "effects":
		handlers = map[string]outbox.Handler{"test.effect": func(ctx context.Context, raw json.RawMessage) error {
			var p payload
			if err := json.Unmarshal(raw, &p); err != nil {
				return outbox.Permanent(err)
			}
			return recordEffect(ctx, d, p, "done", id)
		}}
	case "block":
		// Claims at t0 on a frozen clock, records that it started, then
		// hangs until the test kills it.
		now = func() time.Time { return t0 }
		cfg.ClaimTimeout = time.Hour
		handlers = map[string]outbox.Handler{"test.effect": func(ctx context.Context, raw json.RawMessage) error {
			var p payload
			if err := json.Unmarshal(raw, &p); err != nil {
				return outbox.Permanent(err)
			}
			if err := recordEffect(ctx, d, p, "started", id); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}}
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		os.Exit(2)
	}
	w := outbox.NewWorker(d, handlers, cfg, now)
	fmt.Println("ready")
	// Start on the test's "go" line; stop when it closes stdin (or at the
	// bound above).
	in := bufio.NewReader(os.Stdin)
	if line, err := in.ReadString('\n'); err != nil || line != "go\n" {
		os.Exit(0)
	}
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	w.Run(ctx)
	_ = d.Close()
	os.Exit(0)
}

// helper starts TestHelperProcess in mode on the database at url and
// waits until it is ready. Its worker starts when "go\n" is written to
// the returned stdin, and stops when that is closed.
func helper(t *testing.T, mode, url, id string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envHelperDB+"="+url, envHelperID+"="+id)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- fmt.Errorf("helper exited before it was ready: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("helper process not ready")
	}
	return cmd, stdin
}

// openShared opens a fresh migrated database the helper can open too (a
// SQLite file, or a MariaDB database), returning it and its URL.
func openShared(t *testing.T, dialect db.Dialect) (*db.DB, string) {
	t.Helper()
	url := dbtest.URLDialect(t, dialect)
	ctx := context.Background()
	d, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return d, url
}

// waitFor polls cond (the other process gives no other signal) until it
// holds, failing the test after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTwoProcesses: a helper process and this one each run a worker on
// one database over 200 actions on 20 keys, and 20 more enqueued while
// they run; every action runs exactly once and each key's actions run in
// enqueue order.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second process")
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d, url := openShared(t, dialect)
			createEffects(t, d)
			const keys, perKey = 20, 10
			for n := range perKey {
				// Two transactions per round, keys interleaved.
				for half := range 2 {
					var acts []outbox.Action
					for k := half; k < keys; k += 2 {
						acts = append(acts, act("test.effect", fmt.Sprintf("key%02d", k), n))
					}
					enqueue(t, d, acts...)
				}
			}
			cmd, stdin := helper(t, "effects", url, "helper")
			h := func(ctx context.Context, raw json.RawMessage) error {
				// Until the helper has run something, hold every row this
				// worker claims (at most Concurrency = 8 of the 20 keys):
				// the race must involve both processes, and on SQLite a
				// busy writer can starve the other process's writes (its
				// busy handler sleeps and retries) until it has done
				// everything.
				deadline := time.Now().Add(waitLimit)
				for !helperRan(t, d) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				return recordEffect(ctx, d, decode(t, raw), "done", "local")
			}
			w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, outbox.Config{ID: "local", Poll: 20 * time.Millisecond, Concurrency: 8}, nil)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			go func() { w.Run(ctx); close(stopped) }()
			// More actions while both run: Enqueue's commits race with
			// the claims.
			for k := range keys {
				enqueue(t, d, act("test.effect", fmt.Sprintf("key%02d", k), perKey))
				w.Notify()
			}
			const total = keys * (perKey + 1)
			waitFor(t, "all effects", func() bool { return len(effectRows(t, d)) >= total })
			cancel()
			wait(t, stopped, "the local worker to stop")
			_ = stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("helper: %v", err)
			}
			rows := effectRows(t, d)
			seen := map[string]int{}
			last := map[string]int{}
			byWorker := map[string]int{}
			for _, r := range rows {
				id := fmt.Sprintf("%s:%d", r.OrderKey, r.N)
				seen[id]++
				if seen[id] > 1 {
					t.Errorf("%s ran %d times", id, seen[id])
				}
				if l, ok := last[r.OrderKey]; ok && r.N != l+1 || !ok && r.N != 0 {
					t.Errorf("%s ran after %s:%d", id, r.OrderKey, l)
				}
				last[r.OrderKey] = r.N
				byWorker[r.Worker]++
			}
			if len(rows) != total || len(seen) != total {
				t.Errorf("%d effects of %d actions, want %d of %d", len(rows), len(seen), total, total)
			}
			if byWorker["local"] == 0 || byWorker["helper"] == 0 {
				t.Errorf("one worker ran everything (%v): the test did not race two processes", byWorker)
			}
			if rs := list(t, d); len(rs) != 0 {
				t.Errorf("rows left: %+v", rs)
			}
			t.Logf("executions by worker: %v", byWorker)
		})
	}
}

// TestKilledBetweenClaimAndCompletion: a helper claims a row, records
// that its handler started, and is killed (SIGKILL) in the call. The
// claim keeps the row until ClaimTimeout; then a worker here takes it
// back and runs it. The call therefore ran twice (started in the dead
// process, completed here): why handlers must be idempotent.
func TestKilledBetweenClaimAndCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second process")
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d, url := openShared(t, dialect)
			createEffects(t, d)
			enqueue(t, d, outbox.Action{Kind: "test.effect", Key: "reservation:r1", LeaseID: "lease-1", Payload: payload{Key: "r1", N: 1}})
			cmd, stdin := helper(t, "block", url, "victim")
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the helper's handler to start", func() bool { return len(effectRows(t, d)) == 1 })
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			rs := list(t, d)
			if len(rs) != 1 || rs[0].Status != outbox.StatusClaimed || rs[0].ClaimedBy != "victim" || rs[0].Attempts != 1 || !rs[0].ClaimedAt.Equal(t0) {
				t.Fatalf("row left by the killed process: %+v", rs)
			}

			const timeout = 10 * time.Minute
			clk := newClock(t0.Add(timeout - time.Second))
			var success []outbox.Record
			var failures []outbox.Record
			cfg := outbox.Config{ID: "survivor", ClaimTimeout: timeout,
				OnSuccess: func(_ context.Context, _ *gorm.DB, r outbox.Record) error { success = append(success, r); return nil },
				OnFailure: func(_ context.Context, _ *gorm.DB, r outbox.Record, final bool) error {
					failures = append(failures, r)
					return nil
				},
			}
			h := func(ctx context.Context, raw json.RawMessage) error {
				return recordEffect(ctx, d, decode(t, raw), "done", "survivor")
			}
			w := outbox.NewWorker(d, map[string]outbox.Handler{"test.effect": h}, cfg, clk.Now)
			if n := runDue(t, w); n != 0 {
				t.Fatalf("ran %d rows while the claim was fresh", n)
			}
			if rs := list(t, d); len(rs) != 1 || rs[0].ClaimedBy != "victim" {
				t.Fatalf("a fresh claim was taken back: %+v", rs)
			}
			clk.Set(t0.Add(timeout + time.Second))
			if n := runDue(t, w); n != 1 {
				t.Fatalf("RunDue after the claim timeout = %d, want 1", n)
			}
			var phases []string
			for _, r := range effectRows(t, d) {
				phases = append(phases, r.Phase+" by "+r.Worker)
			}
			if want := "started by victim,done by survivor"; strings.Join(phases, ",") != want {
				t.Errorf("effects %v, want %s", phases, want)
			}
			if len(failures) != 1 || !strings.Contains(failures[0].LastError, "claim by victim") || failures[0].Status != outbox.StatusPending || failures[0].LeaseID != "lease-1" {
				t.Errorf("OnFailure for the expired claim: %+v", failures)
			}
			if len(success) != 1 || success[0].Attempts != 2 || success[0].ClaimedBy != "survivor" {
				t.Errorf("OnSuccess: %+v", success)
			}
			if rs := list(t, d); len(rs) != 0 {
				t.Errorf("rows left: %+v", rs)
			}
		})
	}
}
