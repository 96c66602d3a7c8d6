package allocator

import (
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// EarliestRequest asks when Min hosts are first free together for
// Duration.
type EarliestRequest struct {
	// After is the earliest start allowed.
	After time.Time
	// NotAfter, when not zero, is the latest start allowed.
	NotAfter time.Time
	// Duration is the window's length.
	Duration time.Duration
	// Cleaning is kept free before and after the window, as in
	// HostRequest.
	Cleaning time.Duration
	// Min is the number of hosts that must be free together (at least 1).
	Min int
	// Match evaluates the caller's property requirements; nil matches all
	// hosts.
	Match func(*Host) (ok bool, reason string)
	// ReservePercent is HostRequest.ReservePercent (with the size ranks
	// of PreparedHosts): a window counts the free bigger hosts beyond the
	// reserve only, so that the choice over the window found takes it.
	ReservePercent int
}

// EarliestResult is the earliest window found.
type EarliestResult struct {
	// Window is [start, start+Duration).
	Window Interval
	// Found is false when no window starts by NotAfter, or fewer than Min
	// hosts match.
	Found bool
	// Matching is the number of hosts that match the properties.
	Matching int
}

// EarliestWindow finds the earliest start t >= After (and <= NotAfter when
// set) such that at least Min matching hosts have no reservation
// overlapping [t-Cleaning, t+Duration+Cleaning). Pure and deterministic.
//
// It sweeps the allocation timeline instead of trying start times: each
// free gap of a host gives a closed interval of feasible starts, [end of
// the reservation before + Cleaning, start of the one after − Duration −
// Cleaning]; the gaps of every host are merged in order of their first
// feasible start (a heap holding one gap per host), and a second heap
// holds the last feasible starts of the gaps open at the current time.
// The first start at which Min gaps are open is the answer. Only the
// gaps up to the answer are visited, each host's first one found by binary
// search over prepared bounds: O((H + G) log H) for H matching hosts and G
// gaps visited.
func EarliestWindow(p PreparedHosts, req EarliestRequest) (EarliestResult, error) {
	var res EarliestResult
	if req.Duration <= 0 {
		return res, fmt.Errorf("%w: duration %s is not positive", ErrInvalidRequest, req.Duration)
	}
	if req.Min < 1 {
		return res, fmt.Errorf("%w: need at least one host, got min %d", ErrInvalidRequest, req.Min)
	}
	if req.Cleaning < 0 {
		return res, fmt.Errorf("%w: negative cleaning time %s", ErrInvalidRequest, req.Cleaning)
	}
	if req.ReservePercent < 0 || req.ReservePercent > 100 {
		return res, fmt.Errorf("%w: reserve percent %d is not within 0..100", ErrInvalidRequest, req.ReservePercent)
	}
	after := req.After.UnixNano()
	notAfter := int64(maxTime)
	if !req.NotAfter.IsZero() {
		notAfter = req.NotAfter.UnixNano()
	}
	d, c := int64(req.Duration), int64(req.Cleaning)
	cursors := make([]gapCursor, 0, len(p.Hosts))
	var matched []int32 // the matching hosts' size ranks
	if req.ReservePercent > 0 {
		if p.Ranks == nil {
			p.Ranks = SizeRanks(p.Hosts)
		}
		matched = make([]int32, 0, len(p.Hosts))
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if req.Match != nil {
			if ok, _ := req.Match(h); !ok {
				continue
			}
		}
		res.Matching++
		var b []int64
		if p.sorted(i) {
			b = p.Bounds[i]
		} else {
			b = mergedBounds(h.Busy)
		}
		g := gapCursor{b: b, d: d, c: c, after: after, rank: p.rank(i)}
		g.seek()
		if g.next() {
			cursors = append(cursors, g)
		}
		if matched != nil {
			matched = append(matched, p.rank(i))
		}
	}
	// The reserve: of the matching hosts above the best size rank,
	// reserve must stay free (HostRequest.ReservePercent); their open
	// gaps are counted apart and only beyond it.
	best, reserve := int32(0), 0
	if req.ReservePercent > 0 && len(matched) > 0 {
		best = slices.Min(matched)
		bigger := 0
		for _, r := range matched {
			if r > best {
				bigger++
			}
		}
		reserve = reserveCount(bigger, req.ReservePercent)
	}
	if res.Matching-reserve < req.Min {
		return res, nil
	}
	starts := startHeap(cursors)
	heap.Init(&starts)
	var ends, biggerEnds endHeap
	for starts.Len() > 0 {
		g := &starts[0]
		t := g.lo
		if t > notAfter {
			break
		}
		for ends.Len() > 0 && ends[0] < t {
			heap.Pop(&ends)
		}
		for biggerEnds.Len() > 0 && biggerEnds[0] < t {
			heap.Pop(&biggerEnds)
		}
		if g.rank > best {
			heap.Push(&biggerEnds, g.hi)
		} else {
			heap.Push(&ends, g.hi)
		}
		if ends.Len()+max(0, biggerEnds.Len()-reserve) >= req.Min {
			start := time.Unix(0, t).UTC()
			res.Window = Interval{Start: start, End: start.Add(req.Duration)}
			res.Found = true
			return res, nil
		}
		if g.next() {
			heap.Fix(&starts, 0)
		} else {
			heap.Pop(&starts)
		}
	}
	return res, nil
}

const (
	minTime = -1 << 63
	maxTime = 1<<63 - 1
)

// gapCursor walks one host's free gaps in time order: b holds its
// reservations' bounds (sorted, disjoint, non-empty: [2k] start, [2k+1]
// end), k the gap after reservation k-1 (gap 0 is before the first).
type gapCursor struct {
	b      []int64
	k      int
	d, c   int64
	after  int64
	lo, hi int64 // the current gap's feasible starts, [lo, hi]
	rank   int32 // the host's size rank
}

// seek moves k to the first gap whose feasible starts can reach after:
// the first gap whose next reservation starts at or after after+d+c (the
// starts are sorted, so a binary search finds it).
func (g *gapCursor) seek() {
	n := len(g.b) / 2
	need := satAdd(satAdd(g.after, g.d), g.c)
	l, r := 0, n
	for l < r {
		m := int(uint(l+r) >> 1)
		if g.b[2*m] >= need {
			r = m
		} else {
			l = m + 1
		}
	}
	g.k = l
}

// next loads the next non-empty gap at or after k into [lo, hi] and
// advances k; false when there is none.
func (g *gapCursor) next() bool {
	n := len(g.b) / 2
	for g.k <= n {
		k := g.k
		g.k++
		lo := g.after
		if k > 0 {
			lo = max(lo, satAdd(g.b[2*k-1], g.c))
		}
		hi := int64(maxTime)
		if k < n {
			hi = satAdd(g.b[2*k], -g.d-g.c)
		}
		if lo <= hi {
			g.lo, g.hi = lo, hi
			return true
		}
	}
	return false
}

// satAdd is a+b clamped to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return maxTime
	}
	if b < 0 && s > a {
		return minTime
	}
	return s
}

// mergedBounds are busy's non-empty reservations sorted, overlapping
// ones merged, as bounds.
func mergedBounds(busy []Interval) []int64 {
	iv := make([][2]int64, 0, len(busy))
	for _, x := range busy {
		s, e := x.Start.UnixNano(), x.End.UnixNano()
		if e > s {
			iv = append(iv, [2]int64{s, e})
		}
	}
	slices.SortFunc(iv, func(a, b [2]int64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	out := make([]int64, 0, 2*len(iv))
	for _, x := range iv {
		if n := len(out); n > 0 && x[0] <= out[n-1] {
			out[n-1] = max(out[n-1], x[1])
			continue
		}
		out = append(out, x[0], x[1])
	}
	return out
}

// startHeap orders gap cursors by their current gap's first feasible
// start.
type startHeap []gapCursor

func (h startHeap) Len() int           { return len(h) }
func (h startHeap) Less(i, j int) bool { return h[i].lo < h[j].lo }
func (h startHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *startHeap) Push(x any)        { *h = append(*h, x.(gapCursor)) }
func (h *startHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// endHeap holds the last feasible starts of the open gaps.
type endHeap []int64

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
