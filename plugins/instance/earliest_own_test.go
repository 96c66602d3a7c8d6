package instance_test

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/leasehold/leasehold/plugins/instance"
)

// newOwnSearchEnv is newOwnEnv with Config.DB set (the earliest search
// reads through it), the cleaning time and each host tagged "h<i>", so
// a request can name one host.
func newOwnSearchEnv(t testing.TB, d *db.DB, cleaning time.Duration) *ownEnv {
	t.Helper()
	hook := &lateHook{}
	e := newEnvWith(t, d, 5, func(i int) map[string]any {
		m := map[string]any{"tag": fmt.Sprint("h", i)}
		if i <= 2 {
			m["ownership_slots"] = "4"
		}
		return m
	}, instance.Config{DB: d, Ownership: hook, Cleaning: cleaning})
	o := ownership.New(d, e.hosts, e.clock.Now)
	hook.svc = o
	return &ownEnv{env: e, own: o}
}

// slotsOn is n slots of 2 VCPU/4 GiB/10 GB (a quarter host: a part of
// compute-1 or compute-2 holds 2), on host tag h ("" any), with affinity.
func slotsOn(n int, h string, affinity any) map[string]any {
	r := instanceRes(n, 2, 4096, 10, affinity)
	if h != "" {
		r["resource_properties"] = fmt.Sprintf(`["==", "$tag", "%s"]`, h)
	}
	return r
}

// TestEarliestInstanceWithOwnership: with a plan, the earliest window of
// an instance reservation is the first start at which the create, from
// the project's pools, would succeed, and a lease created at "earliest"
// gets it. slotPlan: a (p1) and b (p2) own 2 slots each of compute-1,
// dom's compute-3 is their private pool, q (p3) owns 2 slots of
// compute-2, whose other 2 are public with compute-4 and compute-5.
func TestEarliestInstanceWithOwnership(t *testing.T) {
	const day = "2030-01-02 "
	type booking struct {
		project, end string
		res          map[string]any
	}
	for _, tc := range []struct {
		name     string
		lends    bool // b lends its slots of compute-1
		bookings []booking
		project  string
		res      map[string]any
		want     string   // start; "" none
		hosts    []string // the hosts the window may use
	}{
		{name: "owned slots free now", project: "p1", res: slotsOn(2, "", nil),
			want: day + "00:00", hosts: []string{"1"}},
		{name: "own slots busy: the parent's private pool",
			bookings: []booking{{"p1", "06:00", slotsOn(2, "", nil)}},
			project:  "p1", res: slotsOn(2, "", nil), want: day + "00:00", hosts: []string{"3"}},
		{name: "own and private busy: the public pool",
			bookings: []booking{{"p1", "06:00", slotsOn(2, "", nil)}, {"p1", "06:00", slotsOn(4, "", nil)}},
			project:  "p1", res: slotsOn(2, "", nil), want: day + "00:00", hosts: []string{"2", "4", "5"}},
		{name: "a sibling's lent slots before the public pool", lends: true,
			bookings: []booking{{"p1", "06:00", slotsOn(2, "", nil)}, {"p1", "06:00", slotsOn(4, "", nil)}},
			project:  "p1", res: slotsOn(2, "h1", nil), want: day + "00:00", hosts: []string{"1"}},
		// compute-1 has room from 04:00, a's part only from 06:00.
		{name: "a part's share full until its booking ends",
			bookings: []booking{{"p2", "04:00", slotsOn(2, "h1", nil)}, {"p1", "06:00", slotsOn(2, "h1", nil)}},
			project:  "p1", res: slotsOn(2, "h1", nil), want: day + "06:00", hosts: []string{"1"}},
		// compute-1 and compute-3 are free, but not p9's.
		{name: "outside the tree: public capacity only",
			bookings: []booking{{"p8", "06:00", slotsOn(4, "", true)}, {"p8", "06:00", slotsOn(4, "", true)}},
			project:  "p9", res: slotsOn(4, "", nil), want: day + "06:00", hosts: []string{"2", "4", "5"}},
		{name: "outside the tree: never more than the public pool",
			project: "p9", res: slotsOn(11, "", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, d *db.DB) {
				e := newOwnSearchEnv(t, d, 0)
				e.setPlan(t, 0, slotPlan(tc.lends))
				ctx := context.Background()
				for i, b := range tc.bookings {
					c := leases.Caller{UserID: "u-" + b.project, ProjectID: b.project}
					if _, err := e.svc.Create(ctx, c, leasestest.Request(fmt.Sprint("b", i), day+"00:00", day+b.end, b.res)); err != nil {
						t.Fatalf("booking %d: %v", i, err)
					}
				}
				c := leases.Caller{UserID: "u-" + tc.project, ProjectID: tc.project}
				rs := []leases.ReservationRequest{leasestest.Reservation(tc.res)}
				win, err := e.svc.Earliest(ctx, c, leases.EarliestRequest{After: strp(day + "00:00"), Duration: 2 * time.Hour, Reservations: rs})
				if tc.want == "" {
					if kindOf(err) != errs.NotEnoughResources {
						t.Fatalf("window %+v, %v; want NotEnoughResources", win, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want[:10] + "T" + tc.want[11:] + ":00.000000"
				if win.StartDate != want {
					t.Errorf("start %s, want %s", win.StartDate, want)
				}
				for _, h := range win.Reservations[0].Resources {
					if !slices.Contains(tc.hosts, h) {
						t.Errorf("the window uses host %s, want only %v", h, tc.hosts)
					}
				}
				// The create at "earliest" gets that window and those hosts.
				req := leasestest.Request("late", "earliest", "", tc.res)
				req.EndDate = nil
				v, err := e.svc.CreateEarliest(ctx, c, req, strp(day+"00:00"), 2*time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if v.StartDate != want {
					t.Errorf("created at %s, want %s", v.StartDate, want)
				}
				var got []string
				for h := range e.slots(t, v.Reservations[0]["id"].(string)) {
					got = append(got, h[len("compute-"):])
				}
				slices.Sort(got)
				if diff := cmp.Diff(slices.Sorted(slices.Values(win.Reservations[0].Resources)), got); diff != "" {
					t.Errorf("created on other hosts than the window said (-window +created):\n%s", diff)
				}
			})
		})
	}
}

// TestEarliestInstanceWithOwnershipBruteForce: over random plans
// (lending, a lending limit, borrowing grace periods), bookings and
// requests, the start the search offers can be created, and no earlier
// start on the half-hour grid (where every booking begins and ends) can.
func TestEarliestInstanceWithOwnershipBruteForce(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		var limit *int
		if rapid.Bool().Draw(rt, "limit") {
			limit = new(int)
			*limit = 1
		}
		borrowGrace := []int64{0, 7200}[rapid.IntRange(0, 1).Draw(rt, "borrowGrace")]
		// dom owns compute-1, -3 and -4: a (p1) and b (p2) 2 slots each
		// of compute-1, b compute-4 too, both of b's lent with an hour
		// of grace; compute-3 is dom's private pool. q (p3) owns 2 slots
		// of compute-2, whose other 2 are public with compute-5. p9 is
		// outside the tree.
		lends := rapid.Bool().Draw(rt, "lends")
		plan := ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "q", Rank: 2, ProjectID: "p3"},
				{ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1", BorrowGraceSeconds: borrowGrace},
				{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2", LendingLimit: limit}},
			Groups: []ownership.Group{{Name: "g1", Hosts: []string{"1"}}, {Name: "g2", Hosts: []string{"2"}},
				{Name: "g3", Hosts: []string{"3"}}, {Name: "g4", Hosts: []string{"4"}}},
			Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1}, {Consumer: "dom", Group: "g3", Amount: 1},
				{Consumer: "dom", Group: "g4", Amount: 1},
				{Consumer: "a", Group: "g1", Amount: 2, Partial: true},
				{Consumer: "b", Group: "g1", Amount: 2, Partial: true, Lend: lends, LendGraceSeconds: 3600},
				{Consumer: "b", Group: "g4", Amount: 1, Lend: lends, LendGraceSeconds: 3600},
				{Consumer: "q", Group: "g2", Amount: 2, Partial: true}},
		}
		cleaning := time.Duration(rapid.IntRange(0, 1).Draw(rt, "cleaning")) * 30 * time.Minute
		// SQLite: a run creates up to hundreds of leases.
		e := newOwnSearchEnv(t, dbtest.OpenDialect(t, db.SQLite), cleaning)
		e.setPlan(t, 0, plan)
		projects := []string{"p1", "p2", "p3", "p9"}
		half := func(k int) time.Time { return t0.Add(time.Duration(k) * 30 * time.Minute) }
		format := func(t time.Time) string { return t.Format("2006-01-02 15:04") }
		res := func(label string, most int) map[string]any {
			n := rapid.IntRange(1, most).Draw(rt, label+"amount")
			aff := []any{nil, nil, true, false}[rapid.IntRange(0, 3).Draw(rt, label+"affinity")]
			h := []string{"", "", "", "h1", "h2", "h4", "h5"}[rapid.IntRange(0, 6).Draw(rt, label+"host")]
			return slotsOn(n, h, aff)
		}
		create := func(project string, start, end time.Time, r map[string]any) (*leases.View, error) {
			return e.svc.Create(ctx, leases.Caller{UserID: "u-" + project, ProjectID: project},
				leasestest.Request("l", format(start), format(end), r))
		}
		// Bookings crowd the first hours, where the request asks.
		for i := range rapid.IntRange(2, 12).Draw(rt, "leases") {
			p := projects[rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("project", i))]
			s := rapid.IntRange(1, 6).Draw(rt, fmt.Sprint("start", i))
			l := rapid.IntRange(1, 24).Draw(rt, fmt.Sprint("length", i))
			_, _ = create(p, half(s), half(s+l), res(fmt.Sprint(i), 4)) // refused or not
		}
		p := projects[rapid.IntRange(0, 3).Draw(rt, "project")]
		r := res("ask", 4)
		d := time.Duration(rapid.IntRange(1, 6).Draw(rt, "halves")) * 30 * time.Minute
		c := leases.Caller{ProjectID: p, UserID: "u-" + p}
		win, err := e.svc.Earliest(ctx, c, leases.EarliestRequest{After: strp(format(half(1))), Duration: d,
			Reservations: []leases.ReservationRequest{leasestest.Reservation(r)}})
		var found time.Time
		switch {
		case err == nil:
			if found, err = time.Parse("2006-01-02T15:04:05.000000", win.StartDate); err != nil {
				rt.Fatal(err)
			}
		case kindOf(err) != errs.NotEnoughResources:
			rt.Fatal(err)
		}
		// The brute force: every start on the grid before the one found
		// (up to half(36), past every booking's end and cleaning) is
		// refused.
		for k := 1; k <= 36; k++ {
			s := half(k)
			if !found.IsZero() && !s.Before(found) {
				break
			}
			if _, err := create(p, s, s.Add(d), r); err == nil {
				rt.Fatalf("%s, %v: a lease can be created at %s, the search said %v", p, r, s, found)
			} else if kindOf(err) != errs.NotEnoughResources {
				rt.Fatal(err)
			}
		}
		if found.IsZero() {
			return
		}
		if _, err := create(p, found, found.Add(d), r); err != nil {
			rt.Fatalf("%s, %v: the search said %s, the create there: %v", p, r, found, err)
		}
	})
}

var _ leases.EarliestFinder = (*instance.FlavorPlugin)(nil)
