package candidates

import (
	"iter"
	"sort"
)

// Len is the number of allocation requests (candidates).
func (r *Result) Len() int { return len(r.out) }

// Allocs returns candidate i's allocations, sorted by provider id then
// class id, as snapshot indexes. The slice belongs to the Result: read
// only.
func (r *Result) Allocs(i int) []AllocRef {
	m := r.out[i]
	return r.allocs[m.aStart : m.aStart+m.aLen : m.aStart+m.aLen]
}

// Groups is the number of request groups of every candidate's mappings.
func (r *Result) Groups() int { return len(r.plans) }

// Suffix is the k-th group's suffix ("" for the unsuffixed group), the
// groups being sorted by suffix as the mappings are rendered.
func (r *Result) Suffix(k int) string { return r.plans[r.order[k]].g.Suffix }

// GroupProviders returns the providers (snapshot indexes) satisfying the
// k-th group (suffix order) in candidate i, sorted by UUID as upstream
// lists them in mappings. The slice belongs to the Result: read only.
func (r *Result) GroupProviders(i, k int) []int32 {
	m := r.out[i]
	g := r.order[k]
	o := &r.plans[g].byAnchor[m.anchor][r.choices[int(m.cStart)+g]]
	if o.byUUID == nil {
		if len(o.provs) == 1 {
			o.byUUID = o.provs
		} else {
			l := append([]int32(nil), o.provs...)
			s := r.Snapshot
			sort.Slice(l, func(x, y int) bool { return s.provs[l[x]].uuid < s.provs[l[y]].uuid })
			o.byUUID = l
		}
	}
	return o.byUUID
}

// usedAllocs yields the allocations of every kept candidate.
func (r *Result) usedAllocs() iter.Seq[AllocRef] {
	return func(yield func(AllocRef) bool) {
		for i := range r.out {
			for _, a := range r.Allocs(i) {
				if !yield(a) {
					return
				}
			}
		}
	}
}

// Request converts candidate i to strings.
func (r *Result) Request(i int) AllocationRequest {
	s := r.Snapshot
	var ar AllocationRequest
	for _, a := range r.Allocs(i) {
		ar.Allocations = append(ar.Allocations, Allocation{Provider: s.provs[a.Provider].uuid, Class: s.classes[a.Class], Amount: a.Amount})
	}
	for k := 0; k < r.Groups(); k++ {
		mp := Mapping{Suffix: r.Suffix(k)}
		for _, p := range r.GroupProviders(i, k) {
			mp.Providers = append(mp.Providers, s.provs[p].uuid)
		}
		ar.Mappings = append(ar.Mappings, mp)
	}
	return ar
}

// AllocationRequests converts every candidate (tests and small answers;
// the renderer reads the compact form).
func (r *Result) AllocationRequests() []AllocationRequest {
	out := make([]AllocationRequest, r.Len())
	for i := range out {
		out[i] = r.Request(i)
	}
	return out
}

// ProviderUUID is the UUID of the provider at index p.
func (s *Snapshot) ProviderUUID(p int32) string { return s.provs[p].uuid }

// ClassName is the name of the resource class at index c.
func (s *Snapshot) ClassName(c int32) string { return s.classes[c] }

// ClassCount is the number of resource classes (indexes 0 to
// ClassCount()-1).
func (s *Snapshot) ClassCount() int { return len(s.classes) }

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
