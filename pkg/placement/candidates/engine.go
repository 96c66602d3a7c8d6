package candidates

import (
	"context"
	"math/rand/v2"
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
	res := &Result{Capped: m.capped, SearchCapped: m.searchCapped, Generated: len(m.out), Steps: m.steps,
		Snapshot: s, out: out, allocs: m.allocs, choices: m.choices, plans: plans}
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
