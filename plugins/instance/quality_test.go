package instance

import (
	"cmp"
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
// pickup_hosts): the reservations of a host "overlap" the window when
// they touch it (upstream compares start <= end and end >= start, so a
// lease ending when the window starts counts); per host, the peak use of
// those reservations over their whole lifetimes (upstream replays their
// leases' start and end events, not clipped to the window); hosts with
// such reservations first, then the others, each in id order, repeated
// once per free slot; the first `amount` entries taken. Two deviations,
// both in upstream's favour or needed for a fair count: at one instant
// ends go before starts (upstream's order of equal-time events is the
// order of its query), and a reservation with several slots on a host
// uses them all (upstream's query returns it once per host and counts
// one instance's size, so it would overbook).

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

// touches is upstream's overlap test: closed intervals.
func touches(b *simBooking, lo, hi int64) bool { return b.start <= hi && b.end >= lo }

// peakOf is the per-resource peak use of bs over [lo, hi) (clip) or over
// the whole lifetimes of the bookings touching it (upstream).
func peakOf(bs []simBooking, lo, hi int64, clip bool) allocator.SlotSize {
	type ev struct {
		t    int64
		sign int64
		b    *simBooking
	}
	var evs []ev
	for i := range bs {
		b := &bs[i]
		if clip && (b.end <= lo || b.start >= hi) || !clip && !touches(b, lo, hi) {
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

// simPlacer is how simulate places a lease: upstream's first fit, or the
// allocator with a whole-host reserve (SlotRequest.WholeReservePercent).
type simPlacer struct {
	allocator bool
	reserve   int
}

var (
	firstFit   = simPlacer{}
	allocNoRes = simPlacer{allocator: true}
	allocRes   = simPlacer{allocator: true, reserve: allocator.DefaultWholeReservePercent}
)

// simResult is what simulate accepted: leases per size (1/8, 1/4, 1/2,
// whole), and VCPU-hours over all sizes (the capacity sold).
type simResult struct {
	bySize    [4]int
	vcpuHours int64
}

// add adds o to r.
func (r *simResult) add(o simResult) {
	for i := range r.bySize {
		r.bySize[i] += o.bySize[i]
	}
	r.vcpuHours += o.vcpuHours
}

// simulate places the trace on nHosts hosts and returns what it accepted.
func simulate(trace []simLease, nHosts int, pl simPlacer) simResult {
	books := make([][]simBooking, nHosts)
	var accepted simResult
	ids := make([]string, nHosts)
	for i := range ids {
		ids[i] = fmt.Sprintf("h%03d", i)
	}
	near := make([][]simBooking, nHosts) // per host, the bookings touching the window
	for _, l := range trace {
		size := simSizes[l.size]
		for i := range books {
			near[i] = near[i][:0]
			for j := range books[i] {
				if touches(&books[i][j], l.start, l.end) {
					near[i] = append(near[i], books[i][j])
				}
			}
		}
		var got map[int]int
		if pl.allocator {
			hs := make([]allocator.SlotHost, nHosts)
			for i := range hs {
				hs[i] = allocator.SlotHost{ID: ids[i], Capacity: simNode, Free: simNode.Sub(peakOf(near[i], l.start, l.end, true), 1),
					Profile: simProfile(near[i], l.start, l.end)}
			}
			dec, err := allocator.ChooseSlots(hs, allocator.SlotRequest{Size: size, Amount: l.amount, Sizes: simSizes,
				WholeReservePercent: pl.reserve})
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
				k := simNode.Sub(peakOf(near[i], l.start, l.end, false), 1).Fits(size)
				for range k {
					if len(near[i]) > 0 {
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
		accepted.bySize[l.size]++
		accepted.vcpuHours += (l.end - l.start) * int64(l.amount) * size.VCPUs
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

// simSeeds are the traces of the quality check: the benchmark's seed
// first, then four more (one seed's difference is within the noise).
var simSeeds = []uint64{simSeed, 1, 2, 3, 4}

// byStart is the trace with leases arriving in start order (booked as
// they begin, as IMMEDIATE leases and short lead times do), instead of
// the random arrival order of simTrace.
func byStart(trace []simLease) []simLease {
	out := slices.Clone(trace)
	slices.SortStableFunc(out, func(a, b simLease) int { return cmp.Compare(a.start, b.start) })
	return out
}

// wholeFirst is the trace with its whole-host leases placed before every
// other one: what the whole-host demand gets at most.
func wholeFirst(trace []simLease) []simLease {
	out := slices.Clone(trace)
	slices.SortStableFunc(out, func(a, b simLease) int { return cmp.Compare(b.size, a.size) })
	return out
}

// simOrders are the two arrival orders: random (the trace's, a lease
// may be booked after others that start later) and start order.
var simOrders = []struct {
	name  string
	order func([]simLease) []simLease
}{
	{"random", slices.Clone[[]simLease]},
	{"startorder", byStart},
}

// TestQualityAgainstFirstFit compares the allocator with the upstream
// baseline on several seeded traces (summed), in both arrival orders,
// with the whole-host reserve at its default and off. With the reserve
// the allocator accepts at least 20 % more whole-host leases than first
// fit in both orders (the target); the price is paid by the
// smaller sizes and is logged. Without it, placement alone meets the
// target in start order only, and must not do worse than first fit in
// random order (2 % allowed for noise): there every lease that fits is
// accepted, and the whole-host leases a placement can take are those
// arriving before small ones fill their windows. The ceiling
// (whole-host leases placed first) is logged too.
func TestQualityAgainstFirstFit(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation of 3,000 leases per trace")
	}
	for _, o := range simOrders {
		var base, on, off simResult
		for _, seed := range simSeeds {
			trace := o.order(simTrace(seed, simLeases))
			b, r, n := simulate(trace, simHosts, firstFit), simulate(trace, simHosts, allocRes), simulate(trace, simHosts, allocNoRes)
			ceiling := simulate(wholeFirst(trace), simHosts, allocNoRes)
			t.Logf("%s order, seed %d, accepted by size (1/8, 1/4, 1/2, whole): first fit %v, allocator with the reserve %v, without %v; whole-host leases accepted when placed first %d",
				o.name, seed, b.bySize, r.bySize, n.bySize, ceiling.bySize[3])
			base.add(b)
			on.add(r)
			off.add(n)
		}
		for _, c := range []struct {
			name string
			r    simResult
		}{{fmt.Sprintf("reserve %d %%", allocRes.reserve), on}, {"reserve off", off}} {
			g := c.r.bySize
			t.Logf("%s order over %d traces, %s: %v to first fit's %v: whole %+.1f %%, 1/8 %+.1f %%, 1/4 %+.1f %%, 1/2 %+.1f %%, VCPU-hours %+.1f %%",
				o.name, len(simSeeds), c.name, g, base.bySize, gain(g[3], base.bySize[3]), gain(g[0], base.bySize[0]), gain(g[1], base.bySize[1]), gain(g[2], base.bySize[2]),
				gain64(c.r.vcpuHours, base.vcpuHours))
		}
		if g := gain(on.bySize[3], base.bySize[3]); g < 20 {
			t.Errorf("%s order, reserve %d %%: allocator %d whole-host leases, first fit %d: %+.1f %%, want >= +20 %%", o.name, allocRes.reserve, on.bySize[3], base.bySize[3], g)
		}
		switch g := gain(off.bySize[3], base.bySize[3]); {
		case o.name == "startorder" && g < 20:
			t.Errorf("start order, no reserve: allocator %d whole-host leases, first fit %d: %+.1f %%, want >= +20 %%", off.bySize[3], base.bySize[3], g)
		case g < -2:
			t.Errorf("%s order, no reserve: allocator %d whole-host leases, first fit %d: %+.1f %%", o.name, off.bySize[3], base.bySize[3], g)
		}
	}
}

// gain is a's percentage over b.
func gain(a, b int) float64 { return gain64(int64(a), int64(b)) }

func gain64(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * (float64(a)/float64(b) - 1)
}

// BenchmarkQuality reports, on the benchmark's seeded trace in both
// arrival orders, the leases accepted per size by first fit and by the
// allocator with the whole-host reserve at its default ("alloc") and off
// ("alloc0"), each size's gain over first fit ("%gain-…": the whole size
// is the target, the smaller ones what the reserve costs them), and the
// gain in VCPU-hours accepted over all sizes ("%vcpuh-gain-…").
func BenchmarkQuality(b *testing.B) {
	names := []string{"eighth", "quarter", "half", "whole"}
	type result struct{ base, on, off simResult }
	res := make([]result, len(simOrders))
	traces := make([][]simLease, len(simOrders))
	for i, o := range simOrders {
		traces[i] = o.order(simTrace(simSeed, simLeases))
	}
	for b.Loop() {
		for i, tr := range traces {
			res[i] = result{simulate(tr, simHosts, firstFit), simulate(tr, simHosts, allocRes), simulate(tr, simHosts, allocNoRes)}
		}
	}
	for i, o := range simOrders {
		r := res[i]
		for k, n := range names {
			suffix := n + "-" + o.name
			b.ReportMetric(float64(r.base.bySize[k]), "firstfit-"+suffix)
			b.ReportMetric(float64(r.on.bySize[k]), "alloc-"+suffix)
			b.ReportMetric(float64(r.off.bySize[k]), "alloc0-"+suffix)
			b.ReportMetric(gain(r.on.bySize[k], r.base.bySize[k]), "%gain-"+suffix)
			b.ReportMetric(gain(r.off.bySize[k], r.base.bySize[k]), "%gain0-"+suffix)
		}
		b.ReportMetric(gain64(r.on.vcpuHours, r.base.vcpuHours), "%vcpuh-gain-"+o.name)
		b.ReportMetric(gain64(r.off.vcpuHours, r.base.vcpuHours), "%vcpuh-gain0-"+o.name)
	}
}
