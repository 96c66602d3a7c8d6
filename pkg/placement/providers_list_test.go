package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

var (
	listTraits = []string{"HW_CPU_X86_AVX", "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2", "HW_CPU_X86_AVX2"}
	listAggs   = []string{
		"a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002",
		"a0000000-0000-4000-8000-000000000003", "a0000000-0000-4000-8000-000000000004",
	}
	listClasses = []string{"VCPU", "MEMORY_MB", "DISK_GB"}
)

// listFixture builds providers in trees with random inventories, usage,
// traits and aggregates (seeded: the same data every run).
func listFixture(t *testing.T, s *Service, n int) []string {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(16, 1))
	var uuids []string
	for i := range n {
		var parent *string
		if i > 0 && rng.IntN(3) == 0 {
			parent = &uuids[rng.IntN(len(uuids))]
		}
		p, err := s.CreateProvider(ctx, fmt.Sprintf("rp-%d", i), "", parent)
		if err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, p.UUID)
		var invs []Inventory
		for _, c := range listClasses {
			if rng.IntN(3) == 0 {
				continue
			}
			inv := inventoryOf(c, int64(1+rng.IntN(40)))
			inv.Reserved = int64(rng.IntN(5))
			inv.MinUnit = int64(1 + rng.IntN(3))
			inv.MaxUnit = int64(4 + rng.IntN(40))
			inv.StepSize = int64(1 + rng.IntN(3))
			inv.AllocationRatio = []float64{1, 1.5, 2, 0.5}[rng.IntN(4)]
			invs = append(invs, inv)
		}
		if len(invs) > 0 {
			if p, _, err = s.SetInventories(ctx, p.UUID, nil, invs, nil); err != nil {
				t.Fatal(err)
			}
			// Some usage; a write the inventory refuses is simply skipped.
			inv := invs[rng.IntN(len(invs))]
			amount := inv.StepSize * int64(1+rng.IntN(4))
			_ = s.WriteAllocations(ctx, []ConsumerWrite{{
				UUID: fmt.Sprintf("c0000000-0000-4000-8000-%012d", i), ProjectID: "p", UserID: "u",
				Allocations: map[string]map[string]int64{p.UUID: {inv.ResourceClass: amount}},
			}}, false)
		}
		var traits []string
		for _, tr := range listTraits {
			if rng.IntN(2) == 0 {
				traits = append(traits, tr)
			}
		}
		p, err = s.GetProvider(ctx, p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetProviderTraits(ctx, p.UUID, p.Generation, traits); err != nil {
			t.Fatal(err)
		}
		var aggs []string
		for _, a := range listAggs {
			if rng.IntN(3) == 0 {
				aggs = append(aggs, a)
			}
		}
		if _, err := s.SetProviderAggregates(ctx, p.UUID, nil, aggs); err != nil {
			t.Fatal(err)
		}
	}
	return uuids
}

// drawProviderFilter draws a filter over the fixture's names, with now
// and then a name no row has.
func drawProviderFilter(t *rapid.T, uuids []string) ProviderFilter {
	var f ProviderFilter
	pick := func(label string, pool []string, unknown string) string {
		if rapid.IntRange(0, 9).Draw(t, label+"-unknown") == 0 {
			return unknown
		}
		return rapid.SampledFrom(pool).Draw(t, label)
	}
	if rapid.Bool().Draw(t, "in_tree") {
		f.InTree = pick("tree", uuids, "ffffffff-0000-4000-8000-000000000000")
	}
	for range rapid.IntRange(0, 2).Draw(t, "required") {
		var set []string
		for range rapid.IntRange(1, 2).Draw(t, "any") {
			set = append(set, pick("trait", listTraits, "CUSTOM_NOPE"))
		}
		f.RequiredTraits = append(f.RequiredTraits, set)
	}
	for range rapid.IntRange(0, 1).Draw(t, "forbidden-traits") {
		f.ForbiddenTraits = append(f.ForbiddenTraits, pick("forbidden-trait", listTraits, "CUSTOM_NOPE"))
	}
	for range rapid.IntRange(0, 2).Draw(t, "member_of") {
		var set []string
		for range rapid.IntRange(1, 2).Draw(t, "any-agg") {
			set = append(set, pick("agg", listAggs, "ffffffff-0000-4000-8000-00000000aaaa"))
		}
		f.MemberOf = append(f.MemberOf, set)
	}
	for range rapid.IntRange(0, 1).Draw(t, "forbidden-aggs") {
		f.ForbiddenAggs = append(f.ForbiddenAggs, pick("forbidden-agg", listAggs, "ffffffff-0000-4000-8000-00000000aaaa"))
	}
	seen := map[string]bool{}
	for range rapid.IntRange(0, 2).Draw(t, "resources") {
		c := pick("class", listClasses, "CUSTOM_NOPE")
		if !seen[c] {
			seen[c] = true
			f.Resources = append(f.Resources, ResourceAmount{c, rapid.Int64Range(1, 45).Draw(t, "amount")})
		}
	}
	return f
}

// TestListProvidersMatchesSQL holds the snapshot listing to the database
// query it replaced: for any filter, the same providers with the same
// columns, or the same error; and after writes by another Service on the
// same database (as another process would make them), still the same.
func TestListProvidersMatchesSQL(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			s := NewService(d, Config{})
			other := NewService(d, Config{})
			uuids := listFixture(t, other, 14)
			ctx := context.Background()
			rapid.Check(t, func(t *rapid.T) {
				if rapid.IntRange(0, 5).Draw(t, "write") == 0 {
					listWrite(t, other, uuids)
				}
				f := drawProviderFilter(t, uuids)
				got, gotErr := s.ListProviders(ctx, f)
				want, wantErr := s.listProvidersSQL(ctx, f)
				if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
					t.Fatalf("filter %+v: error %v, database path %v", f, gotErr, wantErr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("filter %+v (-database +snapshot):\n%s", f, diff)
				}
			})
		})
	}
}

// listWrite makes one write that changes what a listing shows: a rename,
// a generation bump, a usage change, an aggregate change.
func listWrite(t *rapid.T, s *Service, uuids []string) {
	ctx := context.Background()
	u := rapid.SampledFrom(uuids).Draw(t, "provider")
	p, err := s.GetProvider(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		name := fmt.Sprintf("renamed-%d", rapid.IntRange(0, 1<<20).Draw(t, "name"))
		if _, err := s.UpdateProvider(ctx, u, name, false, nil, true); err != nil && !errs.Is(err, errs.Conflict) {
			t.Fatal(err)
		}
	case 1:
		var traits []string
		for _, tr := range listTraits {
			if rapid.Bool().Draw(t, tr) {
				traits = append(traits, tr)
			}
		}
		if _, _, err := s.SetProviderTraits(ctx, u, p.Generation, traits); err != nil {
			t.Fatal(err)
		}
	case 2:
		_ = s.WriteAllocations(ctx, []ConsumerWrite{{
			UUID: "d0000000-0000-4000-8000-000000000000", ProjectID: "p", UserID: "u",
			Allocations: map[string]map[string]int64{u: {rapid.SampledFrom(listClasses).Draw(t, "class"): rapid.Int64Range(1, 6).Draw(t, "used")}},
		}}, false)
	case 3:
		aggs := []string{rapid.SampledFrom(listAggs).Draw(t, "agg")}
		if _, err := s.SetProviderAggregates(ctx, u, nil, aggs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListProvidersSeesRename checks the cached provider rows (all of
// them, and those of one tree read by id for in_tree) follow a rename
// made through another Service on the same database (renames change no
// generation, so only the data version tells).
func TestListProvidersSeesRename(t *testing.T) {
	for _, inTree := range []bool{false, true} {
		t.Run(fmt.Sprintf("in_tree=%v", inTree), func(t *testing.T) {
			d := dbtest.Open(t)
			s, other := NewService(d, Config{}), NewService(d, Config{})
			ctx := context.Background()
			p, err := other.CreateProvider(ctx, "before", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.CreateProvider(ctx, "z-other", "", nil); err != nil {
				t.Fatal(err)
			}
			f, want := ProviderFilter{}, []string{"before", "z-other"}
			if inTree {
				f, want = ProviderFilter{InTree: p.UUID}, []string{"before"}
			}
			names := func() []string {
				t.Helper()
				ps, err := s.ListProviders(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, p := range ps {
					out = append(out, p.Name)
				}
				return out
			}
			for range 2 { // the second from the kept rows
				if diff := cmp.Diff(want, names()); diff != "" {
					t.Fatal(diff)
				}
			}
			if _, err := other.UpdateProvider(ctx, p.UUID, "after", false, nil, true); err != nil {
				t.Fatal(err)
			}
			want[0] = "after"
			if diff := cmp.Diff(want, names()); diff != "" {
				t.Fatalf("after the rename (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSQLiteTime holds the fast reader to time.Parse on the layout
// the SQLite driver writes, and checks it refuses what it cannot read.
func TestParseSQLiteTime(t *testing.T) {
	const layout = "2006-01-02 15:04:05.999999999-07:00"
	rapid.Check(t, func(t *rapid.T) {
		// Years 1970–9999 in every zone (a day short of year 10000 in UTC,
		// which a zone east of it would write as a five-digit year).
		sec := rapid.Int64Range(0, 253402300799-86400).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999999999).Draw(t, "nsec")
		if rapid.Bool().Draw(t, "micro") {
			nsec -= nsec % 1000
		}
		if rapid.Bool().Draw(t, "whole") {
			nsec = 0
		}
		zone := time.UTC
		if off := rapid.IntRange(-14*60, 14*60).Draw(t, "offset"); off != 0 && rapid.Bool().Draw(t, "zoned") {
			zone = time.FixedZone("", off*60)
		}
		in := time.Unix(sec, nsec).In(zone)
		s := in.Format(layout)
		got, ok := parseSQLiteTime(s)
		if !ok || !got.Equal(in) {
			t.Fatalf("parseSQLiteTime(%q) = %v, %v; want %v", s, got, ok, in)
		}
		if _, fast := parseTimeFast(s); !fast {
			t.Fatalf("%q took the slow path", s)
		}
	})
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-11-25 10:00:00+00:00", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), true},
		{"2026-11-25 10:00:00.5+01:00", time.Date(2026, 11, 25, 9, 0, 0, 5e8, time.UTC), true},
		{"2026-11-25 10:00:00.123456789-02:30", time.Date(2026, 11, 25, 12, 30, 0, 123456789, time.UTC), true},
		{"2026-11-25T10:00:00Z", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), true},
		{"2026-11-25 10:00:00", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), true},
		{"2026-11-25", time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), true},
		{"2026-02-30 10:00:00+00:00", time.Time{}, false},
		{"2026-11-25 10:00:00.+00:00", time.Time{}, false},
		{"2026-11-25 24:00:00+00:00", time.Time{}, false},
		{"1732528800", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		got, ok := parseSQLiteTime(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseSQLiteTime(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestListProvidersConcurrentWrites lists from several goroutines while
// another Service renames providers: every listing succeeds and shows
// each provider under a name it had, and the listing after the last
// rename shows the last names.
func TestListProvidersConcurrentWrites(t *testing.T) {
	d := dbtest.Open(t)
	s, other := NewService(d, Config{}), NewService(d, Config{})
	ctx := context.Background()
	var uuids []string
	for i := range 4 {
		p, err := other.CreateProvider(ctx, fmt.Sprintf("p%d-v0", i), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, p.UUID)
	}
	const rounds = 20
	done := make(chan struct{})
	errc := make(chan error, 5)
	go func() {
		defer close(done)
		for r := 1; r <= rounds; r++ {
			for i, u := range uuids {
				if _, err := other.UpdateProvider(ctx, u, fmt.Sprintf("p%d-v%d", i, r), false, nil, true); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ps, err := s.ListProviders(ctx, ProviderFilter{})
				if err != nil {
					errc <- err
					return
				}
				for i, p := range ps {
					var idx, ver int
					if _, err := fmt.Sscanf(p.Name, "p%d-v%d", &idx, &ver); err != nil || idx != i || ver > rounds {
						errc <- fmt.Errorf("provider %d listed as %q", i, p.Name)
						return
					}
				}
			}
		})
	}
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	ps, err := s.ListProviders(ctx, ProviderFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if want := fmt.Sprintf("p%d-v%d", i, rounds); p.Name != want {
			t.Errorf("after the writes provider %d is %q, want %q", i, p.Name, want)
		}
	}
}
