package allocator

import (
	"fmt"
	"slices"
	"strings"
)

// Options are the algorithm switches (hail's command-line options).
type Options struct {
	// NoCapacityChecks disables the global N+1 capacity check (hail's
	// --no-capacity-checks). The check is on by default.
	NoCapacityChecks bool
	// IgnoreSoftErrors relaxes the soft per-node limits.
	IgnoreSoftErrors bool
	// RestrictTo limits the candidate nodes (names); nil = no limit.
	RestrictTo []string
	// ExactTieBudget bounds the extra work (node visits) spent recomputing
	// near-tied single-node scores from scratch in htools' summation order,
	// so that exact ties break as in hail. 0 means the default (4,000,000);
	// negative disables it.
	ExactTieBudget int
}

// AllocRequest asks for a new instance.
type AllocRequest struct {
	Inst          Instance
	RequiredNodes int
	GroupName     *string  // nil: any group
	RestrictTo    []string // request's restrict-to-nodes; nil = none
}

// failCounts counts rejections per FailMode.
type failCounts [FailInternal + 1]int

func (f *failCounts) add(m FailMode, k int) { f[m] += k }
func (f *failCounts) total() int {
	t := 0
	for _, v := range f {
		t += v
	}
	return t
}

// String formats the counts as "FailMem: 3, FailN1: 2".
func (f *failCounts) String() string {
	var parts []string
	for m := FailMem; m <= FailInternal; m++ {
		if f[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", m, f[m]))
		}
	}
	return strings.Join(parts, ", ")
}

// Placement is one candidate placement: nodes and resulting node states.
type Placement struct {
	P, S  int // node indices; S = -1 for single
	NewP  Node
	NewS  Node
	Inst  Instance // the placed instance
	Score float64  // normal metric
	Ded   DedMetric
	IsDed bool
	Pairs [][2]string // location/exclusion pairs added on P
	stats *Stats
}

// less orders placements by metric (smaller is better).
func (a *Placement) less(b *Placement) bool {
	if a.IsDed {
		return a.Ded.less(&b.Ded)
	}
	return a.Score < b.Score
}

// Solution is the outcome of an allocation in one group.
type Solution struct {
	Fails  failCounts
	Allocs int
	Best   *Placement
	Log    []string
}

func (s *Solution) describe(c *Cluster) string {
	if s.Best == nil {
		r := "unknown reasons"
		if s.Fails.total() > 0 {
			r = s.Fails.String()
		}
		return "No valid allocation solutions, failure reasons: " + r
	}
	names := c.Nodes[s.Best.P].Name
	if s.Best.S >= 0 {
		names += "/" + c.Nodes[s.Best.S].Name
	}
	var score string
	if s.Best.IsDed {
		score = s.Best.Ded.String()
	} else {
		score = fmt.Sprintf("%.8f", s.Best.Score)
	}
	return fmt.Sprintf("score: %s, successes %d, failures %d (%s) for node(s) %s",
		score, s.Allocs, s.Fails.total(), s.Fails.String(), names)
}

func groupDesc(g *Group, msg string) string {
	return fmt.Sprintf("Group %s (%s): %s", g.Name, g.AllocPolicy, msg)
}

// onlineCandidates is genAllocNodes: online nodes of the given set, in
// order, restricted by name if asked.
func (c *Cluster) onlineCandidates(nodes []int, restrict []string) []int {
	var out []int
	for _, i := range nodes {
		n := &c.Nodes[i]
		if n.Offline {
			continue
		}
		if restrict != nil && !slices.Contains(restrict, n.Name) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// scope is the set of nodes and instances a computation sees (the whole
// cluster, or one group as in tryGroupAlloc).
type scope struct {
	nodes []int // node indices, in order
	insts []int // instance indices whose primary is in nodes
}

func (c *Cluster) fullScope() scope {
	var s scope
	for i := range c.Nodes {
		if !c.isHidden(i) {
			s.nodes = append(s.nodes, i)
		}
	}
	for i := range c.Instances {
		if !c.isHidden(c.Instances[i].PNode) {
			s.insts = append(s.insts, i)
		}
	}
	return s
}

func (c *Cluster) groupScope(g int) scope {
	var s scope
	in := make([]bool, len(c.Nodes))
	for i := range c.Nodes {
		if c.Nodes[i].Group == g && !c.isHidden(i) {
			s.nodes = append(s.nodes, i)
			in[i] = true
		}
	}
	for i := range c.Instances {
		if in[c.Instances[i].PNode] {
			s.insts = append(s.insts, i)
		}
	}
	return s
}

func (c *Cluster) statsOf(sc scope) *Stats {
	ptrs := make([]*Node, len(sc.nodes))
	for i, ni := range sc.nodes {
		ptrs[i] = &c.Nodes[ni]
	}
	return computeStats(ptrs)
}

// scoreFromScratch is compCV of the scope's nodes with p (and s) replaced.
func (c *Cluster) scoreFromScratch(sc scope, pl *Placement) float64 {
	ptrs := make([]*Node, len(sc.nodes))
	for i, ni := range sc.nodes {
		switch ni {
		case pl.P:
			ptrs[i] = &pl.NewP
		case pl.S:
			ptrs[i] = &pl.NewS
		default:
			ptrs[i] = &c.Nodes[ni]
		}
	}
	st := computeStats(ptrs)
	if len(pl.Pairs) > 0 {
		// computeStats read NewP's map, which commit has not updated.
		st.mapExtra += st.addPairsExtra(pl.Pairs)
	}
	return st.Score()
}

// evalSingle evaluates one single-node placement (allocateOnSingle).
func (c *Cluster) evalSingle(base *Stats, inst *Instance, p int, opts *Options, ded bool) (Placement, FailMode) {
	pn := &c.Nodes[p]
	if f := inst.MatchesPolicy(pn.Policy, pn.ExclStorage); f != FailNone {
		return Placement{}, f
	}
	pl := Placement{P: p, S: -1, Inst: *inst}
	pl.Inst.PNode, pl.Inst.SNode = p, -1
	var f FailMode
	pl.NewP, f = pn.addPri(&pl.Inst, opts.IgnoreSoftErrors)
	if f != FailNone {
		return pl, f
	}
	if ded {
		pl.IsDed = true
		pl.Ded = dedLost(pn, &pl.NewP, pn.Policy)
		pl.Ded.Disk = pl.NewP.FDsk
		return pl, FailNone
	}
	if !pl.Inst.Forthcoming {
		pl.Pairs = pn.locExclPairs(&pl.Inst)
	}
	st := base.clone()
	ov, nv := nodeValues(pn), nodeValues(&pl.NewP)
	st.update(pn, &pl.NewP, &ov, &nv)
	st.mapExtra += st.addPairsExtra(pl.Pairs)
	pl.Score = st.Score()
	pl.stats = st
	return pl, FailNone
}

// evalPair evaluates a mirrored placement (allocateOnPair).
func (c *Cluster) evalPair(base *Stats, inst *Instance, p, s int, opts *Options, ded bool) (Placement, FailMode) {
	pn, sn := &c.Nodes[p], &c.Nodes[s]
	if f := inst.MatchesPolicy(pn.Policy, pn.ExclStorage); f != FailNone {
		return Placement{}, f
	}
	pl := Placement{P: p, S: s, Inst: *inst}
	pl.Inst.PNode, pl.Inst.SNode = p, s
	if !ded {
		pl.Inst.LocationScore = countCommon(pn.LocTags, sn.LocTags)
	}
	var f FailMode
	pl.NewP, f = pn.addPri(&pl.Inst, opts.IgnoreSoftErrors)
	if f != FailNone {
		return pl, f
	}
	pl.NewS, f = sn.addSec(&pl.Inst, p, false, false)
	if f != FailNone {
		return pl, f
	}
	if ded {
		pl.IsDed = true
		lp := dedLost(pn, &pl.NewP, pn.Policy)
		ls := dedLost(sn, &pl.NewS, pn.Policy)
		for k := range lp.Lost {
			lp.Lost[k] += ls.Lost[k]
		}
		lp.Disk = pl.NewP.FDsk + pl.NewS.FDsk
		pl.Ded = lp
		return pl, FailNone
	}
	if !pl.Inst.Forthcoming {
		pl.Pairs = pn.locExclPairs(&pl.Inst)
	}
	st := base.clone()
	ov, nv := nodeValues(pn), nodeValues(&pl.NewP)
	st.update(pn, &pl.NewP, &ov, &nv)
	st.mapExtra += st.addPairsExtra(pl.Pairs)
	ov, nv = nodeValues(sn), nodeValues(&pl.NewS)
	st.update(sn, &pl.NewS, &ov, &nv)
	pl.Score = st.Score()
	pl.stats = st
	return pl, FailNone
}

// Apply makes a placement part of the cluster: the instance is appended
// to Instances and the nodes updated.
func (c *Cluster) Apply(pl *Placement) int {
	inst := pl.Inst
	inst.Idx = len(c.Instances)
	c.Instances = append(c.Instances, inst)
	np := pl.NewP
	np.commitPri(&c.Instances[inst.Idx])
	c.Nodes[pl.P] = np
	if pl.S >= 0 {
		ns := pl.NewS
		ns.commitSec(&c.Instances[inst.Idx], pl.P)
		c.Nodes[pl.S] = ns
	}
	c.version++
	c.n1 = nil
	return inst.Idx
}

// Clone returns an independent copy of the cluster (nodes are values with
// copy-on-write maps, so this is cheap).
func (c *Cluster) Clone() *Cluster {
	d := *c
	d.Nodes = slices.Clone(c.Nodes)
	d.Instances = slices.Clone(c.Instances)
	d.n1 = nil
	return &d
}

// tryAlloc allocates in one group (Cluster.tryAlloc / Dedicated).
// statScope: the nodes whose statistics make the metric and whose N+1
// redundancy is checked; cands: candidate nodes.
func (c *Cluster) tryAlloc(statScope scope, cands []int, inst *Instance, count int, opts *Options, ded bool) (*Solution, error) {
	switch count {
	case 1:
		if len(cands) == 0 {
			return nil, fmt.Errorf("No online nodes")
		}
	case 2:
		ok := false
		perGroup := map[int]int{}
		for _, p := range cands {
			perGroup[c.Nodes[p].Group]++
			if perGroup[c.Nodes[p].Group] > 1 {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("Not enough online nodes")
		}
	default:
		return nil, fmt.Errorf("Unsupported number of nodes, only one or two  supported")
	}
	var base *Stats
	if !ded {
		base = c.statsOf(statScope)
	}
	checkN1 := !ded && !opts.NoCapacityChecks
	if !ded {
		if count == 1 {
			return c.trySinglesNormal(statScope, base, cands, inst, opts, checkN1), nil
		}
		return c.tryPairsNormal(statScope, base, cands, inst, opts, checkN1), nil
	}
	if count == 2 {
		return c.tryPairsDed(cands, inst, opts), nil
	}
	sol := &Solution{}
	if count == 1 {
		var ok []Placement
		for _, p := range cands {
			pl, f := c.evalSingle(base, inst, p, opts, ded)
			if f != FailNone {
				sol.Fails.add(f, 1)
				continue
			}
			sol.Allocs++
			if ded || !checkN1 {
				if sol.Best == nil || !sol.Best.less(&pl) {
					b := pl
					sol.Best = &b
				}
				continue
			}
			ok = append(ok, pl)
		}
		if checkN1 {
			c.pickWithN1(statScope, ok, sol, opts, true)
		}
		return sol, nil
	}
	var buf []Placement
	for _, p := range cands {
		buf = buf[:0]
		var best *Placement
		for _, s := range cands {
			if s == p || c.Nodes[s].Group != c.Nodes[p].Group {
				continue
			}
			pl, f := c.evalPair(base, inst, p, s, opts, ded)
			if f != FailNone {
				sol.Fails.add(f, 1)
				continue
			}
			sol.Allocs++
			if !checkN1 {
				if best == nil || !best.less(&pl) {
					b := pl
					best = &b
				}
				continue
			}
			buf = append(buf, pl)
		}
		if checkN1 {
			sub := &Solution{}
			c.pickWithN1(statScope, buf, sub, opts, false)
			sol.Allocs -= sub.Fails[FailN1]
			sol.Fails.add(FailN1, sub.Fails[FailN1])
			best = sub.Best
		}
		if best != nil && (sol.Best == nil || !sol.Best.less(best)) {
			sol.Best = best
		}
	}
	return sol, nil
}

// pickWithN1 is collectionToSolution with the global N+1 predicate:
// candidates in metric order (ties: later candidate first), the first that
// passes wins, the better ones that fail count as FailN1.
func (c *Cluster) pickWithN1(sc scope, ok []Placement, sol *Solution, opts *Options, single bool) {
	// ok is in candidate order; hail's list is reversed then stably sorted.
	slices.Reverse(ok)
	slices.SortStableFunc(ok, func(a, b Placement) int {
		switch {
		case a.less(&b):
			return -1
		case b.less(&a):
			return 1
		}
		return 0
	})
	budget := tieBudget(opts)
	refined := 0
	for i := 0; i < len(ok); i++ {
		if single && budget > 0 && i >= refined {
			refined = c.refineTies(sc, ok, i, budget)
		}
		if c.globalN1(sc, &ok[i]) {
			b := ok[i]
			sol.Best = &b
			sol.Fails.add(FailN1, i)
			sol.Allocs -= i
			return
		}
	}
	sol.Fails.add(FailN1, len(ok))
	sol.Allocs -= len(ok)
}

// refineTies recomputes, from scratch in htools' order, the scores of the
// candidates near-tied with ok[i] and re-sorts them, so that exact ties
// and last-bit differences order as in hail. It returns the end of the
// refined run.
func (c *Cluster) refineTies(sc scope, ok []Placement, i, budget int) int {
	ref := ok[i].Score
	eps := 1e-9 * max(1, abs(ref))
	j := i
	for j < len(ok) && ok[j].Score-ref <= eps {
		j++
	}
	if j-i < 2 || (j-i)*len(sc.nodes) > budget {
		return j
	}
	for k := i; k < j; k++ {
		ok[k].Score = c.scoreFromScratch(sc, &ok[k])
	}
	run := ok[i:j]
	// Restore candidate order (descending index after the reversal),
	// then stable-sort by the exact score.
	slices.SortFunc(run, func(a, b Placement) int { return b.P - a.P })
	slices.SortStableFunc(run, func(a, b Placement) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		return 0
	})
	return j
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
