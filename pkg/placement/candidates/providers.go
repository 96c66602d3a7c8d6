package candidates

import "sort"

// ProviderQuery is the filter of GET /resource_providers that a snapshot
// can answer: every field is optional; the conditions are ANDed.
type ProviderQuery struct {
	// InTree keeps the providers in the tree of this provider uuid.
	InTree string
	// RequiredTraits: each entry a set of traits of which a provider needs
	// one. ForbiddenTraits: traits a provider must have none of.
	RequiredTraits  [][]string
	ForbiddenTraits []string
	// MemberOf: each entry a set of aggregate uuids of which a provider
	// must be (directly) in one. ForbiddenAggs: aggregates it must be in
	// none of.
	MemberOf      [][]string
	ForbiddenAggs []string
	// Resources: the provider's own inventory must take each amount
	// (unit limits and capacity less usage, as get_providers_with_resource).
	Resources []Amount
}

// Amount is an amount of a resource class.
type Amount struct {
	Class  string
	Amount int64
}

// ProviderRef is a provider a ProviderQuery matched.
type ProviderRef struct {
	ID         int64
	UUID       string
	ParentID   int64  // 0 for a root
	ParentUUID string // "" for a root
	RootID     int64
	RootUUID   string
}

// MatchProviders returns the providers matching q in id order. ok is
// false when q names a provider, trait, aggregate or resource class the
// snapshot does not hold: the database then decides (an unknown trait or
// class is an error there, and its collation may match a name that
// differs in case), so the caller asks it instead.
func (s *Snapshot) MatchProviders(q ProviderQuery) (out []ProviderRef, ok bool) {
	tree := int32(-1)
	if q.InTree != "" {
		p, found := s.byUUID[q.InTree]
		if !found {
			return nil, false
		}
		tree = s.provs[p].root
	}
	required := make([][]int32, len(q.RequiredTraits))
	for i, set := range q.RequiredTraits {
		if required[i], ok = s.indexes(s.traitIdx, set); !ok {
			return nil, false
		}
	}
	forbiddenTraits, ok := s.indexes(s.traitIdx, q.ForbiddenTraits)
	if !ok {
		return nil, false
	}
	memberOf := make([][]int32, len(q.MemberOf))
	for i, set := range q.MemberOf {
		if memberOf[i], ok = s.indexes(s.aggIdx, set); !ok {
			return nil, false
		}
	}
	forbiddenAggs, ok := s.indexes(s.aggIdx, q.ForbiddenAggs)
	if !ok {
		return nil, false
	}
	type need struct {
		class  int32
		amount int64
	}
	needs := make([]need, len(q.Resources))
	for i, r := range q.Resources {
		c, found := s.classIdx[r.Class]
		if !found {
			return nil, false
		}
		needs[i] = need{c, r.Amount}
	}

	// Start from the smallest obvious candidate list: a tree, or the
	// providers with inventory of the first class asked for.
	var cand []int32
	switch {
	case tree >= 0:
		cand = s.treeOf[tree]
	case len(needs) > 0:
		cand = s.byClass[needs[0].class]
	default:
		cand = make([]int32, len(s.provs))
		for i := range cand {
			cand[i] = int32(i)
		}
	}
	out = make([]ProviderRef, 0, len(cand))
next:
	for _, p := range cand {
		if tree >= 0 && s.provs[p].root != tree {
			continue
		}
		for _, set := range required {
			if !s.hasAnyTrait(p, set) {
				continue next
			}
		}
		if s.hasAnyTrait(p, forbiddenTraits) {
			continue
		}
		for _, set := range memberOf {
			if !s.inAnyAgg(p, set) {
				continue next
			}
		}
		if s.inAnyAgg(p, forbiddenAggs) {
			continue
		}
		for _, n := range needs {
			iv := s.provs[p].inventory(n.class)
			if iv == nil || !iv.fits(n.amount) {
				continue next
			}
		}
		out = append(out, s.ref(p))
	}
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].ID < out[j].ID }) {
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	}
	return out, true
}

// indexes maps names to snapshot indexes; ok is false if one is unknown.
func (s *Snapshot) indexes(idx map[string]int32, names []string) ([]int32, bool) {
	out := make([]int32, len(names))
	for i, n := range names {
		x, found := idx[n]
		if !found {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

func (s *Snapshot) ref(p int32) ProviderRef {
	pr := &s.provs[p]
	root := &s.provs[pr.root]
	r := ProviderRef{ID: pr.id, UUID: pr.uuid, RootID: root.id, RootUUID: root.uuid}
	if pr.parent >= 0 {
		r.ParentID, r.ParentUUID = s.provs[pr.parent].id, s.provs[pr.parent].uuid
	}
	return r
}
