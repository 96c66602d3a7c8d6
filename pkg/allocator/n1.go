package allocator

import (
	"os"
	"slices"
)

// The global N+1 capacity check (htools' GlobalN1): after a placement,
// every node of the scope must be evacuable: its DRBD primaries fail over
// to their secondaries, its shared-storage instances move to another node
// of the group, and its other instances (biggest memory first) can be
// re-created elsewhere in the group.

// state is a cluster state: a base cluster plus overlaid nodes and
// instances (copy on write), with metric statistics kept up to date.
type state struct {
	c     *Cluster
	nodes map[int]Node
	insts map[int]Instance // overlaid and added instances
	// inScope marks the instances of the scope (hail's instance list);
	// size is that list's size. New instances get index size, as in
	// htools' updateIl, which overwrites an existing instance when the
	// list is a group's subset: that quirk is reproduced.
	inScope []bool
	size    int
	stats   *Stats // nil when scores are not needed
	// pending are the nodes changed since stats was computed, with their
	// state at that time: the statistics are brought up to date only when
	// a score is needed (most evacuation checks never need one).
	pending []pendingNode
}

type pendingNode struct {
	idx int
	old Node
}

// getStats returns the statistics of the current state.
func (s *state) getStats() *Stats {
	if s.stats == nil || len(s.pending) == 0 {
		return s.stats
	}
	slices.SortFunc(s.pending, func(a, b pendingNode) int { return a.idx - b.idx })
	st := s.stats.clone()
	for i := range s.pending {
		old := &s.pending[i].old
		ov, nv := nodeValues(old), nodeValues(s.node(s.pending[i].idx))
		st.update(old, s.node(s.pending[i].idx), &ov, &nv)
	}
	s.stats, s.pending = st, nil
	return st
}

func (s *state) node(i int) *Node {
	if n, ok := s.nodes[i]; ok {
		return &n
	}
	return &s.c.Nodes[i]
}

func (s *state) setNode(i int, n Node) {
	if s.stats != nil && !slices.ContainsFunc(s.pending, func(p pendingNode) bool { return p.idx == i }) {
		s.pending = append(s.pending, pendingNode{idx: i, old: *s.node(i)})
	}
	s.nodes[i] = n
}

func (s *state) inst(i int) *Instance {
	if v, ok := s.insts[i]; ok {
		return &v
	}
	return &s.c.Instances[i]
}

func (s *state) setInst(i int, v Instance) { s.insts[i] = v }

// addInst adds an instance at index size (htools' updateIl) and reports
// whether that overwrote an existing one.
func (s *state) addInst(v Instance) (idx int, overwrote bool) {
	idx = s.size
	_, added := s.insts[idx]
	present := added || (idx < len(s.inScope) && s.inScope[idx])
	if !present {
		s.size++
	}
	v.Idx = idx
	s.insts[idx] = v
	return idx, present
}

func (s *state) fork() *state {
	t := &state{c: s.c, nodes: make(map[int]Node, len(s.nodes)+8), insts: make(map[int]Instance, len(s.insts)+4),
		inScope: s.inScope, size: s.size, stats: s.stats, pending: slices.Clone(s.pending)}
	for k, v := range s.nodes {
		t.nodes[k] = v
	}
	for k, v := range s.insts {
		t.insts[k] = v
	}
	return t
}

func newState(c *Cluster, sc scope, stats *Stats) *state {
	in := make([]bool, len(c.Instances))
	for _, i := range sc.insts {
		in[i] = true
	}
	return &state{c: c, nodes: map[int]Node{}, insts: map[int]Instance{}, inScope: in, size: len(sc.insts), stats: stats}
}

// placedState is the state after a placement (extractNl/updateIl).
func (c *Cluster) placedState(sc scope, pl *Placement) (*state, bool) {
	s := newState(c, sc, pl.stats)
	idx, overwrote := s.addInst(pl.Inst)
	inst := *s.inst(idx)
	if pl.Inst.Idx >= 0 {
		// An existing instance (group change): as in htools, the node
		// lists keep its old index, which still names the old placement.
		inst.Idx = pl.Inst.Idx
		overwrote = true
	}
	np := pl.NewP
	np.commitPri(&inst)
	s.nodes[pl.P] = np
	if pl.S >= 0 {
		ns := pl.NewS
		ns.commitSec(&inst, pl.P)
		s.nodes[pl.S] = ns
	}
	return s, overwrote
}

// failover is applyMoveEx Failover with force (Moves.move).
func (s *state) failover(idx int) FailMode { return s.moveFailover(idx, true) }

// moveFailover is applyMoveEx Failover: the instance's primary and
// secondary swap.
func (s *state) moveFailover(idx int, force bool) FailMode {
	inst := *s.inst(idx)
	if inst.SNode < 0 {
		return FailInternal
	}
	oldP, oldS := s.node(inst.PNode), s.node(inst.SNode)
	if f := checkMigration(oldP, oldS); f != FailNone {
		return f
	}
	intP := oldP.removePri(&inst)
	intS := oldS.removeSec(&inst)
	newP, f := intS.addPri(&inst, oldP.Offline || force)
	if f != FailNone {
		return f
	}
	newS, f := intP.addSec(&inst, inst.SNode, oldP.Offline, oldP.Offline || force)
	if f != FailNone {
		return f
	}
	moved := inst
	moved.PNode, moved.SNode = inst.SNode, inst.PNode
	newP.commitPri(&moved)
	newS.commitSec(&moved, moved.PNode)
	pdx, sdx := inst.PNode, inst.SNode
	s.setNode(sdx, newP)
	s.setNode(pdx, newS)
	s.setInst(idx, moved)
	return FailNone
}

// moveFailoverToAny is applyMoveEx (FailoverToAny t).
func (s *state) moveFailoverToAny(idx, t int, force bool) FailMode {
	inst := *s.inst(idx)
	oldP, tn := s.node(inst.PNode), s.node(t)
	if f := checkMigration(oldP, tn); f != FailNone {
		return f
	}
	newT, f := tn.addPri(&inst, oldP.Offline || force)
	if f != FailNone {
		return f
	}
	moved := inst
	moved.PNode = t
	newT.commitPri(&moved)
	s.setNode(inst.PNode, oldP.removePri(&inst))
	s.setNode(t, newT)
	s.setInst(idx, moved)
	return FailNone
}

// moveReplaceSecondary is applyMoveEx (ReplaceSecondary t).
func (s *state) moveReplaceSecondary(idx, t int, force bool) FailMode {
	inst := *s.inst(idx)
	if inst.SNode < 0 {
		return FailInternal
	}
	pdx, sdx := inst.PNode, inst.SNode
	oldS, tn, pn := s.node(sdx), s.node(t), s.node(pdx)
	pn2 := pn.removePri(&inst)
	intS := oldS.removeSec(&inst)
	moved := inst
	moved.LocationScore = countCommon(pn.LocTags, tn.LocTags)
	moved.SNode = t
	newS, f := tn.addSec(&moved, pdx, false, oldS.Offline || force)
	if f != FailNone {
		return f
	}
	pn3, f := pn2.addPri(&moved, true)
	if f != FailNone {
		return f
	}
	newS.commitSec(&moved, pdx)
	pn3.commitPri(&moved)
	s.setNode(sdx, intS)
	s.setNode(t, newS)
	s.setNode(pdx, pn3)
	s.setInst(idx, moved)
	return FailNone
}

// failoverToAny moves a shared-storage instance to the best target.
func (s *state) failoverToAny(idx int, targets []int) bool {
	inst := *s.inst(idx)
	old := s.node(inst.PNode)
	bestScore, bestT := 0.0, -1
	var bestNode Node
	for _, t := range targets {
		tn := s.node(t)
		if checkMigration(old, tn) != FailNone {
			continue
		}
		nn, f := tn.addPri(&inst, true)
		if f != FailNone {
			continue
		}
		sc := s.scoreWith(t, tn, &nn)
		if bestT < 0 || !(bestScore < sc) {
			bestScore, bestT, bestNode = sc, t, nn
		}
	}
	if bestT < 0 {
		return false
	}
	moved := inst
	moved.PNode = bestT
	bestNode.commitPri(&moved)
	s.setNode(inst.PNode, old.removePri(&inst))
	s.setNode(bestT, bestNode)
	s.setInst(idx, moved)
	return true
}

// recreate places a copy of a non-movable instance on the best target
// (allocateOnSingle with soft errors ignored).
func (s *state) recreate(idx int, targets []int) bool {
	inst := *s.inst(idx)
	bestScore, bestT := 0.0, -1
	var bestNode Node
	for _, t := range targets {
		tn := s.node(t)
		if inst.MatchesPolicy(tn.Policy, tn.ExclStorage) != FailNone {
			continue
		}
		nn, f := tn.addPri(&inst, true)
		if f != FailNone {
			continue
		}
		sc := s.scoreWith(t, tn, &nn)
		if bestT < 0 || !(bestScore < sc) {
			bestScore, bestT, bestNode = sc, t, nn
		}
	}
	if bestT < 0 {
		return false
	}
	cp := inst
	cp.PNode, cp.SNode = bestT, -1
	idx, _ = s.addInst(cp)
	cp.Idx = idx
	bestNode.commitPri(&cp)
	s.setNode(bestT, bestNode)
	return true
}

func (s *state) scoreWith(i int, old, nw *Node) float64 {
	if s.stats == nil {
		return 0
	}
	st := s.getStats().clone()
	ov, nv := nodeValues(old), nodeValues(nw)
	st.update(old, nw, &ov, &nv)
	return st.Score()
}

// canEvacuate is GlobalN1.canEvacuateNode for node n of state s.
func (s *state) canEvacuate(sc scope, n int) bool {
	node := s.node(n)
	var drbd, shared, other []int
	// htools keeps primaries newest first.
	for k := len(node.pList) - 1; k >= 0; k-- {
		idx := node.pList[k]
		in := s.inst(idx)
		switch {
		case in.Template == DTDrbd:
			drbd = append(drbd, idx)
		case in.Template.movable():
			shared = append(shared, idx)
		default:
			other = append(other, idx)
		}
	}
	if len(shared) == 0 && len(other) == 0 && len(drbd) == 0 {
		return true
	}
	w := s.fork()
	for _, idx := range drbd {
		if w.failover(idx) != FailNone {
			return false
		}
	}
	if len(shared) == 0 && len(other) == 0 {
		return true
	}
	g := w.node(n).Group
	var escape []int
	for _, i := range sc.nodes {
		if i != n && w.node(i).Group == g {
			escape = append(escape, i)
		}
	}
	for _, idx := range shared {
		if !w.failoverToAny(idx, escape) {
			return false
		}
	}
	slices.SortStableFunc(other, func(a, b int) int { return w.inst(b).Mem - w.inst(a).Mem })
	for _, idx := range other {
		if !w.recreate(idx, escape) {
			return false
		}
	}
	return true
}

// n1Cache remembers which nodes are evacuable before any placement.
type n1Cache struct {
	ok             []bool // by node index
	failing        []int  // scope nodes that cannot be evacuated
	inScope        []bool
	nonDrbd        []bool        // node has non-DRBD primaries
	nonDrbdByGroup map[int][]int // those nodes per group, in order
}

// globalN1 checks the state after placement pl over the scope.
func (c *Cluster) globalN1(sc scope, pl *Placement) bool {
	s, overwrote := c.placedState(sc, pl)
	if s.stats == nil {
		// Dedicated or unscored: scores only rank evacuation targets.
		s.stats = c.statsOf(sc)
	}
	cache := c.n1base(sc)
	check := func(i int) bool {
		if s.canEvacuate(sc, i) {
			return true
		}
		if debugN1 {
			println("N1 fail: placement", c.Nodes[pl.P].Name, "node", c.Nodes[i].Name)
		}
		return false
	}
	if overwrote {
		for _, i := range sc.nodes {
			if !check(i) {
				return false
			}
		}
		return true
	}
	// Only the nodes the placement can affect are evacuated again: the
	// placement's nodes, the primaries whose DRBD secondaries are on them,
	// and the nodes of the group that re-create or move instances (their
	// targets changed). Every other node keeps its earlier verdict.
	affected := map[int]bool{pl.P: true}
	if pl.S >= 0 {
		affected[pl.S] = true
	}
	for _, a := range []int{pl.P, pl.S} {
		if a < 0 {
			continue
		}
		for _, idx := range s.node(a).sList {
			affected[s.inst(idx).PNode] = true
		}
	}
	g := c.Nodes[pl.P].Group
	for _, i := range cache.failing {
		if !affected[i] && !(c.Nodes[i].Group == g && cache.nonDrbd[i]) {
			if debugN1 {
				println("N1 cached fail: node", c.Nodes[i].Name)
			}
			return false
		}
	}
	var todo []int
	for i := range affected {
		if cache.inScope[i] {
			todo = append(todo, i)
		}
	}
	for _, i := range cache.nonDrbdByGroup[g] {
		if !affected[i] {
			todo = append(todo, i)
		}
	}
	slices.Sort(todo)
	for _, i := range todo {
		if !check(i) {
			return false
		}
	}
	return true
}

func (c *Cluster) hasNonDrbd(i int) bool {
	for _, idx := range c.Nodes[i].pList {
		if c.Instances[idx].Template != DTDrbd {
			return true
		}
	}
	return false
}

// n1base computes (once per cluster state and scope) which nodes can be
// evacuated before the placement.
func (c *Cluster) n1base(sc scope) *n1Cache {
	key := len(sc.nodes)
	if key > 0 {
		key = key*1_000_003 + sc.nodes[0]
	}
	if c.n1 != nil && c.n1key == key && c.n1ver == c.version {
		return c.n1
	}
	s := newState(c, sc, c.statsOf(sc))
	cache := &n1Cache{ok: make([]bool, len(c.Nodes)), inScope: make([]bool, len(c.Nodes)),
		nonDrbd: make([]bool, len(c.Nodes)), nonDrbdByGroup: map[int][]int{}}
	for _, i := range sc.nodes {
		cache.inScope[i] = true
		cache.ok[i] = s.canEvacuate(sc, i)
		if !cache.ok[i] {
			cache.failing = append(cache.failing, i)
		}
		if c.hasNonDrbd(i) {
			cache.nonDrbd[i] = true
			g := c.Nodes[i].Group
			cache.nonDrbdByGroup[g] = append(cache.nonDrbdByGroup[g], i)
		}
	}
	c.n1, c.n1key, c.n1ver = cache, key, c.version
	return cache
}

var debugN1 = os.Getenv("LEASEHOLD_DEBUG_N1") == "1"
