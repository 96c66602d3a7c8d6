package faults_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/tests/internal/proc"
)

// TestSIGTERMHandsBackClaimedEvent: a process stopped with SIGTERM while
// its event manager holds a lease event's claim (its run waits on the
// lease's row, which the test holds locked) puts the claim back before
// it exits: the event is UNDONE and unclaimed, and the next process runs
// it at once, though the claim timeout (after which a dead process's
// claims are taken back) is 10 minutes.
func TestSIGTERMHandsBackClaimedEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a MariaDB server")
	}
	_, server := startMariaDB(t)
	name := fmt.Sprintf("lh_faults_claims_%d", os.Getpid())
	u, err := proc.DatabaseURL(server, name)
	if err != nil {
		t.Fatal(err)
	}
	admin := openAdmin(t, u)
	if _, err := admin.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASEHOLD_EVENTS_CLAIM_TIMEOUT=10m", "LEASEHOLD_EVENTS_POLL_INTERVAL=200ms", "LEASEHOLD_MANAGER_MINUTES_BEFORE_END_LEASE=0", "LEASEHOLD_SHUTDOWN_TIMEOUT=10s"}
	s := proc.Start(t, "leasehold", proc.Options{Database: u, Env: env})
	c := proc.NewClient(time.Minute)
	c.Must(t, http.StatusCreated, "POST", s.URL+"/v1/os-hosts", `{"name": "claim-00"}`)
	start := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	b := c.Must(t, http.StatusCreated, "POST", s.URL+"/v1/leases", fmt.Sprintf(
		`{"name": "held", "start_date": %q, "end_date": %q, "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}], "events": []}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05")))
	var doc struct {
		Lease struct {
			ID string `json:"id"`
		} `json:"lease"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Lease.ID == "" {
		t.Fatalf("lease create answered %s", b)
	}
	lease := doc.Lease.ID

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hold, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, "SELECT id FROM `"+name+"`.leases WHERE id = ? FOR UPDATE", lease); err != nil {
		t.Fatal(err)
	}
	event := func() (status, claimedBy string) {
		t.Helper()
		if err := admin.QueryRowContext(ctx, "SELECT status, claimed_by FROM `"+name+"`.events WHERE lease_id = ? AND event_type = 'start_lease'", lease).Scan(&status, &claimedBy); err != nil {
			t.Fatal(err)
		}
		return status, claimedBy
	}
	// The manager claims the start event when it falls due, then waits
	// on the lease's row.
	for deadline := time.Now().Add(60 * time.Second); ; {
		st, by := event()
		if st == "IN_PROGRESS" && strings.Contains(by, fmt.Sprintf("-%d-", s.Pid())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start event was not claimed in 60 s: %s by %q", st, by)
		}
		time.Sleep(50 * time.Millisecond)
	}

	s.Signal(t, syscall.SIGTERM)
	if code := s.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	if st, by := event(); st != "UNDONE" || by != "" {
		t.Fatalf("after the stop the start event is %s, claimed by %q; want UNDONE and unclaimed", st, by)
	}
	if !strings.Contains(s.Log(), "handed back a claimed lease event") {
		t.Errorf("the log does not say the event was handed back")
	}
	if err := hold.Rollback(); err != nil && err != sql.ErrTxDone {
		t.Fatal(err)
	}

	// The next process runs it long before any claim timeout.
	next := proc.Start(t, "leasehold-next", proc.Options{Database: u, Env: env})
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, b, err := c.Do(ctx, "GET", next.URL+"/v1/leases/"+lease, "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET lease: %d %v %s", code, err, b)
		}
		var l struct {
			Lease struct {
				Status string `json:"status"`
			} `json:"lease"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		if l.Lease.Status == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease is %s 30 s after the next process started", l.Lease.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := event(); st != "DONE" {
		t.Errorf("start event %s after the lease became ACTIVE", st)
	}
}
