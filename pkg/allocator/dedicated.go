package allocator

import (
	"slices"
	"strconv"
	"strings"
)

// DedMetric is the dedicated-group metric ("Allocation for Partitioned
// Ganeti"): the lost-allocations vector (per policy interval, largest min
// disk first) and the free disk left (MiB), compared lexicographically.
type DedMetric struct {
	Lost []int
	Disk int
}

func (a *DedMetric) less(b *DedMetric) bool {
	if c := slices.Compare(a.Lost, b.Lost); c != 0 {
		return c < 0
	}
	return a.Disk < b.Disk
}

// String formats the metric as hail does: ([0,0,1],10).
func (a DedMetric) String() string {
	var b strings.Builder
	b.WriteString("([")
	for i, v := range a.Lost {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	b.WriteString("],")
	b.WriteString(strconv.Itoa(a.Disk))
	b.WriteByte(')')
	return b.String()
}

// testSpecs are the minimal specs of the policy's intervals, sorted by
// disk size, largest first (stable).
func testSpecs(p *Policy) []ISpec {
	if p.testSpecs != nil {
		return p.testSpecs
	}
	out := make([]ISpec, len(p.MinMax))
	for i, mm := range p.MinMax {
		out[i] = mm.Min
	}
	slices.SortStableFunc(out, func(a, b ISpec) int { return b.DiskSize - a.DiskSize })
	return out
}

// allocCount is how many copies of a minimally compliant instance of spec
// s can be added to n one after another with the strict checks of addPri.
// The checks are monotone in the count, so a doubling + binary search
// gives the same number as adding them one by one.
func allocCount(n *Node, s *ISpec) int {
	fits := func(k int) bool {
		m, d, v, su := k*s.MemorySize, k*s.DiskSize, k*s.CPUCount, k*s.SpindleUse
		free := n.unallocatedMem() - m
		if free <= 0 {
			return false
		}
		dsk := n.FDsk - d
		if dsk <= 0 || dsk < n.LoDsk {
			return false
		}
		if n.ExclStorage && n.FSpindles < 0 {
			return false
		}
		if !n.ExclStorage && n.InstSpindles+float64(su) > n.HiSpindles {
			return false
		}
		// N+1: a step fails when the node newly becomes N+1-failing. With
		// memory decreasing, that happens at the first step whose free
		// memory is <= rMem, unless the node was failing before the first
		// step and that first step already leaves it failing.
		if free <= n.RMem && !(n.FailN1 && n.unallocatedMem()-s.MemorySize <= n.RMem) {
			return false
		}
		lcpu := n.Policy.VCPURatio
		if lcpu >= 0 && lcpu < float64(n.UCpu+v)/n.TCpu {
			return false
		}
		// forthcoming-inclusive limits
		if n.FMemForth-m <= 0 {
			return false
		}
		df := n.FDskForth - d
		if df <= 0 || df < n.LoDsk {
			return false
		}
		if n.ExclStorage && n.FSpindlesForth < 0 {
			return false
		}
		if !n.ExclStorage && n.InstSpindlesForth+float64(su) > n.HiSpindles {
			return false
		}
		if lcpu >= 0 && lcpu < float64(n.UCpuForth+v)/n.TCpu {
			return false
		}
		return true
	}
	const limit = 1 << 30
	if !fits(1) {
		return 0
	}
	lo, hi := 1, 2
	for fits(hi) {
		lo = hi
		if hi >= limit {
			return limit
		}
		hi *= 2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// dedLost is the lost-allocations vector between two states of a node.
func dedLost(before, after *Node, p *Policy) DedMetric {
	specs := testSpecs(p)
	m := DedMetric{Lost: make([]int, len(specs))}
	for i := range specs {
		m.Lost[i] = allocCount(before, &specs[i]) - allocCount(after, &specs[i])
	}
	return m
}

// IsDedicated reports whether an allocation in the given group (or, for
// -1, in any allocable group) uses the dedicated metric: every node of
// those groups has exclusive storage.
func (c *Cluster) IsDedicated(group int) bool {
	for i := range c.Nodes {
		n := &c.Nodes[i]
		in := false
		if group >= 0 {
			in = n.Group == group
		} else {
			in = c.Groups[n.Group].AllocPolicy != AllocUnallocable
		}
		if in && !n.ExclStorage {
			return false
		}
	}
	return true
}
