package instance_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins/instance"
)

// newOwnSearchEnv is newOwnEnv with Config.DB set (the earliest search
// reads through it) and each host tagged "h<i>", so a request can name
// one host.
func newOwnSearchEnv(t testing.TB, d *db.DB) *ownEnv {
	t.Helper()
	hook := &lateHook{}
	e := newEnvWith(t, d, 4, func(i int) map[string]any {
		m := map[string]any{"tag": fmt.Sprint("h", i)}
		if i <= 2 {
			m["ownership_slots"] = "4"
		}
		return m
	}, instance.Config{DB: d, Ownership: hook})
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
// compute-2, whose other 2 are public with compute-4.
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
			project:  "p1", res: slotsOn(2, "", nil), want: day + "00:00", hosts: []string{"2", "4"}},
		{name: "a sibling's lent slots before the public pool", lends: true,
			bookings: []booking{{"p1", "06:00", slotsOn(2, "", nil)}, {"p1", "06:00", slotsOn(4, "", nil)}},
			project:  "p1", res: slotsOn(2, "h1", nil), want: day + "00:00", hosts: []string{"1"}},
		// compute-1 has room from 04:00, a's part only from 06:00.
		{name: "a part's share full until its booking ends",
			bookings: []booking{{"p2", "04:00", slotsOn(2, "h1", nil)}, {"p1", "06:00", slotsOn(2, "h1", nil)}},
			project:  "p1", res: slotsOn(2, "h1", nil), want: day + "06:00", hosts: []string{"1"}},
		// compute-1 and compute-3 are free, but not p9's.
		{name: "outside the tree: public capacity only",
			bookings: []booking{{"p8", "06:00", slotsOn(4, "", true)}},
			project:  "p9", res: slotsOn(4, "", nil), want: day + "06:00", hosts: []string{"2", "4"}},
		{name: "outside the tree: never more than the public pool",
			project: "p9", res: slotsOn(7, "", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, d *db.DB) {
				e := newOwnSearchEnv(t, d)
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
