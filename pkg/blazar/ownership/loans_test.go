package ownership_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// lendBothWays: dom owns two of three hosts, a (PA) and b (PB) one each,
// both lending; c (PC) under dom owns none; the third host is public.
func lendBothWays() ownership.Plan {
	return ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1}, {ID: "a", ParentID: "dom", Rank: 1, ProjectID: "PA"},
			{ID: "b", ParentID: "dom", Rank: 2, ProjectID: "PB"}, {ID: "c", ParentID: "dom", Rank: 3, ProjectID: "PC"}},
		Groups: []ownership.Group{{Name: "rack1", Properties: map[string]string{"rack": "r1"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "rack1", Amount: 2},
			{Consumer: "a", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600},
			{Consumer: "b", Group: "rack1", Amount: 1, Lend: true, LendGraceSeconds: 3600}},
	}
}

// TestLoansOf: a project's loans are exactly the loans that involve it,
// seen from its side, over the window asked for.
func TestLoansOf(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, dbtest.OpenDialect(t, dialect), 3, lendBothWays())
			st, err := e.own.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			only := func(c string) string {
				t.Helper()
				if len(st.Ownership[c]) != 1 {
					t.Fatalf("%s owns %v", c, st.Ownership[c])
				}
				for h := range st.Ownership[c] {
					return h
				}
				return ""
			}
			hostA, hostB := only("a"), only("b")
			create := func(project, start, end string, n int) string {
				t.Helper()
				v, err := e.create(project, start, end, n)
				if err != nil {
					t.Fatalf("lease of %s: %v", project, err)
				}
				return v.ID
			}
			day := func(d int) time.Time { return time.Date(2030, 2, d, 0, 0, 0, 0, time.UTC) }
			// Feb 1: PA takes its host and borrows b's. Feb 3: PB takes its
			// host and borrows a's. Feb 5: PA takes its host, PC borrows
			// b's (a loan PA must not see). Feb 1 and 7: PZ, outside the
			// tree, uses the public host (no loans).
			paW1 := create("PA", "2030-02-01 00:00", "2030-02-02 00:00", 2)
			pbW2 := create("PB", "2030-02-03 00:00", "2030-02-04 00:00", 2)
			create("PA", "2030-02-05 00:00", "2030-02-06 00:00", 1)
			pcW3 := create("PC", "2030-02-05 00:00", "2030-02-06 00:00", 1)
			create("PZ", "2030-02-01 00:00", "2030-02-02 00:00", 1)
			create("PZ", "2030-02-07 00:00", "2030-02-08 00:00", 1)

			all, err := e.own.Loans(ctx, day(1), day(9))
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 3 {
				t.Fatalf("all loans = %+v, want three", all)
			}
			loan := func(host, lease, project, consumer string, d int) ownership.ProjectLoan {
				return ownership.ProjectLoan{Host: host, LeaseID: lease, ProjectID: project, Consumer: consumer, Start: day(d), End: day(d + 1)}
			}
			none := []ownership.ProjectLoan{}
			tests := []struct {
				name, project string
				start, end    int
				want          ownership.ProjectLoans
			}{
				{"PA both ways", "PA", 1, 9, ownership.ProjectLoans{
					Lent:     []ownership.ProjectLoan{loan(hostA, pbW2, "PB", "b", 3)},
					Borrowed: []ownership.ProjectLoan{loan(hostB, paW1, "PB", "b", 1)}}},
				{"PB lends to two", "PB", 1, 9, ownership.ProjectLoans{
					Lent:     []ownership.ProjectLoan{loan(hostB, paW1, "PA", "a", 1), loan(hostB, pcW3, "PC", "c", 5)},
					Borrowed: []ownership.ProjectLoan{loan(hostA, pbW2, "PA", "a", 3)}}},
				{"PC borrows", "PC", 1, 9, ownership.ProjectLoans{Lent: none,
					Borrowed: []ownership.ProjectLoan{loan(hostB, pcW3, "PB", "b", 5)}}},
				{"PA in the first window", "PA", 1, 2, ownership.ProjectLoans{Lent: none,
					Borrowed: []ownership.ProjectLoan{loan(hostB, paW1, "PB", "b", 1)}}},
				{"PA in a window without loans", "PA", 6, 9, ownership.ProjectLoans{Lent: none, Borrowed: none}},
				{"outside the tree", "PZ", 1, 9, ownership.ProjectLoans{Lent: none, Borrowed: none}},
				// "" would match the inner consumer dom, which stands for
				// no project.
				{"no project", "", 1, 9, ownership.ProjectLoans{Lent: none, Borrowed: none}},
			}
			for _, tt := range tests {
				got, err := e.own.LoansOf(ctx, tt.project, day(tt.start), day(tt.end))
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if diff := cmp.Diff(&tt.want, got); diff != "" {
					t.Errorf("%s: LoansOf (-want +got):\n%s", tt.name, diff)
				}
			}
		})
	}
}
