package ownership

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// offers renders what each host offers consumer c's slot request at
// stage k: "h=whole" or "h=owner/slots" per part ("public" for the
// public part), hosts that offer nothing left out.
func offers(o *Order, k int, hosts []string) string {
	var out []string
	for _, h := range hosts {
		whole, parts := o.Offer(k, h)
		if whole {
			out = append(out, h+"=whole")
			continue
		}
		var ps []string
		for _, p := range parts {
			owner := p.Owner
			if owner == "" {
				owner = "public"
			}
			ps = append(ps, fmt.Sprintf("%s/%d", owner, p.Slots))
		}
		if len(ps) > 0 {
			out = append(out, h+"="+strings.Join(ps, "+"))
		}
	}
	return strings.Join(out, " ")
}

// TestSlotOffers: dom owns h1 (4 slots) whole, a owns 2 of its slots, b
// 1 (lent with a grace of an hour), dom keeps 1 private; q owns 2 of
// h2's 4 slots and does not lend, the other 2 are public; h3 and h4 are
// public whole hosts. Each consumer's stages grow by its pool order:
// owned part, parent's private part, lent parts, then the public pool
// (whole hosts and public parts).
func TestSlotOffers(t *testing.T) {
	hs := []Host{{ID: "h1", Slots: 4}, {ID: "h2", Slots: 4}, {ID: "h3"}, {ID: "h4", Load: 1}}
	plan := &Plan{
		Consumers: []Consumer{{ID: "dom", Rank: 1, LendingLimit: -1}, {ID: "q", Rank: 2, Project: "PQ", LendingLimit: -1},
			{ID: "a", Parent: "dom", Rank: 1, Project: "PA", LendingLimit: -1},
			{ID: "b", Parent: "dom", Rank: 2, Project: "PB", BorrowGrace: 2 * time.Hour, LendingLimit: -1}},
		Groups: []Group{{Name: "g1", Hosts: []string{"h1"}}, {Name: "g2", Hosts: []string{"h2"}}},
		Entries: []Entry{{Consumer: "dom", Group: "g1", Amount: 1},
			{Consumer: "a", Group: "g1", Amount: 2, Partial: true, Lend: true, LendGrace: 30 * time.Minute},
			{Consumer: "b", Group: "g1", Amount: 1, Partial: true, Lend: true, LendGrace: time.Hour},
			{Consumer: "q", Group: "g2", Amount: 2, Partial: true}},
	}
	if err := Validate(plan, hs); err != nil {
		t.Fatal(err)
	}
	res := mustRecompute(t, plan, hs, nil)
	v, err := NewView(plan, hs, res.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"h1", "h2", "h3", "h4"}
	tests := []struct {
		consumer string
		stages   []string // offers at stage 1, 2, …
	}{
		{"a", []string{
			"h1=a/2",
			"h1=a/2+dom/1",
			"h1=a/2+dom/1+b/1",
			"h1=a/2+dom/1+b/1 h2=public/2 h3=whole h4=whole",
		}},
		// a lends with 30 minutes of grace, shorter than b's borrowing
		// grace of two hours: b never gets a's part.
		{"b", []string{
			"h1=b/1",
			"h1=b/1+dom/1",
			"h1=b/1+dom/1 h2=public/2 h3=whole h4=whole",
		}},
		// q's own part, then the public pool; dom lends nothing up.
		{"q", []string{
			"h2=q/2",
			"h2=q/2+public/2 h3=whole h4=whole",
		}},
		{"", []string{"h2=public/2 h3=whole h4=whole"}},
	}
	for _, tc := range tests {
		t.Run("consumer "+tc.consumer, func(t *testing.T) {
			o := v.HostOrder(tc.consumer)
			var got []string
			for k := 1; k <= o.Stages(); k++ {
				got = append(got, offers(o, k, all))
			}
			if diff := cmp.Diff(tc.stages, got); diff != "" {
				t.Errorf("offers by stage (-want +got):\n%s", diff)
			}
		})
	}
	// Where a part comes from, as the lease records it.
	o := v.HostOrder("a")
	_, parts := o.Offer(o.Stages(), "h1")
	var src []string
	for _, p := range parts {
		s := o.PartSource(p)
		src = append(src, fmt.Sprintf("%s:%s:%s", s.Pool, s.Consumer, s.LentBy))
		if got := PartOwner(s.Pool, s.Consumer, s.LentBy); got != p.Owner {
			t.Errorf("PartOwner of %v = %q, want %q", s, got, p.Owner)
		}
	}
	if diff := cmp.Diff([]string{"owned:a:", "private:dom:", "private:dom:b"}, src); diff != "" {
		t.Errorf("part sources (-want +got):\n%s", diff)
	}
	// A whole-host request never takes a part.
	for k := 1; k <= o.Stages(); k++ {
		if o.Allows(k, "h1") || o.Allows(k, "h2") {
			t.Fatalf("stage %d allows a partly owned host whole", k)
		}
	}
}

// mayUse is the ownership rule stated on its own: consumer c may draw
// from capacity of owner in group g when it is public, c's own, an
// ancestor's private pool, or lent up to c's level (every consumer on
// the way up lends) by a lender whose grace period is at least c's
// borrowing grace.
func mayUse(p *Plan, c, owner, g string) bool {
	cons := map[string]Consumer{}
	for _, x := range p.Consumers {
		cons[x.ID] = x
	}
	if owner == "" || owner == c {
		return true
	}
	up := map[string]bool{}
	for x := cons[c].Parent; c != "" && x != ""; x = cons[x].Parent {
		up[x] = true
	}
	if up[owner] {
		return true
	}
	for x := owner; ; {
		e := entryOf(p, x, g)
		if e == nil || !e.Lend {
			return false
		}
		x = cons[x].Parent
		if x == "" || up[x] || x == c {
			break
		}
	}
	return cons[c].BorrowGrace <= entryOf(p, owner, g).LendGrace
}

// TestSlotsNeverBorrowedWithoutLeave: whatever the plan and hosts, a slot
// request's offers are parts its consumer may use, each within what
// its owner holds of the host, and together no more than the host.
func TestSlotsNeverBorrowedWithoutLeave(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, hs := genWorld(t)
		res, err := Recompute(p, hs, nil)
		if err != nil {
			t.Skip(err)
		}
		v, err := NewView(p, hs, res.Ownership)
		if err != nil {
			t.Fatal(err)
		}
		cs := []string{""}
		for _, c := range p.Consumers {
			cs = append(cs, c.ID)
		}
		for _, c := range cs {
			o := v.HostOrder(c)
			for _, h := range hs {
				whole, parts := o.Offer(o.Stages(), h.ID)
				if whole && o.Split(h.ID) {
					t.Fatalf("%s: partly owned host %s offered whole", c, h.ID)
				}
				if whole && v.Holder(h.ID) != "" && !mayUse(p, c, v.Holder(h.ID), v.group[h.ID]) {
					t.Fatalf("%s: host %s of %s offered whole", c, h.ID, v.Holder(h.ID))
				}
				sum := 0
				for _, pt := range parts {
					if !mayUse(p, c, pt.Owner, pt.Group) {
						t.Fatalf("%s may not use %s's part of %s, offered %v", c, pt.Owner, h.ID, pt)
					}
					if pt.Owner != "" && res.Ownership[pt.Owner][h.ID].Slots < pt.Slots {
						t.Fatalf("%s's part of %s is %d slots, it owns %v", pt.Owner, h.ID, pt.Slots, res.Ownership[pt.Owner][h.ID])
					}
					if pt.Slots <= 0 || pt.Of != h.slots() {
						t.Fatalf("part %v of host %s with %d slots", pt, h.ID, h.slots())
					}
					sum += pt.Slots
				}
				if sum > h.slots() {
					t.Fatalf("%s: parts of %s offer %d slots of %d", c, h.ID, sum, h.slots())
				}
				// Stages only grow.
				for k := 1; k < o.Stages(); k++ {
					_, a := o.Offer(k, h.ID)
					_, b := o.Offer(k+1, h.ID)
					if !slices.Equal(a, b[:min(len(a), len(b))]) {
						t.Fatalf("%s: stage %d offers %v of %s, stage %d %v", c, k, a, h.ID, k+1, b)
					}
				}
			}
		}
	})
}

// TestLendableParts: a consumer's own parts of partly owned hosts, with
// their entries' lending grace periods, are what its reclaim may take
// back; parts it only borrows or shares through its parent are not.
func TestLendableParts(t *testing.T) {
	hs := []Host{{ID: "h1", Slots: 4}, {ID: "h2", Slots: 4}, {ID: "h3"}}
	plan := &Plan{
		Consumers: []Consumer{{ID: "dom", Rank: 1, LendingLimit: -1}, {ID: "q", Rank: 2, Project: "PQ", LendingLimit: -1},
			{ID: "a", Parent: "dom", Rank: 1, Project: "PA", LendingLimit: -1},
			{ID: "b", Parent: "dom", Rank: 2, Project: "PB", LendingLimit: -1}},
		Groups: []Group{{Name: "g1", Hosts: []string{"h1"}}, {Name: "g2", Hosts: []string{"h2"}}},
		Entries: []Entry{{Consumer: "dom", Group: "g1", Amount: 1},
			{Consumer: "a", Group: "g1", Amount: 2, Partial: true, Lend: true, LendGrace: 30 * time.Minute, Reclaim: true},
			{Consumer: "b", Group: "g1", Amount: 1, Partial: true, Lend: true, LendGrace: time.Hour},
			{Consumer: "q", Group: "g2", Amount: 2, Partial: true}},
	}
	if err := Validate(plan, hs); err != nil {
		t.Fatal(err)
	}
	res := mustRecompute(t, plan, hs, nil)
	v, err := NewView(plan, hs, res.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		consumer string
		eager    bool
		want     map[string]PartGrace
	}{
		{"a", false, map[string]PartGrace{"h1": {Owner: "a", Grace: 30 * time.Minute}}},
		{"a", true, map[string]PartGrace{"h1": {Owner: "a", Grace: 30 * time.Minute}}},
		{"b", false, map[string]PartGrace{"h1": {Owner: "b", Grace: time.Hour}}},
		{"b", true, map[string]PartGrace{}},
		{"q", false, map[string]PartGrace{"h2": {Owner: "q"}}},
		{"", false, map[string]PartGrace{}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, v.HostOrder(tc.consumer).LendableParts(tc.eager)); diff != "" {
			t.Errorf("%q eager=%v (-want +got):\n%s", tc.consumer, tc.eager, diff)
		}
	}
}

// TestPartHeldOutside: which bookings of a partly owned host a reclaim
// for a part's owner takes back. h1 (4 slots): dom keeps 1 private, its
// children a and b own 1 each, 1 is public; h2: q and r own 2 each (no
// public part); h3 is whole. PX's project is outside the tree.
func TestPartHeldOutside(t *testing.T) {
	hs := []Host{{ID: "h1", Slots: 4}, {ID: "h2", Slots: 4}, {ID: "h3", Slots: 4}}
	plan := &Plan{
		Consumers: []Consumer{{ID: "dom", Rank: 1, LendingLimit: -1}, {ID: "q", Rank: 2, Project: "PQ", LendingLimit: -1},
			{ID: "r", Rank: 3, Project: "PR", LendingLimit: -1},
			{ID: "a", Parent: "dom", Rank: 1, Project: "PA", LendingLimit: -1},
			{ID: "b", Parent: "dom", Rank: 2, Project: "PB", LendingLimit: -1}},
		Groups: []Group{{Name: "g1", Hosts: []string{"h1"}}, {Name: "g2", Hosts: []string{"h2"}}, {Name: "g3", Hosts: []string{"h3"}}},
		Entries: []Entry{{Consumer: "dom", Group: "g1", Amount: 3, Partial: true},
			{Consumer: "a", Group: "g1", Amount: 1, Partial: true, Lend: true},
			{Consumer: "b", Group: "g1", Amount: 1, Partial: true, Lend: true},
			{Consumer: "q", Group: "g2", Amount: 2, Partial: true},
			{Consumer: "r", Group: "g2", Amount: 2, Partial: true},
			{Consumer: "q", Group: "g3", Amount: 1}},
	}
	if err := Validate(plan, hs); err != nil {
		t.Fatal(err)
	}
	res := mustRecompute(t, plan, hs, nil)
	v, err := NewView(plan, hs, res.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	if got := offers(v.HostOrder("a"), 1, []string{"h1"}) + " | " + offers(v.HostOrder("q"), v.HostOrder("q").Stages(), []string{"h2", "h3"}); got != "h1=a/1 | h2=q/2 h3=whole" {
		t.Fatalf("the plan's parts: %s", got)
	}
	// A host request takes whole hosts only: a partly owned host is
	// never one it may use or reclaim, so only slot requests reclaim parts.
	for _, c := range []string{"a", "q"} {
		o := v.HostOrder(c)
		if _, ok := o.Lendable(false)["h1"]; ok || o.Allows(o.Stages(), "h1") || o.Allows(o.Stages(), "h2") {
			t.Fatalf("%s's host requests may use or reclaim a partly owned host", c)
		}
	}
	rec := func(host, project, part string) Booking {
		return Booking{Host: host, Project: project, Part: part, Recorded: true}
	}
	bare := func(host, project string) Booking { return Booking{Host: host, Project: project} }
	tests := []struct {
		name  string
		owner string
		b     Booking
		want  bool
	}{
		{"lent from a's part", "a", rec("h1", "PB", "a"), true},
		{"a's own booking of its part", "a", rec("h1", "PA", "a"), false},
		{"drawn from a's part by a project outside the tree", "a", rec("h1", "PX", "a"), true},
		{"booked before the plan, outside the tree", "a", bare("h1", "PX"), true},
		{"booked before the plan by a's own project", "a", bare("h1", "PA"), false},
		{"booked before the plan below dom, which holds a part", "a", bare("h1", "PB"), false},
		{"booked before the plan by q, holding no part of h1", "a", bare("h1", "PQ"), true},
		{"drawn from the public part the host still has", "a", rec("h1", "PX", ""), false},
		{"drawn from b's part", "a", rec("h1", "PX", "b"), false},
		{"drawn from dom's part", "a", rec("h1", "PX", "dom"), false},
		{"drawn from a part gone since", "a", rec("h1", "PX", "q"), true},
		{"drawn from a part gone since, below b", "a", rec("h1", "PB", "r"), false},
		{"drawn from the public part, gone since", "q", rec("h2", "PX", ""), true},
		{"drawn from the public part, gone since, by a", "q", rec("h2", "PA", ""), true},
		{"booked before the plan by r, holding the other part", "q", bare("h2", "PR"), false},
		{"drawn from r's part", "q", rec("h2", "PA", "r"), false},
		{"an owner with no part of the host", "q", bare("h1", "PX"), false},
		{"a whole host", "q", bare("h3", "PX"), false},
		{"no owner", "", bare("h1", "PX"), false},
	}
	for _, tc := range tests {
		o := v.HostOrder(tc.owner)
		if got := o.PartHeldOutside(tc.b, tc.owner); got != tc.want {
			t.Errorf("%s: PartHeldOutside(%+v, %q) = %v, want %v", tc.name, tc.b, tc.owner, got, tc.want)
		}
	}
}
