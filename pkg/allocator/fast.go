package allocator

import (
	"math"
	"runtime"
	"slices"
	"sync"
)

// Fast paths of the normal-group allocation. Scores are computed with
// exactly the floating-point operations of htools' incremental update
// (so that they are bit-identical to hail's), but without copying node
// states or statistics per candidate: a candidate costs O(1) and a few
// dozen flops, and only the candidates that reach the N+1 check are
// rebuilt in full.

// scoreWith is the metric of st after one more node update old -> new,
// computed without modifying st. locAdj is added to the location sum
// before the update and mapExtra replaces the map component: the
// operations are those of st.update followed by st.Score.
func (st *Stats) scoreWith(old *Node, ov, nv *[nComp]float64, mapExtra int, locAdj float64) float64 {
	online := !old.Offline
	total := 0.0
	for k := 0; k < nComp; k++ {
		var val float64
		switch compKind[k] {
		case aggSum:
			s := st.s[k]
			if k == cLocation {
				s += locAdj
			}
			if compOnline[k] == online {
				s = s + (nv[k] - ov[k])
			}
			val = s
		case aggSD:
			v := st.v[k]
			if compOnline[k] == online {
				v = varAfter(st.n[k], st.s[k], v, ov[k], nv[k])
			}
			val = math.Sqrt(v)
		case aggMap:
			val = float64(mapExtra)
		}
		total += ComponentWeights[k] * val
	}
	return total
}

// primed is the metric of a state (stP) prepared for many one-node
// updates: term[k] is component k's weighted value as it stands, used
// as is when the update does not change that component's node value
// (then htools' update is the identity, bit for bit).
type primed struct {
	st   *Stats
	term [nComp]float64
}

func prime(st *Stats, locAdj float64) *primed {
	p := &primed{st: st}
	for k := 0; k < nComp; k++ {
		var val float64
		switch compKind[k] {
		case aggSum:
			val = st.s[k]
			if k == cLocation {
				val += locAdj
			}
		case aggSD:
			val = math.Sqrt(st.v[k])
		}
		p.term[k] = ComponentWeights[k] * val
	}
	return p
}

// scoreWith is Stats.scoreWith using the precomputed terms for the
// components the update leaves unchanged. The location term must have
// been primed with the same locAdj (or the component must change).
func (p *primed) scoreWith(old *Node, ov, nv *[nComp]float64, mapExtra int, locAdj float64) float64 {
	st := p.st
	online := !old.Offline
	total := 0.0
	for k := 0; k < nComp; k++ {
		x, y := ov[k], nv[k]
		if compKind[k] != aggMap && (x == y && !math.IsInf(x, 0) || compOnline[k] != online) && !(k == cLocation && locAdj != 0) {
			total += p.term[k]
			continue
		}
		var val float64
		switch compKind[k] {
		case aggSum:
			s := st.s[k]
			if k == cLocation {
				s += locAdj
			}
			if compOnline[k] == online {
				s = s + (y - x)
			}
			val = s
		case aggSD:
			v := st.v[k]
			if compOnline[k] == online {
				v = varAfter(st.n[k], st.s[k], v, x, y)
			}
			val = math.Sqrt(v)
		case aggMap:
			val = float64(mapExtra)
		}
		total += ComponentWeights[k] * val
	}
	return total
}

// scoreChanged is scoreWith for an update that changes exactly the
// components listed in changed, with no location adjustment. The terms
// are the same numbers as scoreWith's and are summed in the same order.
func (p *primed) scoreChanged(old *Node, ov, nv *[nComp]float64, changed []int8, mapExtra int) float64 {
	st := p.st
	t := p.term
	t[cLocationExcl] = ComponentWeights[cLocationExcl] * float64(mapExtra)
	online := !old.Offline
	for _, k8 := range changed {
		k := int(k8)
		if compOnline[k] != online || compKind[k] == aggMap {
			continue
		}
		x, y := ov[k], nv[k]
		var val float64
		if compKind[k] == aggSum {
			val = st.s[k] + (y - x)
		} else {
			val = math.Sqrt(varAfter(st.n[k], st.s[k], st.v[k], x, y))
		}
		t[k] = ComponentWeights[k] * val
	}
	total := 0.0
	for k := 0; k < nComp; k++ {
		total += t[k]
	}
	return total
}

// lightCand is a scored candidate: the other node and the score.
type lightCand struct {
	node  int32
	score float64
}

// primaryResult is the outcome for one primary of a mirrored allocation.
type primaryResult struct {
	fails  failCounts
	allocs int
	best   *Placement
}

// tryPairsNormal evaluates every (primary, secondary) pair of cands in the
// normal metric, with hail's selection: per primary the best-scored pair
// that passes the global N+1 check (ties to the later secondary), then
// the best over primaries (ties to the later primary). Primaries are
// spread over the CPUs; the result does not depend on it.
func (c *Cluster) tryPairsNormal(sc scope, base *Stats, cands []int, inst *Instance, opts *Options, checkN1 bool) *Solution {
	if checkN1 {
		c.n1base(sc) // fill the shared cache before the workers read it
	}
	ov := make([][nComp]float64, len(c.Nodes))
	for _, i := range cands {
		ov[i] = nodeValues(&c.Nodes[i])
	}
	// A secondary's new state depends on the primary only through the
	// memory it already reserves for that primary (peers): precompute it
	// once per node for the common case of no such reservation.
	gen := make([]genericSec, len(c.Nodes))
	peerOf := map[int][]int{}
	for _, i := range cands {
		g := &gen[i]
		in := *inst
		in.SNode = i
		g.node, g.fail = c.Nodes[i].addSec(&in, -2, false, false)
		if g.fail == FailNone {
			g.nv = nodeValues(&g.node)
			for k := 0; k < nComp; k++ {
				if !(ov[i][k] == g.nv[k] && !math.IsInf(ov[i][k], 0)) || c.Nodes[i].Offline {
					g.changed = append(g.changed, int8(k))
				}
			}
		}
		for p := range c.Nodes[i].peers {
			peerOf[p] = append(peerOf[p], i)
		}
	}
	// Secondaries whose node values before and after are identical get
	// identical scores for a given primary (the same operations on the
	// same inputs): score each such class once per primary.
	classOf := make([]int32, len(c.Nodes))
	classIDs := map[[2 * nComp]uint64]int32{}
	for _, i := range cands {
		classOf[i] = -1
		if gen[i].fail != FailNone || c.Nodes[i].Offline {
			continue
		}
		var key [2 * nComp]uint64
		for k := 0; k < nComp; k++ {
			key[k] = math.Float64bits(ov[i][k])
			key[nComp+k] = math.Float64bits(gen[i].nv[k])
		}
		id, ok := classIDs[key]
		if !ok {
			id = int32(len(classIDs))
			classIDs[key] = id
		}
		classOf[i] = id
	}
	results := make([]primaryResult, len(cands))
	work := func(from, to int) {
		var buf []lightCand
		special := make([]bool, len(c.Nodes))
		ws := &pairScratch{classOf: classOf, score: make([]float64, len(classIDs)), stamp: make([]int32, len(classIDs)),
			locScore: make([]float64, 4*len(classIDs)), locStamp: make([]int32, 4*len(classIDs))}
		for k := from; k < to; k++ {
			p := cands[k]
			for _, s := range peerOf[p] {
				special[s] = true
			}
			ws.epoch++
			results[k] = c.onePrimary(sc, base, cands, p, inst, opts, checkN1, ov, gen, special, ws, &buf)
			for _, s := range peerOf[p] {
				special[s] = false
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if workers > 1 && len(cands) >= 64 {
		var wg sync.WaitGroup
		chunk := (len(cands) + workers - 1) / workers
		for from := 0; from < len(cands); from += chunk {
			to := min(from+chunk, len(cands))
			wg.Go(func() { work(from, to) })
		}
		wg.Wait()
	} else {
		work(0, len(cands))
	}
	sol := &Solution{}
	for k := range results {
		r := &results[k]
		for m := range r.fails {
			sol.Fails[m] += r.fails[m]
		}
		sol.Allocs += r.allocs
		if r.best != nil && (sol.Best == nil || !sol.Best.less(r.best)) {
			sol.Best = r.best
		}
	}
	return sol
}

// genericSec is a node's state as a secondary of the new instance for a
// primary it reserves no memory for.
type genericSec struct {
	node    Node
	fail    FailMode
	nv      [nComp]float64
	changed []int8 // components whose node value changes
}

// pairScratch is a worker's per-primary cache of class scores.
type pairScratch struct {
	classOf  []int32
	score    []float64
	stamp    []int32
	locScore []float64 // by class*4 + shared location tags (1..3)
	locStamp []int32
	epoch    int32
}

func (c *Cluster) onePrimary(sc scope, base *Stats, cands []int, p int, inst *Instance, opts *Options, checkN1 bool,
	ov [][nComp]float64, gen []genericSec, special []bool, ws *pairScratch, buf *[]lightCand) primaryResult {
	var res primaryResult
	pn := &c.Nodes[p]
	nSec := c.secondariesOf(cands, p)
	if f := inst.MatchesPolicy(pn.Policy, pn.ExclStorage); f != FailNone {
		res.fails[f] += nSec
		return res
	}
	inst0 := *inst
	inst0.PNode, inst0.LocationScore = p, 0
	newP, f := pn.addPri(&inst0, opts.IgnoreSoftErrors)
	if f != FailNone {
		res.fails[f] += nSec
		return res
	}
	var pairs [][2]string
	if !inst.Forthcoming {
		pairs = pn.locExclPairs(inst)
	}
	stP := *base
	nvP := nodeValues(&newP)
	stP.update(pn, &newP, &ov[p], &nvP)
	extra := base.mapExtra + base.addPairsExtra(pairs)
	pr := prime(&stP, 0)
	*buf = (*buf)[:0]
	for _, s := range cands {
		if s == p || c.Nodes[s].Group != pn.Group {
			continue
		}
		sn := &c.Nodes[s]
		ls := 0
		if len(pn.LocTags) > 0 && len(sn.LocTags) > 0 {
			ls = countCommonSorted(pn.LocTags, sn.LocTags)
		}
		var score float64
		if !special[s] {
			g := &gen[s]
			if g.fail != FailNone {
				res.fails[g.fail]++
				continue
			}
			res.allocs++
			if ls == 0 {
				if cl := ws.classOf[s]; cl >= 0 {
					if ws.stamp[cl] != ws.epoch {
						ws.score[cl] = pr.scoreChanged(sn, &ov[s], &g.nv, g.changed, extra)
						ws.stamp[cl] = ws.epoch
					}
					score = ws.score[cl]
				} else {
					score = pr.scoreChanged(sn, &ov[s], &g.nv, g.changed, extra)
				}
			} else if cl := ws.classOf[s]; cl >= 0 && ls < 4 {
				key := int(cl)*4 + ls
				if ws.locStamp[key] != ws.epoch {
					ws.locScore[key] = stP.scoreWith(sn, &ov[s], &g.nv, extra, float64(ls))
					ws.locStamp[key] = ws.epoch
				}
				score = ws.locScore[key]
			} else {
				score = stP.scoreWith(sn, &ov[s], &g.nv, extra, float64(ls))
			}
		} else {
			inst0.SNode = s
			newS, f := sn.addSec(&inst0, p, false, false)
			if f != FailNone {
				res.fails[f]++
				continue
			}
			res.allocs++
			nvS := nodeValues(&newS)
			if ls == 0 {
				score = pr.scoreWith(sn, &ov[s], &nvS, extra, 0)
			} else {
				score = stP.scoreWith(sn, &ov[s], &nvS, extra, float64(ls))
			}
		}
		*buf = append(*buf, lightCand{node: int32(s), score: score})
	}
	cs := *buf
	if len(cs) == 0 {
		return res
	}
	bi := bestLast(cs) // ties: the later secondary
	build := func(lc lightCand) *Placement {
		pl, f := c.evalPair(base, inst, p, int(lc.node), opts, false)
		if f != FailNone {
			panic("allocator: candidate became infeasible")
		}
		pl.Score = lc.score
		return &pl
	}
	if !checkN1 {
		res.best = build(cs[bi])
		return res
	}
	if pl := build(cs[bi]); c.globalN1(sc, pl) {
		res.best = pl
		return res
	}
	order := hailOrder(cs)
	for i := 1; i < len(order); i++ {
		if pl := build(order[i]); c.globalN1(sc, pl) {
			res.best = pl
			res.fails[FailN1] += i
			res.allocs -= i
			return res
		}
	}
	res.fails[FailN1] += len(order)
	res.allocs -= len(order)
	return res
}

// trySinglesNormal is the single-node allocation in the normal metric.
func (c *Cluster) trySinglesNormal(sc scope, base *Stats, cands []int, inst *Instance, opts *Options, checkN1 bool) *Solution {
	sol := &Solution{}
	var cs []lightCand
	for _, p := range cands {
		pn := &c.Nodes[p]
		if f := inst.MatchesPolicy(pn.Policy, pn.ExclStorage); f != FailNone {
			sol.Fails[f]++
			continue
		}
		in := *inst
		in.PNode, in.SNode = p, -1
		newP, f := pn.addPri(&in, opts.IgnoreSoftErrors)
		if f != FailNone {
			sol.Fails[f]++
			continue
		}
		sol.Allocs++
		var pairs [][2]string
		if !inst.Forthcoming {
			pairs = pn.locExclPairs(inst)
		}
		ov, nv := nodeValues(pn), nodeValues(&newP)
		cs = append(cs, lightCand{node: int32(p), score: base.scoreWith(pn, &ov, &nv, base.mapExtra+base.addPairsExtra(pairs), 0)})
	}
	if len(cs) == 0 {
		return sol
	}
	build := func(lc lightCand) Placement {
		pl, _ := c.evalSingle(base, inst, int(lc.node), opts, false)
		pl.Score = lc.score
		return pl
	}
	if !checkN1 {
		bi := bestLast(cs)
		// exact ties as hail: refine the near-tied best ones from scratch
		pls := c.nearTies(sc, base, cs, cs[bi].score, build, opts)
		b := pls[0]
		sol.Best = &b
		return sol
	}
	order := hailOrder(cs)
	budget := tieBudget(opts)
	full := make([]Placement, 0, 8)
	for i := 0; i < len(order); {
		// the run of near-tied candidates starting at i, in hail's order
		j := i + 1
		eps := 1e-9 * max(1, abs(order[i].score))
		for j < len(order) && order[j].score-order[i].score <= eps {
			j++
		}
		if j-i == 1 || budget < 0 || (j-i)*len(sc.nodes) > budget {
			// nothing to refine: build the candidates one at a time
			for k := i; k < j; k++ {
				pl := build(order[k])
				if c.globalN1(sc, &pl) {
					sol.Best = &pl
					sol.Fails[FailN1] += k
					sol.Allocs -= k
					return sol
				}
			}
			i = j
			continue
		}
		full = full[:0]
		for _, lc := range order[i:j] {
			full = append(full, build(lc))
		}
		c.refineRun(sc, full, opts)
		for k := range full {
			if c.globalN1(sc, &full[k]) {
				b := full[k]
				sol.Best = &b
				sol.Fails[FailN1] += i + k
				sol.Allocs -= i + k
				return sol
			}
		}
		i = j
	}
	sol.Fails[FailN1] += len(order)
	sol.Allocs -= len(order)
	return sol
}

// nearTies returns the candidates within rounding distance of best, in
// hail's order (exact scores when the budget allows).
func (c *Cluster) nearTies(sc scope, base *Stats, cs []lightCand, best float64, build func(lightCand) Placement, opts *Options) []Placement {
	eps := 1e-9 * max(1, abs(best))
	budget := tieBudget(opts)
	n := 0
	for k := range cs {
		if cs[k].score-best <= eps {
			n++
		}
	}
	var run []Placement
	if n == 1 || budget < 0 || n*len(sc.nodes) > budget {
		// no refinement: the exact minimum, ties to the later candidate
		return []Placement{build(cs[bestLast(cs)])}
	}
	for k := len(cs) - 1; k >= 0; k-- { // reversed candidate order
		if cs[k].score-best <= eps {
			run = append(run, build(cs[k]))
		}
	}
	slices.SortStableFunc(run, func(a, b Placement) int { return cmpScore(a.Score, b.Score) })
	c.refineRun(sc, run, opts)
	return run
}

// refineRun recomputes a run of near-tied single placements from scratch
// in htools' summation order and re-sorts it (stable, so ties keep hail's
// later-first order), when the budget allows.
func (c *Cluster) refineRun(sc scope, run []Placement, opts *Options) {
	budget := tieBudget(opts)
	if len(run) < 2 || budget < 0 || len(run)*len(sc.nodes) > budget {
		return
	}
	vals := make([][nComp]float64, len(sc.nodes))
	offline := make([]bool, len(sc.nodes))
	for i, ni := range sc.nodes {
		vals[i] = nodeValues(&c.Nodes[ni])
		offline[i] = c.Nodes[ni].Offline
	}
	base := c.statsOf(sc)
	for k := range run {
		run[k].Score = scratchScore(sc, vals, offline, base, &run[k])
	}
	slices.SortFunc(run, func(a, b Placement) int { return b.P - a.P })
	slices.SortStableFunc(run, func(a, b Placement) int { return cmpScore(a.Score, b.Score) })
}

// scratchScore is compCV of the scope with the placement's nodes replaced,
// computed from precomputed node values in htools' summation order (two
// passes per standard deviation). The map component is integer-valued and
// taken from the base statistics.
func scratchScore(sc scope, vals [][nComp]float64, offline []bool, base *Stats, pl *Placement) float64 {
	pv := nodeValues(&pl.NewP)
	var sv [nComp]float64
	if pl.S >= 0 {
		sv = nodeValues(&pl.NewS)
	}
	row := func(i int) *[nComp]float64 {
		switch sc.nodes[i] {
		case pl.P:
			return &pv
		case pl.S:
			return &sv
		}
		return &vals[i]
	}
	total := 0.0
	for k := 0; k < nComp; k++ {
		var val float64
		switch compKind[k] {
		case aggSum:
			s := 0.0
			for i := range vals {
				if offline[i] != compOnline[k] {
					s += row(i)[k]
				}
			}
			val = s
		case aggSD:
			cnt, s := 0.0, 0.0
			for i := range vals {
				if offline[i] != compOnline[k] {
					cnt++
					s += row(i)[k]
				}
			}
			mean := s / cnt
			nv := 0.0
			for i := range vals {
				if offline[i] != compOnline[k] {
					d := row(i)[k] - mean
					nv += d * d
				}
			}
			val = math.Sqrt(nv / cnt)
		case aggMap:
			val = float64(base.mapExtra + base.addPairsExtra(pl.Pairs))
		}
		total += ComponentWeights[k] * val
	}
	return total
}

// tryPairsDed is the mirrored allocation in a dedicated group: the sum of
// the two nodes' lost-allocation vectors and free disks, lexicographically
// smallest, ties to the later secondary and then the later primary. The
// secondary's part is computed once per node (it depends on the primary
// only through memory the node already reserves for it).
func (c *Cluster) tryPairsDed(cands []int, inst *Instance, opts *Options) *Solution {
	type secPart struct {
		fail FailMode
		lost []int
		dsk  int
	}
	gen := make([]secPart, len(c.Nodes))
	peerOf := map[int][]int{}
	secPartOf := func(s, p int) secPart {
		sn := &c.Nodes[s]
		in := *inst
		in.PNode, in.SNode = p, s
		newS, f := sn.addSec(&in, p, false, false)
		if f != FailNone {
			return secPart{fail: f}
		}
		// the policy is the primary's; nodes of one group share it
		m := dedLost(sn, &newS, sn.Policy)
		return secPart{lost: m.Lost, dsk: newS.FDsk}
	}
	for _, s := range cands {
		for p := range c.Nodes[s].peers {
			peerOf[p] = append(peerOf[p], s)
		}
	}
	genDone := make([]bool, len(c.Nodes))
	sol := &Solution{}
	var bestP, bestS int
	var best DedMetric
	have := false
	special := make([]bool, len(c.Nodes))
	cur := DedMetric{}
	for _, p := range cands {
		pn := &c.Nodes[p]
		nSec := c.secondariesOf(cands, p)
		if f := inst.MatchesPolicy(pn.Policy, pn.ExclStorage); f != FailNone {
			sol.Fails[f] += nSec
			continue
		}
		in := *inst
		in.PNode = p
		newP, f := pn.addPri(&in, opts.IgnoreSoftErrors)
		if f != FailNone {
			sol.Fails[f] += nSec
			continue
		}
		lp := dedLost(pn, &newP, pn.Policy)
		for _, s := range peerOf[p] {
			special[s] = true
		}
		pHave := false
		var pBest DedMetric
		pBestS := -1
		for _, s := range cands {
			if s == p || c.Nodes[s].Group != pn.Group {
				continue
			}
			var sp secPart
			if special[s] {
				sp = secPartOf(s, p)
			} else {
				if !genDone[s] {
					gen[s] = secPartOf(s, -2)
					genDone[s] = true
				}
				sp = gen[s]
			}
			if sp.fail != FailNone {
				sol.Fails[sp.fail]++
				continue
			}
			sol.Allocs++
			if cur.Lost == nil || len(cur.Lost) != len(lp.Lost) {
				cur.Lost = make([]int, len(lp.Lost))
			}
			for k := range cur.Lost {
				cur.Lost[k] = lp.Lost[k] + sp.lost[k]
			}
			cur.Disk = newP.FDsk + sp.dsk
			if !pHave || !pBest.less(&cur) {
				pBest = DedMetric{Lost: slices.Clone(cur.Lost), Disk: cur.Disk}
				pBestS, pHave = s, true
			}
		}
		for _, s := range peerOf[p] {
			special[s] = false
		}
		if pHave && (!have || !best.less(&pBest)) {
			best, bestP, bestS, have = pBest, p, pBestS, true
		}
	}
	if have {
		pl, f := c.evalPair(nil, inst, bestP, bestS, opts, true)
		if f != FailNone {
			panic("allocator: dedicated candidate became infeasible")
		}
		sol.Best = &pl
	}
	return sol
}

// countCommonSorted counts the strings two sorted, duplicate-free lists
// share.
func countCommonSorted(a, b []string) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}

// varAfter is the variance after one node's value changes from x to y in
// a population of n values summing to s with variance v: htools'
// incremental formula (updateStatistics). Stats.update and the fast
// scorers share it so that their results stay bit-identical.
func varAfter(n, s, v, x, y float64) float64 {
	ds := y - x
	dss := y*y - x*x
	dnnvar := (n*dss - 2*s*ds) - ds*ds
	return max(0, v+dnnvar/(n*n))
}

// secondariesOf counts the candidates that can be p's secondary (other
// candidates of p's group): the pairs a failure of p alone rules out.
func (c *Cluster) secondariesOf(cands []int, p int) int {
	n, g := 0, c.Nodes[p].Group
	for _, s := range cands {
		if s != p && c.Nodes[s].Group == g {
			n++
		}
	}
	return n
}

// bestLast is the index of the lowest score in cs, ties to the later
// candidate (hail keeps the later of equal scores).
func bestLast(cs []lightCand) int {
	bi := 0
	for i := range cs {
		if !(cs[bi].score < cs[i].score) {
			bi = i
		}
	}
	return bi
}

// cmpScore orders scores ascending for the stable sorts. Not
// cmp.Compare, which puts NaN first: here NaN compares equal to every
// score, as these sorts always did.
func cmpScore(a, b float64) int {
	switch {
	case a < b:
		return -1
	case b < a:
		return 1
	}
	return 0
}

// hailOrder is the order in which hail tries candidates after the best
// fails the N+1 check: the list in reverse candidate order, stably
// sorted by score. cs itself is left as it is.
func hailOrder(cs []lightCand) []lightCand {
	order := slices.Clone(cs)
	slices.Reverse(order)
	slices.SortStableFunc(order, func(a, b lightCand) int { return cmpScore(a.score, b.score) })
	return order
}

// tieBudget is opts.ExactTieBudget with its default applied (see Options).
func tieBudget(opts *Options) int {
	if opts.ExactTieBudget == 0 {
		return 4_000_000
	}
	return opts.ExactTieBudget
}
