package instance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins/instance"
)

// start runs the events due once the clock is at 2030-01-02 01:00, so
// the leases starting on 2030-01-02 are active.
func (e *ownEnv) start(t *testing.T) {
	t.Helper()
	e.clock.Set(time.Date(2030, 1, 2, 1, 0, 0, 0, time.UTC))
	if _, err := e.events.RunDue(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestActiveGrowthWithinPart: an active reservation with affinity on a's
// part of compute-1 (2 of its 4 slots) may not grow past that part on
// the host it holds, though the host has room: the update is refused and
// the reservation keeps its slots; b's lent part is not taken either
// unless a may borrow it.
func TestActiveGrowthWithinPart(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newOwnEnv(t, d)
		e.setPlan(t, 0, slotPlan(false))
		ctx := context.Background()
		pa := leases.Caller{UserID: "u", ProjectID: "p1"}
		v, err := e.svc.Create(ctx, pa, leasestest.Request("held", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(2, 2, 4096, 10, true)))
		if err != nil {
			t.Fatal(err)
		}
		resID := v.Reservations[0]["id"].(string)
		if g, _ := e.svc.Get(ctx, pa, v.ID); pools(t, g.Reservations[0]) != "1:owned:a" {
			t.Fatalf("held on %s, want a's part of compute-1", pools(t, g.Reservations[0]))
		}
		e.start(t)
		_, err = e.svc.Update(ctx, pa, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 3}))
		if kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("growing past a's part of compute-1: %v, want a 409", err)
		}
		g, err := e.svc.Get(ctx, pa, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := g.Reservations[0]["amount"]; n != 2 {
			t.Fatalf("amount %v after a refused growth", n)
		}
		// Within the part, a longer end is fine.
		end := "2030-01-04 00:00"
		if _, err := e.svc.Update(ctx, pa, v.ID, leases.UpdateRequest{EndDate: &end}); err != nil {
			t.Fatalf("a longer end within the part: %v", err)
		}
		// b books its own part over the longer end: a's part is still
		// its own, and the host is full only then.
		pb := leases.Caller{UserID: "u", ProjectID: "p2"}
		if _, err := e.svc.Create(ctx, pb, leasestest.Request("b", "2030-01-03 12:00", "2030-01-05 00:00", instanceRes(2, 2, 4096, 10, true))); err != nil {
			t.Fatalf("b's own part: %v", err)
		}
		if _, err := e.svc.Update(ctx, pa, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 3})); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("growing past a's part with b's part booked: %v, want a 409", err)
		}
	})
}

// newLimitEnv is four hosts with rack r1 … r4 (so a lease can pick its
// host): q (p3) owns compute-1 and compute-2, b (p2) owns compute-3 and
// compute-4 under dom and lends them with an hour's grace, at most one
// at once; a (p1), b's sibling, owns nothing.
func newLimitEnv(t *testing.T, d *db.DB) *ownEnv {
	t.Helper()
	hook := &lateHook{}
	ev := newEnvWith(t, d, 4, func(i int) map[string]any {
		return map[string]any{"rack": fmt.Sprintf("r%d", i)}
	}, instance.Config{Ownership: hook})
	hook.svc = ownership.New(d, ev.hosts, ev.clock.Now)
	e := &ownEnv{env: ev, own: hook.svc}
	one := 1
	e.setPlan(t, 0, ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "q", Rank: 2, ProjectID: "p3"},
			{ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"}, {ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2", LendingLimit: &one}},
		Groups: []ownership.Group{{Name: "gq", Hosts: []string{"1", "2"}}, {Name: "gb", Hosts: []string{"3", "4"}}},
		Entries: []ownership.Entry{{Consumer: "q", Group: "gq", Amount: 2}, {Consumer: "dom", Group: "gb", Amount: 2},
			{Consumer: "b", Group: "gb", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
	})
	return e
}

// createOn creates a's lease of a whole host's worth of slots (4 of 2
// VCPU) on the host of rack.
func (e *ownEnv) createOn(name, start, end, rack string) (*leases.View, error) {
	r := instanceRes(4, 2, 4096, 10, nil)
	r["resource_properties"] = `["=", "$rack", "` + rack + `"]`
	return e.svc.Create(context.Background(), leases.Caller{UserID: "u", ProjectID: "p1"}, leasestest.Request(name, start, end, r))
}

// TestActiveGrowthRacesALoan: an active reservation holding one of b's
// hosts stretches its end while another lease borrows b's other host
// over the stretch, concurrently (on MariaDB the update's held loan is
// counted again under the lender's lock): exactly one of them is made.
func TestActiveGrowthRacesALoan(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newLimitEnv(t, d)
		ctx := context.Background()
		pa := leases.Caller{UserID: "u", ProjectID: "p1"}
		for round := range 3 {
			day := 2 + 10*round
			v, err := e.createOn(fmt.Sprintf("held%d", round), fmt.Sprintf("2030-01-%02d 00:00", day), fmt.Sprintf("2030-01-%02d 00:00", day+1), "r3")
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Set(time.Date(2030, 1, day, 1, 0, 0, 0, time.UTC))
			if _, err := e.events.RunDue(ctx); err != nil {
				t.Fatal(err)
			}
			results := make(chan error, 2)
			go func() {
				end := fmt.Sprintf("2030-01-%02d 12:00", day+3)
				_, err := e.svc.Update(ctx, pa, v.ID, leases.UpdateRequest{EndDate: &end})
				results <- err
			}()
			go func() {
				_, err := e.createOn(fmt.Sprintf("loan%d", round), fmt.Sprintf("2030-01-%02d 00:00", day+3), fmt.Sprintf("2030-01-%02d 00:00", day+4), "r4")
				results <- err
			}()
			var ok, refused int
			for range 2 {
				switch err := <-results; {
				case err == nil:
					ok++
				case kindOf(err) == errs.NotEnoughResources:
					refused++
				default:
					t.Errorf("round %d: %v", round, err)
				}
			}
			if ok != 1 || refused != 1 {
				t.Fatalf("round %d: %d made, %d refused; want 1 and 1", round, ok, refused)
			}
		}
	})
}

// TestActiveGrowthCountsHeldLoans: an active reservation holding one of
// b's hosts (b lends at most one at once) may not stretch its end over
// another loan of b's: its held loan counts against the limit over the
// new window, and the update is refused naming it; an end short of that
// loan is fine.
func TestActiveGrowthCountsHeldLoans(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newLimitEnv(t, d)
		ctx := context.Background()
		pa := leases.Caller{UserID: "u", ProjectID: "p1"}
		create := func(name, start, end, rack string) *leases.View {
			t.Helper()
			v, err := e.createOn(name, start, end, rack)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
		v := create("now", "2030-01-02 00:00", "2030-01-03 00:00", "r3")
		create("later", "2030-01-05 00:00", "2030-01-06 00:00", "r4")
		e.start(t)
		end := "2030-01-05 12:00"
		_, err := e.svc.Update(ctx, pa, v.ID, leases.UpdateRequest{EndDate: &end})
		if kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), `consumer "b" lends at most 1 hosts at once`) {
			t.Fatalf("stretching a loan over another of a limited lender: %v", err)
		}
		if g, _ := e.svc.Get(ctx, pa, v.ID); g.EndDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("end %s after a refused update", g.EndDate)
		}
		end = "2030-01-04 12:00"
		if _, err := e.svc.Update(ctx, pa, v.ID, leases.UpdateRequest{EndDate: &end}); err != nil {
			t.Fatalf("a longer end clear of the other loan: %v", err)
		}
	})
}
