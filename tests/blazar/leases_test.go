package blazar_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// showJSON runs a client show command with -f json.
func showJSON(t *testing.T, srv *Server, cli string, args ...string) map[string]any {
	t.Helper()
	out := srv.MustRun(t, cli, append(args, "-f", "json")...)
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("%s %v: no JSON in output:\n%s", cli, args, out)
	}
	var m map[string]any
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&m); err != nil {
		t.Fatalf("%s %v: %v\n%s", cli, args, err, out)
	}
	return m
}

func wantFail(t *testing.T, srv *Server, want string, cli string, args ...string) {
	t.Helper()
	out, code := srv.Run(t, cli, args...)
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("%s %s: exit %d, want 1 with %q:\n%s", cli, strings.Join(args, " "), code, want, out)
	}
}

// apiLease GETs a lease over HTTP as the admin.
func apiLease(t *testing.T, srv *Server, id string) map[string]any {
	t.Helper()
	resp, err := AdminHTTP.Get(srv.Endpoint + "/leases/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Lease map[string]any `json:"lease"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET lease %s: %d %v", id, resp.StatusCode, err)
	}
	return body.Lease
}

func registerHosts(t *testing.T, srv *Server) {
	t.Helper()
	srv.MustRun(t, "blazar", "host-create", "compute-1", "--extra", "gpu=true", "--extra", "vcpus=8")
	srv.MustRun(t, "blazar", "host-create", "compute-2", "--extra", "vcpus=4")
	srv.MustRun(t, "blazar", "host-create", "compute-3", "--extra", "vcpus=2")
}

func TestBlazarCLILeases(t *testing.T) {
	RequireClients(t, "blazar")
	srv := StartServer(t)
	registerHosts(t, srv)

	l := showJSON(t, srv, "blazar", "lease-create", "--physical-reservation",
		`min=1,max=2,hypervisor_properties=[">=", "$vcpus", "4"],resource_properties=`,
		"--start-date", "2030-01-01 12:00", "--end-date", "2030-01-02 12:00", "lease1")
	id, _ := l["id"].(string)
	if l["status"] != "PENDING" || l["start_date"] != "2030-01-01T12:00:00.000000" || l["end_date"] != "2030-01-02T12:00:00.000000" {
		t.Fatalf("lease-create: %v", l)
	}
	res, _ := l["reservations"].(string)
	if !strings.Contains(res, `"resource_type": "physical:host"`) || !strings.Contains(res, `"max": 2`) {
		t.Errorf("reservations: %s", res)
	}
	rows := ParseList(t, srv.MustRun(t, "blazar", "lease-list"))
	if len(rows) != 1 || rows[0]["name"] != "lease1" || rows[0]["id"] != id {
		t.Fatalf("lease-list: %v", rows)
	}
	for _, ref := range []string{"lease1", id} {
		f := ParseShow(t, srv.MustRun(t, "blazar", "lease-show", ref))
		if f["id"] != id || f["status"] != "PENDING" {
			t.Errorf("lease-show %s: %v", ref, f)
		}
	}
	rid := apiLease(t, srv, id)["reservations"].([]any)[0].(map[string]any)["id"].(string)

	// Date arithmetic on the client side, checks on ours.
	for _, tc := range []struct {
		args       []string
		start, end string
	}{
		{[]string{"--prolong-for", "1d"}, "2030-01-01T12:00:00.000000", "2030-01-03T12:00:00.000000"},
		{[]string{"--reduce-by", "2h"}, "2030-01-01T12:00:00.000000", "2030-01-03T10:00:00.000000"},
		{[]string{"--defer-by", "1h"}, "2030-01-01T13:00:00.000000", "2030-01-03T10:00:00.000000"},
		{[]string{"--advance-by", "30m"}, "2030-01-01T12:30:00.000000", "2030-01-03T10:00:00.000000"},
		{[]string{"--start-date", "2030-01-01 10:00", "--end-date", "2030-01-03 10:00"}, "2030-01-01T10:00:00.000000", "2030-01-03T10:00:00.000000"},
		{[]string{"--reservation", "id=" + rid + ",min=1,max=1"}, "2030-01-01T10:00:00.000000", "2030-01-03T10:00:00.000000"},
		{[]string{"--name", "lease1b"}, "2030-01-01T10:00:00.000000", "2030-01-03T10:00:00.000000"},
	} {
		ref := id
		if tc.args[0] == "--prolong-for" {
			ref = "lease1"
		}
		out := srv.MustRun(t, "blazar", append([]string{"lease-update", ref}, tc.args...)...)
		if !strings.Contains(out, "Updated lease: "+ref) {
			t.Errorf("lease-update %v: %s", tc.args, out)
		}
		got := apiLease(t, srv, id)
		if got["start_date"] != tc.start || got["end_date"] != tc.end {
			t.Errorf("after lease-update %v: %v – %v, want %s – %s", tc.args, got["start_date"], got["end_date"], tc.start, tc.end)
		}
	}
	if got := apiLease(t, srv, id); got["name"] != "lease1b" {
		t.Errorf("name %v", got["name"])
	}
	if r := apiLease(t, srv, id)["reservations"].([]any)[0].(map[string]any); r["max"] != 1.0 {
		t.Errorf("max after update: %v", r["max"])
	}

	// Errors: no free hosts, bad dates, unknown ids, another project.
	wantFail(t, srv, "ERROR: Not enough hosts available: 3 hosts match the properties, 3 are free in the window, 5 needed",
		"blazar", "lease-create", "--physical-reservation", "min=5,max=5,hypervisor_properties=,resource_properties=",
		"--start-date", "2030-05-01 12:00", "--end-date", "2030-05-02 12:00", "too-many")
	wantFail(t, srv, "ERROR: Start date must be later than current date",
		"blazar", "lease-create", "--physical-reservation", "min=1,max=1,hypervisor_properties=,resource_properties=",
		"--start-date", "2001-01-01 12:00", "--end-date", "2001-01-02 12:00", "past")
	wantFail(t, srv, "ERROR: Malformed parameter min", "blazar", "lease-create", "--reservation",
		"resource_type=physical:host,min=,max=1,hypervisor_properties=,resource_properties=", "--start-date", "2030-05-01 12:00", "--end-date", "2030-05-02 12:00", "nomin")
	wantFail(t, srv, `ERROR: Malformed requirements [">=", "$vcpus", 4]`, "blazar", "lease-create", "--reservation",
		`resource_type=physical:host,min=1,max=1,hypervisor_properties=[">=", "$vcpus", 4],resource_properties=`, "--start-date", "2030-05-01 12:00", "--end-date", "2030-05-02 12:00", "badq")
	wantFail(t, srv, "ERROR: Object with {'lease_id': '00000000-0000-4000-8000-000000000000'} not found",
		"blazar", "lease-show", "00000000-0000-4000-8000-000000000000")
	wantFail(t, srv, "Unable to find resource with name 'no-such-lease'", "blazar", "lease-show", "no-such-lease")
	wantFail(t, srv, "ERROR: Please enter valid reservation IDs", "blazar", "lease-update", id, "--reservation", "id=nope,max=1")
	wantFail(t, srv, "ERROR: End date must be later than current and start date", "blazar", "lease-update", id, "--reduce-by", "3d")
	asOther := []string{"--os-auth-type", "admin_token", "--os-token", "u2:p2"}
	wantFail(t, srv, "ERROR: Policy doesn't allow blazar:leases:get to be performed.", "blazar", append(asOther, "lease-show", id)...)
	wantFail(t, srv, "ERROR: Policy doesn't allow blazar:leases:delete to be performed.", "blazar", append(asOther, "lease-delete", id)...)
	if out := srv.MustRun(t, "blazar", append(asOther, "lease-list")...); strings.Contains(out, id) {
		t.Errorf("another project lists the lease:\n%s", out)
	}
	// A reserved host cannot be deleted (lease1b kept compute-2 when its
	// max went down to 1: the smaller host, leaving compute-1 free).
	wantFail(t, srv, "The host is reserved.", "blazar", "host-delete", "compute-2")

	// A lease without reservations (the blazar CLI allows it).
	srv.MustRun(t, "blazar", "lease-create", "--start-date", "2030-05-01 12:00", "--end-date", "2030-05-02 12:00", "noreservation")

	out := srv.MustRun(t, "blazar", "lease-delete", "lease1b")
	if !strings.Contains(out, "Deleted lease: lease1b") {
		t.Errorf("lease-delete: %s", out)
	}
	srv.MustRun(t, "blazar", "host-delete", "compute-1")
	srv.MustRun(t, "blazar", "lease-delete", "noreservation")
	if out := strings.TrimSpace(srv.MustRun(t, "blazar", "lease-list")); out != "" {
		t.Errorf("leases left:\n%s", out)
	}
}

// TestBlazarCLILeaseStartsNow: a lease starting "now" is ACTIVE within 2 s
// (the event manager is woken by the create, not a 10 s poll), and two
// back-to-back leases on the one host both succeed.
func TestBlazarCLILeaseStartsNow(t *testing.T) {
	RequireClients(t, "blazar")
	srv := StartServer(t)
	srv.MustRun(t, "blazar", "host-create", "compute-1")
	l := showJSON(t, srv, "blazar", "lease-create", "--physical-reservation", "min=1,max=1,hypervisor_properties=,resource_properties=", "lease-now")
	id := l["id"].(string)
	created := time.Now()
	for {
		got := apiLease(t, srv, id)
		if got["status"] == "ACTIVE" {
			break
		}
		if time.Since(created) > 2*time.Second {
			t.Fatalf("lease-now is %v %v seconds after creation, want ACTIVE within 2 s", got["status"], time.Since(created).Seconds())
		}
		time.Sleep(50 * time.Millisecond)
	}
	end, _ := time.Parse("2006-01-02T15:04:05.000000", l["end_date"].(string))
	next := end.Add(24 * time.Hour)
	// Back-to-back on the same host: the next lease starts when this ends.
	srv.MustRun(t, "blazar", "lease-create", "--physical-reservation", "min=1,max=1,hypervisor_properties=,resource_properties=",
		"--start-date", end.Format("2006-01-02 15:04"), "--end-date", next.Format("2006-01-02 15:04"), "after")
	wantFail(t, srv, "ERROR: Not enough hosts available", "blazar", "lease-create", "--physical-reservation",
		"min=1,max=1,hypervisor_properties=,resource_properties=",
		"--start-date", end.Add(-time.Minute).Format("2006-01-02 15:04"), "--end-date", next.Format("2006-01-02 15:04"), "overlap")
}

func TestOpenStackCLILeases(t *testing.T) {
	RequireClients(t, "openstack")
	srv := StartServer(t)
	srv.MustRun(t, "openstack", "reservation", "host", "create", "compute-9", "--extra", "vcpus=4")
	l := showJSON(t, srv, "openstack", "reservation", "lease", "create", "--reservation",
		`resource_type=physical:host,min=1,max=1,hypervisor_properties=[">=", "$vcpus", "2"],resource_properties=`,
		"--start-date", "2030-06-01 12:00", "--end-date", "2030-06-02 12:00", "osc-lease")
	id := l["id"].(string)
	rows := ParseList(t, srv.MustRun(t, "openstack", "reservation", "lease", "list"))
	if len(rows) != 1 || rows[0]["name"] != "osc-lease" {
		t.Fatalf("lease list: %v", rows)
	}
	f := ParseShow(t, srv.MustRun(t, "openstack", "reservation", "lease", "show", "osc-lease"))
	if f["id"] != id {
		t.Errorf("lease show: %v", f)
	}
	srv.MustRun(t, "openstack", "reservation", "lease", "set", "osc-lease", "--prolong-for", "1h")
	if got := apiLease(t, srv, id); got["end_date"] != "2030-06-02T13:00:00.000000" {
		t.Errorf("after --prolong-for 1h: %v", got["end_date"])
	}
	wantFail(t, srv, "Object with {'lease_id': '00000000-0000-4000-8000-000000000000'} not found",
		"openstack", "reservation", "lease", "show", "00000000-0000-4000-8000-000000000000")
	srv.MustRun(t, "openstack", "reservation", "lease", "delete", "osc-lease")
	if out := srv.MustRun(t, "openstack", "reservation", "lease", "list"); strings.Contains(out, id) {
		t.Errorf("after delete:\n%s", out)
	}
}

// startServerOn starts another `leasehold serve` on an existing database.
func startServerOn(t *testing.T, dbURL string) string {
	t.Helper()
	cmd := exec.Command(leaseholdBinary(t), "serve", "--listen", "127.0.0.1:0", "--database", dbURL, "--auth", "noauth", "--log-format", "text", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var log strings.Builder
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
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
			logMu.Lock()
			t.Logf("server log:\n%s", log.String())
			logMu.Unlock()
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("leasehold exited before listening:\n%s", log.String())
		}
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("leasehold did not start listening")
	}
	return ""
}

// TestTwoServersNoDoubleBooking: two `leasehold serve` processes on one
// database (MariaDB when LEASEHOLD_TEST_MYSQL_DSN is set, else SQLite)
// take 200 concurrent lease creations for overlapping windows; SQL then
// shows no host booked twice in overlapping windows.
func TestTwoServersNoDoubleBooking(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	dbURL := dbtest.URL(t)
	first := startServerOn(t, dbURL) // migrates
	second := startServerOn(t, dbURL)
	for i := 1; i <= 10; i++ {
		resp, err := AdminHTTP.Post(first+"/v1/os-hosts", "application/json", strings.NewReader(fmt.Sprintf(`{"name": "compute-%d"}`, i)))
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("host %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: AdminHTTP.Transport}
	for i := range n {
		wg.Go(func() {
			base := []string{first, second}[i%2]
			start := time.Date(2030, 3, 1, i%7, 0, 0, 0, time.UTC)
			end := start.Add(time.Duration(1+i%3) * time.Hour)
			body := fmt.Sprintf(`{"name": "c%d", "start_date": %q, "end_date": %q, "reservations": [{"resource_type": "physical:host", "min": 1, "max": %d, "hypervisor_properties": "", "resource_properties": ""}], "events": [], "before_end_date": null}`,
				i, start.Format("2006-01-02 15:04"), end.Format("2006-01-02 15:04"), 1+i%2)
			resp, err := client.Post(base+"/v1/leases", "application/json", bytes.NewReader([]byte(body)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
			if resp.StatusCode == 409 && !strings.Contains(string(b), "Not enough hosts available") {
				t.Errorf("409 that is not a lack of hosts: %s", b)
			}
		})
	}
	wg.Wait()
	t.Logf("status codes: %v", codes)
	if codes[201] == 0 || codes[201]+codes[409] != n {
		t.Errorf("want only 201 and 409, got %v", codes)
	}
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	over, err := leasestest.Overlaps(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range over {
		t.Error("double booking: " + o)
	}
}
