package faults_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // reads the database file the processes leave behind

	"github.com/leasehold/leasehold/tests/internal/proc"
)

// TestSIGTERMDrains: a host create whose body is still on its way when
// SIGTERM arrives (the server has answered "100 Continue", so its handler
// is running) gets its 201; meanwhile the listener refuses new
// connections; the process then exits 0 with no lease event and no
// outbox row left claimed. A lease due to start after the stop is
// started by the next process at once.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	file := filepath.Join(t.TempDir(), "leasehold.db")
	dbURL := "sqlite:///" + filepath.ToSlash(file)
	env := []string{"LEASEHOLD_SHUTDOWN_TIMEOUT=30s", "LEASEHOLD_MANAGER_MINUTES_BEFORE_END_LEASE=0", "LEASEHOLD_EVENTS_POLL_INTERVAL=200ms"}
	s := proc.Start(t, "leasehold", proc.Options{Database: dbURL, Env: env})
	c := proc.NewClient(time.Minute)
	c.Must(t, http.StatusCreated, "POST", s.URL+"/v1/os-hosts", `{"name": "drain-00"}`)
	// A lease that starts a few seconds from now: due after the stop.
	start := time.Now().UTC().Add(4 * time.Second).Truncate(time.Second)
	lb := c.Must(t, http.StatusCreated, "POST", s.URL+"/v1/leases", fmt.Sprintf(
		`{"name": "after-stop", "start_date": %q, "end_date": %q, "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}], "events": []}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05")))
	var lease struct {
		Lease struct {
			ID string `json:"id"`
		} `json:"lease"`
	}
	if err := json.Unmarshal(lb, &lease); err != nil || lease.Lease.ID == "" {
		t.Fatalf("lease create answered %s", lb)
	}

	// The slow request: headers now, body later.
	conn, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	body := `{"name": "drain-01"}`
	fmt.Fprintf(conn, "POST /v1/os-hosts HTTP/1.1\r\nHost: %s\r\nX-Auth-Token: admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", s.Addr, len(body))
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("want 100 Continue (the handler reading the body), got %q %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}

	s.Signal(t, syscall.SIGTERM)
	// New connections are refused while the request is in flight.
	deadline := time.Now().Add(15 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			// A connection that reached the accept queue just before the
			// listener closed is reset rather than refused.
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("dial after SIGTERM: %v, want connection refused", err)
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
		} else {
			nc.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 15 s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !s.Running() {
		t.Fatal("the process exited with a request in flight")
	}

	// The request in flight completes.
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to the request in flight: %v", err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("request in flight at SIGTERM: %d %s, want 201", resp.StatusCode, rb)
	}
	var host struct {
		Host struct {
			ID string `json:"id"`
		} `json:"host"`
	}
	if err := json.Unmarshal(rb, &host); err != nil || host.Host.ID == "" {
		t.Fatalf("host create answered %s", rb)
	}
	if code := s.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(s.Log(), "requests drained") {
		t.Errorf("the log does not say the requests were drained")
	}

	// Nothing left claimed by the stopped process.
	ro, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var claimedEvents, claimedRows int
	if err := ro.QueryRow("SELECT COUNT(*) FROM events WHERE status = 'IN_PROGRESS'").Scan(&claimedEvents); err != nil {
		t.Fatal(err)
	}
	if err := ro.QueryRow("SELECT COUNT(*) FROM outbox WHERE status = 'CLAIMED'").Scan(&claimedRows); err != nil {
		t.Fatal(err)
	}
	if claimedEvents != 0 || claimedRows != 0 {
		t.Errorf("after a graceful stop: %d events and %d outbox rows still claimed", claimedEvents, claimedRows)
	}
	ro.Close()

	// The next start has the host the drained request created, and runs
	// the lease start that fell due while no process ran.
	s2 := proc.Start(t, "leasehold-next", proc.Options{Database: dbURL, Env: env})
	c.Must(t, http.StatusOK, "GET", s2.URL+"/v1/os-hosts/"+host.Host.ID, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		code, b, err := c.Do(ctx, "GET", s2.URL+"/v1/leases/"+lease.Lease.ID, "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET lease: %d %v %s", code, err, b)
		}
		if strings.Contains(string(b), `"status": "ACTIVE"`) || strings.Contains(string(b), `"status":"ACTIVE"`) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the lease due at %s is not ACTIVE under the next process: %s", start, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
