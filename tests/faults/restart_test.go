package faults_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/tests/internal/proc"
)

// mariadb is a throw-away mysqld of this test's own.
type mariadb struct {
	env []string
}

func (m *mariadb) run(t *testing.T, arg string) (string, error) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0) // tests/faults/restart_test.go
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "mariadb-throwaway.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, arg)
	cmd.Env = m.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mariadb-throwaway.sh %s: %w\n%s", arg, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// startMariaDB starts a mysqld on a port of its own (purged at the end)
// and returns its server URL, or skips loudly when MariaDB is missing.
func startMariaDB(t *testing.T) (*mariadb, string) {
	t.Helper()
	pid := os.Getpid()
	for try := range 3 {
		port := 31000 + (pid+211*try)%1000 // below the Galera suite's ports and the ephemeral range
		m := &mariadb{env: append(os.Environ(),
			fmt.Sprintf("LEASEHOLD_MARIADB_PORT=%d", port),
			"LEASEHOLD_MARIADB_DIR="+filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-faults-%d-%d", pid, port)))}
		u, err := m.run(t, "start")
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			switch ee.ExitCode() {
			case 3:
				msg := fmt.Sprintf("MariaDB is not installed (%v): the MariaDB fault tests NOT RUN", err)
				if os.Getenv(envRequireMariaDB) == "1" {
					t.Fatal(msg)
				}
				fmt.Fprintln(os.Stderr, "!!!!!!!! SKIPPING: "+msg)
				t.Skip("!!!!!!!! " + msg)
			case 4:
				continue // port busy
			}
		}
		t.Cleanup(func() {
			if _, err := m.run(t, "purge"); err != nil {
				t.Error(err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return m, u
	}
	t.Fatal("no free port for the throw-away MariaDB after 3 tries")
	return nil, ""
}

// TestDatabaseRestart: clients create leases and read without pause
// while the server's MariaDB is stopped and started again. While it is
// down every answer is a 503 in the API's own error body (Blazar's and
// Placement's), never a 500; after it is back every request succeeds
// again without restarting Leasehold; every lease a 201 acknowledged
// exists at the end.
func TestDatabaseRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a MariaDB server and restarts it")
	}
	m, server := startMariaDB(t)
	name := fmt.Sprintf("lh_faults_%d", os.Getpid())
	u, err := proc.DatabaseURL(server, name)
	if err != nil {
		t.Fatal(err)
	}
	admin := openAdmin(t, u)
	if _, err := admin.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	s := proc.Start(t, "leasehold", proc.Options{Database: u})
	c := proc.NewClient(30 * time.Second)
	const hosts = 40
	for i := range hosts {
		c.Must(t, http.StatusCreated, "POST", s.URL+"/v1/os-hosts", fmt.Sprintf(`{"name": "restart-%02d"}`, i))
	}

	// state tells the clients what the database is doing: answers are
	// checked against it. Its low bits are the phase, the rest counts the
	// changes: an answer is held to a phase only when no change happened
	// while its request ran (else it counts as "recovering", where either
	// a success or a 503 is right).
	const (
		up = iota
		down
		recovering
	)
	var state atomic.Int64
	setPhase := func(p int64) { state.Store((state.Load()>>2+1)<<2 | p) }
	phaseOf := func(before int64) int32 {
		if state.Load() != before {
			return recovering
		}
		return int32(before & 3)
	}
	var stopping atomic.Bool
	var mu sync.Mutex
	acked := map[string]bool{}
	counts := map[string]map[int]int{} // phase name → status → n
	var problems []string
	record := func(ph int32, what string, code int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		pn := [...]string{"up", "down", "recovering"}[ph]
		if counts[pn] == nil {
			counts[pn] = map[int]int{}
		}
		counts[pn][code]++
		bad := ""
		switch {
		case code >= 500 && code != http.StatusServiceUnavailable:
			bad = "a 5xx other than 503"
		case code == http.StatusServiceUnavailable && !isAPIErrorBody(what, body):
			bad = "a 503 without the API's error body"
		case ph == up && code >= 300:
			bad = "a failure while the database was up"
		case ph == down && code < 300 && what != "healthcheck":
			bad = "a success while the database was down"
		}
		if bad != "" && len(problems) < 20 {
			problems = append(problems, fmt.Sprintf("%s while %s: %s: %d %s", what, pn, bad, code, body))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var seq atomic.Int64
	base := time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC)
	for w := range 6 {
		wg.Go(func() {
			for !stopping.Load() && ctx.Err() == nil {
				s0 := state.Load()
				switch w % 3 {
				case 0, 1: // lease creates, each in a window of its own
					i := seq.Add(1)
					start := base.Add(time.Duration(i) * 2 * time.Hour)
					body := fmt.Sprintf(`{"name": "r-%05d", "start_date": %q, "end_date": %q, "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}], "events": []}`,
						i, start.Format("2006-01-02 15:04"), start.Add(time.Hour).Format("2006-01-02 15:04"))
					code, b, err := c.Do(ctx, "POST", s.URL+"/v1/leases", body)
					if err != nil {
						t.Errorf("lease create: %v", err)
						continue
					}
					if code == http.StatusCreated {
						var doc struct {
							Lease struct {
								ID string `json:"id"`
							} `json:"lease"`
						}
						if json.Unmarshal(b, &doc) != nil || doc.Lease.ID == "" {
							t.Errorf("201 without a lease: %s", b)
						}
						mu.Lock()
						acked[doc.Lease.ID] = true
						mu.Unlock()
					}
					record(phaseOf(s0), "blazar", code, b)
				case 2: // reads on both APIs
					code, b, err := c.Do(ctx, "GET", s.URL+"/v1/leases", "")
					if err == nil {
						record(phaseOf(s0), "blazar", code, b)
					}
					s0 = state.Load()
					code, b, err = c.Do(ctx, "GET", s.URL+"/placement/resource_providers", "", "OpenStack-API-Version", "placement 1.39")
					if err == nil {
						record(phaseOf(s0), "placement", code, b)
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	settle := func(d time.Duration) {
		t.Helper()
		// Let the clients run in this phase for a while.
		time.Sleep(d)
	}
	settle(time.Second)

	setPhase(recovering) // the stop takes a moment: answers may be either
	if _, err := m.run(t, "stop"); err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	setPhase(down)
	downAt := time.Now()
	settle(2 * time.Second)
	hc, hb, _ := c.Do(context.Background(), "GET", s.URL+"/healthcheck", "")
	if hc != http.StatusServiceUnavailable {
		t.Errorf("/healthcheck with the database down: %d %s, want 503", hc, hb)
	}

	setPhase(recovering)
	if _, err := m.run(t, "start"); err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	downFor := time.Since(downAt)
	// Full service again, without restarting Leasehold: wait (bounded)
	// for the first success, then every answer must be one.
	recoverAt := time.Now()
	for {
		code, _, err := c.Do(context.Background(), "GET", s.URL+"/v1/os-hosts", "")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Since(recoverAt) > 30*time.Second {
			t.Fatalf("no successful request 30 s after the database came back (last %d %v)", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recovered := time.Since(recoverAt)
	setPhase(up)
	settle(2 * time.Second)
	// The clients stop between requests: a request cancelled in flight
	// is no answer to judge.
	stopping.Store(true)
	wg.Wait()
	cancel()

	t.Logf("database down for %s, service back %s after its start; answers by phase and status: %v", downFor.Round(time.Millisecond), recovered.Round(time.Millisecond), counts)
	for _, p := range problems {
		t.Error(p)
	}
	if counts["down"][http.StatusServiceUnavailable] == 0 {
		t.Error("no 503 seen while the database was down")
	}
	if counts["up"][http.StatusCreated] == 0 {
		t.Error("no lease created after the database came back")
	}

	// Nothing acknowledged is lost.
	check := openAdmin(t, u)
	rows, err := check.Query("SELECT id FROM " + "`" + name + "`.leases")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	rows.Close()
	lost := 0
	for id := range acked {
		if !stored[id] {
			lost++
			t.Errorf("lease %s was acknowledged (201) and is not in the database", id)
		}
	}
	t.Logf("%d leases acknowledged, %d stored, %d lost", len(acked), len(stored), lost)
	if n := strings.Count(s.Log(), "internal error"); n > 0 {
		t.Errorf("leasehold logged %d internal errors", n)
	}
}

// openAdmin opens a pool on the server of database URL u (no default
// database).
func openAdmin(t *testing.T, u string) *sql.DB {
	t.Helper()
	target, err := db.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(target.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	cfg.Timeout = 10 * time.Second
	c, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// isAPIErrorBody reports whether b is the error document of the API
// (Blazar's {"error_code": …, "error_message": …, "error_name": …},
// Placement's {"errors": [{"status": …, "code": …}]}).
func isAPIErrorBody(api string, b []byte) bool {
	switch api {
	case "blazar":
		var doc struct {
			Code    int    `json:"error_code"`
			Message string `json:"error_message"`
		}
		return json.Unmarshal(b, &doc) == nil && doc.Code == http.StatusServiceUnavailable && doc.Message != ""
	case "placement":
		var doc struct {
			Errors []struct {
				Status int    `json:"status"`
				Code   string `json:"code"`
			} `json:"errors"`
		}
		return json.Unmarshal(b, &doc) == nil && len(doc.Errors) == 1 && doc.Errors[0].Status == http.StatusServiceUnavailable
	}
	return true
}
