package ownership

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

// hostList is a fixed host list (the hosts service has its own tests;
// the workload query runs on the real database).
type hostList []hosts.Host

func (l hostList) List(context.Context) ([]hosts.Host, error) { return l, nil }

func fourHosts() hostList {
	var l hostList
	for _, id := range []string{"1", "2", "3", "4"} {
		l = append(l, hosts.Host{ID: id, Reservable: true, ExtraCapabilities: map[string]string{"rack": "r1"}})
	}
	return l
}

func twoProjects() Plan {
	return Plan{
		Consumers: []Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"}, {ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB"}},
		Groups:    []Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []Entry{{Consumer: "dom", Group: "rack1", Amount: 3}, {Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600},
			{Consumer: "b", Group: "rack1", Amount: 1}},
	}
}

func TestServiceGenerations(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			s := New(dbtest.OpenDialect(t, dialect), fourHosts(), func() time.Time { return now })
			st, err := s.Get(ctx)
			if err != nil || st.Generation != 0 || len(st.Plan.Consumers) != 0 {
				t.Fatalf("initial state = %+v, %v", st, err)
			}
			st, err = s.Update(ctx, 0, func(p *Plan) error { *p = twoProjects(); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if st.Generation != 1 || len(st.Ownership["dom"]) != 3 || len(st.Ownership["a"]) != 1 || len(st.Ownership["b"]) != 1 {
				t.Fatalf("after the first update: gen %d, ownership %v", st.Generation, st.Ownership)
			}
			got, err := s.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.Ownership, got.Ownership); diff != "" || got.Generation != 1 {
				t.Fatalf("stored ownership (-want +got):\n%s", diff)
			}
			// A stale generation is a conflict and changes nothing.
			_, err = s.Update(ctx, 0, func(p *Plan) error { p.Entries[0].Amount = 4; return nil })
			if e := errs.As(err); e == nil || e.Kind != errs.Conflict || e.Code != ConflictCode {
				t.Fatalf("stale update = %v", err)
			}
			// An invalid plan is a bad request naming consumer and group.
			_, err = s.Update(ctx, 1, func(p *Plan) error { p.Entries[1].Amount = 3; return nil })
			if e := errs.As(err); e == nil || e.Kind != errs.BadRequest || !strings.Contains(e.Msg, `consumer "dom"`) || !strings.Contains(e.Msg, `"rack1"`) {
				t.Fatalf("invalid update = %v", err)
			}
			if got, _ := s.Get(ctx); got.Generation != 1 {
				t.Fatalf("generation moved to %d", got.Generation)
			}
			// Two writers at one generation: exactly one wins.
			var wg sync.WaitGroup
			errc := make(chan error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Update(ctx, 1, func(p *Plan) error { p.Entries[0].Amount = 3 + i%2; return nil })
					errc <- err
				}()
			}
			wg.Wait()
			close(errc)
			var ok, conflicts int
			for err := range errc {
				switch {
				case err == nil:
					ok++
				case errs.Is(err, errs.Conflict):
					conflicts++
				default:
					t.Fatalf("concurrent update: %v", err)
				}
			}
			if ok != 1 || conflicts != 1 {
				t.Fatalf("%d succeeded, %d conflicted; want 1 and 1", ok, conflicts)
			}
			// The loans query runs on this dialect (no bookings: none).
			if loans, err := s.Loans(ctx, now, now.Add(time.Hour)); err != nil || len(loans) != 0 {
				t.Fatalf("Loans = %v, %v", loans, err)
			}
			ex, err := s.Explain(ctx, "PB")
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, p := range ex.Pools {
				kinds = append(kinds, p.Kind)
			}
			if ex.Consumer != "b" || !cmp.Equal(kinds[:3], []string{"owned", "private", "lent"}) {
				t.Fatalf("Explain(PB) = %+v", ex)
			}
			ex, _ = s.Explain(ctx, "nobody")
			// dom may own every host now (the winner may have set 4): an
			// outsider gets at most the public pool, and sees why not more.
			if ex.Consumer != "" || ex.Note == "" || len(ex.Pools) > 1 || (len(ex.Pools) == 1 && ex.Pools[0].Kind != "public") || len(ex.Refused) < 3 {
				t.Fatalf("Explain(nobody) = %+v", ex)
			}
		})
	}
}
