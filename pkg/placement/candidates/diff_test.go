package candidates

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// The differential test: random worlds and requests; the engine must
// return exactly what refFind, a slow enumeration written straight from
// the upstream semantics, returns.

type mInv struct {
	total, reserved, minUnit, maxUnit, step, used int64
	ratio                                         float64
}

type mProv struct {
	id     int64
	uuid   string
	parent int // -1 root
	traits map[string]bool
	aggs   map[string]bool
	inv    map[string]mInv
}

type model struct {
	provs   []mProv
	classes map[string]int64
	traits  []string
}

func (w *model) root(i int) int {
	for w.provs[i].parent >= 0 {
		i = w.provs[i].parent
	}
	return i
}

func (w *model) snapshot() *Snapshot {
	b := NewBuilder()
	names := make([]string, 0, len(w.classes))
	for n := range w.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.AddClass(w.classes[n], n)
	}
	for _, t := range w.traits {
		b.AddTrait(t)
	}
	for i, p := range w.provs {
		var parent int64
		if p.parent >= 0 {
			parent = w.provs[p.parent].id
		}
		b.AddProvider(p.id, p.uuid, parent, w.provs[w.root(i)].id)
		for c, iv := range p.inv {
			b.AddInventory(p.id, w.classes[c], iv.total, iv.reserved, iv.minUnit, iv.maxUnit, iv.step, iv.ratio)
			if iv.used > 0 {
				b.AddUsage(p.id, w.classes[c], iv.used)
			}
		}
		for t := range p.traits {
			b.AddProviderTrait(p.id, t)
		}
		for a := range p.aggs {
			b.AddProviderAggregate(p.id, a)
		}
	}
	return b.Build()
}

// ---- reference ----

type refCand struct {
	anchor int
	allocs map[[2]string]int64 // (provider index as string, class) → amount
	provs  []int
}

func (w *model) fits(p int, c string, amount int64) bool {
	iv, ok := w.provs[p].inv[c]
	if !ok {
		return false
	}
	capacity := int64(float64(iv.total-iv.reserved) * iv.ratio)
	return iv.minUnit <= amount && amount <= iv.maxUnit && amount%iv.step == 0 && iv.used+amount <= capacity
}

func (w *model) sharedRoots(p int) map[int]bool {
	out := map[int]bool{}
	for q := range w.provs {
		for a := range w.provs[p].aggs {
			if w.provs[q].aggs[a] {
				out[w.root(q)] = true
			}
		}
	}
	return out
}

func (w *model) isSharing(p int) bool { return w.provs[p].traits[SharingTrait] }

func (w *model) knownTrait(t string) bool {
	for _, x := range w.traits {
		if x == t {
			return true
		}
	}
	for _, p := range w.provs {
		if p.traits[t] {
			return true
		}
	}
	return false
}

func (w *model) inAgg(p int, set []string) bool {
	for _, a := range set {
		if w.provs[p].aggs[a] {
			return true
		}
	}
	return false
}

func (w *model) hasAny(p int, set []string) bool {
	for _, t := range set {
		if w.provs[p].traits[t] {
			return true
		}
	}
	return false
}

func (w *model) byUUID(u string) int {
	for i, p := range w.provs {
		if p.uuid == u {
			return i
		}
	}
	return -1
}

// refFind returns the sorted candidate keys and summary keys.
func (w *model) refFind(req *Request) (cands, sums []string, err error) {
	anyTrees, anySharing := false, false
	for i, p := range w.provs {
		if p.parent >= 0 {
			anyTrees = true
		}
		if w.isSharing(i) {
			anySharing = true
		}
	}
	anchorOK := func(int) bool { return true }
	if len(req.RootRequired)+len(req.RootForbidden) > 0 {
		for _, t := range append(append([]string(nil), req.RootRequired...), req.RootForbidden...) {
			if !w.knownTrait(t) {
				return nil, nil, &UnknownTraitError{t}
			}
		}
		okRoots := map[int]bool{}
		for i, p := range w.provs {
			if p.parent >= 0 {
				continue
			}
			good := true
			for _, t := range req.RootRequired {
				good = good && p.traits[t]
			}
			for _, t := range req.RootForbidden {
				good = good && !p.traits[t]
			}
			if good {
				okRoots[i] = true
			}
		}
		if len(okRoots) == 0 {
			return nil, nil, nil
		}
		anchorOK = func(a int) bool { return okRoots[a] }
	}
	var perGroup [][]refCand
	for _, g := range req.Groups {
		for _, r := range g.Resources {
			if _, ok := w.classes[r.Class]; !ok {
				return nil, nil, &UnknownClassError{r.Class}
			}
		}
		inAggs := func(int) bool { return true }
		if len(g.MemberOf) > 0 {
			set := map[int]bool{}
			for p := range w.provs {
				good := true
				for _, s := range g.MemberOf {
					good = good && w.inAgg(p, s)
				}
				if good {
					set[p] = true
				}
			}
			if len(set) == 0 {
				return nil, nil, nil
			}
			inAggs = func(p int) bool { return set[p] }
		}
		for _, s := range g.RequiredTraits {
			for _, t := range s {
				if !w.knownTrait(t) {
					return nil, nil, &UnknownTraitError{t}
				}
			}
		}
		for _, t := range g.ForbiddenTraits {
			if !w.knownTrait(t) {
				return nil, nil, &UnknownTraitError{t}
			}
		}
		treeRoot := -1
		if g.InTree != "" {
			p := w.byUUID(g.InTree)
			if p < 0 {
				return nil, nil, nil
			}
			treeRoot = w.root(p)
		}
		inTree := func(p int) bool { return treeRoot < 0 || w.root(p) == treeRoot }
		for _, r := range g.Resources {
			any := false
			for p := range w.provs {
				if inTree(p) && w.fits(p, r.Class, r.Amount) {
					any = true
				}
			}
			if !any {
				return nil, nil, nil
			}
		}
		bad := func(p int) bool { return w.inAgg(p, g.ForbiddenAggs) }
		var list []refCand
		if g.UseSameProvider || !(anyTrees || anySharing) {
			for p := range w.provs {
				ok := true
				for _, r := range g.Resources {
					ok = ok && inTree(p) && w.fits(p, r.Class, r.Amount)
				}
				for _, s := range g.RequiredTraits {
					ok = ok && w.hasAny(p, s)
				}
				ok = ok && !w.hasAny(p, g.ForbiddenTraits) && !bad(p)
				if len(g.MemberOf) > 0 {
					ok = ok && inAggs(p)
				}
				if len(g.Resources) == 0 && len(g.RequiredTraits) == 0 && len(g.MemberOf) == 0 {
					ok = false
				}
				if !ok {
					continue
				}
				anchors := map[int]bool{w.root(p): true}
				if w.isSharing(p) {
					for a := range w.sharedRoots(p) {
						anchors[a] = true
					}
				}
				for a := range anchors {
					if !anchorOK(a) {
						continue
					}
					c := refCand{anchor: a, allocs: map[[2]string]int64{}, provs: []int{p}}
					for _, r := range g.Resources {
						c.allocs[[2]string{fmt.Sprint(p), r.Class}] = r.Amount
					}
					list = append(list, c)
				}
			}
		} else {
			eligible := func(p, a int, class string, amount int64) bool {
				if !inTree(p) || !w.fits(p, class, amount) || !anchorOK(a) || bad(p) || bad(a) {
					return false
				}
				if len(g.MemberOf) > 0 && !inAggs(p) && !inAggs(a) {
					return false
				}
				if w.root(p) == a {
					return true
				}
				return treeRoot < 0 && w.isSharing(p) && (len(g.MemberOf) == 0 || inAggs(p)) && w.sharedRoots(p)[a]
			}
			for a := range w.provs {
				if w.provs[a].parent >= 0 {
					continue
				}
				var rec func(i int, chosen []int)
				rec = func(i int, chosen []int) {
					if i == len(g.Resources) {
						ps := map[int]bool{}
						for _, p := range chosen {
							ps[p] = true
							if w.hasAny(p, g.ForbiddenTraits) {
								return
							}
						}
						for _, s := range g.RequiredTraits {
							found := false
							for p := range ps {
								found = found || w.hasAny(p, s)
							}
							if !found {
								return
							}
						}
						c := refCand{anchor: a, allocs: map[[2]string]int64{}}
						for k, r := range g.Resources {
							c.allocs[[2]string{fmt.Sprint(chosen[k]), r.Class}] = r.Amount
						}
						for p := range ps {
							c.provs = append(c.provs, p)
						}
						list = append(list, c)
						return
					}
					for p := range w.provs {
						if eligible(p, a, g.Resources[i].Class, g.Resources[i].Amount) {
							rec(i+1, append(chosen, p))
						}
					}
				}
				if len(g.Resources) > 0 {
					rec(0, nil)
				}
			}
		}
		if len(list) == 0 {
			return nil, nil, nil
		}
		perGroup = append(perGroup, list)
	}
	seen := map[string]bool{}
	usedRoots := map[int]bool{}
	usedProvs := map[int]bool{}
	var rec func(gi int, chosen []refCand)
	rec = func(gi int, chosen []refCand) {
		if gi == len(perGroup) {
			for i := 1; i < len(chosen); i++ {
				if chosen[i].anchor != chosen[0].anchor {
					return
				}
			}
			if req.GroupPolicy == "isolate" {
				ps := map[int]bool{}
				n := 0
				for i, c := range chosen {
					if req.Groups[i].UseSameProvider {
						n++
						ps[c.provs[0]] = true
					}
				}
				if len(ps) != n {
					return
				}
			}
			for _, set := range req.SameSubtrees {
				ps := map[int]bool{}
				for i, c := range chosen {
					for _, s := range set {
						if req.Groups[i].Suffix == s {
							for _, p := range c.provs {
								ps[p] = true
							}
						}
					}
				}
				if len(ps) <= 1 {
					continue
				}
				found := false
				for cand := range ps {
					all := true
					for p := range ps {
						x := p
						for x >= 0 && x != cand {
							x = w.provs[x].parent
						}
						all = all && x == cand
					}
					found = found || all
				}
				if !found {
					return
				}
			}
			total := map[[2]string]int64{}
			for _, c := range chosen {
				for k, v := range c.allocs {
					total[k] += v
				}
			}
			provsUsed := map[int]bool{}
			for k, v := range total {
				var p int
				fmt.Sscan(k[0], &p)
				provsUsed[p] = true
				iv := w.provs[p].inv[k[1]]
				if iv.used+v > int64(float64(iv.total-iv.reserved)*iv.ratio) || v > iv.maxUnit {
					return
				}
			}
			if !req.NestedAware && anyTrees {
				roots := map[int]bool{}
				for p := range provsUsed {
					if roots[w.root(p)] {
						return
					}
					roots[w.root(p)] = true
				}
			}
			var parts []string
			for k, v := range total {
				var p int
				fmt.Sscan(k[0], &p)
				parts = append(parts, fmt.Sprintf("%s/%s=%d", w.provs[p].uuid, k[1], v))
			}
			sort.Strings(parts)
			var maps []string
			for i, c := range chosen {
				var us []string
				for _, p := range c.provs {
					us = append(us, w.provs[p].uuid)
				}
				sort.Strings(us)
				maps = append(maps, req.Groups[i].Suffix+":"+strings.Join(us, "+"))
			}
			sort.Strings(maps)
			key := strings.Join(parts, ",") + " | " + strings.Join(maps, ",")
			if !seen[key] {
				seen[key] = true
				cands = append(cands, key)
				for p := range provsUsed {
					usedRoots[w.root(p)] = true
					usedProvs[p] = true
				}
			}
			return
		}
		for _, c := range perGroup[gi] {
			rec(gi+1, append(chosen, c))
		}
	}
	rec(0, nil)
	sort.Strings(cands)
	for i := range w.provs {
		if (req.NestedAware || !anyTrees) && usedRoots[w.root(i)] || !(req.NestedAware || !anyTrees) && usedProvs[i] {
			sums = append(sums, w.summaryKey(i))
		}
	}
	sort.Strings(sums)
	return cands, sums, nil
}

func (w *model) summaryKey(i int) string {
	p := w.provs[i]
	var res []string
	for c, iv := range p.inv {
		res = append(res, fmt.Sprintf("%s=%d/%d", c, int64(float64(iv.total-iv.reserved)*iv.ratio), iv.used))
	}
	sort.Strings(res)
	var ts []string
	for t := range p.traits {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	parent := ""
	if p.parent >= 0 {
		parent = w.provs[p.parent].uuid
	}
	return fmt.Sprintf("%s parent=%s root=%s res=%s traits=%s", p.uuid, parent, w.provs[w.root(i)].uuid,
		strings.Join(res, ","), strings.Join(ts, ","))
}

func candKey(ar AllocationRequest) string {
	var parts []string
	for _, a := range ar.Allocations {
		parts = append(parts, fmt.Sprintf("%s/%s=%d", a.Provider, a.Class, a.Amount))
	}
	sort.Strings(parts)
	var maps []string
	for _, m := range ar.Mappings {
		maps = append(maps, m.Suffix+":"+strings.Join(m.Providers, "+"))
	}
	sort.Strings(maps)
	return strings.Join(parts, ",") + " | " + strings.Join(maps, ",")
}

func summaryKeyOf(s Summary) string {
	var res []string
	for _, r := range s.Resources {
		res = append(res, fmt.Sprintf("%s=%d/%d", r.Class, r.Capacity, r.Used))
	}
	sort.Strings(res)
	ts := append([]string(nil), s.Traits...)
	sort.Strings(ts)
	return fmt.Sprintf("%s parent=%s root=%s res=%s traits=%s", s.UUID, s.ParentUUID, s.RootUUID,
		strings.Join(res, ","), strings.Join(ts, ","))
}

// ---- generators ----

var (
	genClasses = []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_X"}
	genTraits  = []string{"T_A", "T_B", "T_C", SharingTrait}
	genAggs    = []string{"aaaaaaaa-0000-0000-0000-000000000001", "aaaaaaaa-0000-0000-0000-000000000002"}
)

func genModel(t *rapid.T) *model {
	w := &model{classes: map[string]int64{"VCPU": 1, "MEMORY_MB": 2, "DISK_GB": 3, "CUSTOM_X": 10000},
		traits: append([]string{"T_UNUSED"}, genTraits...)}
	nTrees := rapid.IntRange(1, 4).Draw(t, "trees")
	id := int64(0)
	for tr := 0; tr < nTrees; tr++ {
		size := rapid.IntRange(1, 4).Draw(t, "size")
		first := len(w.provs)
		for k := 0; k < size; k++ {
			id++
			p := mProv{id: id, uuid: fmt.Sprintf("00000000-0000-0000-0000-%012d", id), parent: -1,
				traits: map[string]bool{}, aggs: map[string]bool{}, inv: map[string]mInv{}}
			if k > 0 {
				p.parent = first + rapid.IntRange(0, k-1).Draw(t, "parent")
			}
			for _, tr := range genTraits {
				prob := 3
				if tr == SharingTrait {
					prob = 6
				}
				if rapid.IntRange(0, prob).Draw(t, "trait") == 0 {
					p.traits[tr] = true
				}
			}
			for _, a := range genAggs {
				if rapid.IntRange(0, 2).Draw(t, "agg") == 0 {
					p.aggs[a] = true
				}
			}
			for _, c := range genClasses {
				if rapid.IntRange(0, 3).Draw(t, "hasinv") == 0 {
					continue
				}
				total := int64(rapid.IntRange(1, 10).Draw(t, "total"))
				iv := mInv{total: total, reserved: int64(rapid.IntRange(0, 4).Draw(t, "reserved") / 4),
					minUnit: int64(1 + rapid.IntRange(0, 4).Draw(t, "min")/4), maxUnit: int64(rapid.IntRange(2, 10).Draw(t, "max")),
					step: int64(1 + rapid.IntRange(0, 4).Draw(t, "step")/4), ratio: rapid.SampledFrom([]float64{1, 1.5}).Draw(t, "ratio"),
					used: int64(rapid.IntRange(0, 6).Draw(t, "used") / 2)}
				p.inv[c] = iv
			}
			w.provs = append(w.provs, p)
		}
	}
	return w
}

func genRequest(t *rapid.T, w *model) *Request {
	req := &Request{NestedAware: rapid.Bool().Draw(t, "nested"), GroupPolicy: rapid.SampledFrom([]string{"none", "isolate"}).Draw(t, "policy")}
	nGran := rapid.IntRange(0, 3).Draw(t, "granular")
	unsuffixed := nGran == 0 || rapid.Bool().Draw(t, "unsuffixed")
	mk := func(suffix string, same bool, resourceless bool) Group {
		g := Group{Suffix: suffix, UseSameProvider: same}
		if !resourceless {
			n := rapid.IntRange(1, 2).Draw(t, "nres")
			seen := map[string]bool{}
			for i := 0; i < n; i++ {
				c := rapid.SampledFrom(genClasses).Draw(t, "class")
				if seen[c] {
					continue
				}
				seen[c] = true
				g.Resources = append(g.Resources, Resource{c, int64(rapid.IntRange(1, 3).Draw(t, "amount"))})
			}
			if rapid.IntRange(0, 80).Draw(t, "badclass") == 41 {
				g.Resources = append(g.Resources, Resource{"CUSTOM_NOPE", 1})
			}
		}
		if rapid.IntRange(0, 2).Draw(t, "req") == 0 || resourceless {
			set := []string{rapid.SampledFrom(genTraits[:3]).Draw(t, "rt")}
			if rapid.Bool().Draw(t, "any") {
				set = append(set, rapid.SampledFrom(genTraits[:3]).Draw(t, "rt2"))
			}
			if rapid.IntRange(0, 80).Draw(t, "badtrait") == 41 {
				set = append(set, "CUSTOM_NOTRAIT")
			}
			g.RequiredTraits = append(g.RequiredTraits, set)
		}
		if rapid.IntRange(0, 3).Draw(t, "forb") == 0 {
			g.ForbiddenTraits = []string{rapid.SampledFrom(genTraits).Draw(t, "ft")}
		}
		if rapid.IntRange(0, 3).Draw(t, "mo") == 0 {
			g.MemberOf = [][]string{{rapid.SampledFrom(genAggs).Draw(t, "agg")}}
		}
		if rapid.IntRange(0, 5).Draw(t, "fa") == 0 {
			g.ForbiddenAggs = []string{rapid.SampledFrom(genAggs).Draw(t, "fagg")}
		}
		if rapid.IntRange(0, 5).Draw(t, "intree") == 0 {
			g.InTree = w.provs[rapid.IntRange(0, len(w.provs)-1).Draw(t, "tree")].uuid
		}
		return g
	}
	if unsuffixed {
		req.Groups = append(req.Groups, mk("", false, false))
	}
	var sufs []string
	for i := 1; i <= nGran; i++ {
		resourceless := i > 1 && rapid.IntRange(0, 3).Draw(t, "resourceless") == 0
		suf := fmt.Sprintf("_%d", i)
		sufs = append(sufs, suf)
		req.Groups = append(req.Groups, mk(suf, true, resourceless))
		if resourceless {
			req.SameSubtrees = append(req.SameSubtrees, []string{"_1", suf})
		}
	}
	if len(sufs) >= 2 && rapid.IntRange(0, 2).Draw(t, "ss") == 0 {
		req.SameSubtrees = append(req.SameSubtrees, sufs)
	}
	if rapid.IntRange(0, 4).Draw(t, "rr") == 0 {
		req.RootRequired = []string{rapid.SampledFrom(genTraits[:3]).Draw(t, "rrt")}
	}
	if rapid.IntRange(0, 4).Draw(t, "rf") == 0 {
		req.RootForbidden = []string{rapid.SampledFrom(genTraits[:3]).Draw(t, "rft")}
	}
	return req
}

func TestDifferentialAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genModel(t)
		req := genRequest(t, w)
		snap := w.snapshot()
		want, wantSums, wantErr := w.refFind(req)
		got, err := snap.Find(context.Background(), req)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error mismatch: got %v, want %v", err, wantErr)
		}
		if err != nil {
			if err.Error() != wantErr.Error() {
				t.Fatalf("error: got %q want %q", err, wantErr)
			}
			return
		}
		var gotKeys, gotSums []string
		for _, ar := range got.AllocationRequests() {
			gotKeys = append(gotKeys, candKey(ar))
		}
		sort.Strings(gotKeys)
		for _, s := range got.Summaries {
			gotSums = append(gotSums, summaryKeyOf(s))
		}
		sort.Strings(gotSums)
		if diff := cmp.Diff(want, gotKeys); diff != "" {
			t.Fatalf("candidates differ (-ref +engine):\n%s", diff)
		}
		if diff := cmp.Diff(wantSums, gotSums); diff != "" {
			t.Fatalf("summaries differ (-ref +engine):\n%s", diff)
		}
		// limit: a prefix-sized subset of the full answer.
		if len(want) > 1 {
			limit := rapid.IntRange(1, len(want)).Draw(t, "limit")
			lreq := *req
			lreq.Limit = limit
			lres, err := snap.Find(context.Background(), &lreq)
			if err != nil {
				t.Fatal(err)
			}
			if lres.Len() != limit {
				t.Fatalf("limit %d gave %d", limit, lres.Len())
			}
			all := map[string]bool{}
			for _, k := range want {
				all[k] = true
			}
			for _, ar := range lres.AllocationRequests() {
				if !all[candKey(ar)] {
					t.Fatalf("limited result %s not in full answer", candKey(ar))
				}
			}
			// randomized: same size, still a subset
			lreq.Randomize, lreq.Rand = true, rand.New(rand.NewPCG(1, 2))
			rres, err := snap.Find(context.Background(), &lreq)
			if err != nil {
				t.Fatal(err)
			}
			if rres.Len() != limit {
				t.Fatalf("random limit %d gave %d", limit, rres.Len())
			}
			// max candidates caps generation
			creq := *req
			creq.MaxCandidates = limit
			cres, err := snap.Find(context.Background(), &creq)
			if err != nil {
				t.Fatal(err)
			}
			if cres.Len() != limit || !cres.Capped {
				t.Fatalf("max %d gave %d capped=%v", limit, cres.Len(), cres.Capped)
			}
		}
		// The search cap: what it returns is a subsequence of the full
		// answer (a prefix when it stopped the candidates, not a group's
		// combinations), and when it did not stop the search it is the
		// full answer.
		sreq := *req
		sreq.SearchCap = rapid.IntRange(1, 2*len(want)+2).Draw(t, "searchCap")
		sres, err := snap.Find(context.Background(), &sreq)
		if err != nil {
			t.Fatal(err)
		}
		if sres.Len() > sreq.SearchCap || sres.Len() > got.Len() || (!sres.SearchCapped && sres.Len() != got.Len()) {
			t.Fatalf("search cap %d: %d candidates (search capped %v) of %d", sreq.SearchCap, sres.Len(), sres.SearchCapped, got.Len())
		}
		j := 0
		for i := 0; i < sres.Len(); i++ {
			k := candKey(sres.Request(i))
			for j < got.Len() && candKey(got.Request(j)) != k {
				j++
			}
			if j == got.Len() {
				t.Fatalf("search cap %d: candidate %d (%s) is not in the full answer after the ones before it", sreq.SearchCap, i, k)
			}
			j++
		}
	})
}
