package allocator

import (
	"fmt"
	"slices"
	"time"
)

// The earliest window for instance slots: the start of the first window
// of a given length in which a virtual:instance request fits, the way
// EarliestWindow answers it for whole hosts.
//
// Why only a few starts need checking: moving a window later, a booking
// leaves it on the left only at its end (plus cleaning) and every other
// change adds use. So if t is the earliest start that fits, the last of
// After and those end times at or before t fits as well (the use at every
// instant of its window is at most the use at t), hence is t. The search
// checks After and each such end time in order.
//
// With the whole-host reserve (SlotRequest.WholeReservePercent) that holds
// while at least the reserve's number of hosts stays whole-free; past it,
// more use can let a request in (a host taken into use is no longer kept
// closed), so a window that fits only because a booking starting inside it
// uses a host that was whole-free is not found: the search offers the
// earliest of After and the end times that fits, which create accepts (it
// counts the same way), and may miss such a window.

// SlotBooking is one booking on a host's timeline: Slots instances of
// Size over [Start, End), or, with Whole, a whole-host reservation (no
// slot fits beside it).
type SlotBooking struct {
	Start, End time.Time
	Size       SlotSize
	Slots      int64
	Whole      bool
}

// SlotTimeline is a matching host as EarliestSlots sees it: its usable
// capacity and its bookings, in any order.
type SlotTimeline struct {
	ID       string
	Capacity SlotSize
	Bookings []SlotBooking
}

// SlotWindow asks for the earliest start in [After, NotAfter] (NotAfter
// zero: no limit) of a window of length Duration, with Cleaning kept free
// on both sides as for the slots themselves.
type SlotWindow struct {
	After, NotAfter    time.Time
	Duration, Cleaning time.Duration
}

// EarliestSlots returns the earliest start of a window w.Duration long in
// which req (Size, Amount and Affinity; held slots and policy sizes play
// no part) fits on hosts: some host with room for all of them (affinity
// true), that many hosts with room for one (false), or that much room in
// all (nil), room being each host's capacity minus the per-resource peak
// of its bookings overlapping the window (with cleaning), the whole-host
// reserve (req.WholeReservePercent of req.MatchingHosts, 0: len(hosts))
// counted as ChooseSlots counts it. false when no such window starts by w.NotAfter. Pure and
// deterministic.
func EarliestSlots(hosts []SlotTimeline, req SlotRequest, w SlotWindow) (time.Time, bool, error) {
	if req.Amount < 1 {
		return time.Time{}, false, fmt.Errorf("%w: amount %d", ErrInvalidRequest, req.Amount)
	}
	if req.Size.negative() {
		return time.Time{}, false, fmt.Errorf("%w: negative size %s", ErrInvalidRequest, req.Size.Format(req.CustomNames))
	}
	if w.Duration <= 0 {
		return time.Time{}, false, fmt.Errorf("%w: duration %s", ErrInvalidRequest, w.Duration)
	}
	if req.WholeReservePercent < 0 || req.WholeReservePercent > 100 {
		return time.Time{}, false, fmt.Errorf("%w: whole-host reserve percent %d is not within 0..100", ErrInvalidRequest, req.WholeReservePercent)
	}
	// Past every booking the hosts are empty: a request that does not fit
	// them empty never fits (and the sweep need not run). Without the
	// reserve, that is: the reserve only takes room away, but it can let
	// in use what it keeps closed when empty.
	empty := make([]SlotTimeline, len(hosts))
	for i, h := range hosts {
		empty[i] = SlotTimeline{ID: h.ID, Capacity: h.Capacity}
	}
	open := req
	open.WholeReservePercent = 0
	if !slotsFit(empty, open, w.After, w.After.Add(w.Duration)) {
		return time.Time{}, false, nil
	}
	starts := []time.Time{w.After}
	for _, h := range hosts {
		for _, b := range h.Bookings {
			if t := b.End.Add(w.Cleaning); t.After(w.After) && b.End.After(b.Start) {
				starts = append(starts, t)
			}
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	starts = slices.CompactFunc(starts, func(a, b time.Time) bool { return a.Equal(b) })
	sw := newSlotSweep(hosts, req)
	for _, t := range starts {
		if !w.NotAfter.IsZero() && t.After(w.NotAfter) {
			break
		}
		if sw.fitsAt(t.Add(-w.Cleaning), t.Add(w.Duration+w.Cleaning)) {
			return t, true, nil
		}
	}
	return time.Time{}, false, nil
}

// slotSweep keeps, for windows moving later, each host's room (hostRoom
// over the bookings overlapping the window) and the counts the affinity
// rules read, recomputing only the hosts whose bookings in the window
// changed: every booking enters and leaves the window once.
//
// With the whole-host reserve (slots_reserve.go), a closable host (the
// request not exempt on it) counts apart while it is whole-free: the
// request may open at most (whole-free hosts − keep) of those, the
// roomiest, as ChooseSlots does.
type slotSweep struct {
	hosts  []SlotTimeline
	req    SlotRequest
	byHost []int // booking's host, by index in all
	all    []*SlotBooking
	starts []int // indexes into all, by start
	ends   []int // indexes into all, by end
	si, ei int
	active []bool
	inWin  [][]SlotBooking // per host, the bookings in the window
	room   []int
	free   []bool // whole-free in the window
	// sum is the sum of the rooms, each capped at the amount; one the
	// hosts with room for a slot; whole those with room for them all
	// (closed hosts left out).
	sum, one, whole int
	dirty           []int
	isDirty         []bool

	// The reserve: keep whole-free hosts kept whole (0: off); closable
	// per host; nFree the whole-free hosts; cOne and cWhole as one and
	// whole over the closed hosts, cRooms[k] how many closed hosts have
	// room (capped at the amount) rooms[k], rooms descending.
	keep         int
	closable     []bool
	roomRank     []int
	rooms        []int
	cRooms       []int
	nFree        int
	cOne, cWhole int
}

func newSlotSweep(hosts []SlotTimeline, req SlotRequest) *slotSweep {
	sw := &slotSweep{hosts: hosts, req: req, inWin: make([][]SlotBooking, len(hosts)), room: make([]int, len(hosts)),
		free: make([]bool, len(hosts)), isDirty: make([]bool, len(hosts))}
	matching := req.MatchingHosts
	if matching <= 0 {
		matching = len(hosts)
	}
	sw.keep = reserveCount(matching, req.WholeReservePercent)
	if sw.keep > 0 {
		sw.closable = make([]bool, len(hosts))
		sw.roomRank = make([]int, len(hosts))
		for i := range hosts {
			sw.closable[i] = !slotExempt(hosts[i].Capacity, req)
			sw.rooms = append(sw.rooms, min(hosts[i].Capacity.Fits(req.Size), req.Amount))
		}
		slices.SortFunc(sw.rooms, func(a, b int) int { return b - a })
		sw.rooms = slices.Compact(sw.rooms)
		sw.cRooms = make([]int, len(sw.rooms))
		for i := range hosts {
			sw.roomRank[i] = slices.Index(sw.rooms, min(hosts[i].Capacity.Fits(req.Size), req.Amount))
		}
	}
	for i := range hosts {
		for j := range hosts[i].Bookings {
			if b := &hosts[i].Bookings[j]; b.End.After(b.Start) {
				sw.all = append(sw.all, b)
				sw.byHost = append(sw.byHost, i)
			}
		}
		sw.room[i], sw.free[i] = hostRoom(&SlotTimeline{Capacity: hosts[i].Capacity}, req.Size, time.Time{}, time.Time{})
		sw.count(i, 1)
	}
	sw.active = make([]bool, len(sw.all))
	sw.starts = make([]int, len(sw.all))
	for i := range sw.starts {
		sw.starts[i] = i
	}
	sw.ends = slices.Clone(sw.starts)
	slices.SortStableFunc(sw.starts, func(a, b int) int { return sw.all[a].Start.Compare(sw.all[b].Start) })
	slices.SortStableFunc(sw.ends, func(a, b int) int { return sw.all[a].End.Compare(sw.all[b].End) })
	return sw
}

// count adds (sign 1) or takes away (-1) host i's room from the counts.
func (sw *slotSweep) count(i, sign int) {
	n := sw.room[i]
	if sw.free[i] {
		sw.nFree += sign
	}
	if sw.keep > 0 && sw.free[i] && sw.closable[i] {
		sw.cRooms[sw.roomRank[i]] += sign
		if n >= 1 {
			sw.cOne += sign
		}
		if n >= sw.req.Amount {
			sw.cWhole += sign
		}
		return
	}
	sw.sum += sign * min(n, sw.req.Amount)
	if n >= 1 {
		sw.one += sign
	}
	if n >= sw.req.Amount {
		sw.whole += sign
	}
}

func (sw *slotSweep) touch(i int) {
	if !sw.isDirty[i] {
		sw.isDirty[i] = true
		sw.dirty = append(sw.dirty, i)
	}
}

// fitsAt moves the window to [lo, hi) (never earlier than the last one)
// and tells whether the request fits.
func (sw *slotSweep) fitsAt(lo, hi time.Time) bool {
	for ; sw.ei < len(sw.ends) && !sw.all[sw.ends[sw.ei]].End.After(lo); sw.ei++ {
		k := sw.ends[sw.ei]
		if !sw.active[k] {
			continue
		}
		sw.active[k] = false
		h := sw.byHost[k]
		bs := sw.inWin[h]
		for j := range bs {
			if bs[j] == *sw.all[k] {
				bs[j] = bs[len(bs)-1]
				sw.inWin[h] = bs[:len(bs)-1]
				break
			}
		}
		sw.touch(h)
	}
	for ; sw.si < len(sw.starts) && sw.all[sw.starts[sw.si]].Start.Before(hi); sw.si++ {
		k := sw.starts[sw.si]
		if !sw.all[k].End.After(lo) {
			continue // over before the window: never in it
		}
		sw.active[k] = true
		h := sw.byHost[k]
		sw.inWin[h] = append(sw.inWin[h], *sw.all[k])
		sw.touch(h)
	}
	for _, h := range sw.dirty {
		sw.isDirty[h] = false
		sw.count(h, -1)
		sw.room[h], sw.free[h] = hostRoom(&SlotTimeline{Capacity: sw.hosts[h].Capacity, Bookings: sw.inWin[h]}, sw.req.Size, lo, hi)
		sw.count(h, 1)
	}
	sw.dirty = sw.dirty[:0]
	// open is how many closed hosts the request may open.
	open := 0
	if sw.keep > 0 {
		open = max(0, sw.nFree-sw.keep)
	}
	switch {
	case sw.req.Affinity != nil && *sw.req.Affinity:
		return sw.whole >= 1 || open >= 1 && sw.cWhole >= 1
	case sw.req.Affinity != nil:
		return sw.one+min(open, sw.cOne) >= sw.req.Amount
	}
	sum := sw.sum
	for k := 0; k < len(sw.rooms) && open > 0 && sum < sw.req.Amount; k++ {
		n := min(open, sw.cRooms[k])
		sum += n * sw.rooms[k]
		open -= n
	}
	return sum >= sw.req.Amount
}

// slotsFit tells whether req fits on hosts over [lo, hi).
func slotsFit(hosts []SlotTimeline, req SlotRequest, lo, hi time.Time) bool {
	total, withSlot := 0, 0
	for i := range hosts {
		n, _ := hostRoom(&hosts[i], req.Size, lo, hi)
		switch {
		case req.Affinity != nil && *req.Affinity:
			if n >= req.Amount {
				return true
			}
		case req.Affinity != nil:
			if n > 0 {
				withSlot++
			}
			if withSlot >= req.Amount {
				return true
			}
		default:
			total += n
			if total >= req.Amount {
				return true
			}
		}
	}
	return false
}

// hostRoom is how many instances of size fit on h over [lo, hi): its
// capacity minus the per-resource peak of the bookings overlapping it,
// none beside a whole-host booking; and whether h is whole-free there
// (no use at all, as ChooseSlots' Free == Capacity).
func hostRoom(h *SlotTimeline, size SlotSize, lo, hi time.Time) (int, bool) {
	type ev struct {
		t    time.Time
		sign int64
		b    *SlotBooking
	}
	var evs []ev
	for i := range h.Bookings {
		b := &h.Bookings[i]
		if !b.Start.Before(hi) || !b.End.After(lo) || !b.End.After(b.Start) {
			continue
		}
		if b.Whole {
			return 0, false
		}
		evs = append(evs, ev{b.Start, 1, b}, ev{b.End, -1, b})
	}
	// Half-open bookings: at one instant, ends go before starts.
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return int(a.sign - b.sign)
	})
	var cur, top SlotSize
	for _, e := range evs {
		cur = cur.Sub(e.b.Size, -e.sign*e.b.Slots)
		top = top.Max(cur)
	}
	return h.Capacity.Sub(top, 1).Fits(size), top == SlotSize{}
}
