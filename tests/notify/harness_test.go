// Package notify_test checks Leasehold's usage notifications end to end:
// Leasehold servers publish to a real RabbitMQ (Debian's rabbitmq-server,
// started once for the package on loopback with its own node name, ports,
// data and log directories, stopped in TestMain) and oslo.messaging's own
// notification listener (Debian's python3-oslo.messaging, run by
// testdata/listener.py) reads them. Without those packages the tests skip
// with a loud message, unless LEASEHOLD_REQUIRE_RABBITMQ=1 (CI), which
// makes that a failure.
package notify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// EnvRequireRabbitMQ makes a missing RabbitMQ or oslo.messaging a test
// failure.
const EnvRequireRabbitMQ = "LEASEHOLD_REQUIRE_RABBITMQ"

const (
	rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	python       = "/usr/bin/python3"
	epmd         = "/usr/bin/epmd"
)

// Rabbit is a RabbitMQ node of this test binary.
type Rabbit struct {
	Dir                      string
	Port, DistPort, EpmdPort int
	Node                     string
	mu                       sync.Mutex
	cmd                      *exec.Cmd
	exited                   chan struct{}
}

// URL is the node's transport URL (the broker's guest account, which
// RabbitMQ admits on loopback only).
func (r *Rabbit) URL() string { return fmt.Sprintf("rabbit://guest:guest@127.0.0.1:%d/", r.Port) }

var (
	rabbitOnce sync.Once
	rabbit     *Rabbit
	rabbitSkip string
	rabbitErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if rabbit != nil {
		if err := rabbit.Cleanup(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// RequireRabbit returns the package's RabbitMQ node, starting it on first
// use; it skips the test loudly (or fails it under
// LEASEHOLD_REQUIRE_RABBITMQ=1) when RabbitMQ or oslo.messaging is
// missing.
func RequireRabbit(t testing.TB) *Rabbit {
	t.Helper()
	rabbitOnce.Do(startRabbit)
	if rabbitSkip != "" {
		if os.Getenv(EnvRequireRabbitMQ) == "1" {
			t.Fatalf("%s (%s=1: the notification tests must run)", rabbitSkip, EnvRequireRabbitMQ)
		}
		t.Skip("SKIPPED LOUDLY: " + rabbitSkip)
	}
	if rabbitErr != nil {
		t.Fatalf("starting RabbitMQ: %v", rabbitErr)
	}
	return rabbit
}

func startRabbit() {
	switch {
	case !fileExists(rabbitServer):
		rabbitSkip = "rabbitmq-server is not installed (apt-get install rabbitmq-server; scripts/deps.sh does it): the notification tests against a real RabbitMQ do not run"
	case exec.Command(python, "-c", "import oslo_messaging").Run() != nil:
		rabbitSkip = "python3-oslo.messaging is not installed (scripts/deps.sh installs it): the notification tests do not run"
	}
	if rabbitSkip != "" {
		fmt.Fprintf(os.Stderr, "\n%s\n### %s\n%s\n\n", strings.Repeat("#", 80), rabbitSkip, strings.Repeat("#", 80))
		return
	}
	dir, err := os.MkdirTemp("", "leasehold-rabbit-")
	if err != nil {
		rabbitErr = err
		return
	}
	ports, err := freePorts(3)
	if err != nil {
		rabbitErr = err
		_ = os.RemoveAll(dir)
		return
	}
	rabbit = &Rabbit{Dir: dir, Port: ports[0], DistPort: ports[1], EpmdPort: ports[2],
		Node: fmt.Sprintf("leasehold-notify-%d@localhost", os.Getpid())}
	// No plugins: nothing listens beyond AMQP and distribution.
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o600); err != nil {
		rabbitErr = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rabbitErr = rabbit.Start(ctx)
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// env is the node's environment: every path and port its own, nothing
// under /etc or /var read or written.
func (r *Rabbit) env() []string {
	d := r.Dir
	return append(os.Environ(),
		"HOME="+d, // the Erlang cookie
		"RABBITMQ_NODENAME="+r.Node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(r.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.DistPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT="+strconv.Itoa(r.EpmdPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(d, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(d, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(d, "enabled_plugins"),
		"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(d, "plugins-expand"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(d, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(d, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(d, "rabbitmq-env.conf"),
		"RABBITMQ_PID_FILE="+filepath.Join(d, "rabbitmq.pid"),
	)
}

// Start starts the node and waits (bounded by ctx) until it accepts an
// AMQP connection.
func (r *Rabbit) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return errors.New("rabbit: already running")
	}
	out, err := os.OpenFile(filepath.Join(r.Dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(rabbitServer)
	cmd.Dir = r.Dir
	cmd.Env = r.env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	for {
		c, err := amqp.DialConfig(fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.Port), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			r.cmd = nil
			return fmt.Errorf("rabbitmq-server exited during start-up; its output:\n%s", r.tail())
		case <-ctx.Done():
			return fmt.Errorf("rabbitmq-server not accepting connections on %d: %w (last: %v); its output:\n%s", r.Port, ctx.Err(), err, r.tail())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (r *Rabbit) tail() string {
	b, _ := os.ReadFile(filepath.Join(r.Dir, "server.out"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// LogTail is the end (at most n bytes) of the node's own log files, for
// a failing test's output.
func (r *Rabbit) LogTail(n int) string {
	files, _ := filepath.Glob(filepath.Join(r.Dir, "log", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(f), tailOf(string(data), n))
	}
	return b.String()
}

// Stop stops the node: SIGTERM to its process group, SIGKILL after 60 s.
func (r *Rabbit) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return nil
	}
	pgid := r.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("rabbitmq-server (pgid %d) did not exit", pgid)
		}
	}
	r.cmd = nil
	return nil
}

// Cleanup stops the node and the epmd it started on its own port, and
// removes its directory.
func (r *Rabbit) Cleanup() error {
	err := r.Stop()
	if fileExists(epmd) {
		// epmd daemonises; it is ours (own port) and is told to exit.
		kill := exec.Command(epmd, "-port", strconv.Itoa(r.EpmdPort), "-kill")
		kill.Env = r.env()
		_ = kill.Run()
	}
	return errors.Join(err, os.RemoveAll(r.Dir))
}

// Listener is a running testdata/listener.py: oslo.messaging's
// notification listener printing what it is handed.
type Listener struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	got   []Notification
	bad   []string
	more  chan struct{}
	done  chan struct{}
}

// Notification is one notification as the listener was handed it.
type Notification struct {
	Priority    string         `json:"priority"`
	PublisherID string         `json:"publisher_id"`
	EventType   string         `json:"event_type"`
	Payload     map[string]any `json:"payload"`
	MessageID   string         `json:"message_id"`
	Timestamp   string         `json:"timestamp"`
	Context     map[string]any `json:"context"`
	Ready       bool           `json:"ready"`
}

// LeaseID is the payload's lease_id.
func (n Notification) LeaseID() string { s, _ := n.Payload["lease_id"].(string); return s }

// StartListener runs the listener on topics of r's default exchange
// until the test ends.
func StartListener(t *testing.T, r *Rabbit, topics ...string) *Listener {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "listener.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, append([]string{script, r.URL()}, topics...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &Listener{cmd: cmd, stdin: stdin, more: make(chan struct{}, 1), done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var n Notification
			if err := json.Unmarshal(sc.Bytes(), &n); err != nil {
				l.mu.Lock()
				l.bad = append(l.bad, sc.Text())
				l.mu.Unlock()
				continue
			}
			if n.Ready {
				close(ready)
				continue
			}
			l.mu.Lock()
			l.got = append(l.got, n)
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		exited := make(chan error, 1)
		go func() { <-l.done; exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("listener stderr:\n%s", tailOf(stderr.String(), 3000))
		}
	})
	select {
	case <-ready:
	case <-l.done:
		t.Fatalf("listener exited before it was ready:\n%s", tailOf(stderr.String(), 3000))
	case <-time.After(2 * time.Minute):
		t.Fatalf("listener not ready after 2 min:\n%s", tailOf(stderr.String(), 3000))
	}
	return l
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Got returns what the listener received so far.
func (l *Listener) Got() []Notification {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		panic("listener printed a line that is not JSON: " + l.bad[0])
	}
	return append([]Notification(nil), l.got...)
}

// WaitFor waits until done(received so far) holds, at most bound; it
// returns what was received and whether done held.
func (l *Listener) WaitFor(bound time.Duration, done func([]Notification) bool) ([]Notification, bool) {
	deadline := time.After(bound)
	for {
		got := l.Got()
		if done(got) {
			return got, true
		}
		select {
		case <-l.more:
		case <-l.done:
			return l.Got(), done(l.Got())
		case <-deadline:
			return got, false
		}
	}
}
