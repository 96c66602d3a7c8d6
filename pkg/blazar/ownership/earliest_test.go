package ownership_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// lendsOne: of two hosts, a (PA) owns one and lends it with a grace
// period of an hour; b (PB) borrows with borrowGrace; the other host is
// public.
func lendsOne(borrowGrace int64) ownership.Plan {
	return ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", BorrowGraceSeconds: borrowGrace}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 1},
			{Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
}

// limitOne: b (PB) owns both hosts and lends them with a lending limit of
// one; a (PA) owns none.
func limitOne() ownership.Plan {
	return ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: intp(1)}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 2},
			{Consumer: "b", Group: "rack1", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
	}
}

// describePools is a lease's entries as "pool[:consumer][ lent by
// x][ reclaim action]", sorted.
func describePools(es []hostplugin.PoolEntry) []string {
	out := kinds(es)
	for i, e := range es {
		if e.Reclaim != nil {
			out[i] += " " + e.Reclaim.Action
		}
	}
	slices.Sort(out)
	return out
}

type booking struct {
	project, start, end string
	n                   int
}

// TestEarliestWithOwnership: the earliest window of a one-hour, one-host
// lease asked at 2030-01-01 00:00 draws from the project's pools; an
// owner's lent host counts from the lending grace period on. The window
// is then created with "start_date": "earliest" and gets the hosts the
// search said, from the pools it said; a reclaim shortens the borrower
// as a create at that start does.
func TestEarliestWithOwnership(t *testing.T) {
	tests := []struct {
		name    string
		plan    ownership.Plan
		before  []booking
		project string
		want    string   // the window's start ("" none)
		pools   []string // the created lease's entries
		// shortened is the before lease (index) a reclaim shortens to
		// the start.
		shortened int
	}{
		{name: "owner's idle host now", plan: lendsOne(0), project: "PA",
			want: "2030-01-01 00:00", pools: []string{"owned:a"}, shortened: -1},
		{name: "owner's lent host from the grace period on", plan: lendsOne(0),
			before:  []booking{{"PZ", "2030-01-01 00:00", "2030-01-05 00:00", 1}, {"PB", "2030-01-01 00:05", "2030-01-03 00:00", 1}},
			project: "PA", want: "2030-01-01 01:00", pools: []string{"owned:a reclaimed"}, shortened: 1},
		{name: "other capacity frees before the grace period is over", plan: lendsOne(0),
			before:  []booking{{"PZ", "2030-01-01 00:00", "2030-01-01 00:30", 1}, {"PB", "2030-01-01 00:05", "2030-01-03 00:00", 1}},
			project: "PA", want: "2030-01-01 00:30", pools: []string{"public"}, shortened: -1},
		{name: "owner's own lease is not reclaimed", plan: lendsOne(0),
			before:  []booking{{"PZ", "2030-01-01 00:00", "2030-01-05 00:00", 1}, {"PA", "2030-01-01 00:05", "2030-01-03 00:00", 1}},
			project: "PA", want: "2030-01-03 00:00", pools: []string{"owned:a"}, shortened: -1},
		{name: "a loan not begun, with no room to move, is cut from just after its start", plan: lendsOne(0),
			before: []booking{{"PZ", "2030-01-01 00:00", "2030-01-05 00:00", 1}, {"PA", "2030-01-01 00:00", "2030-01-01 02:30", 1},
				{"PB", "2030-01-01 03:00", "2030-01-03 00:00", 1}},
			project: "PA", want: "2030-01-01 03:01", pools: []string{"owned:a reclaimed"}, shortened: 2},
		{name: "borrower within the lender's grace borrows", plan: lendsOne(600),
			before:  []booking{{"PZ", "2030-01-01 00:00", "2030-01-02 00:00", 1}},
			project: "PB", want: "2030-01-01 00:00", pools: []string{"private:dom lent by a"}, shortened: -1},
		{name: "borrower with a longer grace does not", plan: lendsOne(7200),
			before:  []booking{{"PZ", "2030-01-01 00:00", "2030-01-02 00:00", 1}},
			project: "PB", want: "2030-01-02 00:00", pools: []string{"public"}, shortened: -1},
		{name: "project outside the tree sees only public hosts", plan: lendsOne(0),
			before:  []booking{{"PQ", "2030-01-01 00:00", "2030-01-02 00:00", 1}},
			project: "PZ", want: "2030-01-02 00:00", pools: []string{"public"}, shortened: -1},
		{name: "lending limit: the next loan once the first ends", plan: limitOne(),
			before:  []booking{{"PA", "2030-01-01 00:00", "2030-01-02 00:00", 1}},
			project: "PA", want: "2030-01-02 00:00", pools: []string{"private:dom lent by b"}, shortened: -1},
		{name: "lending limit: the lender's own hosts are no loan", plan: limitOne(),
			before:  []booking{{"PA", "2030-01-01 00:00", "2030-01-02 00:00", 1}},
			project: "PB", want: "2030-01-01 00:00", pools: []string{"owned:b"}, shortened: -1},
		{name: "nothing the project may use", plan: limitOne(), project: "PZ", want: "", shortened: -1},
	}
	for _, dialect := range dbtest.Dialects() {
		for _, tc := range tests {
			t.Run(string(dialect)+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, tc.plan)
				var ids []string
				for _, b := range tc.before {
					v, err := e.create(b.project, b.start, b.end, b.n)
					if err != nil {
						t.Fatalf("lease of %s: %v", b.project, err)
					}
					ids = append(ids, v.ID)
				}
				ctx := context.Background()
				c := leases.Caller{ProjectID: tc.project, UserID: "u"}
				res := []leases.ReservationRequest{leasestest.Reservation(leasestest.HostReservation(1, 1, "", ""))}
				win, err := e.leases.Earliest(ctx, c, leases.EarliestRequest{Duration: time.Hour, Reservations: res})
				if tc.want == "" {
					if !errs.Is(err, errs.NotEnoughResources) {
						t.Fatalf("earliest = %+v, %v; want none", win, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				start, _ := time.Parse("2006-01-02 15:04", tc.want)
				stamp := start.Format("2006-01-02T15:04:05.000000")
				if win.StartDate != stamp {
					t.Fatalf("earliest start %s, want %s", win.StartDate, tc.want)
				}
				req := leasestest.Request(tc.name, "", "", leasestest.HostReservation(1, 1, "", ""))
				req.StartDate, req.EndDate = nil, nil
				v, err := e.leases.CreateEarliest(ctx, c, req, nil, time.Hour)
				if err != nil {
					t.Fatalf("create at earliest: %v", err)
				}
				got := e.get(t, v.ID)
				if got.StartDate != stamp {
					t.Fatalf("lease starts %s, want %s", got.StartDate, stamp)
				}
				if diff := cmp.Diff(tc.pools, describePools(pools(t, got))); diff != "" {
					t.Fatalf("pools (-want +got):\n%s", diff)
				}
				if hs := pools(t, got); len(hs) != 1 || hs[0].HostID != win.Reservations[0].Resources[0] {
					t.Fatalf("lease got %+v, the search said %v", hs, win.Reservations[0].Resources)
				}
				for i, id := range ids {
					b := e.get(t, id)
					if i == tc.shortened {
						r := pools(t, b)[0].Reclaim
						if b.EndDate != stamp || r == nil || r.Action != "shortened" || r.ByLease != v.ID {
							t.Fatalf("borrower ends %s with reclaim %+v; want shortened to %s by %s", b.EndDate, r, stamp, v.ID)
						}
						continue
					}
					if es := pools(t, b); len(es) > 0 && es[0].Reclaim != nil {
						t.Fatalf("lease %d reclaimed: %+v", i, es[0].Reclaim)
					}
				}
			})
		}
	}
}

// TestEarliestWithOwnershipBruteForce: over random plans, cleaning times
// and leases, the earliest window a project is offered is one a lease can
// be created in, and no start before it on the half-hour grid, or a
// minute after a grid point, is (every booking, grace period, cleaning
// and reclaim time here is on that grid; a loan not begun is cut, rather
// than moved, from a minute after its start). The create at each start is the brute force.
func TestEarliestWithOwnershipBruteForce(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		limit := []*int{nil, intp(1)}[rapid.IntRange(0, 1).Draw(rt, "limit")]
		borrowGrace := []int64{0, 7200}[rapid.IntRange(0, 1).Draw(rt, "borrowGrace")]
		eager := rapid.Bool().Draw(rt, "eager")
		// Four hosts: a (PA) owns two and lends them with an hour of
		// grace; dom keeps one private; one is public. b (PB) borrows;
		// PZ is outside the tree.
		plan := ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA", LendingLimit: limit},
				{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", BorrowGraceSeconds: borrowGrace}},
			Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
			Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 3},
				{Consumer: "a", Group: "rack1", Amount: 2, Lend: true, LendGraceSeconds: 3600, Reclaim: eager}},
		}
		// SQLite: the brute force creates up to hundreds of leases a run
		// (the table test above runs on both databases).
		cleaning := time.Duration(rapid.IntRange(0, 1).Draw(rt, "cleaning")) * 30 * time.Minute
		e := newEnvCleaning(t, dbtest.OpenDialect(t, db.SQLite), 4, plan, cleaning)
		projects := []string{"PA", "PB", "PZ"}
		half := func(k int) string { return t0.Add(time.Duration(k) * 30 * time.Minute).Format("2006-01-02 15:04") }
		for i := range rapid.IntRange(0, 6).Draw(rt, "leases") {
			p := projects[rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("project", i))]
			s := rapid.IntRange(0, 48).Draw(rt, fmt.Sprint("start", i))
			l := rapid.IntRange(1, 48).Draw(rt, fmt.Sprint("length", i))
			n := rapid.IntRange(1, 2).Draw(rt, fmt.Sprint("hosts", i))
			start := half(s)
			if s == 0 {
				start = "now"
			}
			_, _ = e.create(p, start, half(s+l), n) // refused or not
		}
		p := projects[rapid.IntRange(0, 2).Draw(rt, "project")]
		n := rapid.IntRange(1, 3).Draw(rt, "n")
		d := time.Duration(rapid.IntRange(1, 6).Draw(rt, "halves")) * 30 * time.Minute
		c := leases.Caller{ProjectID: p, UserID: "u"}
		res := []leases.ReservationRequest{leasestest.Reservation(leasestest.HostReservation(n, n, "", ""))}
		win, err := e.leases.Earliest(ctx, c, leases.EarliestRequest{Duration: d, Reservations: res})
		var found time.Time
		switch {
		case err == nil:
			if found, err = time.Parse("2006-01-02T15:04:05.000000", win.StartDate); err != nil {
				rt.Fatal(err)
			}
		case !errs.Is(err, errs.NotEnoughResources):
			rt.Fatal(err)
		}
		// The brute force: the first start on the grid, up to four days
		// ahead (past every booking), at which the create succeeds.
		var first time.Time
		for k := 0; k <= 2*4*48; k++ {
			s := t0.Add(time.Duration(k/2)*30*time.Minute + time.Duration(k%2)*time.Minute)
			if !found.IsZero() && !s.Before(found) {
				break
			}
			start := s.Format("2006-01-02 15:04")
			if k == 0 {
				start = "now"
			}
			if _, err := e.create(p, start, s.Add(d).Format("2006-01-02 15:04"), n); err == nil {
				first = s
				break
			} else if !errs.Is(err, errs.NotEnoughResources) {
				rt.Fatal(err)
			}
		}
		if !first.IsZero() {
			rt.Fatalf("%s for %d hosts, %s: a lease can be created at %s, the search said %v (%v)", p, n, d, first, found, err)
		}
		if found.IsZero() {
			return
		}
		start := found.Format("2006-01-02 15:04")
		if found.Equal(t0) {
			start = "now"
		}
		if _, err := e.create(p, start, found.Add(d).Format("2006-01-02 15:04"), n); err != nil {
			rt.Fatalf("%s for %d hosts, %s: the search said %s, the create there: %v", p, n, d, found, err)
		}
	})
}

// With a cleaning time, the owner's earliest start is the reclaim time
// plus the cleaning time, as the 409 says, and the borrower is cut at
// the reclaim time.
func TestEarliestReclaimWithCleaning(t *testing.T) {
	ctx := context.Background()
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnvCleaning(t, dbtest.OpenDialect(t, dialect), 2, lendsOne(0), 30*time.Minute)
			if _, err := e.create("PZ", "2030-01-01 00:00", "2030-01-05 00:00", 1); err != nil {
				t.Fatal(err)
			}
			loan, err := e.create("PB", "now", "2030-01-03 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.create("PA", "2030-01-01 01:00", "2030-01-01 03:00", 1); !errs.Is(err, errs.NotEnoughResources) ||
				!strings.Contains(err.Error(), "starting at 2030-01-01T01:30:00Z or later") {
				t.Fatalf("PA within the grace period: %v", err)
			}
			c := leases.Caller{ProjectID: "PA", UserID: "u"}
			req := leasestest.Request("pa", "", "", leasestest.HostReservation(1, 1, "", ""))
			req.StartDate, req.EndDate = nil, nil
			v, err := e.leases.CreateEarliest(ctx, c, req, nil, 2*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if v.StartDate != "2030-01-01T01:30:00.000000" {
				t.Fatalf("PA's lease starts %s, want 01:30", v.StartDate)
			}
			if b := e.get(t, loan.ID); b.EndDate != "2030-01-01T01:00:00.000000" || pools(t, b)[0].Reclaim == nil {
				t.Fatalf("PB's lease ends %s (%+v), want 01:00", b.EndDate, pools(t, b))
			}
		})
	}
}

// Two reservations together: the second is chosen without the first's
// host, so the window waits for both the public host and the owner's
// reclaim.
func TestEarliestWithOwnershipTogether(t *testing.T) {
	ctx := context.Background()
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 2, lendsOne(0))
			if _, err := e.create("PZ", "2030-01-01 00:00", "2030-01-01 00:30", 1); err != nil {
				t.Fatal(err)
			}
			loan, err := e.create("PB", "now", "2030-01-03 00:00", 1)
			if err != nil {
				t.Fatal(err)
			}
			c := leases.Caller{ProjectID: "PA", UserID: "u"}
			one := leasestest.HostReservation(1, 1, "", "")
			req := leasestest.Request("pa", "", "", one, one)
			win, err := e.leases.Earliest(ctx, c, leases.EarliestRequest{Duration: time.Hour, Reservations: req.Reservations})
			if err != nil {
				t.Fatal(err)
			}
			if win.StartDate != "2030-01-01T01:00:00.000000" || len(win.Reservations) != 2 ||
				win.Reservations[0].Resources[0] == win.Reservations[1].Resources[0] {
				t.Fatalf("window %+v", win)
			}
			req.StartDate, req.EndDate = nil, nil
			v, err := e.leases.CreateEarliest(ctx, c, req, nil, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if v.StartDate != win.StartDate {
				t.Fatalf("lease starts %s, the window %s", v.StartDate, win.StartDate)
			}
			if b := e.get(t, loan.ID); b.EndDate != "2030-01-01T01:00:00.000000" {
				t.Fatalf("PB's lease ends %s", b.EndDate)
			}
		})
	}
}

// A lending limit used up by a loan of a host outside the project's
// pools: b lends its rack-2 host with a grace period shorter than a's
// borrowing grace, so a never sees that host, but PC's loan of it counts
// against b's limit of one; a's earliest loan of b's rack-1 host starts
// when PC's loan ends (not when that host is free after cleaning).
func TestEarliestLendingLimitOutsideThePools(t *testing.T) {
	ctx := context.Background()
	plan := ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA", BorrowGraceSeconds: 1800},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB", LendingLimit: intp(1)}, {ID: "c", ParentID: "dom", Rank: 3, ProjectID: "PC"}},
		Groups: []ownership.Group{{Name: "g1", Properties: map[string]string{"rack": "r1"}}, {Name: "g2", Properties: map[string]string{"rack": "r2"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1}, {Consumer: "dom", Group: "g2", Amount: 1},
			{Consumer: "b", Group: "g1", Amount: 1, Lend: true, LendGraceSeconds: 3600},
			{Consumer: "b", Group: "g2", Amount: 1, Lend: true, LendGraceSeconds: 600}},
	}
	props := func(i int) map[string]string { return map[string]string{"rack": fmt.Sprint("r", i%2+1)} }
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			e := newEnvHosts(t, dbtest.OpenDialect(t, dialect), 2, props, plan, 30*time.Minute)
			req := leasestest.Request("pc", "2030-01-01 00:00", "2030-01-01 06:00", leasestest.HostReservation(1, 1, "", `["=", "$rack", "r2"]`))
			v, err := e.leases.Create(ctx, leases.Caller{ProjectID: "PC", UserID: "u"}, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(pools(t, e.get(t, v.ID))); !cmp.Equal(got, []string{"private:dom lent by b"}) {
				t.Fatalf("PC's pools = %v", got)
			}
			c := leases.Caller{ProjectID: "PA", UserID: "u"}
			res := []leases.ReservationRequest{leasestest.Reservation(leasestest.HostReservation(1, 1, "", ""))}
			win, err := e.leases.Earliest(ctx, c, leases.EarliestRequest{Duration: time.Hour, Reservations: res})
			if err != nil {
				t.Fatal(err)
			}
			if win.StartDate != "2030-01-01T06:00:00.000000" {
				t.Fatalf("PA's earliest start %s, want 06:00", win.StartDate)
			}
			if _, err := e.create("PA", "2030-01-01 06:00", "2030-01-01 07:00", 1); err != nil {
				t.Fatalf("PA at 06:00: %v", err)
			}
		})
	}
}
