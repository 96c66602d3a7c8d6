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
// of its bookings overlapping the window (with cleaning). false when no
// such window starts by w.NotAfter. Pure and deterministic.
func EarliestSlots(hosts []SlotTimeline, req SlotRequest, w SlotWindow) (time.Time, bool, error) {
	if req.Amount < 1 {
		return time.Time{}, false, fmt.Errorf("%w: amount %d", ErrInvalidRequest, req.Amount)
	}
	if req.Size.VCPUs < 0 || req.Size.MemoryMB < 0 || req.Size.DiskGB < 0 {
		return time.Time{}, false, fmt.Errorf("%w: negative size %s", ErrInvalidRequest, req.Size)
	}
	if w.Duration <= 0 {
		return time.Time{}, false, fmt.Errorf("%w: duration %s", ErrInvalidRequest, w.Duration)
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
	for _, t := range starts {
		if !w.NotAfter.IsZero() && t.After(w.NotAfter) {
			break
		}
		if slotsFit(hosts, req, t.Add(-w.Cleaning), t.Add(w.Duration+w.Cleaning)) {
			return t, true, nil
		}
	}
	return time.Time{}, false, nil
}

// slotsFit tells whether req fits on hosts over [lo, hi).
func slotsFit(hosts []SlotTimeline, req SlotRequest, lo, hi time.Time) bool {
	total, withSlot := 0, 0
	for i := range hosts {
		n := hostRoom(&hosts[i], req.Size, lo, hi)
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
// none beside a whole-host booking.
func hostRoom(h *SlotTimeline, size SlotSize, lo, hi time.Time) int {
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
			return 0
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
		top.VCPUs, top.MemoryMB, top.DiskGB = max(top.VCPUs, cur.VCPUs), max(top.MemoryMB, cur.MemoryMB), max(top.DiskGB, cur.DiskGB)
	}
	return h.Capacity.Sub(top, 1).Fits(size)
}
