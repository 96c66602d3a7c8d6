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
