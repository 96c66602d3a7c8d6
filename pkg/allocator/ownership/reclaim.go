package ownership

import (
	"math"
	"sort"
	"time"
)

// Booking is a lease's booking of an owned host over [Start, End), as a
// reclaim sees it.
type Booking struct {
	Host        string
	Lease       string
	Reservation string
	// Project is the lease's project.
	Project    string
	Start, End time.Time
	// Borrowed is set when the lease borrowed the host (it was lent).
	Borrowed bool
	// Fixed is set when the lease cannot be shortened by a reclaim (its
	// status, or resources a reclaim does not shorten).
	Fixed bool
	// Stays is set when the booking cannot move to another host (an
	// instance reservation's slots): a reclaim may cut it, but a host
	// whose reclaim would have to move it is not a candidate.
	Stays bool
	// Part is the part of a partly owned host the booking draws from
	// (PartOwner of its pool record; "" without one, or the public part).
	Part string
	// Recorded is set when the booking has a pool record (Part says
	// which part it draws from).
	Recorded bool
	// Claim is, for a booking of a partly owned host, the owner of the
	// part a reclaim takes it back for (Order.PartHeldOutside).
	Claim string
}

// Candidate is an owned host a reclaim frees over the owner's window:
// its borrowed bookings that started before At are cut to At, and those
// starting later (not begun: no grace period to give) must move to other
// free hosts.
type Candidate struct {
	Host  string
	At    time.Time
	Grace time.Duration
	Cuts  []Booking
	Moves []Booking
}

// Reclaimable returns the owned hosts an owner's request over [start,
// end), asked at now, may reclaim from their borrowers, best first:
// by rank (the seed's "reclaimed by rank": the host whose borrowers rank
// lowest goes first; a host whose loans all move cuts nobody and goes
// before any; rank says where a project stands in the tree's rank order,
// larger is lower, nil ranks every project alike), then the fewest
// bookings cut, then the least booked time taken back, then by host: a
// host in grace (the owned hosts its owner lends, with the
// lending grace period) whose bookings overlapping the window (cleaning
// included) are all borrowed and not fixed. Those that start before the
// reclaim time At = start - cleaning are cut to end at At, when At leaves
// each borrower at least the grace period from now (and At is after
// now), and so are those that have begun by now; those that start at
// At or later, after now, are to move (Moves), which the caller may or
// may not find room for; a host with such a booking that cannot move
// (Stays) is no candidate. Nothing is taken from a borrower before the grace period is
// over.
//
// later is the earliest start from which the hosts refused only for the
// grace period could be reclaimed (zero when there are none).
func Reclaimable(now, start, end time.Time, cleaning time.Duration, grace map[string]time.Duration, bookings []Booking, rank func(project string) int) (cands []Candidate, later time.Time) {
	at := start.Add(-cleaning)
	lo, hi := at, end.Add(cleaning)
	byHost := map[string][]Booking{}
	for _, b := range bookings {
		if _, ok := grace[b.Host]; !ok || !b.Start.Before(hi) || !b.End.After(lo) {
			continue
		}
		byHost[b.Host] = append(byHost[b.Host], b)
	}
	lost := map[string]time.Duration{}
	// top is the rank of a host's highest-ranked borrower cut (MaxInt:
	// nobody is cut).
	top := map[string]int{}
	for h, bs := range byHost {
		ok := true
		var cuts, moves []Booking
		for _, b := range bs {
			if !b.Borrowed || b.Fixed {
				ok = false
				break
			}
			// A loan that has begun by now runs: it is cut, never moved,
			// even when the owner's window starts as early as it did.
			switch {
			case b.Start.Before(at) || !b.Start.After(now):
				cuts = append(cuts, b)
			case b.Stays:
				ok = false
			default:
				moves = append(moves, b)
			}
			if !ok {
				break
			}
		}
		if !ok {
			continue
		}
		g := grace[h]
		// A cut ends the borrower's lease by its end event, which must
		// come after now: the owner's lease starts after it (the event
		// manager's order hands the host over).
		if len(cuts) > 0 && (at.Before(now.Add(g)) || !at.After(now)) {
			if t := now.Add(max(g, time.Minute) + cleaning); later.IsZero() || t.Before(later) {
				later = t
			}
			continue
		}
		c := Candidate{Host: h, At: at, Grace: g, Cuts: cuts, Moves: moves}
		top[h] = math.MaxInt
		for _, b := range cuts {
			lost[h] += b.End.Sub(at)
			if rank != nil {
				top[h] = min(top[h], rank(b.Project))
			} else {
				top[h] = 0
			}
		}
		sort.Slice(c.Cuts, func(a, b int) bool { return c.Cuts[a].Start.Before(c.Cuts[b].Start) })
		sort.Slice(c.Moves, func(a, b int) bool { return c.Moves[a].Start.Before(c.Moves[b].Start) })
		cands = append(cands, c)
	}
	// The lowest-ranked borrowers first (a host whose loans can all move
	// elsewhere takes nothing from anyone), then the fewest cuts, then the
	// least time taken back.
	sort.Slice(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if top[x.Host] != top[y.Host] {
			return top[x.Host] > top[y.Host]
		}
		if len(x.Cuts) != len(y.Cuts) {
			return len(x.Cuts) < len(y.Cuts)
		}
		if lost[x.Host] != lost[y.Host] {
			return lost[x.Host] < lost[y.Host]
		}
		return x.Host < y.Host
	})
	return cands, later
}

// Lendable returns the hosts of o's consumer's own pools, with the
// lending grace period of each host's group: what a reclaim may take
// back for it. Other projects hold such a host either because it was
// lent, or because they booked it before it became the consumer's (a
// busy host handed over by a recomputation, the seed's step 4, whose
// workload is rebalanced under the lending grace period whether or not
// the entry lends). With eager, only the groups whose plan entry asks to
// reclaim even while less preferred capacity is idle (Entry.Reclaim).
func (o *Order) Lendable(eager bool) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range o.Pools {
		if p.Kind != KindOwned || o.ix == nil {
			continue
		}
		e := o.ix.entries[p.Owner][p.Group]
		if e == nil || (eager && !e.Reclaim) {
			continue
		}
		for _, h := range p.Hosts {
			out[h] = e.LendGrace
		}
	}
	return out
}

// HeldOutside reports whether a booking of host by project is held
// outside the ownership it sits in: the host is in one of o's consumer's
// own pools and project's consumer is neither that pool's owner nor one
// of its descendants (a project outside the tree always is). Such a
// booking is the owner's to reclaim, like a loan.
func (o *Order) HeldOutside(host, project string) bool {
	if o == nil || o.ix == nil {
		return false
	}
	i, ok := o.poolOf[host]
	if !ok || o.Pools[i].Kind != KindOwned {
		return false
	}
	return !o.under(project, o.Pools[i].Owner)
}

// OwnedStages is how many of o's pools, from the first, are the
// consumer's own.
func (o *Order) OwnedStages() int {
	n := 0
	for _, p := range o.Pools {
		if p.Kind != KindOwned {
			break
		}
		n++
	}
	return n
}

// RankOf returns where the consumer standing for project is in the
// tree's rank order (0 is served first); a project outside the tree ranks
// below every consumer (math.MaxInt - 1: still above "nobody").
func (o *Order) RankOf(project string) int {
	if o != nil && o.ix != nil {
		if c, ok := o.ix.byProject[project]; ok {
			return o.ix.pos[c]
		}
	}
	return math.MaxInt - 1
}

// ReclaimableSlots is Reclaimable for an owner's instance request, which
// takes slots beside what is already on the host: the bookings of the
// owner's own subtree (not borrowed) stay and share the host with it, so
// only borrowed bookings decide whether a host is a candidate; and a
// reclaim for slots cuts, never moves (the host the request needs is the
// one the loan is on), so a host with a loan beginning at the reclaim
// time or later is no candidate.
func ReclaimableSlots(now, start, end time.Time, cleaning time.Duration, grace map[string]time.Duration, bookings []Booking, rank func(project string) int) ([]Candidate, time.Time) {
	loans := make([]Booking, 0, len(bookings))
	for _, b := range bookings {
		if !b.Borrowed {
			continue
		}
		b.Stays = true
		loans = append(loans, b)
	}
	return Reclaimable(now, start, end, cleaning, grace, loans, rank)
}
