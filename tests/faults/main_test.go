// Package faults_test runs the built `leasehold serve` through faults a
// production service meets:
//
//   - its MariaDB restarted mid-run (a throw-away mysqld of its own,
//     scripts/mariadb-throwaway.sh on a port derived from the pid, never
//     the shared test server): 503s in the API's own error body while the
//     database is down, never a 500; full service after; every lease a
//     2xx acknowledged still there;
//   - SIGTERM: a request in flight gets its answer, new connections are
//     refused at once, the process exits 0 with nothing left claimed, and
//     the next start runs the events that fell due meanwhile (on SQLite);
//     a lease event claimed and still running at SIGTERM is handed back
//     and the next process runs it at once, long before the claim timeout
//     (on MariaDB, where the test can hold the lease's row locked).
//
// Without mariadb-server (and no root to install it) the MariaDB tests
// skip loudly, unless LEASEHOLD_REQUIRE_MARIADB=1 (CI), which makes that
// a failure. The SQLite SIGTERM test needs nothing.
package faults_test

import (
	"os"
	"testing"

	"github.com/leasehold/leasehold/tests/internal/proc"
)

const envRequireMariaDB = "LEASEHOLD_REQUIRE_MARIADB"

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}
