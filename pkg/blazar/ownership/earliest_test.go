package ownership_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
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
