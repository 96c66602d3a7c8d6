package ownership

import (
	"slices"
	"time"
)

// Part is one consumer's own part of a partly owned host: Slots of the
// host's Of slots that Owner holds and gives none of its children (Owner
// "" is the public part, the slots no top-level consumer owns). A slot
// request drawing from a part may use that fraction of the host's
// capacity in every resource (Slots/Of of its VCPU, memory, disk …),
// counted over the window against the other bookings drawn from the same
// part, besides the host's own capacity against every booking.
type Part struct {
	Host  string `json:"host"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Slots int    `json:"slots"`
	Of    int    `json:"of"`
}

// partsOf splits host h (full slots) by own into its parts: each
// consumer's share less what its children own of it, and the public rest.
func (ix *index) partsOf(own Ownership, h string, full int) []Part {
	var out []Part
	top := 0
	for _, c := range ix.plan.Consumers {
		sh, ok := own[c.ID][h]
		if !ok {
			continue
		}
		if c.Parent == "" {
			top += sh.Slots
		}
		n := sh.Slots
		for _, k := range ix.children[c.ID] {
			n -= own[k][h].Slots
		}
		if n > 0 {
			out = append(out, Part{Host: h, Owner: c.ID, Group: sh.Group, Slots: n, Of: full})
		}
	}
	if full > top {
		out = append(out, Part{Host: h, Slots: full - top, Of: full})
	}
	slices.SortFunc(out, func(a, b Part) int { return ix.posOf(a.Owner) - ix.posOf(b.Owner) })
	return out
}

// posOf is a consumer's place in the rank order; the public part ("")
// sorts last.
func (ix *index) posOf(c string) int {
	if c == "" {
		return len(ix.pos)
	}
	return ix.pos[c]
}

// PartUse is a part of a host a slot request may draw from, with the
// index of the pool (in Order.Pools) that holds it.
type PartUse struct {
	Part
	Pool int
}

// Split reports whether host h is partly owned: a slot request uses it
// only through its parts (Offer), counted against their own bookings.
func (o *Order) Split(h string) bool { _, ok := o.parts[h]; return ok }

// Offer is what host h offers a slot request at stage k (1-based: the
// first k pools): the whole host (whole, a host in one of those pools, or
// one the view does not know at the last stage), or the parts of a
// partly owned host in those pools, first pool first. A host of another
// consumer that does not lend to the requester offers nothing.
func (o *Order) Offer(k int, h string) (whole bool, parts []PartUse) {
	ps, ok := o.parts[h]
	if !ok {
		return o.Allows(k, h), nil
	}
	for _, p := range ps {
		if p.Pool < k {
			parts = append(parts, p)
		}
	}
	return false, parts
}

// PartSource is where a part comes from, as SourceOf says for a host.
func (o *Order) PartSource(p PartUse) Source { return o.sourceOfPool(p.Pool) }

// PartCharges returns the consumers whose lending limits using part p
// counts against (none unless it is borrowed): a borrowed part counts as
// one host lent.
func (o *Order) PartCharges(p PartUse) []string {
	s := o.PartSource(p)
	if s.LentBy == "" {
		return nil
	}
	return o.ix.limiters(s.LentBy, s.Consumer)
}

// PartOwner is the part a stored booking draws from, from its recorded
// pool, consumer and lender: the lender of a borrowed part, else the
// consumer of an owned or private part, else the public part ("").
func PartOwner(pool, consumer, lentBy string) string {
	switch {
	case lentBy != "":
		return lentBy
	case pool == KindPublic:
		return ""
	}
	return consumer
}

// PartGrace is a part of a partly owned host that a reclaim may take
// back for its owner: the owner and the lending grace period of the
// part's plan entry.
type PartGrace struct {
	Owner string
	Grace time.Duration
}

// LendableParts returns the partly owned hosts where o's consumer holds
// a part in its own pools, with that part's owner and lending grace
// period (eager: only the parts whose entry reclaims before less
// preferred pools, Entry.Reclaim): other projects' bookings drawn from
// such a part (lent) are its owner's to reclaim, as Lendable's hosts are.
func (o *Order) LendableParts(eager bool) map[string]PartGrace {
	out := map[string]PartGrace{}
	if o == nil || o.ix == nil {
		return out
	}
	for h, ps := range o.parts {
		for _, p := range ps {
			if o.Pools[p.Pool].Kind != KindOwned || p.Owner == "" {
				continue
			}
			e := o.ix.entries[p.Owner][p.Group]
			if e == nil || (eager && !e.Reclaim) {
				continue
			}
			out[h] = PartGrace{Owner: p.Owner, Grace: e.LendGrace}
		}
	}
	return out
}

// PartHeldOutside reports whether booking b of a partly owned host is on
// owner's part of it and held outside that part's ownership: the owner's
// to reclaim, as HeldOutside says of a whole host. b is on owner's part
// when it was drawn from it (its pool record names the part), or when it
// was drawn from no part the host still has (no record: booked before the
// plan made the part anyone's; or its recorded part is gone since a
// recomputation) and its project is below no other consumer holding a
// part of the host (such a booking may sit on that consumer's part, which
// a reclaim for owner leaves alone). It is held outside when b's
// project's consumer is neither owner nor below it (a project outside the
// tree always is). A booking drawn from another part the host still has,
// the public one included, is that part's.
func (o *Order) PartHeldOutside(b Booking, owner string) bool {
	if o == nil || o.ix == nil || owner == "" {
		return false
	}
	ps := o.hostParts[b.Host]
	has := func(c string) bool { return slices.ContainsFunc(ps, func(p Part) bool { return p.Owner == c }) }
	if !has(owner) || o.under(b.Project, owner) {
		return false
	}
	switch {
	case b.Recorded && b.Part == owner:
		return true
	case b.Recorded && has(b.Part):
		return false
	}
	for _, p := range ps {
		if p.Owner != "" && p.Owner != owner && o.under(b.Project, p.Owner) {
			return false
		}
	}
	return true
}

// under reports whether project's consumer is c or one of its
// descendants.
func (o *Order) under(project, c string) bool {
	for x := o.ix.byProject[project]; x != ""; x = o.ix.cons[x].Parent {
		if x == c {
			return true
		}
	}
	return false
}
