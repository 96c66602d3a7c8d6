package candidates

import (
	"context"
	"encoding/binary"
	"slices"
	"sort"
)

// combine checks the traits of one combination and builds its option.
func (s *Snapshot) combine(gp *groupPlan, order []int, lists [][]int32, idx []int, anchor int32) (option, bool) {
	var provs []int32
	for k := range order {
		p := lists[k][idx[k]]
		if s.hasAnyTrait(p, gp.forbidden) {
			return option{}, false
		}
		dup := false
		for _, x := range provs {
			if x == p {
				dup = true
				break
			}
		}
		if !dup {
			provs = append(provs, p)
		}
	}
	for _, set := range gp.required {
		found := false
		for _, p := range provs {
			if s.hasAnyTrait(p, set) {
				found = true
				break
			}
		}
		if !found {
			return option{}, false
		}
	}
	allocs := make([]palloc, len(order))
	for k, i := range order {
		allocs[k] = palloc{lists[k][idx[k]], gp.res[i].c, gp.res[i].amount}
	}
	sort.Slice(provs, func(i, j int) bool { return s.provs[provs[i]].id < s.provs[provs[j]].id })
	return option{anchor: anchor, allocs: allocs, provs: provs}, true
}

// merged is one distinct candidate: its consolidated allocations
// (allocs[aStart:aStart+aLen] of the merger) and the option chosen per
// group (byAnchor[anchor][choices[cStart+g]] of group g). It holds no
// pointers, so tens of thousands of them cost the collector nothing.
type merged struct {
	anchor, aStart, aLen, cStart int32
}

type merger struct {
	s             *Snapshot
	req           *Request
	plans         []*groupPlan
	isolate       bool
	excludeNested bool
	sameAt        [][][]int // depth → same_subtree sets (group indexes) complete at that depth
	chosen        []*option
	chosenIdx     []int32
	amounts       []palloc
	granular      []int32
	seen          map[string]struct{}
	out           []merged
	allocs        []AllocRef
	choices       []int32
	stop, capped  bool
	max, limit    int
	steps         int
	maxSteps      int
	capFromSearch bool // max is SearchCap, not MaxCandidates
	searchCapped  bool
	key           []byte
}

func newMerger(s *Snapshot, req *Request, plans []*groupPlan) *merger {
	m := &merger{
		s: s, req: req, plans: plans, isolate: req.GroupPolicy == "isolate",
		excludeNested: !req.NestedAware && s.hasTrees,
		sameAt:        make([][][]int, len(plans)),
		chosen:        make([]*option, len(plans)),
		chosenIdx:     make([]int32, len(plans)),
		seen:          map[string]struct{}{},
		max:           req.MaxCandidates,
	}
	if req.SearchCap > 0 {
		if m.max <= 0 || m.max > req.SearchCap {
			m.max, m.capFromSearch = req.SearchCap, true
		}
		m.maxSteps = 16 * req.SearchCap
	}
	if !req.Randomize {
		m.limit = req.Limit
	}
	bySuffix := map[string]int{}
	for i, gp := range plans {
		bySuffix[gp.g.Suffix] = i
	}
	for _, set := range req.SameSubtrees {
		var gs []int
		last := -1
		for _, suf := range set {
			if i, ok := bySuffix[suf]; ok {
				gs = append(gs, i)
				if i > last {
					last = i
				}
			}
		}
		if last >= 0 {
			m.sameAt[last] = append(m.sameAt[last], gs)
		}
	}
	return m
}

func (m *merger) run(ctx context.Context) error {
	// Anchors every group can use, in provider id order.
	var anchors []int32
	for _, a := range m.plans[0].anchors {
		ok := true
		for _, gp := range m.plans[1:] {
			if len(gp.byAnchor[a]) == 0 {
				ok = false
				break
			}
		}
		if ok {
			anchors = append(anchors, a)
		}
	}
	sort.Slice(anchors, func(i, j int) bool { return m.s.provs[anchors[i]].id < m.s.provs[anchors[j]].id })
	for _, a := range anchors {
		if err := m.dfs(ctx, a, 0); err != nil {
			return err
		}
		if m.stop {
			break
		}
	}
	return nil
}

func (m *merger) dfs(ctx context.Context, anchor int32, depth int) error {
	if depth == len(m.plans) {
		m.emit(anchor)
		return nil
	}
	m.steps++
	if m.steps&1023 == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A search that prunes nearly everything emits little but can
		// still walk a huge product: bound the walk as well.
		if m.maxSteps > 0 && m.steps > m.maxSteps {
			m.stop, m.capped, m.searchCapped = true, true, true
			return nil
		}
	}
	gp := m.plans[depth]
	opts := gp.byAnchor[anchor]
	for i := range opts {
		o := &opts[i]
		if gp.g.UseSameProvider && m.isolate && m.granularUsed(o.provs[0]) {
			continue
		}
		mark := len(m.amounts)
		var undo []undoEntry
		ok := true
		for _, a := range o.allocs {
			j := m.findAmount(a.p, a.c)
			if j < 0 {
				if m.excludeNested && m.sameTreeOther(a.p) {
					ok = false
					break
				}
				total := a.amount
				if !m.s.provs[a.p].inventory(a.c).within(total) {
					ok = false
					break
				}
				m.amounts = append(m.amounts, palloc{a.p, a.c, total})
			} else {
				total := m.amounts[j].amount + a.amount
				if !m.s.provs[a.p].inventory(a.c).within(total) {
					ok = false
					break
				}
				undo = append(undo, undoEntry{j, m.amounts[j].amount})
				m.amounts[j].amount = total
			}
		}
		if ok {
			m.chosen[depth] = o
			m.chosenIdx[depth] = int32(i)
			if m.sameSubtreeOK(depth) {
				pushed := false
				if gp.g.UseSameProvider {
					m.granular = append(m.granular, o.provs[0])
					pushed = true
				}
				if err := m.dfs(ctx, anchor, depth+1); err != nil {
					return err
				}
				if pushed {
					m.granular = m.granular[:len(m.granular)-1]
				}
			}
			m.chosen[depth] = nil
		}
		for k := len(undo) - 1; k >= 0; k-- {
			m.amounts[undo[k].i].amount = undo[k].amount
		}
		m.amounts = m.amounts[:mark]
		if m.stop {
			return nil
		}
	}
	return nil
}

type undoEntry struct {
	i      int
	amount int64
}

func (m *merger) findAmount(p, c int32) int {
	for j, a := range m.amounts {
		if a.p == p && a.c == c {
			return j
		}
	}
	return -1
}

// sameTreeOther reports another provider of p's tree among the amounts
// (below 1.29 a candidate may use one provider per tree).
func (m *merger) sameTreeOther(p int32) bool {
	r := m.s.provs[p].root
	for _, a := range m.amounts {
		if a.p != p && m.s.provs[a.p].root == r {
			return true
		}
	}
	return false
}

func (m *merger) granularUsed(p int32) bool {
	for _, x := range m.granular {
		if x == p {
			return true
		}
	}
	return false
}

// sameSubtreeOK checks the same_subtree sets completed at depth: among
// the providers of the listed groups one is an ancestor (or itself) of
// all the others.
func (m *merger) sameSubtreeOK(depth int) bool {
	for _, gs := range m.sameAt[depth] {
		var ps []int32
		for _, g := range gs {
			for _, p := range m.chosen[g].provs {
				dup := false
				for _, x := range ps {
					if x == p {
						dup = true
						break
					}
				}
				if !dup {
					ps = append(ps, p)
				}
			}
		}
		if len(ps) <= 1 {
			continue
		}
		found := false
		for _, cand := range ps {
			all := true
			for _, p := range ps {
				if !m.s.isAncestorOrSelf(cand, p) {
					all = false
					break
				}
			}
			if all {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (m *merger) emit(anchor int32) {
	s := m.s
	// Grow the pools by doubling: append's gentler growth for big
	// slices made a 40,000-candidate answer mostly memmove.
	m.allocs = grow(m.allocs, len(m.amounts))
	m.choices = grow(m.choices, len(m.chosenIdx))
	m.out = grow(m.out, 1)
	start := len(m.allocs)
	for _, a := range m.amounts {
		m.allocs = append(m.allocs, AllocRef{a.p, a.c, a.amount})
	}
	allocs := m.allocs[start:]
	// By provider id then class id; a candidate has a handful of
	// allocations, so insertion sort beats sort.Slice's reflection.
	for i := 1; i < len(allocs); i++ {
		for j := i; j > 0 && s.allocLess(allocs[j], allocs[j-1]); j-- {
			allocs[j], allocs[j-1] = allocs[j-1], allocs[j]
		}
	}
	// Only a candidate made entirely of sharing providers can be reached
	// from several anchors; any other is new by construction.
	allShared := true
	for _, o := range m.chosen {
		for _, p := range o.provs {
			if !s.provs[p].isShared {
				allShared = false
			}
		}
	}
	if allShared && m.seenBefore(allocs) {
		m.allocs = m.allocs[:start]
		return
	}
	cs := len(m.choices)
	m.choices = append(m.choices, m.chosenIdx...)
	m.out = append(m.out, merged{anchor: anchor, aStart: int32(start), aLen: int32(len(allocs)), cStart: int32(cs)})
	if m.max > 0 && len(m.out) >= m.max {
		m.stop, m.capped = true, true
		m.searchCapped = m.searchCapped || m.capFromSearch
	}
	if m.limit > 0 && len(m.out) >= m.limit {
		m.stop = true
	}
}

// grow makes room for n more elements, at least doubling the capacity.
func grow[T any](xs []T, n int) []T {
	if len(xs)+n <= cap(xs) {
		return xs
	}
	return slices.Grow(xs, max(n, len(xs)+64))
}

func (s *Snapshot) allocLess(a, b AllocRef) bool {
	return s.provRank[a.Provider]|s.classRank[a.Class] < s.provRank[b.Provider]|s.classRank[b.Class]
}

// seenBefore records the candidate's key and reports a duplicate.
func (m *merger) seenBefore(allocs []AllocRef) bool {
	k := m.key[:0]
	for _, a := range allocs {
		k = binary.AppendVarint(k, int64(a.Provider))
		k = binary.AppendVarint(k, int64(a.Class))
		k = binary.AppendVarint(k, a.Amount)
	}
	k = append(k, 0xff)
	for _, o := range m.chosen {
		k = binary.AppendVarint(k, int64(len(o.provs)))
		for _, p := range o.provs {
			k = binary.AppendVarint(k, int64(p))
		}
	}
	m.key = k
	if _, dup := m.seen[string(k)]; dup {
		return true
	}
	m.seen[string(k)] = struct{}{}
	return false
}
