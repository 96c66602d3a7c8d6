package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

var t0 = time.Date(2031, 3, 4, 12, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// host is a registered host row: API id, hypervisor hostname, service.
type host struct {
	id            int64
	node, service string
}

// lease is one lease with one reservation holding hosts (API ids).
type lease struct {
	project, resType, resStatus string
	start, end                  time.Time
	hosts                       []string
}

type fixture struct {
	d   *db.DB
	svc *Service
	clk *clock
	hs  *hosts.Service
	n   int
}

func newFixture(t testing.TB, d *db.DB, hs []host) *fixture {
	t.Helper()
	f := &fixture{d: d, clk: &clock{t: t0}}
	f.hs = hosts.New(d, standalone.New(nil))
	f.svc = New(d, f.hs, f.clk.now)
	addHosts(t, d, hs)
	return f
}

// addHosts inserts computehosts rows and moves the hosts marker, as a
// registration does (the providers are not needed here).
func addHosts(t testing.TB, d *db.DB, hs []host) {
	t.Helper()
	rows := make([]models.ComputeHost, len(hs))
	for i, h := range hs {
		rows[i] = models.ComputeHost{ID: h.id, HypervisorHostname: h.node, ServiceName: h.service, HypervisorType: "fake",
			Reservable: true, CPUInfo: "{}", CreatedAt: t0, ComputeProviderUUID: fmt.Sprintf("00000000-0000-0000-0000-%012d", h.id)}
	}
	err := d.Write(context.Background(), func(tx *gorm.DB) error {
		if len(rows) > 0 {
			if err := tx.CreateInBatches(rows, 500).Error; err != nil {
				return err
			}
		}
		return hosts.BumpMarkerTx(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fataler is what add needs of a test (testing.TB or rapid.T).
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// add inserts l and returns its reservation id.
func (f *fixture) add(t fataler, l lease) string {
	t.Helper()
	f.n++
	leaseID := fmt.Sprintf("1ea5e000-0000-4000-8000-%012d", f.n)
	resID := fmt.Sprintf("2e5e0000-0000-4000-8000-%012d", f.n)
	leaseStatus := map[string]string{"pending": "PENDING", "active": "ACTIVE", "deleted": "TERMINATED", "error": "ERROR"}[l.resStatus]
	rows := []any{
		&models.Lease{ID: leaseID, Name: leaseID, ProjectID: l.project, UserID: "u", StartDate: l.start, EndDate: l.end, Status: leaseStatus, CreatedAt: t0},
		&models.Reservation{ID: resID, LeaseID: leaseID, ResourceID: resID, ResourceType: l.resType, Status: l.resStatus, CreatedAt: t0},
	}
	for i, h := range l.hosts {
		rows = append(rows, &models.ComputeHostAllocation{ID: fmt.Sprintf("a110c000-0000-4000-8000-%06d%06d", f.n, i),
			ReservationID: resID, ComputeHostID: h, StartDate: l.start, EndDate: l.end, CreatedAt: t0})
	}
	err := f.d.Write(context.Background(), func(tx *gorm.DB) error {
		for _, r := range rows {
			if err := tx.Create(r).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return resID
}

func body(project string, hint any, flavor map[string]any, hostNames ...string) map[string]any {
	hs := make([]any, len(hostNames))
	for i, h := range hostNames {
		hs[i] = h
	}
	b := map[string]any{"project_id": project, "user_id": "u1", "hosts": hs, "flavor": flavor, "explain": true}
	if hint != nil {
		b["scheduler_hints"] = map[string]any{"reservation": hint}
	}
	return b
}

func stamp(t time.Time) string { return t.Format(time.RFC3339) }

// TestFilter: the decision and every reason, on both databases.
func TestFilter(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) { testFilter(t, dialect) })
	}
}

func testFilter(t *testing.T, dialect db.Dialect) {
	ctx := context.Background()
	f := newFixture(t, dbtest.OpenDialect(t, dialect), []host{
		{1, "compute1", "svc1"}, {2, "compute2", "svc2"}, {3, "compute3", "svc3"}, {4, "compute4", "svc4"},
		{5, "compute5", "svc5"}, {6, "node-a", "ironic"}, {7, "node-b", "ironic"}, {9, "compute9", "svc9"},
		{10, "compute10", "svc10"}, {11, "compute11", "svc11"},
	})
	// compute11 takes no new reservations.
	err := f.d.Write(context.Background(), func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE computehosts SET reservable = ? WHERE id = 11", false).Error; err != nil {
			return err
		}
		return hosts.BumpMarkerTx(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	h := time.Hour
	r1 := f.add(t, lease{"p1", "physical:host", "active", t0.Add(-h), t0.Add(h), []string{"1", "2"}})
	r2 := f.add(t, lease{"p2", "physical:host", "active", t0.Add(-h), t0.Add(2 * h), []string{"3"}})
	r3 := f.add(t, lease{"p1", "physical:host", "pending", t0.Add(h), t0.Add(2 * h), []string{"4"}})
	r4 := f.add(t, lease{"p1", "physical:host", "active", t0.Add(-3 * h), t0.Add(-2 * h), []string{"5"}}) // end not run yet
	r5 := f.add(t, lease{"p1", "virtual:instance", "active", t0.Add(-h), t0.Add(h), []string{"5", "6"}})
	r6 := f.add(t, lease{"p1", "virtual:floatingip", "active", t0.Add(-h), t0.Add(h), nil})
	// Started on time but its start event has not run yet.
	r7 := f.add(t, lease{"p1", "physical:host", "pending", t0.Add(-time.Minute), t0.Add(h), []string{"4"}})
	// compute9: a long instance reservation holds it now; a shorter one
	// starting later ends first (the first allocation by end is not
	// the one holding the host). compute10: booked only later.
	r8 := f.add(t, lease{"p2", "virtual:instance", "active", t0.Add(-h), t0.Add(5 * h), []string{"9"}})
	f.add(t, lease{"p2", "virtual:instance", "pending", t0.Add(h), t0.Add(2 * h), []string{"9", "10"}})
	unknown := "99999999-0000-4000-8000-000000000000"
	all := []string{"compute1", "compute2", "compute3", "compute4", "compute5", "elsewhere"}
	freePool := "in Leasehold's free pool: it takes instances only through a reservation"
	notIn := func(r string) string { return "not a host of reservation " + r }
	same := func(reason string, names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = reason
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		body     map[string]any
		pass     []string
		rejected map[string]string
	}{
		{"no hint: only hosts unknown to Leasehold", body("p1", nil, nil, all...), []string{"elsewhere"}, map[string]string{
			"compute1": "reserved by reservation " + r1 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it",
			"compute2": "reserved by reservation " + r1 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it",
			"compute3": "reserved by reservation " + r2 + " until " + stamp(t0.Add(2*h)) + "; boot with that reservation to use it",
			"compute4": "reserved by reservation " + r7 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it",
			"compute5": "reserved by reservation " + r5 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it",
		}},
		{"no hint: overlapping instance reservations, later bookings", body("p1", nil, nil, "compute9", "compute10"), nil, map[string]string{
			"compute9":  "reserved by reservation " + r8 + " until " + stamp(t0.Add(5*h)) + "; boot with that reservation to use it",
			"compute10": freePool,
		}},
		{"no hint: a host taking no reservations", body("p1", nil, nil, "compute11"), nil, map[string]string{
			"compute11": "registered in Leasehold and not reservable (maintenance, or reported down): it takes no instances without a reservation"}},
		{"no hint, not explained", map[string]any{"project_id": "p1", "hosts": []any{"compute1", "compute10", "elsewhere"}},
			[]string{"elsewhere"}, same(registered, "compute1", "compute10")},
		{"hint: the reservation's hosts", body("p1", r1, nil, all...), []string{"compute1", "compute2"},
			same(notIn(r1), "compute3", "compute4", "compute5", "elsewhere")},
		{"hint as Nova's list", body("p1", []any{r1, r1}, nil, "compute2", "compute3"), []string{"compute2"},
			same(notIn(r1), "compute3")},
		{"hint of another project", body("p2", r1, nil, all...), nil,
			same("reservation "+r1+" belongs to another project", all...)},
		{"hint of a future reservation", body("p1", r3, nil, "compute4"), nil,
			same("reservation "+r3+" is not active (status pending, lease PENDING)", "compute4")},
		{"hint of a reservation whose start has not run", body("p1", r7, nil, "compute4"), nil,
			same("reservation "+r7+" is not active (status pending, lease PENDING)", "compute4")},
		{"hint of an ended reservation", body("p1", r4, nil, "compute5"), nil,
			same("reservation "+r4+" ended at "+stamp(t0.Add(-2*h)), "compute5")},
		{"hint of no reservation", body("p1", unknown, nil, "compute1", "elsewhere"), nil,
			same("reservation "+unknown+" does not exist", "compute1", "elsewhere")},
		{"hint of a floating-IP reservation", body("p1", r6, nil, "compute1"), nil,
			same("reservation "+r6+" (virtual:floatingip) holds no hosts", "compute1")},
		{"instance-reservation flavor", body("p1", nil, map[string]any{"extra_specs": map[string]any{
			"resources:" + ClassOfReservation(r5): "1", "resources:VCPU": "2"}}, all...), []string{"compute5"},
			same(notIn(r5), "compute1", "compute2", "compute3", "compute4", "elsewhere")},
		{"instance-reservation flavor by requested resources", body("p1", nil, map[string]any{
			"resources": map[string]any{ClassOfReservation(r5): 1.0}}, "node-a", "compute5"), []string{"node-a", "compute5"}, map[string]string{}},
		{"upstream's flavor extra spec", body("p1", nil, map[string]any{"extra_specs": map[string]any{
			"aggregate_instance_extra_specs:reservation": r5}}, "compute5", "compute1"), []string{"compute5"}, same(notIn(r5), "compute1")},
		{"instance-reservation flavor of another project", body("p2", nil, map[string]any{"extra_specs": map[string]any{
			"resources1:" + ClassOfReservation(r5): "1"}}, "compute5"), nil, same("reservation "+r5+" belongs to another project", "compute5")},
		{"hint and flavor: both must pass", body("p1", r1, map[string]any{"extra_specs": map[string]any{
			"resources:" + ClassOfReservation(r5): "1"}}, "compute1", "compute5"), nil,
			map[string]string{"compute1": notIn(r5), "compute5": notIn(r1)}},
		{"a zero amount names no reservation", body("p1", nil, map[string]any{"extra_specs": map[string]any{
			"resources:" + ClassOfReservation(r5): "0"}}, "compute5", "elsewhere"), []string{"elsewhere"},
			map[string]string{"compute5": "reserved by reservation " + r5 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it"}},
		{"service host name of one node is that node", body("p1", r1, nil, "svc1", "svc3"), []string{"svc1"}, same(notIn(r1), "svc3")},
		{"service host name of several nodes is not resolved", body("p1", nil, nil, "ironic", "node-b"), []string{"ironic"},
			same(freePool, "node-b")},
		{"duplicates answered once", body("p1", nil, nil, "elsewhere", "compute4", "elsewhere"), []string{"elsewhere"},
			map[string]string{"compute4": "reserved by reservation " + r7 + " until " + stamp(t0.Add(h)) + "; boot with that reservation to use it"}},
		{"no candidates", body("p1", r1, nil), nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseRequest(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.svc.Filter(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want := &Result{Hosts: tc.pass, Rejected: tc.rejected}
			if want.Hosts == nil {
				want.Hosts = []string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}

	// Time moves on: at r1's end its hosts are free-pool hosts, and the
	// hint no longer passes them.
	f.clk.set(t0.Add(h))
	got, err := f.svc.Filter(ctx, mustParse(t, body("p1", r1, nil, "compute1")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"compute1": "reservation " + r1 + " ended at " + stamp(t0.Add(h))}, got.Rejected); diff != "" {
		t.Errorf("after the end (-want +got):\n%s", diff)
	}
	got, err = f.svc.Filter(ctx, mustParse(t, body("p1", nil, nil, "compute1")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"compute1": freePool}, got.Rejected); diff != "" {
		t.Errorf("no hint after the end (-want +got):\n%s", diff)
	}

	// A host registered after the name index was built is seen.
	addHosts(t, f.d, []host{{8, "elsewhere", "svc8"}})
	got, err = f.svc.Filter(ctx, mustParse(t, body("p1", nil, nil, "elsewhere")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"elsewhere": freePool}, got.Rejected); diff != "" {
		t.Errorf("new host (-want +got):\n%s", diff)
	}
}

func mustParse(t testing.TB, b map[string]any) Request {
	t.Helper()
	req, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestClassRoundTrip: the class name of a Leasehold reservation id leads
// back to the id.
func TestClassRoundTrip(t *testing.T) {
	id := "5f3a1c2e-9b7d-4e21-8c6f-0a1b2c3d4e5f"
	class := ClassOfReservation(id)
	if class != "CUSTOM_RESERVATION_5F3A1C2E_9B7D_4E21_8C6F_0A1B2C3D4E5F" {
		t.Errorf("class %s", class)
	}
	if got := ReservationOfClass(class); got != id {
		t.Errorf("id %s, want %s", got, id)
	}
}
