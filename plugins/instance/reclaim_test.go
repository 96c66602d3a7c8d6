package instance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/instance"
)

// newReclaimEnv is n hosts: compute-1, which a (p1) owns under dom and
// lends with a grace period of an hour, and public ones; b (p2) is a's
// sibling. Both plugins follow the ownership policy, as the server wires
// them.
func newReclaimEnv(t testing.TB, d *db.DB, n int) *ownEnv {
	t.Helper()
	hook := &lateHook{}
	e := newEnvHost(t, d, n, nil, instance.Config{Ownership: hook, DB: d}, hostplugin.Config{Ownership: hook})
	o := ownership.New(d, e.hosts, e.clock.Now)
	hook.svc = o
	return &ownEnv{env: e, own: o}
}

// setReclaimPlan stores newReclaimEnv's plan.
func (oe *ownEnv) setReclaimPlan(t testing.TB) {
	t.Helper()
	oe.setPlan(t, 0, ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2"}},
		Groups: []ownership.Group{{Name: "g1", Hosts: []string{"1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1},
			{Consumer: "a", Group: "g1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	})
}

// entry is a reservation's one ownership entry.
func entry(t testing.TB, r map[string]any) hostplugin.PoolEntry {
	t.Helper()
	es, ok := r["ownership"].([]hostplugin.PoolEntry)
	if !ok || len(es) != 1 {
		t.Fatalf("ownership entries %v", r["ownership"])
	}
	return es[0]
}

// TestReclaimShortensAnInstanceLease: an owner's host request takes its
// host back from a sibling's instance lease that borrowed slots on it:
// refused within the lending grace period with the time from when,
// served after it, the borrower's lease, events, slots and entries cut
// to the reclaim time, and the events hand the host over.
func TestReclaimShortensAnInstanceLease(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		borrower, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		resID := borrower.Reservations[0]["id"].(string)
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); pools(t, got.Reservations[0]) != "1:private:dom<a" {
			t.Fatalf("b's slots from %s, want a's lent host", pools(t, got.Reservations[0]))
		}
		e.clock.Set(t0.Add(5 * time.Minute))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		host := func(start, end string) (*leases.View, error) {
			return e.svc.Create(ctx, pa, leasestest.Request("a", start, end, leasestest.HostReservation(1, 1, "", "")))
		}
		// Within the grace period (until 11:05): refused, saying from when.
		_, err = host("2030-01-01 10:30", "2030-01-02 00:00")
		if kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), "starting at 2030-01-01T11:05:00Z or later") {
			t.Fatalf("reclaim within the grace period: %v", err)
		}
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); got.EndDate != "2030-01-03T00:00:00.000000" || entry(t, got.Reservations[0]).Reclaim != nil {
			t.Fatalf("b's lease changed by a refused reclaim: %+v", got)
		}
		// The earliest window says the same.
		hostRes := []leases.ReservationRequest{leasestest.Reservation(leasestest.HostReservation(1, 1, "", ""))}
		if win, err := e.svc.Earliest(ctx, pa, leases.EarliestRequest{Duration: time.Hour, Reservations: hostRes}); err != nil || win.StartDate != "2030-01-01T11:05:00.000000" {
			t.Fatalf("earliest = %+v, %v; want 11:05", win, err)
		}
		owner, err := host("2030-01-01 12:00", "2030-01-02 00:00")
		if err != nil {
			t.Fatalf("reclaim after the grace period: %v", err)
		}
		b, err := e.svc.Get(ctx, pb, borrower.ID)
		if err != nil {
			t.Fatal(err)
		}
		const at = "2030-01-01T12:00:00.000000"
		if b.EndDate != at || b.Status != "ACTIVE" {
			t.Fatalf("b's lease %s ends %s, want ACTIVE until %s", b.Status, b.EndDate, at)
		}
		for _, ev := range b.Events {
			if ev.EventType == "end_lease" && ev.Time != at {
				t.Fatalf("b's end event at %s", ev.Time)
			}
		}
		want := &hostplugin.Reclaim{Action: "shortened", At: at, ByLease: owner.ID, OriginalEnd: "2030-01-03T00:00:00.000000", GraceSeconds: 3600}
		if diff := cmp.Diff(want, entry(t, b.Reservations[0]).Reclaim); diff != "" {
			t.Fatalf("b's reclaim note (-want +got):\n%s", diff)
		}
		// The listing shows the note too.
		list, err := e.svc.List(ctx, pb)
		if err != nil || len(list) != 1 {
			t.Fatalf("b's listing: %v, %v", list, err)
		}
		if diff := cmp.Diff(want, entry(t, list[0].Reservations[0]).Reclaim); diff != "" {
			t.Fatalf("b's listed reclaim note (-want +got):\n%s", diff)
		}
		// The slots end at the reclaim time in both allocation tables.
		var rows []struct {
			End   time.Time
			Span  int64
			Slots int
		}
		if err := d.Raw("SELECT end_date AS end, span_s AS span, slots FROM instance_allocations WHERE reservation_id = ?", resID).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || !rows[0].End.UTC().Equal(t0.Add(2*time.Hour)) || rows[0].Span != int64((115*time.Minute)/time.Second) || rows[0].Slots != 2 {
			t.Fatalf("b's slots after the reclaim: %+v", rows)
		}
		var late int64
		if err := d.Raw("SELECT COUNT(*) FROM computehost_allocations WHERE reservation_id = ? AND end_date > ?", resID, t0.Add(2*time.Hour)).Scan(&late).Error; err != nil {
			t.Fatal(err)
		}
		if late != 0 {
			t.Fatalf("%d of b's host bookings end after the reclaim time", late)
		}
		a, err := e.svc.Get(ctx, pa, owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantA := &hostplugin.Reclaim{Action: "reclaimed", At: at, FromLease: borrower.ID, GraceSeconds: 3600}
		if ea := entry(t, a.Reservations[0]); ea.Pool != "owned" || cmp.Diff(wantA, ea.Reclaim) != "" {
			t.Fatalf("a's entry %+v, reclaim %+v, want owned with %+v", ea, ea.Reclaim, wantA)
		}
		// The host is a's from 12:00: b's slots may not come back.
		if _, err := e.svc.Create(ctx, pb, leasestest.Request("b2", "2030-01-01 13:00", "2030-01-01 14:00", instanceRes(1, 2, 4096, 10, nil))); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("b books slots in the reclaimed window: %v", err)
		}
		e.clock.Set(t0.Add(2 * time.Hour))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		b, _ = e.svc.Get(ctx, pb, borrower.ID)
		a, _ = e.svc.Get(ctx, pa, owner.ID)
		if b.Status != "TERMINATED" || a.Status != "ACTIVE" {
			t.Fatalf("at 12:00 b is %s and a %s; want TERMINATED and ACTIVE", b.Status, a.Status)
		}
	})
}

// TestReclaimLeavesInstanceLeasesItCannotCut: slots that begin at or
// after the reclaim time cannot move: the owner is refused and the
// borrower keeps its lease.
func TestReclaimLeavesInstanceLeasesItCannotCut(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		later, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 13:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-01 20:00", leasestest.HostReservation(1, 1, "", "")))
		if kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("a reclaim moving slots: %v", err)
		}
		if got, _ := e.svc.Get(ctx, pb, later.ID); got.EndDate != "2030-01-02T00:00:00.000000" || entry(t, got.Reservations[0]).Reclaim != nil {
			t.Fatalf("b's lease changed by a refused reclaim: %+v", got)
		}
		// The earliest hour from 12:30 cuts the slots a minute after
		// they start (before, they would have to move).
		after := "2030-01-01 12:30"
		hostRes := []leases.ReservationRequest{leasestest.Reservation(leasestest.HostReservation(1, 1, "", ""))}
		if win, err := e.svc.Earliest(ctx, pa, leases.EarliestRequest{After: &after, Duration: time.Hour, Reservations: hostRes}); err != nil || win.StartDate != "2030-01-01T13:01:00.000000" {
			t.Fatalf("earliest = %+v, %v; want 13:01", win, err)
		}
	})
}

// TestReclaimShortensAMixedLease: b's lease borrows a's host for a host
// reservation and holds slots of the public host: the reclaim shortens
// the whole lease, its host booking and its slots alike.
func TestReclaimShortensAMixedLease(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 2)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		mixed, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00",
			leasestest.HostReservation(1, 1, "", ""), instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", leasestest.HostReservation(1, 1, "", ""))); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		b, err := e.svc.Get(ctx, pb, mixed.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.EndDate != "2030-01-01T12:00:00.000000" {
			t.Fatalf("b's lease ends %s", b.EndDate)
		}
		end := t0.Add(2 * time.Hour)
		for _, q := range []string{
			"SELECT COUNT(*) FROM instance_allocations a JOIN reservations r ON r.id = a.reservation_id WHERE r.lease_id = ? AND a.end_date <> ?",
			"SELECT COUNT(*) FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id WHERE r.lease_id = ? AND a.end_date <> ?",
		} {
			var n int64
			if err := d.Raw(q, mixed.ID, end).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("%d of b's bookings do not end at the reclaim time (%s)", n, q)
			}
		}
		var n int64
		if err := d.Raw("SELECT COUNT(*) FROM instance_allocations a JOIN reservations r ON r.id = a.reservation_id WHERE r.lease_id = ?", mixed.ID).Scan(&n).Error; err != nil || n != 1 {
			t.Fatalf("b's slot bookings: %d, %v", n, err)
		}
	})
}

// TestReclaimHandedOverSlots: b's instance lease booked compute-1 before
// the plan made it a's: a's host request takes it back like a loan,
// after the grace period of a's entry.
func TestReclaimHandedOverSlots(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		before, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		e.setReclaimPlan(t)
		host := func(start string) (*leases.View, error) {
			return e.svc.Create(ctx, pa, leasestest.Request("a", start, "2030-01-02 00:00", leasestest.HostReservation(1, 1, "", "")))
		}
		if _, err := host("2030-01-01 10:30"); kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), "starting at 2030-01-01T11:00:00Z or later") {
			t.Fatalf("reclaim within the grace period: %v", err)
		}
		owner, err := host("2030-01-01 11:00")
		if err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		b, err := e.svc.Get(ctx, pb, before.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := &hostplugin.Reclaim{Action: "shortened", At: "2030-01-01T11:00:00.000000", ByLease: owner.ID, OriginalEnd: "2030-01-03T00:00:00.000000", GraceSeconds: 3600}
		if b.EndDate != want.At || cmp.Diff(want, entry(t, b.Reservations[0]).Reclaim) != "" {
			t.Fatalf("b's lease ends %s, entry %+v; want the note %+v", b.EndDate, entry(t, b.Reservations[0]), want)
		}
	})
}
