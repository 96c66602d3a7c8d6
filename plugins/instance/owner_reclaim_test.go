package instance_test

import (
	"context"
	"fmt"
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

// slotSum is the slots of lease id's reservations on host over the
// instant at.
func slotSum(t testing.TB, d *db.DB, leaseID, host string, at time.Time) int {
	t.Helper()
	var n int
	if err := d.Raw(`SELECT COALESCE(SUM(a.slots), 0) FROM instance_allocations a JOIN reservations r ON r.id = a.reservation_id
		WHERE r.lease_id = ? AND a.compute_host_id = ? AND a.start_date <= ? AND a.end_date > ?`, leaseID, host, at, at).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOwnerInstanceReclaimsSlots: a's instance request that its pools
// cannot serve (b borrowed slots of a's host) is refused within the
// lending grace period, saying from when, and after it takes the slots
// back: b's instance lease is cut to the reclaim time, both leases say
// so, and b cannot book the reclaimed room again.
func TestOwnerInstanceReclaimsSlots(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		// b borrows 4 of the host's 8 VCPUs.
		borrower, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(5 * time.Minute))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		// a asks for 6.
		mine := func(start string) (*leases.View, error) {
			return e.svc.Create(ctx, pa, leasestest.Request("a", start, "2030-01-02 00:00", instanceRes(3, 2, 4096, 10, nil)))
		}
		_, err = mine("2030-01-01 10:30")
		if kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), "starting at 2030-01-01T11:05:00Z or later") {
			t.Fatalf("reclaim within the grace period: %v", err)
		}
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); got.EndDate != "2030-01-03T00:00:00.000000" || entry(t, got.Reservations[0]).Reclaim != nil {
			t.Fatalf("b's lease changed by a refused reclaim: %+v", got)
		}
		owner, err := mine("2030-01-01 12:00")
		if err != nil {
			t.Fatalf("reclaim after the grace period: %v", err)
		}
		const at = "2030-01-01T12:00:00.000000"
		b, err := e.svc.Get(ctx, pb, borrower.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.EndDate != at {
			t.Fatalf("b's lease ends %s, want %s", b.EndDate, at)
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
		a, err := e.svc.Get(ctx, pa, owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantA := &hostplugin.Reclaim{Action: "reclaimed", At: at, FromLease: borrower.ID, GraceSeconds: 3600}
		if ea := entry(t, a.Reservations[0]); ea.Pool != "owned" || cmp.Diff(wantA, ea.Reclaim) != "" {
			t.Fatalf("a's entry %+v, reclaim %+v, want owned with %+v", ea, ea.Reclaim, wantA)
		}
		// No double booking: from 12:00 the host holds a's 3 slots only,
		// b's 2 end there.
		noon := t0.Add(2 * time.Hour)
		if got := [2]int{slotSum(t, d, owner.ID, "1", noon), slotSum(t, d, borrower.ID, "1", noon.Add(-time.Minute))}; got != [2]int{3, 2} {
			t.Fatalf("slots (a at 12:00, b before): %v, want [3 2]", got)
		}
		if n := slotSum(t, d, borrower.ID, "1", noon); n != 0 {
			t.Fatalf("b keeps %d slots at 12:00", n)
		}
		if _, err := e.svc.Create(ctx, pb, leasestest.Request("b2", "2030-01-01 13:00", "2030-01-01 14:00", instanceRes(2, 2, 4096, 10, nil))); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("b books slots in the reclaimed window: %v", err)
		}
	})
}

// TestOwnerInstanceKeepsItsOwnSlots: a's own earlier slots on its host
// stay beside the reclaim (only the borrower is cut), and a request
// that fits without reclaiming cuts nobody.
func TestOwnerInstanceKeepsItsOwnSlots(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		first, err := e.svc.Create(ctx, pa, leasestest.Request("a1", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		borrower, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		// 2 of 8 VCPUs left: one more slot fits without a reclaim.
		fits, err := e.svc.Create(ctx, pa, leasestest.Request("a2", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); got.EndDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("a request that fits cut b's lease to %s", got.EndDate)
		}
		if got, _ := e.svc.Get(ctx, pa, fits.ID); entry(t, got.Reservations[0]).Reclaim != nil {
			t.Fatalf("a request that fits notes a reclaim: %+v", entry(t, got.Reservations[0]))
		}
		// Now full: one more slot reclaims b's.
		third, err := e.svc.Create(ctx, pa, leasestest.Request("a3", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatalf("reclaim beside a's own slots: %v", err)
		}
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); got.EndDate != "2030-01-01T12:00:00.000000" {
			t.Fatalf("b's lease ends %s", got.EndDate)
		}
		noon := t0.Add(2 * time.Hour)
		for _, l := range []*leases.View{first, fits, third} {
			if n := slotSum(t, d, l.ID, "1", noon); n != 1 {
				t.Fatalf("lease %s holds %d slots at 12:00, want 1", l.ID, n)
			}
		}
	})
}

// TestOwnerInstanceCutsAHostLoan: b borrowed a's whole host for a
// physical:host lease; a's instance request cuts it as a's host request
// would.
func TestOwnerInstanceCutsAHostLoan(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		loan, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", leasestest.HostReservation(1, 1, "", "")))
		if err != nil {
			t.Fatal(err)
		}
		owner, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatalf("reclaim of a host loan: %v", err)
		}
		b, err := e.svc.Get(ctx, pb, loan.ID)
		if err != nil {
			t.Fatal(err)
		}
		const at = "2030-01-01T12:00:00.000000"
		want := &hostplugin.Reclaim{Action: "shortened", At: at, ByLease: owner.ID, OriginalEnd: "2030-01-03T00:00:00.000000", GraceSeconds: 3600}
		if b.EndDate != at || cmp.Diff(want, entry(t, b.Reservations[0]).Reclaim) != "" {
			t.Fatalf("b's host lease ends %s, entry %+v; want %+v", b.EndDate, entry(t, b.Reservations[0]), want)
		}
		var late int64
		if err := d.Raw(`SELECT COUNT(*) FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id
			WHERE r.lease_id = ? AND a.end_date > ?`, loan.ID, t0.Add(2*time.Hour)).Scan(&late).Error; err != nil || late != 0 {
			t.Fatalf("b's host bookings after the reclaim time: %d, %v", late, err)
		}
	})
}

// vcpusAt is the VCPUs instance slots take on host at the instant at.
func vcpusAt(t testing.TB, d *db.DB, host string, at time.Time) int64 {
	t.Helper()
	var n int64
	if err := d.Raw(`SELECT COALESCE(SUM(a.slots * r.vcpus), 0) FROM instance_allocations a JOIN instance_reservations r ON r.reservation_id = a.reservation_id
		WHERE a.compute_host_id = ? AND a.start_date <= ? AND a.end_date > ?`, host, at, at).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOwnerInstanceReclaimRacesABorrower: a's instance request that
// must reclaim and b's new loan of the rest of a's host run
// concurrently (on MariaDB both lock the host): a always gets its slots,
// b's new loan is either refused or cut with its first one, and the host
// is never booked past its 8 VCPUs.
func TestOwnerInstanceReclaimRacesABorrower(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		for round := range 4 {
			day := time.Date(2030, 1, 2+5*round, 0, 0, 0, 0, time.UTC)
			at := func(h, m int) string {
				return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute).Format("2006-01-02 15:04")
			}
			first, err := e.svc.Create(ctx, pb, leasestest.Request(fmt.Sprintf("b1-%d", round), at(0, 0), at(48, 0), instanceRes(2, 2, 4096, 10, nil)))
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				v   *leases.View
				err error
			}
			owner, loan := make(chan result, 1), make(chan result, 1)
			go func() {
				v, err := e.svc.Create(ctx, pa, leasestest.Request(fmt.Sprintf("a-%d", round), at(12, 0), at(24, 0), instanceRes(3, 2, 4096, 10, nil)))
				owner <- result{v, err}
			}()
			go func() {
				v, err := e.svc.Create(ctx, pb, leasestest.Request(fmt.Sprintf("b2-%d", round), at(11, 30), at(24, 0), instanceRes(2, 2, 4096, 10, nil)))
				loan <- result{v, err}
			}()
			a, b2 := <-owner, <-loan
			if a.err != nil {
				t.Fatalf("round %d: the owner's reclaim: %v", round, a.err)
			}
			noon := day.Add(12 * time.Hour)
			switch {
			case b2.err == nil:
				// b's second loan came first: the reclaim cut it too.
				if got, _ := e.svc.Get(ctx, pb, b2.v.ID); got.EndDate != noon.Format("2006-01-02T15:04:05.000000") {
					t.Fatalf("round %d: b's second loan ends %s, not at the reclaim time", round, got.EndDate)
				}
			case kindOf(b2.err) != errs.NotEnoughResources:
				t.Fatalf("round %d: b's second loan: %v", round, b2.err)
			}
			if got, _ := e.svc.Get(ctx, pb, first.ID); got.EndDate != noon.Format("2006-01-02T15:04:05.000000") {
				t.Fatalf("round %d: b's first loan ends %s", round, got.EndDate)
			}
			for _, instant := range []time.Time{noon.Add(-15 * time.Minute), noon, noon.Add(30 * time.Minute)} {
				if n := vcpusAt(t, d, "1", instant); n > 8 {
					t.Fatalf("round %d: %d VCPUs booked at %s", round, n, instant)
				}
			}
			if n := slotSum(t, d, a.v.ID, "1", noon); n != 3 {
				t.Fatalf("round %d: a holds %d slots", round, n)
			}
		}
	})
}

// TestOwnerInstanceEarliestReclaims: within the lending grace period the
// earliest window of a's instance request is the first start a reclaim
// serves, not the borrower's end, and a lease created at "earliest" gets
// it, cutting the borrower there. A loan beginning after the search's
// start is cut only from a minute after it begins (slots never move).
func TestOwnerInstanceEarliestReclaims(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		borrower, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		later, err := e.svc.Create(ctx, pb, leasestest.Request("b-later", "2030-01-02 06:00", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(5 * time.Minute))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		res := []leases.ReservationRequest{leasestest.Reservation(instanceRes(3, 2, 4096, 10, nil))}
		// Now: the grace period ends at 11:05.
		if win, err := e.svc.Earliest(ctx, pa, leases.EarliestRequest{Duration: time.Hour, Reservations: res}); err != nil || win.StartDate != "2030-01-01T11:05:00.000000" {
			t.Fatalf("earliest = %+v, %v; want 11:05", win, err)
		}
		// From 05:30 the next day both loans must go; the later one can be
		// cut only from 06:01.
		after := "2030-01-02 05:30"
		if win, err := e.svc.Earliest(ctx, pa, leases.EarliestRequest{After: &after, Duration: time.Hour, Reservations: res}); err != nil || win.StartDate != "2030-01-02T06:01:00.000000" {
			t.Fatalf("earliest after 05:30 = %+v, %v; want 06:01", win, err)
		}
		req := leasestest.Request("a", "earliest", "", instanceRes(3, 2, 4096, 10, nil))
		req.EndDate = nil
		v, err := e.svc.CreateEarliest(ctx, pa, req, nil, time.Hour)
		if err != nil {
			t.Fatalf("create at earliest: %v", err)
		}
		if v.StartDate != "2030-01-01T11:05:00.000000" {
			t.Fatalf("created at %s, want 11:05", v.StartDate)
		}
		if got, _ := e.svc.Get(ctx, pb, borrower.ID); got.EndDate != "2030-01-01T11:05:00.000000" {
			t.Fatalf("b's lease ends %s, want 11:05", got.EndDate)
		}
		if got, _ := e.svc.Get(ctx, pb, later.ID); got.EndDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("b's later lease ends %s, untouched by a reclaim at 11:05", got.EndDate)
		}
	})
}

// TestOwnerInstanceReclaimsFirst: with reclaim on its plan entry, a
// takes its lent host back before it uses the public one; without, the
// public host serves it and b keeps its loan.
func TestOwnerInstanceReclaimsFirst(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("reclaim=%v", eager), func(t *testing.T) {
			each(t, func(t *testing.T, d *db.DB) {
				e := newReclaimEnv(t, d, 2)
				e.setPlan(t, 0, ownership.Plan{
					Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"},
						{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2"}},
					Groups: []ownership.Group{{Name: "g1", Hosts: []string{"1"}}},
					Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1},
						{Consumer: "a", Group: "g1", Amount: 1, Lend: true, LendGraceSeconds: 3600, Reclaim: eager}},
				})
				ctx := context.Background()
				pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
				borrower, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := e.svc.Get(ctx, pb, borrower.ID); pools(t, got.Reservations[0]) != "1:private:dom<a" {
					t.Fatalf("b's slots from %s, want a's lent host", pools(t, got.Reservations[0]))
				}
				// All on one host: a's own host cannot take them beside b's.
				owner, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(3, 2, 4096, 10, true)))
				if err != nil {
					t.Fatal(err)
				}
				a, _ := e.svc.Get(ctx, pa, owner.ID)
				b, _ := e.svc.Get(ctx, pb, borrower.ID)
				got := [2]string{pools(t, a.Reservations[0]), b.EndDate}
				want := [2]string{"2:public", "2030-01-03T00:00:00.000000"}
				if eager {
					want = [2]string{"1:owned:a", "2030-01-01T12:00:00.000000"}
				}
				if got != want {
					t.Fatalf("a's slots and b's end: %v, want %v", got, want)
				}
			})
		})
	}
}

// TestOwnerInstanceReclaimsRace: two of a's instance requests that both
// need b's slots on a's host, and fit only one at a time, run
// concurrently: exactly one is made, b is cut once, and the host is never
// booked past its 8 VCPUs.
func TestOwnerInstanceReclaimsRace(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		for round := range 4 {
			day := time.Date(2030, 1, 2+5*round, 0, 0, 0, 0, time.UTC)
			at := func(h int) string { return day.Add(time.Duration(h) * time.Hour).Format("2006-01-02 15:04") }
			loan, err := e.svc.Create(ctx, pb, leasestest.Request(fmt.Sprintf("b-%d", round), at(0), at(48), instanceRes(2, 2, 4096, 10, nil)))
			if err != nil {
				t.Fatal(err)
			}
			results := make(chan error, 2)
			for i := range 2 {
				go func() {
					_, err := e.svc.Create(ctx, pa, leasestest.Request(fmt.Sprintf("a%d-%d", i, round), at(12), at(24), instanceRes(3, 2, 4096, 10, nil)))
					results <- err
				}()
			}
			var made, refused int
			for range 2 {
				switch err := <-results; {
				case err == nil:
					made++
				case kindOf(err) == errs.NotEnoughResources:
					refused++
				default:
					t.Errorf("round %d: %v", round, err)
				}
			}
			if made != 1 || refused != 1 {
				t.Fatalf("round %d: %d made, %d refused; want 1 and 1", round, made, refused)
			}
			noon := day.Add(12 * time.Hour)
			if got, _ := e.svc.Get(ctx, pb, loan.ID); got.EndDate != noon.Format("2006-01-02T15:04:05.000000") {
				t.Fatalf("round %d: b's loan ends %s", round, got.EndDate)
			}
			for _, instant := range []time.Time{noon.Add(-time.Minute), noon, noon.Add(6 * time.Hour)} {
				if n := vcpusAt(t, d, "1", instant); n > 8 {
					t.Fatalf("round %d: %d VCPUs booked at %s", round, n, instant)
				}
			}
		}
	})
}

// TestOwnerInstanceUpdateReclaims: a's pending instance reservation
// that grows past what b's loan leaves of a's host reclaims the loan as
// a new reservation would, and says so on its entry.
func TestOwnerInstanceUpdateReclaims(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newReclaimEnv(t, d, 1)
		e.setReclaimPlan(t)
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		mine, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(1, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		loan, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatal(err)
		}
		resID := mine.Reservations[0]["id"].(string)
		if _, err := e.svc.Update(ctx, pa, mine.ID, leases.UpdateRequest{Reservations: []leases.ReservationUpdate{{ID: resID, Values: map[string]any{"amount": 3}}}}); err != nil {
			t.Fatalf("update reclaiming: %v", err)
		}
		b, _ := e.svc.Get(ctx, pb, loan.ID)
		if b.EndDate != "2030-01-01T12:00:00.000000" {
			t.Fatalf("b's lease ends %s", b.EndDate)
		}
		a, _ := e.svc.Get(ctx, pa, mine.ID)
		want := &hostplugin.Reclaim{Action: "reclaimed", At: "2030-01-01T12:00:00.000000", FromLease: loan.ID, GraceSeconds: 3600}
		if diff := cmp.Diff(want, entry(t, a.Reservations[0]).Reclaim); diff != "" {
			t.Fatalf("a's reclaim note (-want +got):\n%s", diff)
		}
		if n := slotSum(t, d, mine.ID, "1", t0.Add(2*time.Hour)); n != 3 {
			t.Fatalf("a holds %d slots", n)
		}
	})
}

// TestOwnerInstanceReclaimsItsPart: compute-1 counts 4 slots; a owns 2
// of them and c 1 (both lent, grace an hour), dom keeps 1 private. b
// fills dom's part, borrows a's and c's. a's request that its pools
// cannot serve cuts b's loan of a's part only: b's bookings of dom's and
// c's parts are not a's to take back.
func TestOwnerInstanceReclaimsItsPart(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		hook := &lateHook{}
		ev := newEnvHost(t, d, 1, func(int) map[string]any { return map[string]any{"ownership_slots": "4"} },
			instance.Config{Ownership: hook, DB: d}, hostplugin.Config{Ownership: hook})
		hook.svc = ownership.New(d, ev.hosts, ev.clock.Now)
		e := &ownEnv{env: ev, own: hook.svc}
		e.setPlan(t, 0, ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"},
				{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2"}, {ID: "c", ParentID: "dom", Rank: 3, ProjectID: "p3"}},
			Groups: []ownership.Group{{Name: "g1", Hosts: []string{"1"}}},
			Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1},
				{Consumer: "a", Group: "g1", Amount: 2, Partial: true, Lend: true, LendGraceSeconds: 3600},
				{Consumer: "c", Group: "g1", Amount: 1, Partial: true, Lend: true, LendGraceSeconds: 3600}},
		})
		ctx := context.Background()
		pa, pb := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p2", ProjectID: "p2"}
		var bs []*leases.View
		for i, tc := range []struct {
			n    int
			want string
		}{{1, "1:private:dom"}, {2, "1:private:dom<a"}, {1, "1:private:dom<c"}} {
			v, err := e.svc.Create(ctx, pb, leasestest.Request(fmt.Sprintf("b%d", i), "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(tc.n, 2, 4096, 10, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := e.svc.Get(ctx, pb, v.ID); pools(t, got.Reservations[0]) != tc.want {
				t.Fatalf("b's lease %d from %s, want %s", i, pools(t, got.Reservations[0]), tc.want)
			}
			bs = append(bs, v)
		}
		owner, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatalf("reclaim of a's part: %v", err)
		}
		var ends []string
		for _, v := range bs {
			got, _ := e.svc.Get(ctx, pb, v.ID)
			ends = append(ends, got.EndDate)
		}
		want := []string{"2030-01-03T00:00:00.000000", "2030-01-01T12:00:00.000000", "2030-01-03T00:00:00.000000"}
		if diff := cmp.Diff(want, ends); diff != "" {
			t.Fatalf("b's ends (dom's, a's and c's parts) (-want +got):\n%s", diff)
		}
		a, _ := e.svc.Get(ctx, pa, owner.ID)
		if ea := entry(t, a.Reservations[0]); ea.Pool != "owned" || ea.Reclaim == nil || ea.Reclaim.FromLease != bs[1].ID {
			t.Fatalf("a's entry %+v, reclaim %+v", ea, ea.Reclaim)
		}
		if n := vcpusAt(t, d, "1", t0.Add(2*time.Hour)); n != 8 {
			t.Fatalf("%d VCPUs booked at 12:00, want 8 (b's 2 slots on dom's and c's parts, a's 2)", n)
		}
	})
}

// TestOwnerInstanceReclaimsItsPartBookedBefore: compute-1 counts 4
// slots. Before the plan, p9 (outside the tree) books 2 of them in two
// leases and p3 one; then the plan gives a (p1) 2 slots of it (not lent;
// its lending grace an hour), c (p3) 1, and leaves 1 public, which p9 books
// next. a's request its part cannot serve (the host is full) reclaims
// p9's two slots booked before the plan, which sit on no part the host
// has: they are cut, noted and recorded as taken from a's part; c's
// booking and p9's public one stay, and the earliest search offers the
// end of the grace period.
func TestOwnerInstanceReclaimsItsPartBookedBefore(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		hook := &lateHook{}
		ev := newEnvHost(t, d, 1, func(int) map[string]any { return map[string]any{"ownership_slots": "4"} },
			instance.Config{Ownership: hook, DB: d}, hostplugin.Config{Ownership: hook})
		hook.svc = ownership.New(d, ev.hosts, ev.clock.Now)
		e := &ownEnv{env: ev, own: hook.svc}
		ctx := context.Background()
		pa, px, pc := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p9", ProjectID: "p9"}, leases.Caller{UserID: "u-p3", ProjectID: "p3"}
		create := func(c leases.Caller, name string) *leases.View {
			t.Helper()
			v, err := e.svc.Create(ctx, c, leasestest.Request(name, "2030-01-01 10:05", "2030-01-03 00:00", instanceRes(1, 2, 4096, 10, nil)))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
		x1, xc, x2 := create(px, "x1"), create(pc, "c"), create(px, "x2")
		e.setPlan(t, 0, ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "a", Rank: 1, ProjectID: "p1"}, {ID: "c", Rank: 2, ProjectID: "p3"}},
			Groups:    []ownership.Group{{Name: "g1", Hosts: []string{"1"}}},
			Entries: []ownership.Entry{{Consumer: "a", Group: "g1", Amount: 2, Partial: true, LendGraceSeconds: 3600},
				{Consumer: "c", Group: "g1", Amount: 1, Partial: true}},
		})
		xp := create(px, "x-public")
		if got, _ := e.svc.Get(ctx, px, xp.ID); pools(t, got.Reservations[0]) != "1:public" {
			t.Fatalf("p9's lease after the plan from %s, want the public part", pools(t, got.Reservations[0]))
		}
		res := []leases.ReservationRequest{leasestest.Reservation(instanceRes(2, 2, 4096, 10, nil))}
		if win, err := e.svc.Earliest(ctx, pa, leases.EarliestRequest{Duration: time.Hour, Reservations: res}); err != nil || win.StartDate != "2030-01-01T11:00:00.000000" {
			t.Fatalf("earliest = %+v, %v; want 11:00, the end of the grace period", win, err)
		}
		owner, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(2, 2, 4096, 10, nil)))
		if err != nil {
			t.Fatalf("reclaim of a's part: %v", err)
		}
		var ends []string
		for _, v := range []*leases.View{x1, xc, x2, xp} {
			got, _ := e.svc.Get(ctx, leases.Caller{UserID: "admin", ProjectID: v.ProjectID, Admin: true}, v.ID)
			ends = append(ends, got.EndDate)
		}
		want := []string{"2030-01-01T12:00:00.000000", "2030-01-03T00:00:00.000000", "2030-01-01T12:00:00.000000", "2030-01-03T00:00:00.000000"}
		if diff := cmp.Diff(want, ends); diff != "" {
			t.Fatalf("ends of p9's, c's, p9's and p9's public leases (-want +got):\n%s", diff)
		}
		for _, v := range []*leases.View{x1, x2} {
			got, _ := e.svc.Get(ctx, px, v.ID)
			if ex := entry(t, got.Reservations[0]); ex.Pool != "owned" || ex.Consumer != "a" || ex.Reclaim == nil || ex.Reclaim.Action != "shortened" || ex.Reclaim.ByLease != owner.ID {
				t.Fatalf("p9's entry %+v, reclaim %+v", ex, ex.Reclaim)
			}
		}
		a, _ := e.svc.Get(ctx, pa, owner.ID)
		if ea := entry(t, a.Reservations[0]); ea.Pool != "owned" || ea.Reclaim == nil || (ea.Reclaim.FromLease != x1.ID && ea.Reclaim.FromLease != x2.ID) {
			t.Fatalf("a's entry %+v, reclaim %+v", ea, ea.Reclaim)
		}
		if n := vcpusAt(t, d, "1", t0.Add(2*time.Hour)); n != 8 {
			t.Fatalf("%d VCPUs booked at 12:00, want 8 (c's and the public slot, a's 2)", n)
		}
		// a's part is full from 12:00: its own 2 slots count against it.
		if _, err := e.svc.Create(ctx, pa, leasestest.Request("a2", "2030-01-01 13:00", "2030-01-01 14:00", instanceRes(1, 2, 4096, 10, nil))); err == nil {
			t.Fatal("a's third slot was booked on a full part")
		}
	})
}

// TestOwnerInstanceReclaimKeepsOtherPartsRoom: compute-1 counts 4
// slots; p9 books 2 before the plan, which then gives a (p1) 2 of them
// and leaves 2 public, of which p9 books 1. a's reclaim cuts p9's 2
// slots from before the plan to 12:00; until then they count against
// a's part, not the public one, so the public part still has a slot for
// p9 before 12:00.
func TestOwnerInstanceReclaimKeepsOtherPartsRoom(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		hook := &lateHook{}
		ev := newEnvHost(t, d, 1, func(int) map[string]any { return map[string]any{"ownership_slots": "4"} },
			instance.Config{Ownership: hook, DB: d}, hostplugin.Config{Ownership: hook})
		hook.svc = ownership.New(d, ev.hosts, ev.clock.Now)
		e := &ownEnv{env: ev, own: hook.svc}
		ctx := context.Background()
		pa, px := leases.Caller{UserID: "u-p1", ProjectID: "p1"}, leases.Caller{UserID: "u-p9", ProjectID: "p9"}
		create := func(c leases.Caller, name, start, end string) (*leases.View, error) {
			return e.svc.Create(ctx, c, leasestest.Request(name, start, end, instanceRes(1, 2, 4096, 10, nil)))
		}
		for _, name := range []string{"x1", "x2"} {
			if _, err := create(px, name, "2030-01-01 10:05", "2030-01-03 00:00"); err != nil {
				t.Fatal(err)
			}
		}
		e.setPlan(t, 0, ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "a", Rank: 1, ProjectID: "p1"}},
			Groups:    []ownership.Group{{Name: "g1", Hosts: []string{"1"}}},
			Entries:   []ownership.Entry{{Consumer: "a", Group: "g1", Amount: 2, Partial: true, LendGraceSeconds: 3600}},
		})
		if _, err := create(px, "x-public", "2030-01-01 10:05", "2030-01-03 00:00"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Create(ctx, pa, leasestest.Request("a", "2030-01-01 12:00", "2030-01-02 00:00", instanceRes(2, 2, 4096, 10, nil))); err != nil {
			t.Fatalf("reclaim of a's part: %v", err)
		}
		v, err := create(px, "x-before", "2030-01-01 11:00", "2030-01-01 11:30")
		if err != nil {
			t.Fatalf("p9's public slot before the reclaim time: %v", err)
		}
		if got, _ := e.svc.Get(ctx, px, v.ID); pools(t, got.Reservations[0]) != "1:public" {
			t.Fatalf("p9's slot before the reclaim time from %s, want the public part", pools(t, got.Reservations[0]))
		}
		if _, err := create(px, "x-more", "2030-01-01 11:00", "2030-01-01 11:30"); err == nil {
			t.Fatal("p9 booked a fifth slot on a full host")
		}
	})
}
