package ownership

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genWorld draws a valid plan (a tree up to three levels deep, children
// within their parents) and hosts with slots, load, workload and some
// hosts down.
func genWorld(t *rapid.T) (*Plan, []Host) {
	nh := rapid.IntRange(1, 24).Draw(t, "hosts")
	hs := make([]Host, nh)
	var listed []string
	for i := range hs {
		h := Host{ID: fmt.Sprintf("h%02d", i), Slots: rapid.IntRange(1, 3).Draw(t, "slots"),
			Load: rapid.IntRange(0, 3).Draw(t, "load"), Down: rapid.IntRange(0, 9).Draw(t, "down") == 0,
			Properties: map[string]string{"rack": rapid.SampledFrom([]string{"r1", "r2"}).Draw(t, "rack")}}
		if rapid.Bool().Draw(t, "listed") {
			listed = append(listed, h.ID)
		}
		hs[i] = h
	}
	p := &Plan{Groups: []Group{{Name: "g1", Properties: map[string]string{"rack": "r1"}}}}
	groups := []string{"g1"}
	if len(listed) > 0 {
		p.Groups = append(p.Groups, Group{Name: "g2", Hosts: listed})
		groups = append(groups, "g2")
	}
	var add func(parent string, depth int)
	add = func(parent string, depth int) {
		n := rapid.IntRange(0, 3).Draw(t, "children")
		if parent == "" {
			n++
		}
		budget := map[string]int{}
		partial := map[string]bool{}
		for _, g := range groups {
			if e := entryOf(p, parent, g); e != nil {
				budget[g], partial[g] = e.Amount, e.Partial
			}
		}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s%c", parent, 'a'+i)
			p.Consumers = append(p.Consumers, Consumer{ID: id, Parent: parent, Rank: rapid.IntRange(0, 3).Draw(t, "rank"),
				BorrowGrace: time.Duration(rapid.IntRange(0, 3).Draw(t, "bgrace")) * time.Hour, LendingLimit: -1})
			for _, g := range groups {
				if !rapid.Bool().Draw(t, "entry") {
					continue
				}
				e := Entry{Consumer: id, Group: g, Lend: rapid.Bool().Draw(t, "lend"),
					LendGrace:  time.Duration(rapid.IntRange(0, 3).Draw(t, "lgrace")) * time.Hour,
					Preference: rapid.IntRange(0, 2).Draw(t, "pref")}
				if parent == "" {
					e.Partial = rapid.IntRange(0, 3).Draw(t, "partial") == 0
					e.Amount = rapid.IntRange(0, 8).Draw(t, "amount")
				} else {
					b, ok := budget[g]
					if !ok {
						continue
					}
					e.Partial = partial[g]
					e.Amount = rapid.IntRange(0, b).Draw(t, "amount")
					budget[g] -= e.Amount
				}
				p.Entries = append(p.Entries, e)
			}
			if depth < 2 {
				add(id, depth+1)
			}
		}
	}
	add("", 0)
	return p, hs
}

func entryOf(p *Plan, c, g string) *Entry {
	for i := range p.Entries {
		if p.Entries[i].Consumer == c && p.Entries[i].Group == g {
			return &p.Entries[i]
		}
	}
	return nil
}

// checkOwnership: no host owned twice (top-level shares fit the host),
// children within their parents.
func checkOwnership(t *rapid.T, p *Plan, hs []Host, o Ownership) {
	parent := map[string]string{}
	for _, c := range p.Consumers {
		parent[c.ID] = c.Parent
	}
	for _, h := range hs {
		// sum of shares per parent (the "" parent: the host itself).
		sum := map[string]int{}
		for c, m := range o {
			if sh, ok := m[h.ID]; ok {
				if h.Down {
					t.Fatalf("down host %s owned by %s", h.ID, c)
				}
				sum[parent[c]] += sh.Slots
				if pp := parent[c]; pp != "" {
					ps, ok := o[pp][h.ID]
					if !ok || ps.Group != sh.Group {
						t.Fatalf("%s owns %s (%v) but its parent %s does not (%v)", c, h.ID, sh, pp, ps)
					}
				}
			}
		}
		for pp, n := range sum {
			limit := h.slots()
			if pp != "" {
				limit = o[pp][h.ID].Slots
			}
			if n > limit {
				t.Fatalf("host %s: children of %q own %d slots of %d", h.ID, pp, n, limit)
			}
		}
	}
}

func TestPropOwnership(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, hs := genWorld(t)
		r, err := Recompute(p, hs, nil)
		if err != nil {
			t.Fatalf("Recompute: %v", err)
		}
		checkOwnership(t, p, hs, r.Ownership)
		// Workload arrives on some hosts; recomputing with the same plan
		// and hosts moves nothing.
		for i := range hs {
			if c := rapid.IntRange(-1, len(p.Consumers)-1).Draw(t, "user"); c >= 0 {
				hs[i].Users = map[string]int{p.Consumers[c].ID: 1}
			}
		}
		r2, err := Recompute(p, hs, r.Ownership)
		if err != nil {
			t.Fatal(err)
		}
		if len(r2.Changes) != 0 {
			t.Fatalf("unchanged plan moved: %+v\nplan %+v\nfirst %v\nhosts %+v", r2.Changes, p, r.Ownership, hs)
		}
		// A host goes down: the result is still consistent.
		i := rapid.IntRange(0, len(hs)-1).Draw(t, "fail")
		hs[i].Down = true
		r3, err := Recompute(p, hs, r2.Ownership)
		if err != nil {
			t.Fatal(err)
		}
		checkOwnership(t, p, hs, r3.Ownership)
	})
}

// A request never gets capacity it may not use: every host of Order(c) is
// public, c's, an ancestor's private host, or lent along a chain of
// lenders to a level c sees with a grace period ≥ c's; no host twice.
func TestPropOrderOnlyAllowedHosts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, hs := genWorld(t)
		r, err := Recompute(p, hs, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := NewView(p, hs, r.Ownership)
		if err != nil {
			t.Fatal(err)
		}
		cons := map[string]Consumer{}
		for _, c := range p.Consumers {
			cons[c.ID] = c
		}
		isAnc := func(a, c string) bool {
			for x := c; x != ""; x = cons[x].Parent {
				if x == a {
					return true
				}
			}
			return false
		}
		for _, c := range append([]string{""}, func() []string {
			var out []string
			for _, c := range p.Consumers {
				out = append(out, c.ID)
			}
			return out
		}()...) {
			seen := map[string]bool{}
			for _, pl := range v.Order(c) {
				for _, h := range pl.Hosts {
					if seen[h] {
						t.Fatalf("Order(%q): host %s twice", c, h)
					}
					seen[h] = true
					d := v.Holder(h)
					switch {
					case d == "":
					case isAnc(d, c):
					default:
						// Lent: each consumer from d up to a level that is c's
						// ancestor (or the top) lends, with enough grace.
						x := d
						for x != "" && !isAnc(x, c) {
							e := entryOf(p, x, v.group[h])
							if e == nil || !e.Lend {
								t.Fatalf("Order(%q) has %s of %s, not lent by %s", c, h, d, x)
							}
							x = cons[x].Parent
						}
						if e := entryOf(p, d, v.group[h]); c != "" && e.LendGrace < cons[c].BorrowGrace {
							t.Fatalf("Order(%q) borrows %s with grace %v < %v", c, h, e.LendGrace, cons[c].BorrowGrace)
						}
					}
				}
			}
		}
	})
}

// Recomputation moves no more hosts than the change needs: in a flat plan
// of whole hosts, changing one consumer's amount by Δ moves at most |Δ|
// hosts.
func TestPropMinimalMoves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "consumers")
		amounts := make([]int, n)
		for i := range amounts {
			amounts[i] = rapid.IntRange(0, 6).Draw(t, "amount")
		}
		p := flat(amounts...)
		for i := range p.Consumers {
			p.Consumers[i].Rank = rapid.IntRange(0, 3).Draw(t, "rank")
		}
		hs := rack(rapid.IntRange(1, 20).Draw(t, "hosts"))
		for i := range hs {
			hs[i].Load = rapid.IntRange(0, 3).Draw(t, "load")
			if c := rapid.IntRange(-1, n-1).Draw(t, "user"); c >= 0 {
				hs[i].Users = map[string]int{p.Consumers[c].ID: 1}
			}
		}
		r1, err := Recompute(p, hs, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Busy hosts are owned by their users' consumer in steady state:
		// recompute once with the workload in place.
		r1, _ = Recompute(p, hs, r1.Ownership)
		i := rapid.IntRange(0, n-1).Draw(t, "changed")
		old := p.Entries[i].Amount
		p.Entries[i].Amount = rapid.IntRange(0, 8).Draw(t, "new amount")
		d := p.Entries[i].Amount - old
		if d < 0 {
			d = -d
		}
		r2, err := Recompute(p, hs, r1.Ownership)
		if err != nil {
			t.Fatal(err)
		}
		if r2.MovedHosts > d {
			var ch []string
			for _, c := range r2.Changes {
				ch = append(ch, fmt.Sprintf("%s %s %d→%d (%s)", c.Host, c.Consumer, c.Before, c.After, c.Reason))
			}
			slices.Sort(ch)
			t.Fatalf("amount of %s changed by %d, %d hosts moved:\n%v", p.Entries[i].Consumer, d, r2.MovedHosts, ch)
		}
	})
}
