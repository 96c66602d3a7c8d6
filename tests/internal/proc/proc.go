// Package proc builds the leasehold binary once per test binary and runs
// `leasehold serve` processes for the suites that need a process boundary
// (tests/galera, tests/faults): SIGKILL, SIGTERM, several replicas on one
// database. Every wait is bounded.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu  sync.Mutex
	binPath  string
	buildDir string
)

// Binary builds cmd/leasehold (once) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binPath != "" {
		return binPath
	}
	dir, err := os.MkdirTemp("", "leasehold-proc-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leasehold")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/leasehold/leasehold/cmd/leasehold").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("go build: %v\n%s", err, out)
	}
	buildDir, binPath = dir, bin
	return bin
}

// Cleanup removes the built binary (call it from TestMain after m.Run).
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
		buildDir, binPath = "", ""
	}
}

// Server is one running `leasehold serve`.
type Server struct {
	// Name labels the server in messages.
	Name string
	// URL is the main listener's base URL.
	URL string
	// Addr is its host:port.
	Addr string

	cmd    *exec.Cmd
	exited chan struct{}
	exit   error
	logMu  sync.Mutex
	log    strings.Builder
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+) serves="blazar`)

// Options are how a server starts.
type Options struct {
	// Database is its database URL.
	Database string
	// Listen is the main listener's address (default 127.0.0.1:0).
	Listen string
	// Env is added to the environment (LEASEHOLD_* overrides).
	Env []string
}

// Start starts a server with noauth and waits (bounded) until it listens
// and its /healthcheck answers. It is killed at the end of the test if
// still running.
func Start(t testing.TB, name string, o Options) *Server {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	cmd := exec.Command(Binary(t), "serve", "--listen", o.Listen, "--database", o.Database,
		"--auth", "noauth", "--log-format", "text", "--log-level", "info")
	cmd.Env = append(os.Environ(), o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Name: name, cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.logMu.Lock()
			s.log.WriteString(line + "\n")
			s.logMu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		close(addr)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it all first
		s.exit = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		if s.Running() {
			_ = cmd.Process.Kill()
			s.Wait(t, 30*time.Second)
		}
		if t.Failed() {
			t.Logf("%s log (last 60 lines):\n%s", name, tail(s.Log(), 60))
			if p := os.Getenv("LEASEHOLD_PROC_LOG_DIR"); p != "" {
				_ = os.WriteFile(filepath.Join(p, name+".log"), []byte(s.Log()), 0o644)
			}
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("%s exited before listening:\n%s", name, s.Log())
		}
		s.Addr, s.URL = a, "http://"+a
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not start listening in 90 s:\n%s", name, s.Log())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s /healthcheck not ready in 30 s: %v\n%s", name, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the process has not exited yet.
func (s *Server) Running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process.
func (s *Server) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", s.Name, sig, err)
	}
}

// Kill SIGKILLs the process and waits for it.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.Signal(t, syscall.SIGKILL)
	s.Wait(t, 30*time.Second)
}

// Wait waits at most d for the process to exit and returns its exit
// code (-1 when a signal ended it).
func (s *Server) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		t.Fatalf("%s did not exit in %s", s.Name, d)
	}
	var ee *exec.ExitError
	if errors.As(s.exit, &ee) {
		return ee.ExitCode()
	}
	if s.exit != nil {
		t.Fatalf("%s: %v", s.Name, s.exit)
	}
	return 0
}

// Log is what the process logged so far.
func (s *Server) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Client sends admin requests (the noauth token "admin") to the servers.
type Client struct {
	HTTP *http.Client
}

// NewClient returns a client with its own connection pool, able to keep
// many requests in flight to one server.
func NewClient(timeout time.Duration) *Client {
	tr := &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
	return &Client{HTTP: &http.Client{Timeout: timeout, Transport: tr}}
}

// Do sends method url with a JSON body (none when body is ""), extra
// headers as name, value pairs, and returns status and body.
func (c *Client) Do(ctx context.Context, method, url, body string, headers ...string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Auth-Token", "admin")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Must is Do that fails t unless the status is want.
func (c *Client) Must(t testing.TB, want int, method, url, body string, headers ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code, b, err := c.Do(ctx, method, url, body, headers...)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v %s; want %d", method, url, code, err, b, want)
	}
	return b
}

// String names the server.
func (s *Server) String() string { return fmt.Sprintf("%s (%s)", s.Name, s.Addr) }

// DatabaseURL is the MySQL server URL server (mysql+pymysql://user:pw@host:port/)
// with its database name set to name.
func DatabaseURL(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(u.Scheme, "mysql") || u.Host == "" {
		return "", fmt.Errorf("%s://%s: not a MySQL server URL", u.Scheme, u.Host)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// Pid is the process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }
