package allocator

import "math"

// The cluster metric of htools (Cluster/Metrics.hs): 20 weighted
// components, minimised by allocation in normal (non-dedicated) groups.
const nComp = 20

// Component indices.
const (
	cFreeMem = iota
	cFreeDisk
	cN1
	cReservedMem
	cOfflineAll
	cOfflinePri
	cVCPURatio
	cCPULoad
	cMemLoad
	cDiskLoad
	cNetLoad
	cPriTags
	cSpindles
	cFreeMemForth
	cFreeDiskForth
	cVCPURatioForth
	cSpindlesForth
	cLocation
	cLocationExcl
	cReservedMemTotal
)

// ComponentNames are the metric components' names, as hbal prints them.
var ComponentNames = [nComp]string{
	"free_mem_cv", "free_disk_cv", "n1_cnt", "reserved_mem_cv", "offline_all_cnt",
	"offline_pri_cnt", "vcpu_ratio_cv", "cpu_load_cv", "mem_load_cv", "disk_load_cv",
	"net_load_cv", "pri_tags_score", "spindles_cv", "free_mem_cv_forth",
	"free_disk_cv_forth", "vcpu_ratio_cv_forth", "spindles_cv_forth",
	"location_score", "location_exclusion_score", "reserved_mem_rtotal",
}

// ComponentWeights are the metric weights.
var ComponentWeights = [nComp]float64{0.5, 0.5, 1, 1, 4, 16, 0.5, 1, 1, 1, 1, 2, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 0.25}

type aggKind uint8

const (
	aggSD aggKind = iota
	aggSum
	aggMap
)

var compKind = [nComp]aggKind{aggSD, aggSD, aggSum, aggSD, aggSum, aggSum, aggSD, aggSD, aggSD, aggSD, aggSD, aggSum, aggSD, aggSD, aggSD, aggSD, aggSD, aggSum, aggMap, aggSum}

// compOnline: whether a component aggregates online (true) or offline
// nodes.
var compOnline = [nComp]bool{true, true, true, true, false, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true}

// nodeValues is compDetailedCVNode (the map component is handled apart).
func nodeValues(n *Node) (v [nComp]float64) {
	v[cFreeMem] = n.PMem
	v[cFreeDisk] = n.PDsk
	if n.FailN1 {
		v[cN1] = float64(n.NSec + n.NPri)
	}
	v[cReservedMem] = n.PRem
	v[cOfflineAll] = float64(n.NPri + n.NSec)
	v[cOfflinePri] = float64(n.NPri)
	v[cVCPURatio] = n.PCpu
	v[cCPULoad] = n.CLoad
	v[cMemLoad] = n.MLoad
	v[cDiskLoad] = n.DLoad
	v[cNetLoad] = n.NLoad
	v[cPriTags] = float64(n.ConflictPri)
	v[cSpindles] = n.InstSpindles / n.HiSpindles
	v[cFreeMemForth] = n.PMemForth
	v[cFreeDiskForth] = n.PDskForth
	v[cVCPURatioForth] = n.PCpuForth
	v[cSpindlesForth] = n.InstSpindlesForth / n.HiSpindles
	v[cLocation] = float64(n.LocationScore)
	v[cReservedMemTotal] = n.PRem
	return v
}

// Stats are the cluster statistics from which the metric is computed.
// For standard deviations they keep (count, sum, variance) exactly as
// htools does, so that incremental updates give bit-identical results.
type Stats struct {
	n, s, v [nComp]float64
	// mapCount counts (location, exclusion tag) pairs cluster-wide;
	// mapExtra is Σ count − distinct.
	mapCount map[[2]string]int
	mapExtra int
}

// computeStats computes the statistics from scratch over nodes (indices
// into c.Nodes, in order), as compClusterStatistics does.
func computeStats(nodes []*Node) *Stats {
	st := &Stats{mapCount: map[[2]string]int{}}
	vals := make([][nComp]float64, len(nodes))
	for i, n := range nodes {
		vals[i] = nodeValues(n)
	}
	for k := 0; k < nComp; k++ {
		switch compKind[k] {
		case aggSum:
			s := 0.0
			for i, n := range nodes {
				if n.Offline != compOnline[k] {
					s += vals[i][k]
				}
			}
			st.s[k] = s
		case aggSD:
			cnt, s := 0.0, 0.0
			for i, n := range nodes {
				if n.Offline != compOnline[k] {
					cnt++
					s += vals[i][k]
				}
			}
			mean := s / cnt
			nv := 0.0
			for i, n := range nodes {
				if n.Offline != compOnline[k] {
					d := vals[i][k] - mean
					nv += d * d
				}
			}
			st.n[k], st.s[k], st.v[k] = cnt, s, nv/cnt
		}
	}
	for _, n := range nodes {
		if n.Offline {
			continue
		}
		for key, cnt := range n.instMap {
			st.mapCount[key] += cnt
		}
	}
	for _, cnt := range st.mapCount {
		st.mapExtra += cnt - 1
	}
	return st
}

// value is one component's statistic value.
func (st *Stats) value(k int) float64 {
	switch compKind[k] {
	case aggSD:
		return math.Sqrt(st.v[k])
	case aggMap:
		return float64(st.mapExtra)
	}
	return st.s[k]
}

// Score is the weighted sum of the components, summed in order.
func (st *Stats) Score() float64 {
	s := 0.0
	for k := 0; k < nComp; k++ {
		s += ComponentWeights[k] * st.value(k)
	}
	return s
}

// Components returns the 20 component values.
func (st *Stats) Components() [nComp]float64 {
	var out [nComp]float64
	for k := range out {
		out[k] = st.value(k)
	}
	return out
}

// update applies the change of one node from old to new, with htools'
// incremental formulas (updateStatistics). extraPairs are the
// (location, exclusion) pairs the new node has in addition to the old one
// (pairs removed are not supported here: see updateMapRemove). The map
// count itself is not modified: update returns the new mapExtra delta
// only through st.mapExtra, so callers that branch must copy Stats.
func (st *Stats) update(old, nw *Node, ov, nv *[nComp]float64) {
	online := !old.Offline
	for k := 0; k < nComp; k++ {
		if compOnline[k] != online {
			continue
		}
		x, y := ov[k], nv[k]
		switch compKind[k] {
		case aggSum:
			st.s[k] = st.s[k] + (y - x)
		case aggSD:
			n, s, v := st.n[k], st.s[k], st.v[k]
			st.s[k] = s + (y - x)
			st.v[k] = varAfter(n, s, v, x, y)
		}
	}
}

// addPairsExtra returns how much mapExtra grows when pairs are added
// cluster-wide (the map itself is unchanged).
func (st *Stats) addPairsExtra(pairs [][2]string) int {
	d := 0
	for i, p := range pairs {
		if st.mapCount[p] > 0 {
			d++
			continue
		}
		for _, q := range pairs[:i] {
			if q == p {
				d++
				break
			}
		}
	}
	return d
}

// clone copies the statistics (the map is shared: copy on write).
func (st *Stats) clone() *Stats {
	c := *st
	return &c
}
