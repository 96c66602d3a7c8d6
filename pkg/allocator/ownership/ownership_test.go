package ownership

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
)

// hostsN returns n up hosts h01…, one slot each, no load.
func hostsN(n int) []Host {
	out := make([]Host, n)
	for i := range out {
		out[i] = Host{ID: fmt.Sprintf("h%02d", i+1)}
	}
	return out
}

func ids(hs []Host) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// owned lists c's hosts, sorted.
func owned(o Ownership, c string) []string {
	var out []string
	for h := range o[c] {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

func mustRecompute(t *testing.T, p *Plan, hs []Host, prev Ownership) *Result {
	t.Helper()
	r, err := Recompute(p, hs, prev)
	if err != nil {
		t.Fatalf("Recompute: %v", err)
	}
	return r
}

func TestValidate(t *testing.T) {
	g := []Group{{Name: "g", Hosts: []string{"h1"}}, {Name: "k", Properties: map[string]string{"a": "b"}}}
	tree := []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}, {ID: "q", Parent: "d"}}
	// Group k's hosts: the largest has 4 slots.
	slotted := []Host{{ID: "s1", Slots: 2, Properties: map[string]string{"a": "b"}}, {ID: "s2", Slots: 4, Properties: map[string]string{"a": "b"}},
		{ID: "s3", Slots: 16}}
	tests := []struct {
		name  string
		plan  Plan
		hosts []Host
		want  string // substring of the message; "" for valid
	}{
		{"valid", Plan{Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}}, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "g", Amount: 2}, {Consumer: "p", Group: "g", Amount: 2}}}, nil, ""},
		{"unknown parent", Plan{Consumers: []Consumer{{ID: "p", Parent: "x"}}}, nil, `consumer "p" has an unknown parent "x"`},
		{"cycle", Plan{Consumers: []Consumer{{ID: "a", Parent: "b"}, {ID: "b", Parent: "a"}}}, nil, "parent cycle"},
		{"duplicate consumer", Plan{Consumers: []Consumer{{ID: "a"}, {ID: "a"}}}, nil, `consumer "a" is defined twice`},
		{"empty group", Plan{Groups: []Group{{Name: "e"}}}, nil, `resource group "e" names neither hosts nor properties`},
		{"unknown group", Plan{Consumers: []Consumer{{ID: "a"}}, Entries: []Entry{{Consumer: "a", Group: "z"}}},
			nil, `consumer "a" names an unknown resource group "z"`},
		{"negative amount", Plan{Consumers: []Consumer{{ID: "a"}}, Groups: g, Entries: []Entry{{Consumer: "a", Group: "g", Amount: -1}}},
			nil, `consumer "a" owns a negative amount -1 of resource group "g"`},
		{"child outside parent", Plan{Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}}, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "k", Amount: 2}, {Consumer: "p", Group: "g", Amount: 1}}},
			nil, `consumer "p" owns in resource group "g" but its parent "d" owns nothing there`},
		{"children own more", Plan{Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}, {ID: "q", Parent: "d"}}, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "g", Amount: 2}, {Consumer: "p", Group: "g", Amount: 1}, {Consumer: "q", Group: "g", Amount: 2}}},
			nil, `consumer "d" owns 2 hosts of resource group "g" but its children (q among them) own 3`},
		{"whole under partial", Plan{Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}}, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "g", Amount: 8, Partial: true}, {Consumer: "p", Group: "g", Amount: 1}}},
			nil, `consumer "p" owns whole hosts of resource group "g" but its parent "d" owns only slots there`},
		{"duplicate entry", Plan{Consumers: []Consumer{{ID: "a"}}, Groups: g,
			Entries: []Entry{{Consumer: "a", Group: "g"}, {Consumer: "a", Group: "g"}}}, nil, `consumer "a" has two plan entries for resource group "g"`},
		// A child owning slots under a parent owning whole hosts: its
		// slots, converted to hosts, must fit the parent's.
		{"slots beyond the parent's host", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "g", Amount: 1}, {Consumer: "p", Group: "g", Amount: 1000, Partial: true}}}, nil,
			`consumer "p" owns 1000 slots of resource group "g", more than its parent "d" owns there: 1 hosts of at most 1 slots each`},
		{"slots within the parent's hosts", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "k", Amount: 2}, {Consumer: "p", Group: "k", Amount: 1},
				{Consumer: "q", Group: "k", Amount: 4, Partial: true}}}, slotted, ""},
		{"slots beyond the hosts whole children leave", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "k", Amount: 2}, {Consumer: "p", Group: "k", Amount: 1},
				{Consumer: "q", Group: "k", Amount: 5, Partial: true}}}, slotted,
			`consumer "q" owns 5 slots of resource group "k", more than its parent "d" owns there: 2 hosts of at most 4 slots each, 1 of them owned whole by its children, hold 4 slots`},
		{"slot children together beyond the parent", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "k", Amount: 1}, {Consumer: "p", Group: "k", Amount: 3, Partial: true},
				{Consumer: "q", Group: "k", Amount: 2, Partial: true}}}, slotted,
			`consumer "q" owns 2 slots of resource group "k", more than its parent "d" owns there: 1 hosts of at most 4 slots each, 0 of them owned whole by its children, hold 4 slots for its children owning slots (5 asked in all)`},
		{"whole children fill the parent: no slots left", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "k", Amount: 1}, {Consumer: "p", Group: "k", Amount: 1},
				{Consumer: "q", Group: "k", Amount: 1, Partial: true}}}, slotted,
			`consumer "q" owns 1 slots of resource group "k"`},
		{"a partial parent's slots are not converted", Plan{Consumers: tree, Groups: g,
			Entries: []Entry{{Consumer: "d", Group: "g", Amount: 8, Partial: true}, {Consumer: "p", Group: "g", Amount: 8, Partial: true}}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(&tt.plan, tt.hosts)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			e := errs.As(err)
			if e == nil || e.Kind != errs.BadRequest || !strings.Contains(e.Msg, tt.want) {
				t.Fatalf("Validate = %v, want a bad request containing %q", err, tt.want)
			}
		})
	}
}

// The seed's assignment: rank order, private pools, public pool.
func TestAssignRankOrderAndPools(t *testing.T) {
	hs := hostsN(8)
	p := &Plan{
		Consumers: []Consumer{{ID: "dom", Rank: 1}, {ID: "other", Rank: 2},
			{ID: "p1", Parent: "dom", Rank: 2, Project: "P1"}, {ID: "p2", Parent: "dom", Rank: 1, Project: "P2"}},
		Groups: []Group{{Name: "g", Hosts: ids(hs[:6])}},
		Entries: []Entry{
			{Consumer: "dom", Group: "g", Amount: 4}, {Consumer: "other", Group: "g", Amount: 4},
			{Consumer: "p1", Group: "g", Amount: 1}, {Consumer: "p2", Group: "g", Amount: 2},
		},
	}
	r := mustRecompute(t, p, hs, nil)
	// dom (rank 1) first: 4 hosts least loaded (all equal: by ID); other
	// gets what is left of the group's 6.
	if diff := cmp.Diff([]string{"h01", "h02", "h03", "h04"}, owned(r.Ownership, "dom")); diff != "" {
		t.Errorf("dom owns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"h05", "h06"}, owned(r.Ownership, "other")); diff != "" {
		t.Errorf("other owns (-want +got):\n%s", diff)
	}
	// p2 has the better rank among dom's children.
	if diff := cmp.Diff([]string{"h01", "h02"}, owned(r.Ownership, "p2")); diff != "" {
		t.Errorf("p2 owns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"h03"}, owned(r.Ownership, "p1")); diff != "" {
		t.Errorf("p1 owns (-want +got):\n%s", diff)
	}
	want := []Shortfall{{Consumer: "other", Group: "g", Want: 4, Got: 2, Unit: "hosts"}}
	if diff := cmp.Diff(want, r.Shortfalls); diff != "" {
		t.Errorf("shortfalls (-want +got):\n%s", diff)
	}
	v, err := NewView(p, hs, r.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.ConsumerOf("P1"); got != "p1" {
		t.Fatalf("ConsumerOf(P1) = %q", got)
	}
	type pl struct {
		Kind, Owner string
		Hosts       []string
	}
	var got []pl
	for _, x := range v.Order("p1") {
		got = append(got, pl{x.Kind, x.Owner, x.Hosts})
	}
	// Owned, then dom's private pool (h04), then public (h07, h08);
	// p2's and other's hosts are not lent.
	wantOrder := []pl{{KindOwned, "p1", []string{"h03"}}, {KindPrivate, "dom", []string{"h04"}}, {KindPublic, "", []string{"h07", "h08"}}}
	if diff := cmp.Diff(wantOrder, got); diff != "" {
		t.Errorf("Order(p1) (-want +got):\n%s", diff)
	}
	// A project outside the tree sees the public pool only.
	if got := v.Order(""); len(got) != 1 || got[0].Kind != KindPublic {
		t.Errorf("Order(\"\") = %+v", got)
	}
}

func TestPreferenceOrder(t *testing.T) {
	hs := hostsN(4)
	p := &Plan{
		Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}},
		Groups:    []Group{{Name: "a", Hosts: []string{"h01", "h02"}}, {Name: "b", Hosts: []string{"h03", "h04"}}},
		Entries: []Entry{
			{Consumer: "d", Group: "a", Amount: 2, Preference: 1}, {Consumer: "d", Group: "b", Amount: 2, Preference: 5},
			{Consumer: "p", Group: "a", Amount: 1}, {Consumer: "p", Group: "b", Amount: 1},
		},
	}
	r := mustRecompute(t, p, hs, nil)
	v, _ := NewView(p, hs, r.Ownership)
	var got []string
	for _, x := range v.Order("p") {
		got = append(got, x.Kind+":"+x.Group)
	}
	// Preference is set at the top level and inherited: b (5) before a (1).
	want := []string{"owned:b", "owned:a", "private:b", "private:a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
}

// Lending: to the parent's private pool first, upward only while each
// level lends; borrowers need a borrowing grace ≤ the lender's grace.
func TestLendingAndGrace(t *testing.T) {
	hs := hostsN(6)
	p := &Plan{
		Consumers: []Consumer{
			{ID: "d1", Rank: 1}, {ID: "d2", Rank: 2},
			{ID: "a", Parent: "d1", Rank: 1}, {ID: "b", Parent: "d1", Rank: 2, BorrowGrace: time.Hour},
			{ID: "c", Parent: "d1", Rank: 3, BorrowGrace: 3 * time.Hour},
			{ID: "x", Parent: "d2", Rank: 1},
		},
		Groups: []Group{{Name: "g", Hosts: ids(hs)}},
		Entries: []Entry{
			{Consumer: "d1", Group: "g", Amount: 3}, {Consumer: "d2", Group: "g", Amount: 3},
			{Consumer: "a", Group: "g", Amount: 2, Lend: true, LendGrace: 2 * time.Hour},
			{Consumer: "b", Group: "g", Amount: 1}, {Consumer: "c", Group: "g", Amount: 0},
			{Consumer: "x", Group: "g", Amount: 3},
		},
	}
	r := mustRecompute(t, p, hs, nil)
	v, _ := NewView(p, hs, r.Ownership)
	lent := func(c string) []string {
		var out []string
		for _, x := range v.Order(c) {
			if x.Kind == KindLent {
				out = append(out, x.Owner+"@"+x.Level+":"+strings.Join(x.Hosts, ","))
			}
		}
		return out
	}
	// b (grace 1h ≤ 2h) borrows a's hosts in d1's pool.
	if diff := cmp.Diff([]string{"a@d1:h01,h02"}, lent("b")); diff != "" {
		t.Errorf("b's lent pools (-want +got):\n%s", diff)
	}
	// c asks for 3h of grace: a's 2h is too short.
	if got := lent("c"); len(got) != 0 {
		t.Errorf("c may not borrow, got %v", got)
	}
	_, refused := v.Explain("c")
	if len(refused) == 0 || !strings.Contains(refused[0].Reason, "shorter than the borrowing grace period") {
		t.Errorf("Explain(c) refused = %+v", refused)
	}
	// d1 does not lend: x under d2 sees nothing of a's.
	if got := lent("x"); len(got) != 0 {
		t.Errorf("x may not borrow, got %v", got)
	}
	_, refused = v.Explain("x")
	if len(refused) == 0 || !strings.Contains(refused[0].Reason, `"d1" does not lend further up`) {
		t.Errorf("Explain(x) refused = %+v", refused)
	}
	// Once d1 lends too, a's hosts reach the public pool.
	p.Entries[0].Lend, p.Entries[0].LendGrace = true, time.Hour
	v, _ = NewView(p, hs, r.Ownership)
	if diff := cmp.Diff([]string{"a@:h01,h02"}, lent("x")); diff != "" {
		t.Errorf("x's lent pools (-want +got):\n%s", diff)
	}
}

func TestPartialHosts(t *testing.T) {
	mk := func(n int) []Host {
		hs := hostsN(n)
		for i := range hs {
			hs[i].Slots = 4
		}
		return hs
	}
	// A partial owner (rank 1) takes 6 slots: one host whole, two of the
	// next. B (whole hosts) takes an untouched host while there is one…
	hs := mk(3)
	p := &Plan{
		Consumers: []Consumer{{ID: "A", Rank: 1}, {ID: "B", Rank: 2}, {ID: "C", Rank: 3}},
		Groups:    []Group{{Name: "g", Hosts: ids(hs)}},
		Entries: []Entry{{Consumer: "A", Group: "g", Amount: 6, Partial: true}, {Consumer: "B", Group: "g", Amount: 1},
			{Consumer: "C", Group: "g", Amount: 1, Partial: true}},
	}
	r := mustRecompute(t, p, hs, nil)
	want := Ownership{
		"A": {"h01": {"g", 4}, "h02": {"g", 2}},
		"B": {"h03": {"g", 4}},
		// …and a partial owner fills the partly owned host first.
		"C": {"h02": {"g", 1}},
	}
	if diff := cmp.Diff(want, r.Ownership); diff != "" {
		t.Errorf("ownership (-want +got):\n%s", diff)
	}
	// …and the rest of the partly owned host when no alternative is left.
	hs = mk(2)
	p.Groups[0].Hosts = ids(hs)
	p.Entries = p.Entries[:2]
	r = mustRecompute(t, p, hs, nil)
	want = Ownership{"A": {"h01": {"g", 4}, "h02": {"g", 2}}, "B": {"h02": {"g", 2}}}
	if diff := cmp.Diff(want, r.Ownership); diff != "" {
		t.Errorf("ownership (-want +got):\n%s", diff)
	}
	// A partly owned host is not a whole host for host reservations.
	v, _ := NewView(p, hs, r.Ownership)
	_, refused := v.Explain("B")
	if i := slices.IndexFunc(refused, func(r Refusal) bool { return r.Host == "h02" }); i < 0 || !strings.Contains(refused[i].Reason, "partly owned") {
		t.Errorf("refused = %+v", refused)
	}
}

func flat(amounts ...int) *Plan {
	p := &Plan{Groups: []Group{{Name: "g", Properties: map[string]string{"rack": "r1"}}}}
	for i, a := range amounts {
		id := string(rune('A' + i))
		p.Consumers = append(p.Consumers, Consumer{ID: id, Rank: i + 1})
		p.Entries = append(p.Entries, Entry{Consumer: id, Group: "g", Amount: a})
	}
	return p
}

func rack(n int) []Host {
	hs := hostsN(n)
	for i := range hs {
		hs[i].Properties = map[string]string{"rack": "r1"}
	}
	return hs
}

// The four recomputation steps.
func TestRecomputeSteps(t *testing.T) {
	t.Run("unchanged plan moves nothing", func(t *testing.T) {
		hs := rack(6)
		p := flat(2, 2)
		r1 := mustRecompute(t, p, hs, nil)
		hs[1].Users = map[string]int{"A": 1}
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		if len(r2.Changes) != 0 {
			t.Errorf("changes = %+v", r2.Changes)
		}
	})
	t.Run("step 1 and 2: a down host is replaced from the public pool, least loaded first", func(t *testing.T) {
		hs := rack(6)
		p := flat(2, 2)
		r1 := mustRecompute(t, p, hs, nil) // A: h01 h02, B: h03 h04
		hs[0].Down = true
		hs[4].Load = 3 // h05 busy: h06 is chosen
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		want := []Change{
			{Host: "h01", Consumer: "A", Group: "g", Before: 1, After: 0, Step: 1, Reason: r2.Changes[0].Reason},
			{Host: "h06", Consumer: "A", Group: "g", Before: 0, After: 1, Step: 2, Reason: "filled from the public pool, least loaded first"},
		}
		if diff := cmp.Diff(want, r2.Changes); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
	})
	t.Run("step 2: a higher rank takes from the lowest rank, least workload first", func(t *testing.T) {
		hs := rack(6)
		p := flat(2, 2, 2)
		r1 := mustRecompute(t, p, hs, nil) // A: h01 h02, B: h03 h04, C: h05 h06
		for i := 2; i < 6; i++ {
			hs[i].Users = map[string]int{string(rune('A' + i/2)): 1}
		}
		hs[4].Users["C"] = 5 // h05 is C's busier host
		p.Entries[0].Amount = 3
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		if diff := cmp.Diff([]string{"h01", "h02", "h06"}, owned(r2.Ownership, "A")); diff != "" {
			t.Errorf("A owns (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"h03", "h04"}, owned(r2.Ownership, "B")); diff != "" {
			t.Errorf("B owns (-want +got):\n%s", diff)
		}
		if r2.MovedHosts != 1 {
			t.Errorf("moved %d hosts, want 1: %+v", r2.MovedHosts, r2.Changes)
		}
		// C had a lease on h06: step 4 hands it over after the grace period.
		for _, c := range r2.Changes {
			if c.Consumer == "C" && (c.Step != 4 || c.Workload != 1 || !strings.Contains(c.Reason, `taken by higher-rank "A"`)) {
				t.Errorf("C's change = %+v", c)
			}
		}
	})
	t.Run("step 3: a shrunk group trims the lowest rank, its idle hosts first", func(t *testing.T) {
		hs := rack(6)
		p := flat(3, 3)
		r1 := mustRecompute(t, p, hs, nil) // A: h01-h03, B: h04-h06
		hs[4].Users = map[string]int{"B": 1}
		hs[5].Users = map[string]int{"B": 1}
		hs[5].Properties = map[string]string{"rack": "r2"} // h06 leaves the group
		hs[0].Down = true                                  // and h01 goes down
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		// 4 hosts left: A (rank 1) keeps 3 (h02 h03 + one of B's), B gets 1.
		if got := len(owned(r2.Ownership, "A")); got != 3 {
			t.Errorf("A owns %d hosts, want 3", got)
		}
		// B's idle h04 goes to A; B keeps busy h05.
		if diff := cmp.Diff([]string{"h05"}, owned(r2.Ownership, "B")); diff != "" {
			t.Errorf("B owns (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]Shortfall{{Consumer: "B", Group: "g", Want: 3, Got: 1, Unit: "hosts"}}, r2.Shortfalls); diff != "" {
			t.Errorf("shortfalls (-want +got):\n%s", diff)
		}
	})
	t.Run("step 3: a lowered plan trims least workload first", func(t *testing.T) {
		hs := rack(4)
		p := flat(3)
		r1 := mustRecompute(t, p, hs, nil)
		hs[0].Users = map[string]int{"A": 2}
		hs[1].Users = map[string]int{"A": 1}
		p.Entries[0].Amount = 1
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		if diff := cmp.Diff([]string{"h01"}, owned(r2.Ownership, "A")); diff != "" {
			t.Errorf("A owns (-want +got):\n%s", diff)
		}
		steps := map[string]int{}
		for _, c := range r2.Changes {
			steps[c.Host] = c.Step
		}
		// h02 was busy: step 4 (handed over after grace); h03 idle: step 3.
		if diff := cmp.Diff(map[string]int{"h02": 4, "h03": 3}, steps); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
	})
	t.Run("periodic redistribution: free owned hosts go to a higher rank short of its ownership", func(t *testing.T) {
		hs := rack(4)
		p := flat(2, 2)
		p.Consumers[0].Rank, p.Consumers[1].Rank = 2, 1 // B first now
		hs[3].Down = true
		r1 := mustRecompute(t, p, hs, nil) // B: h01 h02; A: h03
		p.Consumers[0].Rank, p.Consumers[1].Rank = 1, 2
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		// A (now rank 1) is short: it keeps h03 and takes one of B's idle
		// hosts (the lowest rank's released hosts, least loaded, by ID);
		// one host moves.
		if diff := cmp.Diff([]string{"h01", "h03"}, owned(r2.Ownership, "A")); diff != "" {
			t.Errorf("A owns (-want +got):\n%s", diff)
		}
		if r2.MovedHosts != 1 {
			t.Errorf("moved %d hosts: %+v", r2.MovedHosts, r2.Changes)
		}
	})
	t.Run("children follow their parent's hosts", func(t *testing.T) {
		hs := rack(4)
		p := &Plan{
			Consumers: []Consumer{{ID: "d"}, {ID: "p", Parent: "d"}},
			Groups:    []Group{{Name: "g", Properties: map[string]string{"rack": "r1"}}},
			Entries:   []Entry{{Consumer: "d", Group: "g", Amount: 2}, {Consumer: "p", Group: "g", Amount: 1}},
		}
		r1 := mustRecompute(t, p, hs, nil) // d: h01 h02, p: h01
		hs[0].Down = true
		r2 := mustRecompute(t, p, hs, r1.Ownership)
		if diff := cmp.Diff([]string{"h02", "h03"}, owned(r2.Ownership, "d")); diff != "" {
			t.Errorf("d owns (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"h02"}, owned(r2.Ownership, "p")); diff != "" {
			t.Errorf("p owns (-want +got):\n%s", diff)
		}
	})
}

func TestReclaimAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		start  time.Time
		grace  time.Duration
		want   time.Time
		wantOK bool
	}{
		{now.Add(2 * time.Hour), time.Hour, now.Add(2 * time.Hour), true},
		{now.Add(time.Hour), time.Hour, now.Add(time.Hour), true},
		{now.Add(30 * time.Minute), time.Hour, now.Add(time.Hour), false},
		{now, 0, now, true},
	}
	for _, tt := range tests {
		got, ok := ReclaimAt(now, tt.start, tt.grace)
		if !got.Equal(tt.want) || ok != tt.wantOK {
			t.Errorf("ReclaimAt(%v, %v) = %v, %v; want %v, %v", tt.start, tt.grace, got, ok, tt.want, tt.wantOK)
		}
	}
}

// Hosts in two groups belong to one: an explicit list wins over
// properties, then the first group by name.
func TestGroupResolution(t *testing.T) {
	hs := rack(3)
	p := &Plan{
		Consumers: []Consumer{{ID: "A"}, {ID: "B"}},
		Groups:    []Group{{Name: "a-props", Properties: map[string]string{"rack": "r1"}}, {Name: "z-list", Hosts: []string{"h02"}}},
		Entries:   []Entry{{Consumer: "A", Group: "a-props", Amount: 3}, {Consumer: "B", Group: "z-list", Amount: 1}},
	}
	r := mustRecompute(t, p, hs, nil)
	if got := owned(r.Ownership, "B"); !slices.Equal(got, []string{"h02"}) {
		t.Errorf("B owns %v", got)
	}
	if got := owned(r.Ownership, "A"); !slices.Equal(got, []string{"h01", "h03"}) {
		t.Errorf("A owns %v", got)
	}
}
