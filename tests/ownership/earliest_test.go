package ownership_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// clockServer is the Blazar API (hosts, leases, the earliest window, the
// ownership API) on a fixed clock.
func clockServer(t *testing.T, clock *leasestest.Clock) *httptest.Server {
	t.Helper()
	d := dbtest.Open(t)
	hsvc := hosts.New(d, standalone.New(nil))
	hsvc.SetClock(clock.Now)
	own := ownership.New(d, hsvc, clock.Now)
	hp := hostplugin.New(hsvc, d.DB, hostplugin.Config{CheckHosts: hosts.ReservableTx, Ownership: own}, clock.Now)
	reg, err := plugins.NewRegistry(hp)
	if err != nil {
		t.Fatal(err)
	}
	lsvc := leases.New(d, reg, leases.Config{}, clock.Now, nil)
	rt := blazarapi.NewRouter()
	blazarapi.RegisterHosts(rt, hsvc)
	blazarapi.RegisterLeases(rt, lsvc)
	blazarapi.RegisterEarliest(rt, lsvc)
	blazarapi.RegisterOwnership(rt, own, hp)
	ts := httptest.NewServer(http.StripPrefix("/v1", rt.Handler(blazarapi.NoAuth{})))
	t.Cleanup(ts.Close)
	if err := own.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestEarliestReclaims: a (PA) borrows b's (PB) host now; b, asking for
// it now, is refused until its lending grace period of an hour is over
// and pointed at "start_date": "earliest"; the earliest window starts
// then, and the lease created there reclaims the host: PA's lease is
// shortened to that start and both leases say so. The clock stands at
// 10:00:30, so the reclaim time is the next whole minute after the hour.
func TestEarliestReclaims(t *testing.T) {
	clock := leasestest.NewClock(time.Date(2030, 1, 1, 10, 0, 30, 0, time.UTC))
	ts := clockServer(t, clock)
	val := specValidator(t, filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml"))
	for i := 1; i <= 2; i++ {
		if status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i)); status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB"}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 2}, {"consumer": "a", "group": "rack1", "amount": 1},
             {"consumer": "b", "group": "rack1", "amount": 1, "lend": true, "lend_grace_seconds": 3600}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	status, body := do(t, ts, "u:PA", "POST", "/v1/leases", leaseBody("pa", "now", "2030-01-03 00:00", 2))
	if status != 201 {
		t.Fatalf("PA's lease: %d %v", status, body)
	}
	borrower := body["lease"].(map[string]any)["id"].(string)
	if got := describe(entries(t, getLease(t, ts, val, borrower))); got != "owned:a, private:dom lent by b" {
		t.Fatalf("PA's pools = %s", got)
	}

	const at = "2030-01-01T11:01:00Z"
	status, body = do(t, ts, "u:PB", "POST", "/v1/leases", leaseBody("pb-now", "now", "2030-01-02 00:00", 1))
	msg := fmt.Sprint(body["error_message"])
	if status != 409 || !strings.Contains(msg, "for a lease starting at "+at+" or later") || !strings.Contains(msg, `"start_date": "earliest"`) {
		t.Fatalf("PB now: %d %v", status, body)
	}
	const stamp = "2030-01-01T11:01:00.000000"
	status, body = do(t, ts, "u:PB", "POST", "/v1/leases/earliest", `{"duration": 3600,
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`)
	if status != 200 || body["earliest"].(map[string]any)["start_date"] != stamp {
		t.Fatalf("PB's earliest window: %d %v", status, body)
	}
	status, body = do(t, ts, "u:PB", "POST", "/v1/leases", `{"name": "pb", "start_date": "earliest", "duration": 3600, "events": [],
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`)
	if status != 201 {
		t.Fatalf("PB at earliest: %d %v", status, body)
	}
	owner := body["lease"].(map[string]any)["id"].(string)
	o := getLease(t, ts, val, owner)
	if o["start_date"] != stamp || describe(entries(t, o)) != "owned:b reclaimed" {
		t.Fatalf("PB's lease starts %v with %s", o["start_date"], describe(entries(t, o)))
	}
	b := getLease(t, ts, val, borrower)
	if b["end_date"] != stamp || describe(entries(t, b)) != "owned:a, private:dom lent by b shortened" {
		t.Fatalf("PA's lease ends %v with %s", b["end_date"], describe(entries(t, b)))
	}
	for _, e := range entries(t, b) {
		if r, ok := e["reclaim"].(map[string]any); ok && (r["by_lease"] != owner || r["at"] != stamp || r["grace_seconds"] != float64(3600)) {
			t.Fatalf("PA's reclaim note = %v", r)
		}
	}
}
