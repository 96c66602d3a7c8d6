package instance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	own "github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/instance"
)

// ownEnv is env with the ownership service as the instance plugin's
// hook, over four hosts of 8 VCPU/16 GiB/800 GB: compute-1 and compute-2
// count 4 slots for partial ownership (2 VCPU/4 GiB/200 GB each).
type ownEnv struct {
	*env
	own *ownership.Service
}

func newOwnEnv(t testing.TB, d *db.DB) *ownEnv {
	t.Helper()
	hook := &lateHook{}
	e := newEnvWith(t, d, 4, func(i int) map[string]any {
		if i <= 2 {
			return map[string]any{"ownership_slots": "4"}
		}
		return nil
	}, instance.Config{Ownership: hook})
	o := ownership.New(d, e.hosts, e.clock.Now)
	hook.svc = o
	return &ownEnv{env: e, own: o}
}

// lateHook lets the ownership service be made after the plugin (it reads
// the plugin's host service).
type lateHook struct{ svc *ownership.Service }

func (h *lateHook) HostOrder(project string) *own.Order { return h.svc.HostOrder(project) }

// setPlan stores plan (generation gen) and refreshes the view.
func (e *ownEnv) setPlan(t testing.TB, gen int64, plan ownership.Plan) {
	t.Helper()
	if _, err := e.own.Update(context.Background(), gen, func(p *ownership.Plan) error { *p = plan; return nil }); err != nil {
		t.Fatalf("plan: %v", err)
	}
}

// slotPlan: dom owns compute-1 whole, a (p1) 2 of its slots, b (p2) the
// other 2, lent to dom's pool with a grace of an hour; dom also owns
// compute-3 whole, its private pool; q (p3) owns 2 slots of compute-2,
// not lent, whose other 2 are public; compute-4 is public.
func slotPlan(bLends bool) ownership.Plan {
	return ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "q", Rank: 2, ProjectID: "p3"},
			{ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"}, {ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2"}},
		Groups: []ownership.Group{{Name: "g1", Hosts: []string{"1"}}, {Name: "g2", Hosts: []string{"2"}}, {Name: "g3", Hosts: []string{"3"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1}, {Consumer: "dom", Group: "g3", Amount: 1},
			{Consumer: "a", Group: "g1", Amount: 2, Partial: true},
			{Consumer: "b", Group: "g1", Amount: 2, Partial: true, Lend: bLends, LendGraceSeconds: 3600},
			{Consumer: "q", Group: "g2", Amount: 2, Partial: true}},
	}
}

// pools renders a reservation's ownership entries as
// "host:pool[:consumer][<lender]", sorted.
func pools(t testing.TB, r map[string]any) string {
	t.Helper()
	raw, ok := r["ownership"]
	if !ok {
		return "(none)"
	}
	var out []string
	for _, e := range raw.([]hostplugin.PoolEntry) {
		s := e.HostID + ":" + e.Pool
		if e.Consumer != "" {
			s += ":" + e.Consumer
		}
		if e.LentBy != "" {
			s += "<" + e.LentBy
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (e *ownEnv) createAs(t testing.TB, project, name string, amount int) (*leases.View, error) {
	t.Helper()
	return e.svc.Create(context.Background(), leases.Caller{UserID: "u-" + project, ProjectID: project},
		leasestest.Request(name, "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(amount, 2, 4096, 10, nil)))
}

// TestSlotsFromPools: with a plan, a's instance leases take a's slots of
// compute-1 first, then dom's private compute-3, then b's lent slots,
// then the public pool; q's slots of compute-2 are never a's; each
// reservation records and shows where its hosts came from, in GET and in
// listings, and forgets it when deleted.
func TestSlotsFromPools(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newOwnEnv(t, d)
		ctx := context.Background()
		// Without a plan: upstream's body.
		v, err := e.createAs(t, "p1", "before", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := pools(t, v.Reservations[0]); got != "(none)" {
			t.Fatalf("a lease without a plan shows ownership %s", got)
		}
		if err := e.svc.Delete(ctx, leases.Caller{ProjectID: "p1"}, v.ID); err != nil {
			t.Fatal(err)
		}
		e.setPlan(t, 0, slotPlan(true))

		steps := []struct {
			project string
			amount  int
			want    string // "" when checked by check
			check   func(string) bool
			slots   map[string]int
		}{
			{"p1", 2, "1:owned:a", nil, map[string]int{"compute-1": 2}},
			{"p1", 2, "3:private:dom", nil, map[string]int{"compute-3": 2}},
			// compute-3 has 2 left, b lends its 2 slots of compute-1.
			{"p1", 3, "1:private:dom<b 3:private:dom", nil, nil},
			// Only the public pool is left: compute-2's public slots and
			// compute-4 (and whatever of the earlier pools is free).
			{"p1", 4, "", func(s string) bool {
				return strings.Contains(s, ":public") && !strings.Contains(s, "q") && !strings.Contains(s, "2:owned")
			}, nil},
			{"p3", 2, "2:owned:q", nil, map[string]int{"compute-2": 2}},
		}
		var ids []string
		for i, st := range steps {
			v, err := e.createAs(t, st.project, fmt.Sprintf("l%d", i), st.amount)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			ids = append(ids, v.ID)
			got, err := e.svc.Get(ctx, leases.Caller{ProjectID: st.project}, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			r := got.Reservations[0]
			p := pools(t, r)
			if st.want != "" && p != st.want || st.check != nil && !st.check(p) {
				t.Errorf("step %d (%s, %d slots): pools %s, want %s", i, st.project, st.amount, p, st.want)
			}
			if st.slots != nil {
				if s := e.slots(t, r["id"].(string)); fmt.Sprint(s) != fmt.Sprint(st.slots) {
					t.Errorf("step %d: slots %v, want %v", i, s, st.slots)
				}
			}
		}
		// What a may use is nearly all taken; q's slots are not a's.
		if _, err := e.createAs(t, "p1", "more", 8); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("a's lease beyond its pools: %v", err)
		}
		// Listings show the same entries.
		list, err := e.svc.List(ctx, leases.Caller{ProjectID: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range list {
			for _, r := range l.Reservations {
				if pools(t, r) != "(none)" {
					n++
				}
			}
		}
		if n != 4 {
			t.Errorf("p1's listing shows ownership on %d reservations, want 4", n)
		}
		// A deleted lease forgets its records.
		if err := e.svc.Delete(ctx, leases.Caller{ProjectID: "p1"}, ids[0]); err != nil {
			t.Fatal(err)
		}
		var left int64
		if err := d.Raw("SELECT COUNT(*) FROM ownership_pools o JOIN reservations r ON r.id = o.reservation_id WHERE r.lease_id = ?", ids[0]).Scan(&left).Error; err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("deleted lease keeps %d pool records", left)
		}
	})
}

// TestSlotsNotLentNotTaken: b does not lend: once a's slots and dom's
// private host are used up, a's next lease skips b's slots of compute-1
// and goes to the public pool, and b still gets its own slots.
func TestSlotsNotLentNotTaken(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newOwnEnv(t, d)
		e.setPlan(t, 0, slotPlan(false))
		for i, want := range []string{"1:owned:a", "3:private:dom"} {
			v, err := e.createAs(t, "p1", fmt.Sprintf("a%d", i), map[int]int{0: 2, 1: 4}[i])
			if err != nil {
				t.Fatal(err)
			}
			g, _ := e.svc.Get(context.Background(), leases.Caller{ProjectID: "p1"}, v.ID)
			if got := pools(t, g.Reservations[0]); got != want {
				t.Fatalf("lease %d: %s, want %s", i, got, want)
			}
		}
		v, err := e.createAs(t, "p1", "a2", 1)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := e.svc.Get(context.Background(), leases.Caller{ProjectID: "p1"}, v.ID)
		if got := pools(t, g.Reservations[0]); strings.HasPrefix(got, "1:") || !strings.Contains(got, ":public") {
			t.Fatalf("a's third lease: %s, want the public pool, never b's slots", got)
		}
		v, err = e.createAs(t, "p2", "b0", 2)
		if err != nil {
			t.Fatal(err)
		}
		g, _ = e.svc.Get(context.Background(), leases.Caller{ProjectID: "p2"}, v.ID)
		if got := pools(t, g.Reservations[0]); got != "1:owned:b" {
			t.Fatalf("b's lease: %s, want its own slots of compute-1", got)
		}
	})
}

// TestSlotsWithinLendingLimits: b lends its two hosts with a lending
// limit of one host at once; q owns the other two and lends nothing. a's
// leases may borrow one of b's hosts at a time: six slots (two hosts'
// worth of 4) are refused naming b's limit, four fit, a second overlapping
// loan is refused, one in another window is not.
func TestSlotsWithinLendingLimits(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newOwnEnv(t, d)
		one := 1
		e.setPlan(t, 0, ownership.Plan{
			Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "q", Rank: 2, ProjectID: "p3"},
				{ID: "a", ParentID: "dom", Rank: 1, ProjectID: "p1"}, {ID: "b", ParentID: "dom", Rank: 2, ProjectID: "p2", LendingLimit: &one}},
			Groups: []ownership.Group{{Name: "gq", Hosts: []string{"1", "2"}}, {Name: "gb", Hosts: []string{"3", "4"}}},
			Entries: []ownership.Entry{{Consumer: "q", Group: "gq", Amount: 2}, {Consumer: "dom", Group: "gb", Amount: 2},
				{Consumer: "b", Group: "gb", Amount: 2, Lend: true, LendGraceSeconds: 3600}},
		})
		ctx := context.Background()
		pa := leases.Caller{UserID: "u", ProjectID: "p1"}
		create := func(name, start, end string, amount int) (*leases.View, error) {
			return e.svc.Create(ctx, pa, leasestest.Request(name, start, end, instanceRes(amount, 2, 4096, 10, nil)))
		}
		_, err := create("six", "2030-01-02 00:00", "2030-01-03 00:00", 6)
		if kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), `consumer "b" lends at most 1 hosts at once`) {
			t.Fatalf("six slots over two of b's hosts: %v", err)
		}
		v, err := create("four", "2030-01-02 00:00", "2030-01-03 00:00", 4)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := e.svc.Get(ctx, pa, v.ID)
		if got := pools(t, g.Reservations[0]); got != "3:private:dom<b" && got != "4:private:dom<b" {
			t.Fatalf("four slots: %s, want one of b's hosts", got)
		}
		if _, err := create("more", "2030-01-02 12:00", "2030-01-04 00:00", 1); kindOf(err) != errs.NotEnoughResources ||
			!strings.Contains(err.Error(), `has 0 left to lend`) {
			t.Fatalf("a second loan at once: %v", err)
		}
		if _, err := create("later", "2030-01-05 00:00", "2030-01-06 00:00", 4); err != nil {
			t.Fatalf("a loan in another window: %v", err)
		}
		// Two loans at once, concurrently (on MariaDB the write re-checks
		// under the lender's lock): one of them is refused.
		results := make(chan error, 2)
		for i := range 2 {
			go func() {
				_, err := create(fmt.Sprintf("race%d", i), "2030-01-08 00:00", "2030-01-09 00:00", 3)
				results <- err
			}()
		}
		var ok, refused int
		for range 2 {
			switch err := <-results; {
			case err == nil:
				ok++
			case kindOf(err) == errs.NotEnoughResources:
				refused++
			default:
				t.Errorf("concurrent loan: %v", err)
			}
		}
		if ok != 1 || refused != 1 {
			t.Fatalf("concurrent loans from b: %d made, %d refused; want 1 and 1", ok, refused)
		}
	})
}

// TestSlotsNeverBorrowedWithoutLeave: for random plans (who lends, with
// which grace periods) and random instance leases of three projects, no
// reservation draws from capacity its project may not use (another
// consumer's that does not lend to it, or lends with a grace period
// shorter than its borrowing grace), and no part of a partly owned host
// ever holds more instances than its share of the host.
func TestSlotsNeverBorrowedWithoutLeave(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := dbtest.Open(t)
		e := newOwnEnv(t, d)
		plan := slotPlan(rapid.Bool().Draw(rt, "b lends"))
		plan.Consumers[2].BorrowGraceSeconds = int64(rapid.IntRange(0, 2).Draw(rt, "a's borrow grace")) * 3600
		plan.Entries[2].Lend = rapid.Bool().Draw(rt, "a lends")
		plan.Entries[2].LendGraceSeconds = int64(rapid.IntRange(0, 2).Draw(rt, "a's lend grace")) * 3600
		plan.Entries[3].LendGraceSeconds = int64(rapid.IntRange(0, 2).Draw(rt, "b's lend grace")) * 3600
		plan.Entries[4].Lend = rapid.Bool().Draw(rt, "q lends")
		e.setPlan(t, 0, plan)
		days := []string{"2030-01-02 00:00", "2030-01-03 00:00", "2030-01-04 00:00"}
		for i := range rapid.IntRange(1, 10).Draw(rt, "leases") {
			project := rapid.SampledFrom([]string{"p1", "p2", "p3", "p4"}).Draw(rt, "project")
			s := rapid.IntRange(0, 1).Draw(rt, "start")
			_, _ = e.svc.Create(context.Background(), leases.Caller{UserID: "u", ProjectID: project},
				leasestest.Request(fmt.Sprintf("l%d", i), days[s], days[s+rapid.IntRange(1, 2-s).Draw(rt, "days")],
					instanceRes(rapid.IntRange(1, 5).Draw(rt, "amount"), 2, 4096, 10, nil)))
		}
		var rows []struct {
			Project, Host, Pool, Consumer, LentBy string
			Slots                                 int
			StartDate, EndDate                    time.Time
		}
		if err := d.Raw(`SELECT l.project_id AS project, o.compute_host_id AS host, o.pool, o.consumer, o.lent_by, a.slots, a.start_date, a.end_date
 FROM ownership_pools o JOIN instance_allocations a ON a.reservation_id = o.reservation_id AND a.compute_host_id = o.compute_host_id
 JOIN leases l ON l.id = o.lease_id`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		consumer := map[string]string{"p1": "a", "p2": "b", "p3": "q"}
		borrowGrace := map[string]int64{"a": plan.Consumers[2].BorrowGraceSeconds}
		lends := map[string]*ownership.Entry{"a": &plan.Entries[2], "b": &plan.Entries[3], "q": &plan.Entries[4]}
		// Who holds what: compute-1's parts are a's and b's, compute-2's
		// q's and the public's, compute-3 is dom's, compute-4 public.
		holders := map[string][]string{"1": {"a", "b"}, "2": {"q", ""}, "3": {"dom"}, "4": {""}}
		used := map[[2]string][]int{} // (host, part owner) → slots per day
		for _, r := range rows {
			c := consumer[r.Project]
			owner := own.PartOwner(r.Pool, r.Consumer, r.LentBy)
			if !slices.Contains(holders[r.Host], owner) {
				t.Fatalf("%s's slots on host %s recorded from %q, which holds none of it (%+v)", r.Project, r.Host, owner, r)
			}
			var ok bool
			switch owner {
			case "", c:
				ok = true
			case "dom": // the private pool of a and b
				ok = c == "a" || c == "b"
			case "a", "b": // lent into dom's pool
				ok = (c == "a" || c == "b") && lends[owner].Lend && borrowGrace[c] <= lends[owner].LendGraceSeconds
			case "q": // lent into the public pool
				ok = lends[owner].Lend && borrowGrace[c] <= lends[owner].LendGraceSeconds
			}
			if !ok {
				t.Fatalf("%s (consumer %q) drew %d slots of host %s from %q, which does not lend to it (%+v)", r.Project, c, r.Slots, r.Host, owner, r)
			}
			k := [2]string{r.Host, owner}
			if used[k] == nil {
				used[k] = make([]int, len(days))
			}
			for i, day := range days {
				at, _ := time.Parse("2006-01-02 15:04", day)
				if !at.Before(r.StartDate) && at.Before(r.EndDate) {
					used[k][i] += r.Slots
				}
			}
		}
		// A part of 2 of compute-1's or compute-2's 4 slots holds 2
		// instances of 2 VCPU/4 GiB.
		for k, per := range used {
			if k[0] != "1" && k[0] != "2" {
				continue
			}
			for i, n := range per {
				if n > 2 {
					t.Fatalf("part %q of host %s holds %d instances on %s, its share is 2", k[1], k[0], n, days[i])
				}
			}
		}
	})
}

// TestSlotsUpdateFromPools: a pending reservation that grows is placed
// again from its pools and its records follow (a's 2 slots, then dom's
// private host); shrunk back, it keeps only what it holds.
func TestSlotsUpdateFromPools(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newOwnEnv(t, d)
		e.setPlan(t, 0, slotPlan(false))
		ctx := context.Background()
		pa := leases.Caller{UserID: "u", ProjectID: "p1"}
		v, err := e.createAs(t, "p1", "grow", 2)
		if err != nil {
			t.Fatal(err)
		}
		resID := v.Reservations[0]["id"].(string)
		for _, st := range []struct {
			amount int
			want   string
		}{{4, "1:owned:a 3:private:dom"}, {1, "1:owned:a"}} {
			if _, err := e.svc.Update(ctx, pa, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": st.amount})); err != nil {
				t.Fatalf("amount %d: %v", st.amount, err)
			}
			g, err := e.svc.Get(ctx, pa, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := pools(t, g.Reservations[0]); got != st.want {
				t.Errorf("amount %d: %s, want %s", st.amount, got, st.want)
			}
		}
	})
}
