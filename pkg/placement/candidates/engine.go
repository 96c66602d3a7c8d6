package candidates

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sort"
)

// palloc is an amount of a class (index) from a provider (index).
type palloc struct {
	p, c   int32
	amount int64
}

// option is one way to satisfy one group within one anchor's tree.
type option struct {
	anchor int32
	allocs []palloc
	provs  []int32 // providers satisfying the group, sorted by id
	byUUID []int32 // provs sorted by UUID, filled when first rendered
}

type resReq struct {
	c      int32
	amount int64
}

// groupPlan is a group resolved against the snapshot with its options.
type groupPlan struct {
	g         *Group
	res       []resReq
	required  [][]int32
	forbidden []int32
	inAggs    map[int32]bool // nil: no member_of
	badAggs   []int32
	treeRoot  int32
	byAnchor  [][]option // by anchor provider index
	anchors   []int32    // anchors having options, in insertion order
	capped    bool       // SearchCap stopped the combinations
}

func (gp *groupPlan) add(a int32, o option) {
	if len(gp.byAnchor[a]) == 0 {
		gp.anchors = append(gp.anchors, a)
	}
	gp.byAnchor[a] = append(gp.byAnchor[a], o)
}

// Find computes the allocation candidates of req.
func (s *Snapshot) Find(ctx context.Context, req *Request) (*Result, error) {
	anchorOK, ok, err := s.anchorFilter(req)
	if err != nil || !ok {
		return &Result{}, err
	}
	plans := make([]*groupPlan, 0, len(req.Groups))
	for i := range req.Groups {
		gp, err := s.planGroup(ctx, &req.Groups[i], anchorOK, req.SearchCap)
		if err != nil {
			return nil, err
		}
		if gp == nil || len(gp.anchors) == 0 {
			capped := gp != nil && gp.capped
			return &Result{Capped: capped, SearchCapped: capped}, nil
		}
		plans = append(plans, gp)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if len(plans) == 0 {
		return &Result{}, nil
	}
	m := newMerger(s, req, plans)
	if err := m.run(ctx); err != nil {
		return nil, err
	}
	out := m.out
	if req.Randomize {
		rng := req.Rand
		if rng == nil {
			rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	if req.Limit > 0 && len(out) > req.Limit {
		out = out[:req.Limit]
	}
	for _, gp := range plans {
		if gp.capped {
			m.capped, m.searchCapped = true, true
		}
	}
	res := &Result{Capped: m.capped, SearchCapped: m.searchCapped, Snapshot: s, out: out, allocs: m.allocs, choices: m.choices, plans: plans}
	res.order = make([]int, len(plans))
	for i := range res.order {
		res.order[i] = i
	}
	// By suffix: a few groups, insertion sort.
	for i := 1; i < len(res.order); i++ {
		for j := i; j > 0 && plans[res.order[j]].g.Suffix < plans[res.order[j-1]].g.Suffix; j-- {
			res.order[j], res.order[j-1] = res.order[j-1], res.order[j]
		}
	}
	res.Summaries = s.summaries(res, req.NestedAware)
	return res, nil
}

// anchorFilter resolves root_required: the roots a candidate may be
// anchored at (nil: any). ok is false when no root qualifies.
func (s *Snapshot) anchorFilter(req *Request) (func(int32) bool, bool, error) {
	if len(req.RootRequired) == 0 && len(req.RootForbidden) == 0 {
		return func(int32) bool { return true }, true, nil
	}
	var reqd, forb []int32
	for _, n := range req.RootRequired {
		t, ok := s.traitIdx[n]
		if !ok {
			return nil, false, &UnknownTraitError{n}
		}
		reqd = append(reqd, t)
	}
	for _, n := range req.RootForbidden {
		t, ok := s.traitIdx[n]
		if !ok {
			return nil, false, &UnknownTraitError{n}
		}
		forb = append(forb, t)
	}
	okRoots := map[int32]bool{}
	for _, r := range s.roots {
		if s.provs[r].parent >= 0 {
			continue
		}
		good := true
		for _, t := range reqd {
			if !s.hasTrait(r, t) {
				good = false
				break
			}
		}
		if good && s.hasAnyTrait(r, forb) {
			good = false
		}
		if good {
			okRoots[r] = true
		}
	}
	if len(okRoots) == 0 {
		return nil, false, nil
	}
	return func(a int32) bool { return okRoots[a] }, true, nil
}

// planGroup resolves g in upstream's order (classes, member_of, traits,
// in_tree, capacity) and computes its options. A nil plan means the
// group, hence the whole request, has no candidate.
func (s *Snapshot) planGroup(ctx context.Context, g *Group, anchorOK func(int32) bool, searchCap int) (*groupPlan, error) {
	gp := &groupPlan{g: g, treeRoot: -1}
	for _, r := range g.Resources {
		c, ok := s.classIdx[r.Class]
		if !ok {
			return nil, &UnknownClassError{r.Class}
		}
		gp.res = append(gp.res, resReq{c, r.Amount})
	}
	if len(g.MemberOf) > 0 {
		for i, set := range g.MemberOf {
			members := map[int32]bool{}
			for _, u := range set {
				if a, ok := s.aggIdx[u]; ok {
					for _, p := range s.aggMember[a] {
						if i == 0 || gp.inAggs[p] {
							members[p] = true
						}
					}
				}
			}
			gp.inAggs = members
			if len(members) == 0 {
				return nil, nil
			}
		}
	}
	for _, set := range g.RequiredTraits {
		var ids []int32
		for _, n := range set {
			t, ok := s.traitIdx[n]
			if !ok {
				return nil, &UnknownTraitError{n}
			}
			ids = append(ids, t)
		}
		gp.required = append(gp.required, ids)
	}
	for _, n := range g.ForbiddenTraits {
		t, ok := s.traitIdx[n]
		if !ok {
			return nil, &UnknownTraitError{n}
		}
		gp.forbidden = append(gp.forbidden, t)
	}
	for _, u := range g.ForbiddenAggs {
		if a, ok := s.aggIdx[u]; ok {
			gp.badAggs = append(gp.badAggs, a)
		}
	}
	if g.InTree != "" {
		p, ok := s.byUUID[g.InTree]
		if !ok {
			return nil, nil
		}
		gp.treeRoot = s.provs[p].root
	}
	gp.byAnchor = make([][]option, len(s.provs))
	capable := make([][]int32, len(gp.res))
	for i, r := range gp.res {
		for _, p := range s.byClass[r.c] {
			if gp.treeRoot >= 0 && s.provs[p].root != gp.treeRoot {
				continue
			}
			if s.provs[p].inventory(r.c).fits(r.amount) {
				capable[i] = append(capable[i], p)
			}
		}
		if len(capable[i]) == 0 {
			return nil, nil
		}
	}
	if !g.UseSameProvider && (s.sharing || s.hasTrees) {
		if err := s.multiProvider(ctx, gp, capable, anchorOK, searchCap); err != nil {
			return nil, err
		}
	} else {
		s.singleProvider(gp, capable, anchorOK)
	}
	return gp, nil
}

func (s *Snapshot) hasRequired(p int32, required [][]int32) bool {
	for _, set := range required {
		if !s.hasAnyTrait(p, set) {
			return false
		}
	}
	return true
}

// singleProvider is _alloc_candidates_single_provider: every provider
// that alone satisfies the group, anchored at its root and, for a sharing
// provider, at every tree it shares with.
func (s *Snapshot) singleProvider(gp *groupPlan, capable [][]int32, anchorOK func(int32) bool) {
	var cands []int32
	if len(gp.res) > 0 {
		cands = capable[0]
	} else {
		// A resourceless group selects only by traits or aggregates;
		// upstream finds nothing when it has neither.
		if len(gp.required) == 0 && gp.inAggs == nil {
			return
		}
		cands = make([]int32, 0, len(s.provs))
		for _, r := range s.roots {
			cands = append(cands, s.treeOf[r]...)
		}
		sort.Slice(cands, func(i, j int) bool { return s.provs[cands[i]].id < s.provs[cands[j]].id })
	}
next:
	for _, p := range cands {
		for i := 1; i < len(gp.res); i++ {
			if gp.treeRoot >= 0 && s.provs[p].root != gp.treeRoot {
				continue next
			}
			iv := s.provs[p].inventory(gp.res[i].c)
			if iv == nil || !iv.fits(gp.res[i].amount) {
				continue next
			}
		}
		if !s.hasRequired(p, gp.required) || s.hasAnyTrait(p, gp.forbidden) {
			continue
		}
		if gp.inAggs != nil && !gp.inAggs[p] {
			continue
		}
		if s.inAnyAgg(p, gp.badAggs) {
			continue
		}
		allocs := make([]palloc, len(gp.res))
		for i, r := range gp.res {
			allocs[i] = palloc{p, r.c, r.amount}
		}
		provs := []int32{p}
		root := s.provs[p].root
		if anchorOK(root) {
			gp.add(root, option{anchor: root, allocs: allocs, provs: provs})
		}
		if s.provs[p].isShared {
			for _, a := range s.provs[p].anchors {
				if a == root || !anchorOK(a) {
					continue
				}
				gp.add(a, option{anchor: a, allocs: allocs, provs: provs})
			}
		}
	}
}

// multiProvider is get_trees_matching_all + _alloc_candidates_multiple_providers:
// per anchor, every combination of one provider per class drawn from the
// anchor's tree and the sharing providers reaching it, whose providers
// together have the required traits and none has a forbidden one.
//
// The combinations are a product over the group's classes, which grows
// without bound in a big tree: past searchCap of them (0: no cap) the
// group keeps the options found so far.
func (s *Snapshot) multiProvider(ctx context.Context, gp *groupPlan, capable [][]int32, anchorOK func(int32) bool, searchCap int) error {
	bad := func(p int32) bool { return s.inAnyAgg(p, gp.badAggs) }
	perRes := make([]map[int32][]int32, len(gp.res))
	var common map[int32]bool
	for i := range gp.res {
		m := map[int32][]int32{}
		add := func(p, a int32) {
			if !anchorOK(a) {
				return
			}
			if gp.inAggs != nil && !gp.inAggs[p] && !gp.inAggs[a] {
				return
			}
			if len(gp.badAggs) > 0 && (bad(p) || bad(a)) {
				return
			}
			for _, x := range m[a] {
				if x == p {
					return
				}
			}
			m[a] = append(m[a], p)
		}
		for _, p := range capable[i] {
			add(p, s.provs[p].root)
		}
		if gp.treeRoot < 0 {
			for _, p := range capable[i] {
				if !s.provs[p].isShared || (gp.inAggs != nil && !gp.inAggs[p]) {
					continue
				}
				for _, a := range s.provs[p].anchors {
					add(p, a)
				}
			}
		}
		if len(m) == 0 {
			return nil
		}
		if common == nil {
			common = map[int32]bool{}
			for a := range m {
				common[a] = true
			}
		} else {
			for a := range common {
				if _, ok := m[a]; !ok {
					delete(common, a)
				}
			}
		}
		if len(common) == 0 {
			return nil
		}
		perRes[i] = m
	}
	// Classes in id order, as upstream builds its product.
	order := make([]int, len(gp.res))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return s.classIDs[gp.res[order[x]].c] < s.classIDs[gp.res[order[y]].c] })
	anchors := make([]int32, 0, len(common))
	for a := range common {
		anchors = append(anchors, a)
	}
	sort.Slice(anchors, func(i, j int) bool { return s.provs[anchors[i]].id < s.provs[anchors[j]].id })
	lists := make([][]int32, len(order))
	idx := make([]int, len(order))
	tried := 0
	for _, a := range anchors {
		for k, i := range order {
			l := append([]int32(nil), perRes[i][a]...)
			sort.Slice(l, func(x, y int) bool { return s.provs[l[x]].id < s.provs[l[y]].id })
			lists[k] = l
			idx[k] = 0
		}
		for {
			if tried++; searchCap > 0 && tried > searchCap {
				gp.capped = true
				return nil
			}
			if tried&4095 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if opt, ok := s.combine(gp, order, lists, idx, a); ok {
				gp.add(a, opt)
			}
			k := len(idx) - 1
			for ; k >= 0; k-- {
				idx[k]++
				if idx[k] < len(lists[k]) {
					break
				}
				idx[k] = 0
			}
			if k < 0 {
				break
			}
		}
	}
	return nil
}

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

// summaries describes every provider of the trees the candidates use
// (below 1.29 in a nested deployment: only the providers they use).
func (s *Snapshot) summaries(res *Result, nestedAware bool) []Summary {
	var provs []int32
	if nestedAware || !s.hasTrees {
		roots := make([]bool, len(s.provs))
		for a := range res.usedAllocs() {
			roots[s.provs[a.Provider].root] = true
		}
		for _, r := range s.roots {
			if roots[r] {
				provs = append(provs, s.treeOf[r]...)
			}
		}
	} else {
		used := map[int32]bool{}
		for a := range res.usedAllocs() {
			if !used[a.Provider] {
				used[a.Provider] = true
				provs = append(provs, a.Provider)
			}
		}
		sort.Slice(provs, func(i, j int) bool { return s.provs[provs[i]].id < s.provs[provs[j]].id })
	}
	// A summary depends on the provider only: build each once per
	// snapshot, share the slices (callers only read them).
	all := s.Memo("candidates/summary-per-provider", func() any {
		idx := make([]int32, len(s.provs))
		for i := range idx {
			idx[i] = int32(i)
		}
		return s.summarize(idx)
	}).([]Summary)
	sums := make([]Summary, len(provs))
	for i, pi := range provs {
		sums[i] = all[pi]
	}
	return sums
}

func (s *Snapshot) summarize(provs []int32) []Summary {
	sums := make([]Summary, len(provs))
	nRes, nTraits := 0, 0
	for _, pi := range provs {
		nRes += len(s.provs[pi].inv)
		nTraits += len(s.provs[pi].traits)
	}
	resBuf := make([]SummaryResource, nRes)
	traitBuf := make([]string, nTraits)
	for i, pi := range provs {
		p := &s.provs[pi]
		sm := Summary{UUID: p.uuid, RootUUID: s.provs[p.root].uuid, Index: pi,
			Resources: resBuf[:len(p.inv):len(p.inv)], Traits: traitBuf[:len(p.traits):len(p.traits)]}
		resBuf, traitBuf = resBuf[len(p.inv):], traitBuf[len(p.traits):]
		if p.parent >= 0 {
			sm.ParentUUID = s.provs[p.parent].uuid
		}
		for j, iv := range p.inv {
			sm.Resources[j] = SummaryResource{Class: s.classes[iv.class], Capacity: iv.capacity, Used: iv.used}
		}
		// Traits in trait id order (the order the database lists them
		// in, which upstream passes through).
		for j, t := range p.traits {
			sm.Traits[j] = s.traits[t]
		}
		sums[i] = sm
	}
	return sums
}
