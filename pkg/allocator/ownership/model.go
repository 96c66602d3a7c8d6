// Package ownership is the ownership policy in pure form: a consumer tree
// (domains, projects or any grouping an operator names) owns hosts or
// host slots per resource group in rank order; what a parent does not give
// its children is the parent's private share pool; what no top-level
// consumer owns is the public pool. It validates plans, assigns and
// recomputes ownership with the least disruption (reporting what moved),
// and orders the pools a consumer's request draws from, with lending and
// reclaim rules.
//
// Like the rest of pkg/allocator it never touches a database or a clock:
// hosts, their workload and the time are passed in, and every result is
// deterministic.
package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/leasehold/leasehold/pkg/errs"
)

// Consumer is a node of the consumer tree.
type Consumer struct {
	// ID names the consumer (unique in a plan).
	ID string `json:"id"`
	// Parent is the parent consumer's ID; "" for a top-level consumer.
	Parent string `json:"parent,omitempty"`
	// Rank orders siblings: a smaller rank is served first (rank 1 before
	// rank 2); equal ranks are ordered by ID.
	Rank int `json:"rank"`
	// Project is the Keystone project a leaf consumer stands for ("" for
	// inner nodes and groupings).
	Project string `json:"project_id,omitempty"`
	// BorrowGrace is the grace period the consumer asks for when it
	// borrows: it may borrow only from lenders whose LendGrace is at least
	// this long.
	BorrowGrace time.Duration `json:"-"`
	// LendingLimit caps how many hosts the consumer lends at once (what
	// Kueue calls lendingLimit); negative means no limit.
	LendingLimit int `json:"lending_limit"`
}

// Group is a resource group: a named set of hosts, listed explicitly or
// matched by host properties.
type Group struct {
	Name string `json:"name"`
	// Hosts lists host IDs explicitly.
	Hosts []string `json:"hosts,omitempty"`
	// Properties matches every host whose properties carry all these
	// key/values (used when Hosts is empty).
	Properties map[string]string `json:"properties,omitempty"`
}

// Entry is one line of a resource plan: what one consumer owns of one
// group and how it shares it.
type Entry struct {
	Consumer string `json:"consumer"`
	Group    string `json:"group"`
	// Amount is the owned number of whole hosts, or of slots when Partial.
	Amount int `json:"amount"`
	// Partial allows owning parts of hosts (Amount counts slots).
	Partial bool `json:"partial,omitempty"`
	// Preference ranks the consumer's groups: a higher preference is used
	// first. Zero inherits the nearest ancestor's preference in the group.
	Preference int `json:"preference,omitempty"`
	// ShareRatio weighs the consumer's share of its parent's private pool
	// (informational for host reservations, which take whole hosts).
	ShareRatio float64 `json:"share_ratio,omitempty"`
	// Lend lends idle owned hosts of the group to the parent's private
	// pool (and from there upward while the parents lend too).
	Lend bool `json:"lend,omitempty"`
	// LendGrace is how long a borrower keeps a lent host once the owner
	// reclaims it; only borrowers with BorrowGrace ≤ LendGrace may borrow.
	LendGrace time.Duration `json:"-"`
	// Reclaim lets the consumer reclaim lent hosts of this group for its
	// own requests even when less preferred capacity is idle.
	Reclaim bool `json:"reclaim,omitempty"`
}

// Plan is a resource plan: the consumer tree, the groups and the entries.
type Plan struct {
	Consumers []Consumer `json:"consumers"`
	Groups    []Group    `json:"groups"`
	Entries   []Entry    `json:"entries"`
}

// Host is a host as ownership sees it.
type Host struct {
	ID string
	// Slots is how many slots the host has for partial ownership (0 is 1).
	Slots int
	// Properties are matched by groups' Properties.
	Properties map[string]string
	// Down hosts are owned by nobody (a group shrinks when a host goes down).
	Down bool
	// Load is the host's workload now (slots in use by anyone); hosts with
	// less load are chosen first.
	Load int
	// Users is the workload per consumer ID (slots in use by leases of that
	// consumer); a consumer's workload includes its descendants'.
	Users map[string]int
}

func (h *Host) slots() int {
	if h.Slots <= 0 {
		return 1
	}
	return h.Slots
}

// Validate checks a plan's structure. Errors are *errs.Error of kind
// BadRequest naming the consumer and group that break a rule.
//
// hosts are the hosts the plan is written for: a child owning slots of a
// group whose parent owns whole hosts there is converted to hosts with
// the group's largest host (without hosts of the group, a host counts
// one slot, Host's default). Only plan writes check it: a host that
// later goes down or shrinks makes ownership fall short, never a stored
// plan invalid.
func Validate(p *Plan, hosts []Host) error {
	ix, err := compile(p)
	if err != nil {
		return err
	}
	return ix.checkUnits(hosts)
}

// checkUnits refuses children owning slots beyond what their parent's
// whole hosts hold: the parent's hosts less those its whole-host
// children own, times the group's largest host in slots.
func (ix *index) checkUnits(hosts []Host) error {
	groupOf := ix.resolve(hosts)
	perHost := map[string]int{}
	for i := range hosts {
		if g, ok := groupOf[hosts[i].ID]; ok {
			perHost[g] = max(perHost[g], hosts[i].slots())
		}
	}
	for _, c := range ix.plan.Consumers {
		for _, g := range ix.groups {
			pe := ix.entries[c.ID][g]
			if pe == nil || pe.Partial {
				continue
			}
			whole, slots := 0, 0
			for _, k := range ix.children[c.ID] {
				if ke := ix.entries[k][g]; ke != nil && !ke.Partial {
					whole += ke.Amount
				}
			}
			per := max(1, perHost[g])
			room := max(0, pe.Amount-whole) * per
			for _, k := range ix.children[c.ID] {
				ke := ix.entries[k][g]
				if ke == nil || !ke.Partial {
					continue
				}
				slots += ke.Amount
				if slots > room {
					return bad("consumer %q owns %d slots of resource group %q, more than its parent %q owns there: %d hosts of at most %d slots each, %d of them owned whole by its children, hold %d slots for its children owning slots (%d asked in all)",
						k, ke.Amount, g, c.ID, pe.Amount, per, whole, room, slots)
				}
			}
		}
	}
	return nil
}

// index is a compiled plan.
type index struct {
	plan     *Plan
	cons     map[string]*Consumer
	children map[string][]string // parent ("" for the roots) → children by (rank, ID)
	entries  map[string]map[string]*Entry
	groups   []string // names, sorted
	group    map[string]*Group
	depth    map[string]int
	// pos is each consumer's place in the tree's rank order: siblings by
	// (rank, ID), a consumer before its children and its children before
	// its next sibling (the order assignment serves them in).
	pos map[string]int
	// byProject maps projects to the consumers standing for them.
	byProject map[string]string
}

func bad(format string, args ...any) error { return errs.BadRequestf(format, args...) }

func compile(p *Plan) (*index, error) {
	ix := &index{
		plan: p, cons: map[string]*Consumer{}, children: map[string][]string{},
		entries: map[string]map[string]*Entry{}, group: map[string]*Group{}, depth: map[string]int{},
		pos: map[string]int{}, byProject: map[string]string{},
	}
	for i := range p.Consumers {
		c := &p.Consumers[i]
		switch {
		case c.ID == "":
			return nil, bad("consumer #%d has no id", i+1)
		case ix.cons[c.ID] != nil:
			return nil, bad("consumer %q is defined twice", c.ID)
		case c.Rank < 0:
			return nil, bad("consumer %q has a negative rank %d", c.ID, c.Rank)
		case c.BorrowGrace < 0:
			return nil, bad("consumer %q has a negative borrowing grace period", c.ID)
		case c.Parent == c.ID:
			return nil, bad("consumer %q is its own parent", c.ID)
		}
		ix.cons[c.ID] = c
		if c.Project != "" {
			ix.byProject[c.Project] = c.ID
		}
	}
	for _, c := range p.Consumers {
		if c.Parent != "" && ix.cons[c.Parent] == nil {
			return nil, bad("consumer %q has an unknown parent %q", c.ID, c.Parent)
		}
		ix.children[c.Parent] = append(ix.children[c.Parent], c.ID)
	}
	for k, ids := range ix.children {
		slices.SortFunc(ids, func(a, b string) int { return ix.less(a, b) })
		ix.children[k] = ids
	}
	// Depth by walking down from the roots; a consumer never reached sits
	// on a cycle.
	var walk func(id string, d int)
	walk = func(id string, d int) {
		for _, ch := range ix.children[id] {
			ix.depth[ch] = d
			ix.pos[ch] = len(ix.pos)
			walk(ch, d+1)
		}
	}
	walk("", 0)
	for _, c := range p.Consumers {
		if _, ok := ix.depth[c.ID]; !ok {
			return nil, bad("consumer %q is on a parent cycle", c.ID)
		}
	}
	for i := range p.Groups {
		g := &p.Groups[i]
		switch {
		case g.Name == "":
			return nil, bad("resource group #%d has no name", i+1)
		case ix.group[g.Name] != nil:
			return nil, bad("resource group %q is defined twice", g.Name)
		case len(g.Hosts) == 0 && len(g.Properties) == 0:
			return nil, bad("resource group %q names neither hosts nor properties", g.Name)
		}
		ix.group[g.Name] = g
		ix.groups = append(ix.groups, g.Name)
	}
	sort.Strings(ix.groups)
	for i := range p.Entries {
		e := &p.Entries[i]
		switch {
		case ix.cons[e.Consumer] == nil:
			return nil, bad("plan entry #%d names an unknown consumer %q", i+1, e.Consumer)
		case ix.group[e.Group] == nil:
			return nil, bad("plan entry for consumer %q names an unknown resource group %q", e.Consumer, e.Group)
		case ix.entries[e.Consumer][e.Group] != nil:
			return nil, bad("consumer %q has two plan entries for resource group %q", e.Consumer, e.Group)
		case e.Amount < 0:
			return nil, bad("consumer %q owns a negative amount %d of resource group %q", e.Consumer, e.Amount, e.Group)
		case e.ShareRatio < 0:
			return nil, bad("consumer %q has a negative share ratio in resource group %q", e.Consumer, e.Group)
		case e.LendGrace < 0:
			return nil, bad("consumer %q has a negative lending grace period in resource group %q", e.Consumer, e.Group)
		}
		if ix.entries[e.Consumer] == nil {
			ix.entries[e.Consumer] = map[string]*Entry{}
		}
		ix.entries[e.Consumer][e.Group] = e
	}
	// Children within parents: a child owns only in groups its parent owns
	// in, in a unit the parent's ownership can hold, and all children
	// together no more than the parent.
	for _, c := range p.Consumers {
		kids := ix.children[c.ID]
		for _, g := range ix.groups {
			pe := ix.entries[c.ID][g]
			sum := 0
			var last string
			for _, k := range kids {
				ke := ix.entries[k][g]
				if ke == nil {
					continue
				}
				if pe == nil {
					return nil, bad("consumer %q owns in resource group %q but its parent %q owns nothing there: a child's ownership must be a subset of its parent's", k, g, c.ID)
				}
				if pe.Partial && !ke.Partial {
					return nil, bad("consumer %q owns whole hosts of resource group %q but its parent %q owns only slots there", k, g, c.ID)
				}
				if pe.Partial == ke.Partial {
					sum += ke.Amount
					last = k
				}
			}
			if pe != nil && sum > pe.Amount {
				return nil, bad("consumer %q owns %d %s of resource group %q but its children (%s among them) own %d: a mid-level consumer must own at least what its children own",
					c.ID, pe.Amount, unit(pe.Partial), g, last, sum)
			}
		}
	}
	return ix, nil
}

func unit(partial bool) string {
	if partial {
		return "slots"
	}
	return "hosts"
}

// less orders siblings: rank, then ID.
func (ix *index) less(a, b string) int {
	ca, cb := ix.cons[a], ix.cons[b]
	if ca.Rank != cb.Rank {
		return ca.Rank - cb.Rank
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ancestors returns id's parent, grandparent, … (nearest first).
func (ix *index) ancestors(id string) []string {
	var out []string
	for c := ix.cons[id]; c != nil && c.Parent != ""; c = ix.cons[c.Parent] {
		out = append(out, c.Parent)
	}
	return out
}

// preference is e's effective preference: its own, else the nearest
// ancestor's in the group.
func (ix *index) preference(consumer, group string) int {
	for id := consumer; id != ""; id = ix.cons[id].Parent {
		if e := ix.entries[id][group]; e != nil && e.Preference != 0 {
			return e.Preference
		}
	}
	return 0
}

// resolve maps each up host to the one group it belongs to: a group that
// lists it explicitly wins over one matching its properties, then the
// first group by name. Hosts in no group are only ever public.
func (ix *index) resolve(hosts []Host) map[string]string {
	explicit := map[string]string{}
	for _, g := range ix.groups {
		for _, h := range ix.group[g].Hosts {
			if _, ok := explicit[h]; !ok {
				explicit[h] = g
			}
		}
	}
	out := make(map[string]string, len(hosts))
	for i := range hosts {
		h := &hosts[i]
		if h.Down {
			continue
		}
		if g, ok := explicit[h.ID]; ok {
			out[h.ID] = g
			continue
		}
		for _, g := range ix.groups {
			gr := ix.group[g]
			if len(gr.Hosts) == 0 && matches(gr.Properties, h.Properties) {
				out[h.ID] = g
				break
			}
		}
	}
	return out
}

// HostsDigest summarizes what of hosts ownership depends on: the up hosts
// in a resource group of p, with their group and slots. Two host lists
// with one digest give the same recomputation; a host going down, coming
// back, joining or leaving a group changes it, a public host does not.
func HostsDigest(p *Plan, hosts []Host) (string, error) {
	ix, err := compile(p)
	if err != nil {
		return "", err
	}
	groupOf := ix.resolve(hosts)
	lines := make([]string, 0, len(groupOf))
	for i := range hosts {
		h := &hosts[i]
		if g, ok := groupOf[h.ID]; ok {
			lines = append(lines, fmt.Sprintf("%q %q %d\n", h.ID, g, h.slots()))
		}
	}
	sort.Strings(lines)
	sum := sha256.New()
	for _, l := range lines {
		sum.Write([]byte(l))
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func matches(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Share is one consumer's part of one host.
type Share struct {
	Group string `json:"group"`
	Slots int    `json:"slots"`
}

// Ownership is who owns what: consumer ID → host ID → share. A parent's
// share of a host includes its children's shares of it.
type Ownership map[string]map[string]Share

// Clone returns a deep copy.
func (o Ownership) Clone() Ownership {
	out := make(Ownership, len(o))
	for c, hs := range o {
		out[c] = maps.Clone(hs)
	}
	return out
}

func (o Ownership) set(c, h string, s Share) {
	if s.Slots <= 0 {
		if m := o[c]; m != nil {
			delete(m, h)
			if len(m) == 0 {
				delete(o, c)
			}
		}
		return
	}
	if o[c] == nil {
		o[c] = map[string]Share{}
	}
	o[c][h] = s
}

// String renders an error-friendly summary (for tests and logs).
func (s Share) String() string { return fmt.Sprintf("%s:%d", s.Group, s.Slots) }
