// Package blazar_test runs the real Blazar clients (python3-blazarclient's
// `blazar` and python3-openstackclient's `openstack reservation …`)
// against a `leasehold serve` it builds and starts, and checks what the
// clients print.
//
// The clients must be installed (Debian: apt-get install
// python3-blazarclient python3-openstackclient). Without them each test
// skips with a loud message, unless LEASEHOLD_REQUIRE_CLIENTS=1, which
// makes a missing client a failure (CI sets it). The database is a fresh
// SQLite file, or a throw-away MariaDB database when
// LEASEHOLD_TEST_MYSQL_DSN is set (see pkg/db/dbtest).
//
// Harness, for every client test in this directory:
//
//	srv := StartServer(t)                  // builds once, starts, stops at cleanup
//	srv2 := StartServerOn(t, dbURL)        // a replica on a shared database
//	out := srv.MustRun(t, "blazar", "host-list")
//	rows := ParseList(t, out)              // []map[column]value of a cliff table
//	fields := ParseShow(t, out)            // map[Field]Value of a show table
//	out, code := srv.Run(t, "openstack", "reservation", "host", "delete", "x")
//
// This file owns the package's TestMain (it removes the built binary);
// other test files here must not define one.
//
// The server runs with --auth noauth and the clients with keystoneauth's
// admin_token plugin: OS_AUTH_TYPE=admin_token, OS_TOKEN=admin and
// OS_ENDPOINT=<server>/v1, so they send the token "admin", which noauth
// takes as the admin of project admin (any other token but "user:project"
// is refused). Direct HTTP calls go through AdminHTTP, which sends the
// same token.
package blazar_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// AdminHTTP is an HTTP client whose requests carry the noauth admin
// token unless they set X-Auth-Token themselves.
var AdminHTTP = &http.Client{Transport: adminToken{http.DefaultTransport}}

type adminToken struct{ next http.RoundTripper }

func (a adminToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Auth-Token") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Auth-Token", "admin")
	}
	return a.next.RoundTrip(r)
}

// EnvRequireClients makes missing client CLIs a test failure.
const EnvRequireClients = "LEASEHOLD_REQUIRE_CLIENTS"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// leaseholdBinary builds cmd/leasehold once per test run.
func leaseholdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "leasehold-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		binPath = filepath.Join(dir, "leasehold")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/leasehold/leasehold/cmd/leasehold")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RequireClients skips the test (loudly) when a CLI is missing, or fails
// it when LEASEHOLD_REQUIRE_CLIENTS=1.
func RequireClients(t testing.TB, clis ...string) {
	t.Helper()
	for _, c := range clis {
		if _, err := exec.LookPath(c); err != nil {
			msg := fmt.Sprintf("the %q CLI is not installed (apt-get install python3-blazarclient python3-openstackclient); client end-to-end tests NOT RUN", c)
			if os.Getenv(EnvRequireClients) == "1" {
				t.Fatal(msg)
			}
			fmt.Fprintln(os.Stderr, "!!!!!!!! SKIPPING: "+msg)
			t.Skip("!!!!!!!! " + msg)
		}
	}
}

// Server is a running `leasehold serve`.
type Server struct {
	// URL is the main listener's base URL; Endpoint the Blazar endpoint.
	URL      string
	Endpoint string
	cmd      *exec.Cmd
	logMu    sync.Mutex
	log      strings.Builder
}

var listenRE = regexp.MustCompile(`msg=listening addr=(\S+) serves="blazar`)

// StartServer starts leasehold on a free port with a fresh database and
// stops it when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerOn(t, dbtest.URL(t))
}

// StartServerOn starts leasehold on a free port with the database at
// dbURL (several servers may share one, as replicas do) and stops it when
// the test ends.
func StartServerOn(t testing.TB, dbURL string) *Server {
	t.Helper()
	bin := leaseholdBinary(t)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--database", dbURL, "--auth", "noauth", "--log-format", "text", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cmd: cmd}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
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
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.Log())
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("leasehold exited before listening:\n%s", s.Log())
		}
		s.URL = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("leasehold did not start listening:\n%s", s.Log())
	}
	s.Endpoint = s.URL + "/v1"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("leasehold /healthcheck not ready: %v\n%s", err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Log returns what the server logged so far.
func (s *Server) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// Env is the environment the clients run with: the caller's, minus any
// OS_* variable, plus the noauth admin token and this server's endpoint.
func (s *Server) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OS_") {
			env = append(env, kv)
		}
	}
	return append(env, "OS_AUTH_TYPE=admin_token", "OS_TOKEN=admin", "OS_ENDPOINT="+s.Endpoint, "PYTHONWARNINGS=ignore", "COLUMNS=200")
}

// Run runs a client CLI and returns its combined output and exit code.
func (s *Server) Run(t testing.TB, cli string, args ...string) (string, int) {
	t.Helper()
	RequireClients(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = s.Env()
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %s: %v", cli, strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// MustRun is Run that fails the test on a non-zero exit.
func (s *Server) MustRun(t testing.TB, cli string, args ...string) string {
	t.Helper()
	out, code := s.Run(t, cli, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", cli, strings.Join(args, " "), code, out)
	}
	return out
}

// tableRows returns the cells of the data rows of the first cliff table
// in out, the header first. Continuation lines (an empty first cell, as
// cliff prints multi-line values) are joined to the previous row with
// "\n".
func tableRows(t testing.TB, out string) [][]string {
	t.Helper()
	var rows [][]string
	seps := 0
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, " \r")
		if strings.HasPrefix(line, "+") {
			seps++
			if seps == 3 {
				break
			}
			continue
		}
		if !strings.HasPrefix(line, "|") || seps == 0 {
			continue
		}
		parts := strings.Split(strings.Trim(line, "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		if seps == 2 && len(rows) > 1 && parts[0] == "" {
			prev := rows[len(rows)-1]
			for i := 1; i < len(parts) && i < len(prev); i++ {
				if parts[i] != "" {
					prev[i] += "\n" + parts[i]
				}
			}
			continue
		}
		rows = append(rows, parts)
	}
	if len(rows) == 0 {
		t.Fatalf("no table in output:\n%s", out)
	}
	return rows
}

// ParseList parses a cliff list table into one map per row. cliff prints
// nothing at all for an empty list: that gives nil.
func ParseList(t testing.TB, out string) []map[string]string {
	t.Helper()
	if strings.TrimSpace(out) == "" {
		return nil
	}
	rows := tableRows(t, out)
	var res []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			if i < len(r) {
				m[h] = r[i]
			}
		}
		res = append(res, m)
	}
	return res
}

// ParseShow parses a cliff Field/Value table.
func ParseShow(t testing.TB, out string) map[string]string {
	t.Helper()
	rows := tableRows(t, out)
	if len(rows[0]) != 2 || rows[0][0] != "Field" {
		t.Fatalf("not a Field/Value table:\n%s", out)
	}
	m := map[string]string{}
	for _, r := range rows[1:] {
		m[r[0]] = r[1]
	}
	return m
}
