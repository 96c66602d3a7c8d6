package ownership

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var base = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func hr(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }

// lendingWorld: d1 owns 6 hosts; a borrows; b lends 2 (limit lb), and b's
// child b1 owns one of them and lends it (limit l1), so a host of b1
// lent to d1's pool leaves both b1's and b's subtrees. x under d2 sees
// the hosts once d1 lends too.
func lendingWorld(lb, l1 int) (*Plan, []Host) {
	hs := hostsN(6)
	p := &Plan{
		Consumers: []Consumer{
			{ID: "d1", Rank: 1, LendingLimit: -1}, {ID: "a", Parent: "d1", Rank: 1, LendingLimit: -1},
			{ID: "b", Parent: "d1", Rank: 2, LendingLimit: lb}, {ID: "b1", Parent: "b", Rank: 1, LendingLimit: l1},
		},
		Groups: []Group{{Name: "g", Hosts: ids(hs)}},
		Entries: []Entry{
			{Consumer: "d1", Group: "g", Amount: 6}, {Consumer: "a", Group: "g", Amount: 1},
			{Consumer: "b", Group: "g", Amount: 3, Lend: true, LendGrace: time.Hour},
			{Consumer: "b1", Group: "g", Amount: 1, Lend: true, LendGrace: time.Hour},
		},
	}
	return p, hs
}

func TestSourcesAndCharges(t *testing.T) {
	p, hs := lendingWorld(2, 1)
	r := mustRecompute(t, p, hs, nil)
	v, err := NewView(p, hs, r.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	o := v.HostOrder("a")
	got := map[string]Source{}
	charges := map[string][]string{}
	for _, h := range ids(hs) {
		got[h] = o.SourceOf(h)
		charges[h] = o.Charges(h)
	}
	owner := func(c string) string {
		for h := range r.Ownership[c] {
			if v.Holder(h) == c {
				return h
			}
		}
		t.Fatalf("%s holds no host", c)
		return ""
	}
	ha, hb1 := owner("a"), owner("b1")
	if diff := cmp.Diff(Source{Pool: KindOwned, Consumer: "a", Limit: -1}, got[ha]); diff != "" {
		t.Errorf("a's own host (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Source{Pool: KindPrivate, Consumer: "d1", LentBy: "b1", Grace: time.Hour, Limit: 1}, got[hb1]); diff != "" {
		t.Errorf("b1's host (-want +got):\n%s", diff)
	}
	// b1's host leaves b1's and b's subtrees: both limits count it.
	if diff := cmp.Diff([]string{"b1", "b"}, charges[hb1]); diff != "" {
		t.Errorf("charges of b1's host (-want +got):\n%s", diff)
	}
	if got := o.SourceOf("unknown"); got.Pool != KindPublic {
		t.Errorf("a host the view does not know is %+v, want public", got)
	}
	// b's budgets: a loan of b1's host over [1h, 3h) uses b1's only
	// lending; b has one left.
	loans := []Loan{{Host: hb1, LentBy: "b1", Level: "d1", Start: hr(1), End: hr(3)}}
	if diff := cmp.Diff(map[string]int{"b": 1, "b1": 0}, o.Budgets(loans, hr(0), hr(2))); diff != "" {
		t.Errorf("budgets over the loan (-want +got):\n%s", diff)
	}
	// Back to back is not at once.
	if diff := cmp.Diff(map[string]int{"b": 2, "b1": 1}, o.Budgets(loans, hr(3), hr(5))); diff != "" {
		t.Errorf("budgets after the loan (-want +got):\n%s", diff)
	}
	// A loan within d1's subtree into d1's own pool does not leave d1:
	// d1 has no limit anyway, and no one else is charged twice.
	two := append(loans, Loan{Host: "hX", LentBy: "b", Level: "d1", Start: hr(2), End: hr(4)})
	if diff := cmp.Diff(map[string]int{"b": 0, "b1": 0}, o.Budgets(two, hr(0), hr(5))); diff != "" {
		t.Errorf("budgets over two overlapping loans (-want +got):\n%s", diff)
	}
}

// Borrowing through Budgets never lends more hosts at once than a
// lender's limit, and refuses only what would exceed it at some instant.
func TestPropLendingLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lb := rapid.IntRange(0, 3).Draw(t, "limit b")
		l1 := rapid.IntRange(0, 2).Draw(t, "limit b1")
		p, hs := lendingWorld(lb, l1)
		r, err := Recompute(p, hs, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := NewView(p, hs, r.Ownership)
		o := v.HostOrder("a")
		var lent []string
		for _, pl := range o.Pools {
			if pl.Kind == KindLent {
				lent = append(lent, pl.Hosts...)
			}
		}
		if len(lent) == 0 {
			t.Fatal("a borrows nothing")
		}
		var loans []Loan
		limits := map[string]int{"b": lb, "b1": l1}
		for i := range rapid.IntRange(1, 12).Draw(t, "requests") {
			_ = i
			s := rapid.IntRange(0, 10).Draw(t, "start")
			e := s + rapid.IntRange(1, 4).Draw(t, "length")
			h := rapid.SampledFrom(lent).Draw(t, "host")
			budgets := o.Budgets(loans, hr(s), hr(e))
			ok := true
			for _, x := range o.Charges(h) {
				if budgets[x] < 1 {
					ok = false
				}
			}
			src := o.SourceOf(h)
			l := Loan{Host: h, LentBy: src.LentBy, Level: src.Consumer, Start: hr(s), End: hr(e)}
			// The brute force: the most loans charging x at any hour of
			// the window, with this one.
			fits := true
			for _, x := range o.Charges(h) {
				for at := s; at < e; at++ {
					n := 1
					for _, m := range loans {
						if !m.Start.After(hr(at)) && m.End.After(hr(at)) && contains(o.ix.limiters(m.LentBy, m.Level), x) {
							n++
						}
					}
					if n > limits[x] {
						fits = false
					}
				}
			}
			if ok != fits {
				t.Fatalf("loan of %s over [%d, %d): budgets %v say %v, the instants say %v (loans %v)", h, s, e, budgets, ok, fits, loans)
			}
			if ok {
				loans = append(loans, l)
			}
		}
	})
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestReclaimable(t *testing.T) {
	now := hr(0)
	grace := map[string]time.Duration{"h1": time.Hour, "h2": time.Hour, "h3": 2 * time.Hour}
	borrowed := func(h, lease string, s, e int) Booking {
		return Booking{Host: h, Lease: lease, Start: hr(s), End: hr(e), Borrowed: true}
	}
	// stays marks a booking that cannot move (an instance reservation's
	// slots).
	stays := func(b Booking) Booking {
		b.Stays = true
		return b
	}
	// by sets the borrowing project of a booking.
	by := func(b Booking, project string) Booking {
		b.Project = project
		return b
	}
	// Projects' places in the rank order: PA first, PC last; PX is
	// outside the tree.
	ranks := map[string]int{"PA": 0, "PB": 1, "PC": 2}
	rankOf := func(p string) int {
		if r, ok := ranks[p]; ok {
			return r
		}
		return math.MaxInt - 1
	}
	tests := []struct {
		name       string
		start, end int
		cleaning   time.Duration
		grace      map[string]time.Duration // default: grace above
		bookings   []Booking
		want       []string // host@at:leases
		later      time.Time
	}{
		{name: "a started loan after the grace period", start: 2, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 0, 10)}, want: []string{"h1@2:L1"}},
		{name: "within the grace period: later", start: 0, end: 5,
			bookings: []Booking{borrowed("h1", "L1", -1, 10), borrowed("h3", "L3", -1, 10)}, later: hr(1)},
		{name: "no grace period, but the reclaim time is now", start: 0, end: 5,
			grace: map[string]time.Duration{"h1": 0}, bookings: []Booking{borrowed("h1", "L1", -1, 10)}, later: hr(0).Add(time.Minute)},
		{name: "no grace period, reclaim time ahead", start: 1, end: 5,
			grace: map[string]time.Duration{"h1": 0}, bookings: []Booking{borrowed("h1", "L1", -1, 10)}, want: []string{"h1@1:L1"}},
		{name: "cleaning moves the reclaim time", start: 3, end: 5, cleaning: 30 * time.Minute,
			bookings: []Booking{borrowed("h1", "L1", 0, 10)}, want: []string{"h1@2.5:L1"}},
		{name: "cleaning counts in the grace period", start: 1, end: 5, cleaning: 30 * time.Minute,
			bookings: []Booking{borrowed("h1", "L1", 0, 10)}, later: hr(1).Add(30 * time.Minute)},
		{name: "the owner's own booking is no loan", start: 2, end: 5,
			bookings: []Booking{{Host: "h1", Lease: "own", Start: hr(0), End: hr(10)}}},
		{name: "a fixed lease is not shortened", start: 2, end: 5,
			bookings: []Booking{{Host: "h1", Lease: "L1", Start: hr(0), End: hr(10), Borrowed: true, Fixed: true}}},
		{name: "a loan starting at the reclaim time is to move", start: 2, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 2, 10)}, want: []string{"h1@2:>L1"}},
		{name: "a loan begun by now is cut, not moved", start: 0, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 0, 10)}, later: hr(1)},
		{name: "a loan to move needs no grace period", start: 0, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 1, 10)}, want: []string{"h1@0:>L1"}},
		{name: "slots that stay are cut like a host loan", start: 2, end: 5,
			bookings: []Booking{stays(borrowed("h1", "L1", 0, 10)), stays(borrowed("h1", "L2", 1, 3))}, want: []string{"h1@2:L1,L2"}},
		{name: "slots that stay are never moved", start: 2, end: 8,
			bookings: []Booking{borrowed("h1", "L1", 0, 3), stays(borrowed("h1", "L2", 4, 6)), stays(borrowed("h2", "L3", 1, 3))}, want: []string{"h2@2:L3"}},
		{name: "slots not begun by now stay put", start: 0, end: 5,
			bookings: []Booking{stays(borrowed("h1", "L1", 1, 10))}},
		{name: "slots of a fixed lease are not cut", start: 2, end: 5,
			bookings: []Booking{{Host: "h1", Lease: "L1", Start: hr(0), End: hr(10), Borrowed: true, Fixed: true, Stays: true}}},
		{name: "cut and move on one host", start: 2, end: 8,
			bookings: []Booking{borrowed("h1", "L1", 0, 3), borrowed("h1", "L2", 4, 6)}, want: []string{"h1@2:L1,>L2"}},
		{name: "a host not lent is not reclaimed", start: 2, end: 5,
			bookings: []Booking{borrowed("h9", "L9", 0, 10)}},
		{name: "a loan outside the window is left alone", start: 2, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 6, 10), borrowed("h2", "L2", 0, 3)}, want: []string{"h2@2:L2"}},
		{name: "one loan of two on a host is not enough", start: 2, end: 8,
			bookings: []Booking{borrowed("h1", "L1", 0, 4), {Host: "h1", Lease: "own", Start: hr(5), End: hr(6)}}},
		{name: "same rank: least time taken back first", start: 2, end: 9,
			bookings: []Booking{borrowed("h1", "L1", 0, 10), borrowed("h2", "L2", 0, 4), borrowed("h3", "L3", 1, 3)},
			want:     []string{"h3@2:L3", "h2@2:L2", "h1@2:L1"}},
		// The seed reclaims by rank: the lowest-ranked borrower first,
		// whatever it loses; a project outside the tree ranks lowest.
		{name: "lowest rank first", start: 2, end: 9,
			bookings: []Booking{by(borrowed("h1", "L1", 0, 3), "PA"), by(borrowed("h2", "L2", 0, 10), "PC"), by(borrowed("h3", "L3", 1, 4), "PB")},
			want:     []string{"h2@2:L2", "h3@2:L3", "h1@2:L1"}},
		{name: "outside the tree below every rank", start: 2, end: 9,
			bookings: []Booking{by(borrowed("h1", "L1", 0, 3), "PC"), by(borrowed("h2", "L2", 0, 10), "PX")},
			want:     []string{"h2@2:L2", "h1@2:L1"}},
		{name: "a host ranks by its highest-ranked borrower cut", start: 2, end: 9,
			bookings: []Booking{by(borrowed("h1", "L1", 0, 3), "PB"), by(borrowed("h2", "L2", 0, 3), "PC"), by(borrowed("h2", "L3", 1, 4), "PA")},
			want:     []string{"h1@2:L1", "h2@2:L2,L3"}},
		{name: "a host whose loans all move first, then by rank", start: 2, end: 9,
			bookings: []Booking{by(borrowed("h1", "L1", 0, 3), "PC"), by(borrowed("h2", "L2", 3, 5), "PA")},
			want:     []string{"h2@2:>L2", "h1@2:L1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := grace
			if tc.grace != nil {
				g = tc.grace
			}
			cands, later := Reclaimable(now, hr(tc.start), hr(tc.end), tc.cleaning, g, tc.bookings, rankOf)
			var got []string
			for _, c := range cands {
				s := c.Host + "@" + fmtHours(c.At) + ":"
				var parts []string
				for _, b := range c.Cuts {
					parts = append(parts, b.Lease)
				}
				for _, b := range c.Moves {
					parts = append(parts, ">"+b.Lease)
				}
				s += strings.Join(parts, ",")
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if !later.Equal(tc.later) {
				t.Errorf("later = %v, want %v", later, tc.later)
			}
		})
	}
}

func fmtHours(t time.Time) string { return strconv.FormatFloat(t.Sub(base).Hours(), 'g', -1, 64) }

// A reclaim never takes a host from a borrower before the lender's grace
// period is over, cuts only borrowed, movable bookings that started
// before the reclaim time, moves none that stays, and takes from the
// lowest ranks first.
func TestPropReclaimRespectsGrace(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := hr(rapid.IntRange(0, 5).Draw(t, "now"))
		hosts := []string{"h1", "h2", "h3", "h4"}
		grace := map[string]time.Duration{}
		for _, h := range hosts[:3] {
			grace[h] = time.Duration(rapid.IntRange(0, 4).Draw(t, "grace")) * time.Hour
		}
		var bs []Booking
		for i := range rapid.IntRange(0, 8).Draw(t, "bookings") {
			s := rapid.IntRange(0, 12).Draw(t, "bs")
			bs = append(bs, Booking{Host: rapid.SampledFrom(hosts).Draw(t, "host"), Lease: string(rune('A' + i)),
				Start: hr(s), End: hr(s + rapid.IntRange(1, 6).Draw(t, "bl")),
				Borrowed: rapid.Bool().Draw(t, "borrowed"), Fixed: rapid.IntRange(0, 4).Draw(t, "fixed") == 0,
				Stays: rapid.Bool().Draw(t, "stays"), Project: rapid.SampledFrom([]string{"PA", "PB", "PC"}).Draw(t, "project")})
		}
		ranks := map[string]int{"PA": rapid.IntRange(0, 2).Draw(t, "ra"), "PB": rapid.IntRange(0, 2).Draw(t, "rb"), "PC": rapid.IntRange(0, 2).Draw(t, "rc")}
		rankOf := func(p string) int { return ranks[p] }
		start := now.Add(time.Duration(rapid.IntRange(0, 8).Draw(t, "start")) * time.Hour)
		end := start.Add(time.Duration(rapid.IntRange(1, 6).Draw(t, "len")) * time.Hour)
		cleaning := time.Duration(rapid.IntRange(0, 1).Draw(t, "cleaning")) * 30 * time.Minute
		cands, _ := Reclaimable(now, start, end, cleaning, grace, bs, rankOf)
		// By rank: the hosts whose highest-ranked borrower cut ranks
		// lowest come first.
		prev := math.MaxInt
		for _, c := range cands {
			top := math.MaxInt
			for _, b := range c.Cuts {
				top = min(top, ranks[b.Project])
			}
			if top > prev {
				t.Fatalf("candidate %s (rank %d) after one of rank %d", c.Host, top, prev)
			}
			prev = top
		}
		for _, c := range cands {
			if len(c.Cuts) > 0 && (c.At.Before(now.Add(grace[c.Host])) || !c.At.After(now)) {
				t.Fatalf("%s reclaimed at %v, before the grace period from %v", c.Host, c.At, now)
			}
			if !c.At.Equal(start.Add(-cleaning)) {
				t.Fatalf("reclaim time %v, want the start less the cleaning time", c.At)
			}
			for _, b := range c.Cuts {
				if !b.Borrowed || b.Fixed || !b.Start.Before(c.At) || b.Host != c.Host {
					t.Fatalf("cut %+v of candidate %+v", b, c)
				}
			}
			for _, b := range c.Moves {
				if !b.Borrowed || b.Fixed || b.Stays || b.Start.Before(c.At) || b.Host != c.Host {
					t.Fatalf("move %+v of candidate %+v", b, c)
				}
			}
			// Every booking of the host over the window is cut or moved.
			for _, b := range bs {
				if b.Host == c.Host && b.Start.Before(end.Add(cleaning)) && b.End.After(c.At) {
					found := false
					for _, x := range append(slices.Clone(c.Cuts), c.Moves...) {
						found = found || x == b
					}
					if !found {
						t.Fatalf("booking %+v on reclaimed host %s is not cut", b, c.Host)
					}
				}
			}
		}
	})
}

// RankOf follows the order assignment serves consumers in: siblings by
// (rank, ID), each consumer's subtree before its next sibling.
func TestRankOf(t *testing.T) {
	p := &Plan{
		Consumers: []Consumer{{ID: "d1", Rank: 2}, {ID: "d2", Rank: 1},
			{ID: "a", Parent: "d1", Rank: 1, Project: "PA"}, {ID: "b", Parent: "d2", Rank: 2, Project: "PB"},
			{ID: "c", Parent: "d2", Rank: 1, Project: "PC"}, {ID: "e", Parent: "d1", Rank: 1, Project: "PE"}},
		Groups: []Group{{Name: "g", Hosts: []string{"h01"}}},
	}
	v, err := NewView(p, hostsN(1), Ownership{})
	if err != nil {
		t.Fatal(err)
	}
	o := v.HostOrder("")
	got := map[string]int{}
	for _, pr := range []string{"PA", "PB", "PC", "PE", "PX"} {
		got[pr] = o.RankOf(pr)
	}
	// d2 (rank 1): d2=0, c=1, b=2; d1: d1=3, a=4, e=5 (a before e by ID).
	want := map[string]int{"PC": 1, "PB": 2, "PA": 4, "PE": 5, "PX": math.MaxInt - 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RankOf (-want +got):\n%s", diff)
	}
}

// TestReclaimableSlots: an owner's instance request keeps its own
// bookings beside the slots it asks for and cuts loans, never moves them.
func TestReclaimableSlots(t *testing.T) {
	now := hr(0)
	grace := map[string]time.Duration{"h1": time.Hour, "h2": time.Hour}
	borrowed := func(h, lease string, s, e int) Booking {
		return Booking{Host: h, Lease: lease, Start: hr(s), End: hr(e), Borrowed: true}
	}
	own := func(h, lease string, s, e int) Booking {
		return Booking{Host: h, Lease: lease, Start: hr(s), End: hr(e)}
	}
	tests := []struct {
		name       string
		start, end int
		bookings   []Booking
		want       []string // host@at:leases
		later      time.Time
	}{
		{name: "the owner's own slots stay beside a cut loan", start: 2, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 0, 10), own("h1", "O1", 0, 10)}, want: []string{"h1@2:L1"}},
		{name: "a host holding only the owner's bookings is no candidate", start: 2, end: 5,
			bookings: []Booking{own("h1", "O1", 0, 10)}},
		{name: "a host loan not begun by the reclaim time is not moved", start: 2, end: 5,
			bookings: []Booking{borrowed("h1", "L1", 3, 10), borrowed("h2", "L2", 0, 10)}, want: []string{"h2@2:L2"}},
		{name: "a fixed loan keeps its host", start: 2, end: 5,
			bookings: []Booking{{Host: "h1", Lease: "L1", Start: hr(0), End: hr(10), Borrowed: true, Fixed: true}, own("h1", "O1", 0, 10)}},
		{name: "within the grace period: later", start: 0, end: 5,
			bookings: []Booking{borrowed("h1", "L1", -1, 10), own("h1", "O1", -1, 10)}, later: hr(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cands, later := ReclaimableSlots(now, hr(tc.start), hr(tc.end), 0, grace, tc.bookings, nil)
			var got []string
			for _, c := range cands {
				if len(c.Moves) > 0 {
					t.Errorf("%s: a reclaim for slots moves %v", c.Host, c.Moves)
				}
				var leases []string
				for _, b := range c.Cuts {
					leases = append(leases, b.Lease)
				}
				got = append(got, c.Host+"@"+fmtHours(c.At)+":"+strings.Join(leases, ","))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if !later.Equal(tc.later) {
				t.Errorf("later = %v, want %v", later, tc.later)
			}
		})
	}
}
