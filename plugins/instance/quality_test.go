package instance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// The quality benchmark: a seeded trace of instance leases over 100
// identical hosts, sizes 1/8, 1/4, 1/2 and a whole host, random windows,
// placed in arrival order either by the allocator (ChooseSlots with the
// four sizes as policy) or by a first-fit baseline that does what
// upstream Blazar's instance plugin does (query_available_hosts +
// pickup_hosts): per host, the peak use of the overlapping reservations
// over their whole lifetimes (not clipped to the window), hosts already
// holding reservations first, then free ones, each in id order, repeated
// once per free slot, and the first `amount` entries taken.

var (
	simNode  = allocator.SlotSize{VCPUs: 32, MemoryMB: 131072, DiskGB: 2000}
	simSizes = []allocator.SlotSize{
		{VCPUs: 4, MemoryMB: 16384, DiskGB: 250},   // 1/8
		{VCPUs: 8, MemoryMB: 32768, DiskGB: 500},   // 1/4
		{VCPUs: 16, MemoryMB: 65536, DiskGB: 1000}, // 1/2
		simNode, // whole host
	}
)

type simLease struct {
	start, end int64 // hours
	size       int   // index in simSizes
	amount     int
}

type simBooking struct {
	start, end int64
	size       allocator.SlotSize
	slots      int64
}

// simTrace is the seeded trace: n leases over a 60-day horizon.
func simTrace(seed uint64, n int) []simLease {
	r := rand.New(rand.NewPCG(seed, 0x1ea5e401d))
	out := make([]simLease, n)
	for i := range out {
		start := r.Int64N(60 * 24)
		size := 0
		switch x := r.IntN(100); {
		case x < 40:
			size = 0
		case x < 70:
			size = 1
		case x < 90:
			size = 2
		default:
			size = 3
		}
		out[i] = simLease{start: start, end: start + 1 + r.Int64N(7*24), size: size, amount: 1 + r.IntN(4)}
	}
	return out
}

// peakOf is the per-resource peak use of bs over [lo, hi) (clip) or over
// the whole lifetimes of the bookings overlapping it (upstream).
func peakOf(bs []simBooking, lo, hi int64, clip bool) allocator.SlotSize {
	type ev struct {
		t    int64
		sign int64
		b    *simBooking
	}
	var evs []ev
	for i := range bs {
		b := &bs[i]
		if b.end <= lo || b.start >= hi {
			continue
		}
		s, e := b.start, b.end
		if clip {
			s, e = max(s, lo), min(e, hi)
		}
		evs = append(evs, ev{s, 1, b}, ev{e, -1, b})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		return int(a.sign - b.sign)
	})
	var cur, top allocator.SlotSize
	for _, e := range evs {
		cur = cur.Sub(e.b.size, -e.sign*e.b.slots)
		top.VCPUs, top.MemoryMB, top.DiskGB = max(top.VCPUs, cur.VCPUs), max(top.MemoryMB, cur.MemoryMB), max(top.DiskGB, cur.DiskGB)
	}
	return top
}

// simProfile is a host's free capacity over [lo, hi), piece by piece.
func simProfile(bs []simBooking, lo, hi int64) []allocator.SlotSegment {
	cuts := []int64{lo, hi}
	for _, b := range bs {
		if b.end > lo && b.start < hi {
			cuts = append(cuts, max(b.start, lo), min(b.end, hi))
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []allocator.SlotSegment
	for i := 0; i+1 < len(cuts); i++ {
		s, e := cuts[i], cuts[i+1]
		free := simNode
		for _, b := range bs {
			if b.start <= s && b.end >= e {
				free = free.Sub(b.size, b.slots)
			}
		}
		out = append(out, allocator.SlotSegment{Dur: e - s, Free: free})
	}
	return out
}

// simulate places the trace on nHosts hosts and returns the accepted
// leases per size.
func simulate(trace []simLease, nHosts int, useAllocator bool) [4]int {
	books := make([][]simBooking, nHosts)
	var accepted [4]int
	ids := make([]string, nHosts)
	for i := range ids {
		ids[i] = fmt.Sprintf("h%03d", i)
	}
	for _, l := range trace {
		size := simSizes[l.size]
		var got map[int]int
		if useAllocator {
			hs := make([]allocator.SlotHost, nHosts)
			for i := range hs {
				hs[i] = allocator.SlotHost{ID: ids[i], Capacity: simNode, Free: simNode.Sub(peakOf(books[i], l.start, l.end, true), 1),
					Profile: simProfile(books[i], l.start, l.end)}
			}
			dec, err := allocator.ChooseSlots(hs, allocator.SlotRequest{Size: size, Amount: l.amount, Sizes: simSizes})
			if err == nil {
				got = map[int]int{}
				for i, id := range ids {
					if n := dec.Slots[id]; n > 0 {
						got[i] = n
					}
				}
			}
		} else {
			var reserved, free []int // one entry per slot
			for i := range nHosts {
				k := simNode.Sub(peakOf(books[i], l.start, l.end, false), 1).Fits(size)
				used := false
				for _, b := range books[i] {
					if b.end > l.start && b.start < l.end {
						used = true
						break
					}
				}
				for range k {
					if used {
						reserved = append(reserved, i)
					} else {
						free = append(free, i)
					}
				}
			}
			cands := append(reserved, free...)
			if len(cands) >= l.amount {
				got = map[int]int{}
				for _, i := range cands[:l.amount] {
					got[i]++
				}
			}
		}
		if got == nil {
			continue
		}
		accepted[l.size]++
		for i, n := range got {
			books[i] = append(books[i], simBooking{start: l.start, end: l.end, size: size, slots: int64(n)})
		}
	}
	return accepted
}

const (
	simSeed   = 20261125
	simLeases = 3000
	simHosts  = 100
)

// TestQualityAgainstFirstFit: on the seeded trace the allocator accepts
// at least as many whole-host-sized leases as the upstream baseline. (The
// issue's target, 20 % more, is not reached on this trace: with sizes that
// divide each other on identical hosts, upstream's "hosts already in use
// first" is itself close to best fit; the numbers are logged and reported
// by BenchmarkQuality.)
func TestQualityAgainstFirstFit(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation of 3,000 leases")
	}
	trace := simTrace(simSeed, simLeases)
	ours := simulate(trace, simHosts, true)
	base := simulate(trace, simHosts, false)
	t.Logf("accepted by size (1/8, 1/4, 1/2, whole): allocator %v, upstream first-fit %v", ours, base)
	// What the trace's whole-host demand could get at most: those leases
	// placed before every other one. The gap to it is small leases taking
	// capacity first (which both placements must accept), not packing.
	var whole, rest []simLease
	for _, l := range trace {
		if l.size == 3 {
			whole = append(whole, l)
		} else {
			rest = append(rest, l)
		}
	}
	first := simulate(append(whole, rest...), simHosts, true)
	t.Logf("whole-host leases in the trace: %d; accepted when placed first: %d", len(whole), first[3])
	if ours[3] < base[3] {
		t.Errorf("whole-host leases: allocator %d, baseline %d", ours[3], base[3])
	}
}

// BenchmarkQuality reports the accepted leases of both placements on the
// seeded trace (per size, and the largest size's gain).
func BenchmarkQuality(b *testing.B) {
	trace := simTrace(simSeed, simLeases)
	var ours, base [4]int
	for b.Loop() {
		ours = simulate(trace, simHosts, true)
		base = simulate(trace, simHosts, false)
	}
	names := []string{"eighth", "quarter", "half", "whole"}
	for i, n := range names {
		b.ReportMetric(float64(ours[i]), "alloc-"+n)
		b.ReportMetric(float64(base[i]), "firstfit-"+n)
	}
	if base[3] > 0 {
		b.ReportMetric(100*(float64(ours[3])/float64(base[3])-1), "%whole-gain")
	}
}
