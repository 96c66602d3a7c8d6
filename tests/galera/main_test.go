// Package galera_test runs two `leasehold serve` processes (the built
// binary) against two nodes of a real 3-node MariaDB Galera cluster on
// loopback (scripts/galera-throwaway.sh, started once by TestMain) and
// checks the promises replicas must keep there: no double booking under
// 1,000 concurrent lease creates, Placement generations that still give
// 409 and never lose an update, every lease event run exactly once while
// one process is killed with SIGKILL, certification conflicts retried
// and never answered with a 500.
//
// Without mariadb-server, galera-4 and rsync (and no root to install
// them) the tests skip loudly, unless LEASEHOLD_REQUIRE_GALERA=1 (CI),
// which makes that a failure. LEASEHOLD_TEST_GALERA_URLS (three
// space-separated server URLs, mysql+pymysql://user:pw@host:port/) uses a
// running cluster instead of starting one.
package galera_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/tests/internal/proc"
)

const (
	envRequire = "LEASEHOLD_REQUIRE_GALERA"
	envURLs    = "LEASEHOLD_TEST_GALERA_URLS"
)

// cluster is the cluster the first test started: the nodes' server
// URLs, or why there are none.
var cluster struct {
	once    sync.Once
	urls    []string
	err     error
	missing bool // the packages are not installed
	took    time.Duration
	stop    func()
	// script runs galera-throwaway.sh on the cluster (nil for a cluster
	// given by LEASEHOLD_TEST_GALERA_URLS).
	script func(args ...string) ([]byte, error)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster.stop != nil {
		cluster.stop()
	}
	proc.Cleanup()
	os.Exit(code)
}

func script() string {
	_, file, _, _ := runtime.Caller(0) // tests/galera/main_test.go
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "galera-throwaway.sh")
}

// startCluster starts a fresh cluster (unless one is given) on ports
// derived from the pid, trying another block when one is busy, and
// returns how to stop it.
func startCluster() (stop func()) {
	if s := os.Getenv(envURLs); s != "" {
		cluster.urls = strings.Fields(s)
		if len(cluster.urls) != 3 {
			cluster.err = fmt.Errorf("%s has %d URLs, want 3", envURLs, len(cluster.urls))
		}
		return func() {}
	}
	pid := os.Getpid()
	for try := range 3 {
		slot := (pid + 97*try) % 300
		env := append(os.Environ(),
			fmt.Sprintf("LEASEHOLD_GALERA_PORT=%d", 21000+3*slot),
			fmt.Sprintf("LEASEHOLD_GALERA_GCOMM_PORT=%d", 22000+30*slot),
			fmt.Sprintf("LEASEHOLD_GALERA_DIR=%s", filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-galera-test-%d", pid))))
		run := func(d time.Duration, args ...string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			cmd := exec.CommandContext(ctx, script(), args...)
			cmd.Env = env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return out, fmt.Errorf("galera-throwaway.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
			}
			return out, nil
		}
		began := time.Now()
		out, err := run(4*time.Minute, "start")
		cluster.took = time.Since(began)
		stop = func() {
			if _, err := run(2*time.Minute, "purge"); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			switch ee.ExitCode() {
			case 3:
				cluster.err, cluster.missing = err, true
				return stop
			case 4:
				stop()
				continue // ports busy: another block
			}
		}
		if err != nil {
			cluster.err = err
			return stop
		}
		cluster.urls = strings.Fields(string(out))
		cluster.script = func(args ...string) ([]byte, error) { return run(time.Minute, args...) }
		if len(cluster.urls) != 3 {
			cluster.err = fmt.Errorf("galera-throwaway.sh printed %q, want 3 URLs", out)
		}
		return stop
	}
	cluster.err = errors.New("no free block of ports for the cluster after 3 tries")
	return func() {}
}

// needCluster returns the nodes' URLs, or skips the test loudly (fails
// it under LEASEHOLD_REQUIRE_GALERA=1) when there is no cluster.
func needCluster(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 3-node Galera cluster")
	}
	cluster.once.Do(func() { cluster.stop = startCluster() })
	if cluster.err == nil {
		return cluster.urls
	}
	if !cluster.missing {
		t.Fatalf("Galera cluster: %v", cluster.err)
	}
	msg := fmt.Sprintf("no Galera cluster (%v); install mariadb-server galera-4 rsync (scripts/deps.sh): Galera tests NOT RUN", cluster.err)
	if os.Getenv(envRequire) == "1" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "!!!!!!!! SKIPPING: "+msg)
	t.Skip("!!!!!!!! " + msg)
	return nil
}
