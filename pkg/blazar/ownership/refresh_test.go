package ownership

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// liveHosts is a host list the test changes between refreshes.
type liveHosts struct {
	mu sync.Mutex
	l  hostList
}

func (h *liveHosts) List(context.Context) ([]hosts.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(hostList(nil), h.l...), nil
}

func (h *liveHosts) set(f func(l hostList) hostList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.l = f(h.l)
}

func ownedBy(st *State, c string) []string {
	var out []string
	for h := range st.Ownership[c] {
		out = append(out, h)
	}
	return out
}

// A refresh that reads other eligible hosts than the stored ownership was
// computed over recomputes it from the stored one and stores it as a
// plan write does (next generation, report with its trigger); hosts
// outside every group and unchanged hosts do not.
func TestRefreshRecomputesOnHostChange(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			hl := &liveHosts{l: fourHosts()}
			s := New(dbtest.OpenDialect(t, dialect), hl, func() time.Time { return now })
			st, err := s.Update(ctx, 0, func(p *Plan) error { *p = twoProjects(); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if st.Report.Trigger != TriggerPlan || st.Report.HostsDigest == "" {
				t.Fatalf("plan write report = %+v", st.Report)
			}
			// Unchanged hosts: nothing is stored.
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 1 {
				t.Fatalf("refresh over unchanged hosts moved the generation to %d", got.Generation)
			}
			// a's host fails: a is refilled (it was only dropped from the
			// view before), with the fewest hosts moved.
			aHost := ownedBy(st, "a")[0]
			hl.set(func(l hostList) hostList {
				for i := range l {
					if l[i].ID == aHost {
						l[i].Reservable = false
					}
				}
				return l
			})
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Generation != 2 || got.Report.Trigger != TriggerHosts {
				t.Fatalf("after the failure: generation %d, report %+v", got.Generation, got.Report)
			}
			if a := ownedBy(got, "a"); len(a) != 1 || a[0] == aHost {
				t.Fatalf("a owns %v after its host %s failed", a, aHost)
			}
			if len(ownedBy(got, "dom")) != 3 || len(ownedBy(got, "b")) != 1 || ownedBy(got, "b")[0] != ownedBy(st, "b")[0] {
				t.Fatalf("ownership after the failure = %v (before %v)", got.Ownership, st.Ownership)
			}
			// The lease path's view follows the stored ownership.
			if o := s.HostOrder("PA"); o == nil || o.Pools[0].Kind != "owned" || o.Pools[0].Hosts[0] != ownedBy(got, "a")[0] {
				t.Fatalf("PA's view = %+v", o)
			}
			// A host in no group is public: nothing to recompute.
			hl.set(func(l hostList) hostList {
				return append(l, hosts.Host{ID: "9", Reservable: true, ExtraCapabilities: map[string]string{"rack": "r9"}})
			})
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 2 {
				t.Fatalf("a public host moved the generation to %d", got.Generation)
			}
			// A new host of the group is recomputed over even when nothing
			// moves (the basis changed).
			hl.set(func(l hostList) hostList {
				return append(l, hosts.Host{ID: "5", Reservable: true, ExtraCapabilities: map[string]string{"rack": "r1"}})
			})
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 3 || got.Report.Trigger != TriggerHosts {
				t.Fatalf("after a new host: generation %d, report %+v", got.Generation, got.Report)
			}
			// A replica holding an old state loses the race and takes the
			// stored one: a recomputation over stale state is no write.
			old := &State{Generation: 2, Plan: got.Plan, Ownership: got.Ownership}
			if _, err := s.recompute(ctx, old, old.Plan, TriggerHosts, false); err == nil {
				t.Fatal("recompute at a stale generation succeeded")
			}
		})
	}
}

// The periodic redistribution recomputes once the interval has passed
// since the last stored recomputation, stores only what moves, and waits
// another interval after running.
func TestRefreshRedistributes(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			d := dbtest.OpenDialect(t, dialect)
			s := New(d, fourHosts(), func() time.Time { return now })
			s.SetRedistributeInterval(5 * time.Minute)
			if _, err := s.Update(ctx, 0, func(p *Plan) error { *p = twoProjects(); return nil }); err != nil {
				t.Fatal(err)
			}
			// The stored ownership lost b's host (free owned capacity b is
			// short of), over the same hosts.
			st, _ := s.Get(ctx)
			delete(st.Ownership, "b")
			if err := d.Model(&models.OwnershipPlan{}).Where("id = ?", 1).Update("ownership", mustJSON(t, st.Ownership)).Error; err != nil {
				t.Fatal(err)
			}
			now = now.Add(4 * time.Minute)
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 1 || len(got.Ownership["b"]) != 0 {
				t.Fatalf("redistributed before the interval: generation %d", got.Generation)
			}
			now = now.Add(time.Minute)
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			got, _ := s.Get(ctx)
			if got.Generation != 2 || got.Report.Trigger != TriggerRedistribute || len(got.Ownership["b"]) != 1 || got.Report.MovedHosts != 1 {
				t.Fatalf("after the interval: generation %d, b owns %v, report %+v", got.Generation, got.Ownership["b"], got.Report)
			}
			// Nothing left to move: no write, and no run before the next
			// interval.
			now = now.Add(5 * time.Minute)
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 2 || !s.redistributed.Equal(now) {
				t.Fatalf("a redistribution moving nothing: generation %d, last run %v", got.Generation, s.redistributed)
			}
			// Off: never.
			s.SetRedistributeInterval(0)
			st, _ = s.Get(ctx)
			delete(st.Ownership, "b")
			if err := d.Model(&models.OwnershipPlan{}).Where("id = ?", 1).Update("ownership", mustJSON(t, st.Ownership)).Error; err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Hour)
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx); got.Generation != 2 {
				t.Fatalf("redistributed while off: generation %d", got.Generation)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
