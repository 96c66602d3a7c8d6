package ownership_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// lister lets the ownership service read the test's hosts.
type lister struct{ *leasestest.Hosts }

func (l lister) List(ctx context.Context) ([]hosts.Host, error) { return l.Reservable(ctx) }

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a lease engine with the host plugin and the ownership policy on
// one database.
type env struct {
	d      *db.DB
	own    *ownership.Service
	leases *leases.Service
	clock  *leasestest.Clock
}

func newEnv(t *testing.T, d *db.DB, n int, plan ownership.Plan) *env {
	t.Helper()
	return newEnvCleaning(t, d, n, plan, 0)
}

// newEnvCleaning is newEnv with a cleaning time between host bookings.
func newEnvCleaning(t *testing.T, d *db.DB, n int, plan ownership.Plan, cleaning time.Duration) *env {
	t.Helper()
	return newEnvHosts(t, d, n, func(int) map[string]string { return map[string]string{"rack": "r1"} }, plan, cleaning)
}

// newEnvHosts is newEnvCleaning with host i's properties props(i).
func newEnvHosts(t *testing.T, d *db.DB, n int, props func(int) map[string]string, plan ownership.Plan, cleaning time.Duration) *env {
	t.Helper()
	hs := leasestest.NewHosts(n, props)
	clock := leasestest.NewClock(t0)
	own := ownership.New(d, lister{hs}, clock.Now)
	hp := hostplugin.New(hs, d.DB, hostplugin.Config{Ownership: own, Cleaning: cleaning}, clock.Now)
	reg, err := plugins.NewRegistry(hp)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{d: d, own: own, leases: leases.New(d, reg, leases.Config{}, clock.Now, nil), clock: clock}
	if len(plan.Consumers) > 0 {
		if _, err := own.Update(context.Background(), 0, func(p *ownership.Plan) error { *p = plan; return nil }); err != nil {
			t.Fatal(err)
		}
	} else if err := own.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) create(project, start, end string, n int) (*leases.View, error) {
	req := leasestest.Request(project+"-lease", start, end, leasestest.HostReservation(n, n, "", ""))
	return e.leases.Create(context.Background(), leases.Caller{ProjectID: project, UserID: "u"}, req)
}

func (e *env) get(t *testing.T, id string) *leases.View {
	t.Helper()
	v, err := e.leases.Get(context.Background(), leases.Caller{Admin: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pools is a lease's ownership entries (its one reservation's) without
// the host ids, which the allocator picks.
func pools(t *testing.T, v *leases.View) []hostplugin.PoolEntry {
	t.Helper()
	if len(v.Reservations) != 1 {
		t.Fatalf("lease %s has %d reservations", v.ID, len(v.Reservations))
	}
	raw, ok := v.Reservations[0]["ownership"]
	if !ok {
		return nil
	}
	es, ok := raw.([]hostplugin.PoolEntry)
	if !ok {
		t.Fatalf("ownership field of type %T", raw)
	}
	return es
}

func kinds(es []hostplugin.PoolEntry) []string {
	var out []string
	for _, e := range es {
		s := e.Pool
		if e.Consumer != "" {
			s += ":" + e.Consumer
		}
		if e.LentBy != "" {
			s += " lent by " + e.LentBy
		}
		out = append(out, s)
	}
	return out
}

// twoUnderOne: dom owns 3 of 5 hosts, a (PA) and b (PB) one each, so dom
// keeps one private host; two hosts are public. b lends its host.
func twoUnderOne(bLimit *int) ownership.Plan {
	return ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: bLimit}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 3}, {Consumer: "a", Group: "rack1", Amount: 1},
			{Consumer: "b", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
}

func TestLeasesRecordTheirPools(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 5, twoUnderOne(nil))
			var got []string
			var ids []string
			for range 5 {
				v, err := e.create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 1)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, v.ID)
				got = append(got, kinds(pools(t, e.get(t, v.ID)))...)
			}
			// Owned, then dom's private pool, then what b lends into it, then
			// the public pool.
			want := []string{"owned:a", "private:dom", "private:dom lent by b", "public", "public"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("pools of PA's five leases (-want +got):\n%s", diff)
			}
			// The listing shows the same entries.
			list, err := e.leases.List(context.Background(), leases.Caller{Admin: true})
			if err != nil {
				t.Fatal(err)
			}
			// (in the listing's order: by creation, the clock stood still)
			var listed []hostplugin.PoolEntry
			for _, v := range list {
				listed = append(listed, pools(t, v)...)
			}
			if diff := cmp.Diff([]string{"owned:a", "private:dom", "private:dom lent by b", "public", "public"}, sortedKinds(listed)); diff != "" {
				t.Fatalf("pools in the listing (-want +got):\n%s", diff)
			}
			// No host left for a sixth.
			if _, err := e.create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 1); !errs.Is(err, errs.NotEnoughResources) {
				t.Fatalf("sixth lease: %v", err)
			}
			// An update that adds a host draws from the pools: the first
			// lease (owned) grows to two hosts in a window where only the
			// public pool has one left after the others move.
			if err := e.leases.Delete(context.Background(), leases.Caller{Admin: true}, ids[3]); err != nil {
				t.Fatal(err)
			}
			v, err := e.leases.Update(context.Background(), leases.Caller{Admin: true}, ids[0], leases.UpdateRequest{
				Reservations: []leases.ReservationUpdate{{ID: e.get(t, ids[0]).Reservations[0]["id"].(string), Values: plugins.Values{"min": 2, "max": 2}}}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"owned:a", "public"}, sortedKinds(pools(t, v))); diff != "" {
				t.Fatalf("pools after the update (-want +got):\n%s", diff)
			}
		})
	}
}

func sortedKinds(es []hostplugin.PoolEntry) []string {
	k := kinds(es)
	for i := 1; i < len(k); i++ {
		for j := i; j > 0 && k[j] < k[j-1]; j-- {
			k[j], k[j-1] = k[j-1], k[j]
		}
	}
	return k
}

func TestNoOwnershipFieldWithoutAPlan(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, ownership.Plan{})
			v, err := e.create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := e.get(t, v.ID).Reservations[0]["ownership"]; ok {
				t.Fatalf("a lease made with ownership off has an ownership field: %v", e.get(t, v.ID).Reservations[0])
			}
			list, err := e.leases.List(context.Background(), leases.Caller{Admin: true})
			if err != nil || len(list) != 1 {
				t.Fatalf("listing: %v, %v", list, err)
			}
			if _, ok := list[0].Reservations[0]["ownership"]; ok {
				t.Fatalf("the listing shows an ownership field with ownership off")
			}
		})
	}
}

func intp(n int) *int { return &n }

// b lends its two hosts with a lending limit of one: a borrower gets one
// of them at a time, and a refusal names the limit.
func TestLendingLimit(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: intp(1)}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 3}, {Consumer: "a", Group: "rack1", Amount: 1},
			{Consumer: "b", Group: "rack1", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 3, plan)
			// Two hosts at once: a's own and one of b's.
			v, err := e.create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"owned:a", "private:dom lent by b"}, sortedKinds(pools(t, e.get(t, v.ID)))); diff != "" {
				t.Fatalf("pools (-want +got):\n%s", diff)
			}
			// A second loan overlapping it is beyond b's limit, though b's
			// other host is free.
			_, err = e.create("PA", "2030-02-01 12:00", "2030-02-03 00:00", 1)
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), `consumer "b" lends at most 1 hosts at once and has 0 left`) {
				t.Fatalf("loan beyond the limit: %v", err)
			}
			// Three at once: refused for the limit too.
			_, err = e.create("PA", "2030-03-01 00:00", "2030-03-02 00:00", 3)
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), `lending limits`) {
				t.Fatalf("three hosts: %v", err)
			}
			// After the first loan ends b lends again.
			if _, err := e.create("PA", "2030-02-02 00:00", "2030-02-03 00:00", 1); err != nil {
				t.Fatalf("loan after the first: %v", err)
			}
			// b's own lease is no loan: b uses both its hosts.
			if _, err := e.create("PB", "2030-02-05 00:00", "2030-02-06 00:00", 2); err != nil {
				t.Fatalf("b's own lease: %v", err)
			}
		})
	}
}

// a lends its host with a grace period of an hour; b borrows it now. a
// reclaims it: not before the hour is over; from then on b's lease is
// shortened and both leases say so.
func TestReclaimShortensTheBorrower(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", BorrowGraceSeconds: 600}},
		Groups:  []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 1}, {Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 1, plan)
			borrowed, err := e.create("PB", "2030-01-01 00:05", "2030-01-03 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"private:dom lent by a"}, kinds(pools(t, e.get(t, borrowed.ID)))); diff != "" {
				t.Fatalf("b's pools (-want +got):\n%s", diff)
			}
			// Within the grace period: refused, saying from when.
			_, err = e.create("PA", "2030-01-01 00:30", "2030-01-02 00:00", 1)
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), "starting at 2030-01-01T01:00:00Z or later") {
				t.Fatalf("reclaim within the grace period: %v", err)
			}
			if got := e.get(t, borrowed.ID); got.EndDate != "2030-01-03T00:00:00.000000" || pools(t, got)[0].Reclaim != nil {
				t.Fatalf("b's lease changed by a refused reclaim: %+v", got)
			}
			// After it: a gets its host from 02:00, b's lease ends then.
			owner, err := e.create("PA", "2030-01-01 02:00", "2030-01-02 00:00", 1)
			if err != nil {
				t.Fatalf("reclaim: %v", err)
			}
			b := e.get(t, borrowed.ID)
			if b.EndDate != "2030-01-01T02:00:00.000000" {
				t.Fatalf("b's lease ends %s, want 2030-01-01T02:00:00.000000", b.EndDate)
			}
			for _, ev := range b.Events {
				if ev.EventType == "end_lease" && ev.Time != "2030-01-01T02:00:00.000000" {
					t.Fatalf("b's end event at %s", ev.Time)
				}
			}
			wantB := &hostplugin.Reclaim{Action: "shortened", At: "2030-01-01T02:00:00.000000", ByLease: owner.ID,
				OriginalEnd: "2030-01-03T00:00:00.000000", GraceSeconds: 3600}
			if diff := cmp.Diff(wantB, pools(t, b)[0].Reclaim); diff != "" {
				t.Fatalf("b's reclaim note (-want +got):\n%s", diff)
			}
			a := e.get(t, owner.ID)
			wantA := &hostplugin.Reclaim{Action: "reclaimed", At: "2030-01-01T02:00:00.000000", FromLease: borrowed.ID, GraceSeconds: 3600}
			if diff := cmp.Diff(wantA, pools(t, a)[0].Reclaim); diff != "" || pools(t, a)[0].Pool != "owned" {
				t.Fatalf("a's entry %+v, reclaim note (-want +got):\n%s", pools(t, a)[0], diff)
			}
			// The host is b's until 02:00: b may not have it again after.
			if _, err := e.create("PB", "2030-01-01 03:00", "2030-01-01 04:00", 1); !errs.Is(err, errs.NotEnoughResources) {
				t.Fatalf("b books the reclaimed window: %v", err)
			}
			// The events hand the host over at 02:00: b's lease ends, a's
			// starts.
			mgr := events.New(e.d, e.leases, events.Config{}, e.clock.Now)
			for _, at := range []string{"00:05", "02:00"} {
				tm, _ := time.Parse("15:04", at)
				e.clock.Set(t0.Add(time.Duration(tm.Hour())*time.Hour + time.Duration(tm.Minute())*time.Minute))
				if _, err := mgr.RunDue(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if b, a := e.get(t, borrowed.ID), e.get(t, owner.ID); b.Status != "TERMINATED" || a.Status != "ACTIVE" {
				t.Fatalf("at 02:00 b is %s and a %s; want TERMINATED and ACTIVE", b.Status, a.Status)
			}
		})
	}
}

// With reclaim set on its plan entry, an owner takes back its lent host
// even though a public host is idle; without it, it takes the public
// host and the borrower keeps its lease.
func TestEagerReclaim(t *testing.T) {
	type run struct {
		dialect db.Dialect
		eager   bool
	}
	var runs []run
	for _, d := range dbtest.Dialects() {
		runs = append(runs, run{d, false}, run{d, true})
	}
	for _, c := range runs {
		eager := c.eager
		t.Run(string(c.dialect)+map[bool]string{false: "/lazy", true: "/eager"}[eager], func(t *testing.T) {
			plan := ownership.Plan{
				Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
					{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB"}},
				Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
				Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 1},
					{Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600, Reclaim: eager}},
			}
			e := newEnv(t, dbtest.OpenDialect(t, c.dialect), 2, plan)
			borrowed, err := e.create("PB", "2030-01-01 00:05", "2030-01-03 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(pools(t, e.get(t, borrowed.ID))); !cmp.Equal(got, []string{"private:dom lent by a"}) {
				t.Fatalf("b's pools = %v", got)
			}
			owner, err := e.create("PA", "2030-01-01 02:00", "2030-01-02 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			got := pools(t, e.get(t, owner.ID))[0]
			end := e.get(t, borrowed.ID).EndDate
			if eager {
				if got.Pool != "owned" || got.Reclaim == nil || end != "2030-01-01T02:00:00.000000" {
					t.Fatalf("eager owner got %+v, b ends %s", got, end)
				}
			} else if got.Pool != "public" || got.Reclaim != nil || end != "2030-01-03T00:00:00.000000" {
				t.Fatalf("lazy owner got %+v, b ends %s", got, end)
			}
		})
	}
}

// A loan that has not begun by the reclaim time moves to a free host of
// the borrower's pools and keeps its window; without one the owner is
// refused and nothing changes.
func TestReclaimMovesALoanNotBegun(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB"}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 1},
			{Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			for _, room := range []bool{true, false} {
				e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, plan)
				// b takes a's lent host (it comes before the public one)
				// for tomorrow; another project takes the public host,
				// until tonight (room) or over tomorrow too (no room).
				loan, err := e.create("PB", "2030-01-02 00:00", "2030-01-03 00:00", 1)
				if err != nil {
					t.Fatal(err)
				}
				otherEnd := "2030-01-01 23:00"
				if !room {
					otherEnd = "2030-01-04 00:00"
				}
				if _, err := e.create("PC", "2030-01-01 00:10", otherEnd, 1); err != nil {
					t.Fatal(err)
				}
				// a asks for its host from noon to 02:00 tomorrow.
				owner, err := e.create("PA", "2030-01-01 12:00", "2030-01-02 02:00", 1)
				b := e.get(t, loan.ID)
				got := pools(t, b)
				if !room {
					if !errs.Is(err, errs.NotEnoughResources) || got[0].Reclaim != nil || b.EndDate != "2030-01-03T00:00:00.000000" {
						t.Fatalf("no room: %v; b's entries %+v, end %s", err, got, b.EndDate)
					}
					continue
				}
				if err != nil {
					t.Fatalf("reclaim: %v", err)
				}
				if b.EndDate != "2030-01-03T00:00:00.000000" {
					t.Fatalf("the moved loan's lease ends %s", b.EndDate)
				}
				if len(got) != 1 || got[0].Reclaim == nil || got[0].Reclaim.Action != "moved" || got[0].Reclaim.ByLease != owner.ID ||
					got[0].Pool != "public" || got[0].HostID != got[0].Reclaim.MovedTo {
					t.Fatalf("b's entries after the move: %+v (reclaim %+v)", got, got[0].Reclaim)
				}
				a := pools(t, e.get(t, owner.ID))
				if len(a) != 1 || a[0].Pool != "owned" || a[0].Reclaim == nil || a[0].Reclaim.FromLease != loan.ID || a[0].HostID == got[0].HostID {
					t.Fatalf("a's entries: %+v, b's host %s", a, got[0].HostID)
				}
			}
		})
	}
}

// Concurrent borrowers from a lender with a lending limit of one: exactly
// one of them gets a loan over the same window, though the lender has two
// idle hosts.
func TestLendingLimitConcurrent(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: intp(1)},
			{ID: "c1", ParentID: "dom", Rank: 3, ProjectID: "P1"}, {ID: "c2", ParentID: "dom", Rank: 4, ProjectID: "P2"}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 2},
			{Consumer: "b", Group: "rack1", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, plan)
			errc := make(chan error, 4)
			for i := range 4 {
				go func() {
					_, err := e.create([]string{"P1", "P2"}[i%2], "2030-02-01 00:00", "2030-02-02 00:00", 1)
					errc <- err
				}()
			}
			ok, refused := 0, 0
			for range 4 {
				select {
				case err := <-errc:
					switch {
					case err == nil:
						ok++
					case errs.Is(err, errs.NotEnoughResources) && strings.Contains(err.Error(), "lending limit"):
						refused++
					default:
						t.Errorf("borrower: %v", err)
					}
				case <-time.After(time.Minute):
					t.Fatal("borrowers did not finish")
				}
			}
			if ok != 1 || refused != 3 {
				t.Fatalf("%d loans, %d refused for the limit; want 1 and 3", ok, refused)
			}
		})
	}
}

// A lease update that adds hosts keeps to the lending limits: growing
// onto a second loan from a lender that lends one at a time is refused
// with the limit named; moving the window re-checks the loans it keeps.
func TestUpdateKeepsLendingLimits(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: intp(1)}, {ID: "c", ParentID: "dom", Rank: 3, ProjectID: "PC"}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 3}, {Consumer: "a", Group: "rack1", Amount: 1},
			{Consumer: "b", Group: "rack1", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 3, plan)
			v, err := e.create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 2)
			if err != nil {
				t.Fatal(err)
			}
			resID := v.Reservations[0]["id"].(string)
			_, err = e.leases.Update(context.Background(), leases.Caller{Admin: true}, v.ID, leases.UpdateRequest{
				Reservations: []leases.ReservationUpdate{{ID: resID, Values: plugins.Values{"min": 3, "max": 3}}}})
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), `consumer "b" lends at most 1 hosts at once`) {
				t.Fatalf("growing onto a second loan: %v", err)
			}
			if got := sortedKinds(pools(t, e.get(t, v.ID))); !cmp.Equal(got, []string{"owned:a", "private:dom lent by b"}) {
				t.Fatalf("entries after the refused update: %v", got)
			}
			// Another borrower takes one of b's hosts over March; PA's
			// lease cannot move there with its loan (two at once).
			if _, err := e.create("PC", "2030-03-01 00:00", "2030-03-02 00:00", 1); err != nil {
				t.Fatal(err)
			}
			march := "2030-03-01 00:00"
			_, err = e.leases.Update(context.Background(), leases.Caller{Admin: true}, v.ID, leases.UpdateRequest{StartDate: &march, EndDate: ptr("2030-03-01 12:00")})
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), `consumer "b" lends at most 1 hosts at once`) {
				t.Fatalf("moving the loan onto another: %v", err)
			}
			if got := e.get(t, v.ID); got.StartDate != "2030-02-01T00:00:00.000000" {
				t.Fatalf("the refused update moved the lease to %s", got.StartDate)
			}
			// April is free: the lease moves with its loan.
			april := "2030-04-01 00:00"
			if _, err := e.leases.Update(context.Background(), leases.Caller{Admin: true}, v.ID, leases.UpdateRequest{StartDate: &april, EndDate: ptr("2030-04-02 00:00")}); err != nil {
				t.Fatalf("moving to April: %v", err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// A loan not begun is never moved onto a host its own reservation holds
// over the window: with no other room the owner is refused.
func TestReclaimMovesNotOntoItsOwnHosts(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB"}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 2}, {Consumer: "a", Group: "rack1", Amount: 1},
			{Consumer: "b", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, plan)
			// a takes its host and b's for tomorrow.
			loan, err := e.create("PA", "2030-01-02 00:00", "2030-01-03 00:00", 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.create("PB", "2030-01-01 12:00", "2030-01-02 02:00", 1); !errs.Is(err, errs.NotEnoughResources) {
				t.Fatalf("b's reclaim with no room to move a's loan: %v", err)
			}
			es := pools(t, e.get(t, loan.ID))
			if len(es) != 2 || es[0].HostID == es[1].HostID || es[0].Reclaim != nil || es[1].Reclaim != nil {
				t.Fatalf("a's entries: %+v", es)
			}
		})
	}
}

// A busy host a plan hands to a new owner keeps its workload for the
// owner's lending grace period, then the owner takes it back like a
// loan (the seed's step 4: the lending grace period is enforced on the
// existing allocations), although the owner does not lend.
func TestReclaimHandedOverHost(t *testing.T) {
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "a", Rank: 1, ProjectID: "PA"}},
		Groups:    []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries:   []ownership.Entry{{Consumer: "a", Group: "rack1", Amount: 1, LendGraceSeconds: 3600}},
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 1, ownership.Plan{})
			// Booked before there was a plan: no pool record.
			held, err := e.create("PB", "2030-01-01 00:05", "2030-01-03 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			if es := pools(t, e.get(t, held.ID)); es != nil {
				t.Fatalf("pool entries without a plan: %+v", es)
			}
			if _, err := e.own.Update(context.Background(), 0, func(p *ownership.Plan) error { *p = plan; return nil }); err != nil {
				t.Fatal(err)
			}
			_, err = e.create("PA", "2030-01-01 00:30", "2030-01-02 00:00", 1)
			if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), "held by other projects (lent, or booked before they became its own) and can be reclaimed, after their lending grace period, for a lease starting at 2030-01-01T01:00:00Z or later") {
				t.Fatalf("reclaim within the grace period: %v", err)
			}
			owner, err := e.create("PA", "2030-01-01 02:00", "2030-01-02 00:00", 1)
			if err != nil {
				t.Fatalf("reclaim of the handed-over host: %v", err)
			}
			b := e.get(t, held.ID)
			if b.EndDate != "2030-01-01T02:00:00.000000" {
				t.Fatalf("the earlier lease ends %s, want 2030-01-01T02:00:00.000000", b.EndDate)
			}
			es := pools(t, b)
			want := &hostplugin.Reclaim{Action: "shortened", At: "2030-01-01T02:00:00.000000", ByLease: owner.ID,
				OriginalEnd: "2030-01-03T00:00:00.000000", GraceSeconds: 3600}
			if len(es) != 1 || es[0].Pool != "public" {
				t.Fatalf("the earlier lease's entries %+v, want one public with the reclaim note", es)
			}
			if diff := cmp.Diff(want, es[0].Reclaim); diff != "" {
				t.Fatalf("reclaim note (-want +got):\n%s", diff)
			}
		})
	}
}

// A host booked for later is workload: when a plan change trims an
// owner, the recomputation takes its idle host and leaves the one its
// lease next week holds, whichever host the tie-break would pick.
func TestTrimKeepsHostsBookedLater(t *testing.T) {
	cons := []ownership.Consumer{{ID: "a", Rank: 1, ProjectID: "PA"}, {ID: "b", Rank: 2, ProjectID: "PB"}}
	groups := []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			for _, booked := range []int{0, 1} { // b's lease takes its first or second host
				e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, ownership.Plan{Consumers: cons, Groups: groups,
					Entries: []ownership.Entry{{Consumer: "b", Group: "rack1", Amount: 2}}})
				var ids []string
				for range booked + 1 {
					l, err := e.create("PB", "2030-01-08 00:00", "2030-01-09 00:00", 1)
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, l.ID)
				}
				// Keep only the lease on the host wanted booked.
				for _, id := range ids[:booked] {
					if err := e.leases.Delete(context.Background(), leases.Caller{Admin: true}, id); err != nil {
						t.Fatal(err)
					}
				}
				host := pools(t, e.get(t, ids[booked]))[0].HostID
				st, err := e.own.Update(context.Background(), 1, func(p *ownership.Plan) error {
					p.Entries = []ownership.Entry{{Consumer: "a", Group: "rack1", Amount: 1}, {Consumer: "b", Group: "rack1", Amount: 1}}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := st.Ownership["b"][host]; !ok || len(st.Ownership["b"]) != 1 {
					t.Fatalf("b owns %v after the trim, want only %s (booked next week)", st.Ownership["b"], host)
				}
			}
		})
	}
}
