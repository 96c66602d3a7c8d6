package nova_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// reservedOnce waits until host is in aggregate res and nowhere else,
// res exists once with the lease's owner, and checks that nothing was
// applied twice.
func reservedOnce(t *testing.T, n *novatest.Nova, admin, res, host, project string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	aggs, err := n.WaitAggregate(ctx, admin, timeout, func(as []novatest.Aggregate) bool {
		return slices.Equal(membership(as, host), []string{res})
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := countNamed(aggs, res); c != 1 {
		t.Errorf("%d aggregates named %s, want 1", c, res)
	}
	if c := countNamed(aggs, "freepool"); c != 1 {
		t.Errorf("%d freepools, want 1", c)
	}
	agg, _, _ := n.AggregateNamed(ctx, admin, res)
	if agg.Metadata["blazar:owner"] != project || len(agg.Hosts) != 1 {
		t.Errorf("reservation aggregate %+v, want %s owned by %s", agg, host, project)
	}
}

// releasedOnce waits until host is back in the freepool only and no
// aggregate is named res.
func releasedOnce(t *testing.T, n *novatest.Nova, admin, res, host string, timeout time.Duration) {
	t.Helper()
	if _, err := n.WaitAggregate(context.Background(), admin, timeout, func(as []novatest.Aggregate) bool {
		return countNamed(as, res) == 0 && slices.Equal(membership(as, host), []string{"freepool"})
	}); err != nil {
		t.Fatal(err)
	}
}

// outboxRows lists the outbox of the database at url.
func outboxRows(t *testing.T, url string) []outbox.Record {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rows, err := outbox.List(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// waitDone waits (bounded) until rows lists no outbox row: every
// compute action decided so far is done.
func waitDone(t *testing.T, rows func() []outbox.Record) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := rows()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox rows still there after 60s: %+v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNovaFrozenDuringStart: with Nova not answering, a lease starting
// now is accepted and shows degraded while its compute actions fail
// (each row keeps its last error); once Nova answers again the start is
// applied, exactly once, and the lease is clear; its deletion gives the
// host back.
func TestNovaFrozenDuringStart(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	lh := e.StartLeasehold(t, "")
	tok := e.Tokens(t)
	id := registerHost(t, lh.URL, tok.Admin, "compute2")
	listRows := func() []outbox.Record {
		rows, err := outbox.List(context.Background(), lh.S.DB())
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	t.Cleanup(func() {
		call(t, lh.URL, "DELETE", "/os-hosts/"+id, tok.Admin, nil, nil)
		waitDone(t, listRows) // out of the freepool before the next test
	})
	waitDone(t, listRows)
	releasedOnce(t, n, tok.Admin, "-", "compute2", 30*time.Second)

	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Resume() })
	lease := createHostLease(t, lh.URL, tok.Demo, "nova-frozen", "2030-01-01 00:00")
	res := lease.Reservations[0].ID
	waitLease(t, lh.URL, tok.Demo, lease.ID, 60*time.Second, "active and degraded", func(l Lease) bool {
		return l.Status == "ACTIVE" && l.Degraded
	})
	rows, err := outbox.List(context.Background(), lh.S.DB())
	if err != nil {
		t.Fatal(err)
	}
	failing := 0
	for _, r := range rows {
		if r.LastError != "" {
			failing++
			if !strings.Contains(r.LastError, "Nova") && !strings.Contains(r.LastError, "deadline") {
				t.Errorf("outbox row %s: last error %q does not say what failed", r.Kind, r.LastError)
			}
		}
	}
	if failing == 0 {
		t.Errorf("no outbox row records a failure while Nova is frozen: %+v", rows)
	}

	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	reservedOnce(t, n, tok.Admin, res, "compute2", lease.ProjectID, 90*time.Second)
	waitLease(t, lh.URL, tok.Demo, lease.ID, 60*time.Second, "active and clear", func(l Lease) bool {
		return l.Status == "ACTIVE" && !l.Degraded
	})
	mustCall(t, lh.URL, "DELETE", "/leases/"+lease.ID, tok.Demo, http.StatusNoContent, nil, nil)
	releasedOnce(t, n, tok.Admin, res, "compute2", 60*time.Second)
}

// process is a `leasehold serve` child.
type process struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+) serves="blazar`)

// startProcess runs the built binary on config file conf and waits
// (bounded) until it listens.
func startProcess(t *testing.T, conf string) *process {
	t.Helper()
	cmd := exec.Command(leaseholdBinary(t), "serve", "--config", conf, "--log-format", "text")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEHOLD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		close(addr)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("leasehold log (pid %d):\n%s", cmd.Process.Pid, p.Log())
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("leasehold exited before listening:\n%s", p.Log())
		}
		p.url = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("leasehold did not listen within 60s:\n%s", p.Log())
	}
	return p
}

func (p *process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill ends the process with SIGKILL: no shutdown, no cleanup.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("leasehold still running 10s after SIGKILL")
	}
}

// stop ends the process with SIGTERM (SIGKILL after 15s).
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// TestKilledBetweenCommitAndNovaCall: Leasehold (the built binary) is
// killed with SIGKILL after a lease's start committed, while the Nova
// calls it decided hang on a frozen Nova; a new process on the same
// database takes the dead one's claims back, Nova thaws (and may now
// also carry out what the dead process had sent), and the start is
// applied exactly once: one aggregate, the host in it once and nowhere
// else, an empty outbox.
func TestKilledBetweenCommitAndNovaCall(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	tok := e.Tokens(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "leasehold.conf")
	if err := os.WriteFile(conf, []byte(e.leaseholdConf(dir, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := "sqlite:///" + filepath.Join(dir, "lh.db")

	a := startProcess(t, conf)
	id := registerHost(t, a.url, tok.Admin, "compute2")
	waitDone(t, func() []outbox.Record { return outboxRows(t, dbURL) })
	releasedOnce(t, n, tok.Admin, "-", "compute2", 30*time.Second)

	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Resume() })
	lease := createHostLease(t, a.url, tok.Demo, "nova-killed", "2030-01-01 00:00")
	res := lease.Reservations[0].ID
	waitLease(t, a.url, tok.Demo, lease.ID, 30*time.Second, "active", func(l Lease) bool { return l.Status == "ACTIVE" })
	// The start is committed; its Nova calls are claimed and hang.
	claimed := func() bool {
		for _, r := range outboxRows(t, dbURL) {
			if r.Kind == "compute.reserve_host" && r.Status == outbox.StatusClaimed {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !claimed() {
		if time.Now().After(deadline) {
			t.Fatalf("the reserve action was never claimed: %+v\n%s", outboxRows(t, dbURL), a.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.kill(t)

	b := startProcess(t, conf)
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	reservedOnce(t, n, tok.Admin, res, "compute2", lease.ProjectID, 120*time.Second)
	waitLease(t, b.url, tok.Demo, lease.ID, 60*time.Second, "active and clear", func(l Lease) bool {
		return l.Status == "ACTIVE" && !l.Degraded
	})
	if rows := outboxRows(t, dbURL); len(rows) != 0 {
		t.Errorf("outbox rows left: %+v", rows)
	}
	if !strings.Contains(b.Log(), "expired after") {
		t.Errorf("the new process never took the dead one's claim back:\n%s", b.Log())
	}
	mustCall(t, b.url, "DELETE", "/leases/"+lease.ID, tok.Demo, http.StatusNoContent, nil, nil)
	releasedOnce(t, n, tok.Admin, res, "compute2", 60*time.Second)
	mustCall(t, b.url, "DELETE", "/os-hosts/"+id, tok.Admin, http.StatusNoContent, nil, nil)
	waitDone(t, func() []outbox.Record { return outboxRows(t, dbURL) })
}
