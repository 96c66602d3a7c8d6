// Package candidates computes Placement allocation candidates
// (GET /allocation_candidates) on an in-memory snapshot of the providers:
// trees, inventories with capacity and usage, traits, aggregates and the
// sharing flag. It has no database and no HTTP: pkg/placement loads the
// snapshot and the handler renders the result.
//
// The semantics are Placement 8.0.0's (objects/allocation_candidate.py and
// research_context.py): each request group is solved on its own, per
// "anchor" (the root of the tree a candidate belongs to, sharing providers
// being reachable from every tree that shares an aggregate with them),
// then the groups are combined per anchor with group_policy, same_subtree
// and a final capacity check. Unlike upstream, the combination is
// generated depth-first with pruning, so limit stops it early and
// MaxCandidates bounds it.
package candidates

import (
	"math"
	"sort"
	"sync"
)

// SharingTrait marks a provider whose inventory is shared with the trees
// in its aggregates.
const SharingTrait = "MISC_SHARES_VIA_AGGREGATE"

// Snapshot is an immutable view of the providers. It is safe for
// concurrent use by any number of Find calls.
type Snapshot struct {
	provs    []prov
	byID     map[int64]int32
	byUUID   map[string]int32
	classes  []string // class index → name
	classIDs []int64  // class index → database id (ordering)
	// allocKey orders a candidate's allocations (provider id, then class
	// id) with one integer compare: provider rank by id << 32 | class
	// rank by id, per provider and per class.
	provRank  []uint64
	classRank []uint64
	classIdx  map[string]int32
	traitIdx  map[string]int32
	traits    []string
	aggIdx    map[string]int32
	aggs      []string
	aggMember [][]int32 // aggregate index → providers
	byClass   [][]int32 // class index → providers with inventory of it
	treeOf    map[int32][]int32
	roots     []int32
	hasTrees  bool
	sharing   bool // some provider has SharingTrait
	memo      sync.Map
}

// Memo returns the value cached under key for this snapshot, building it
// once. Callers use it for data derived from an immutable snapshot (e.g.
// pre-rendered provider summaries); build must not retain the snapshot
// mutably.
func (s *Snapshot) Memo(key string, build func() any) any {
	if v, ok := s.memo.Load(key); ok {
		return v
	}
	v, _ := s.memo.LoadOrStore(key, build())
	return v
}

// ProviderCount is the number of providers in the snapshot.
func (s *Snapshot) ProviderCount() int { return len(s.provs) }

// AllSummaries describes every provider, in tree order (roots by id,
// then the tree's providers by id).
func (s *Snapshot) AllSummaries() []Summary {
	var provs []int32
	for _, r := range s.roots {
		provs = append(provs, s.treeOf[r]...)
	}
	return s.summarize(provs)
}

type prov struct {
	id       int64
	uuid     string
	parent   int32 // -1 for a root
	root     int32
	inv      []inventory // sorted by class database id
	traits   []int32     // sorted
	aggs     []int32     // sorted
	isShared bool
	// anchors are the roots of every tree holding a provider that shares
	// an aggregate with this one (only computed for sharing providers),
	// sorted by provider id.
	anchors []int32
}

type inventory struct {
	class                                         int32
	total, reserved, minUnit, maxUnit, step, used int64
	ratio                                         float64
	capacity                                      int64
}

// fits is the per-group check of one amount: unit constraints and
// capacity (get_providers_with_resource).
func (iv *inventory) fits(amount int64) bool {
	return iv.minUnit <= amount && amount <= iv.maxUnit && iv.step > 0 && amount%iv.step == 0 &&
		iv.used+amount <= iv.capacity
}

// within is the final check of a consolidated amount (exceeds_capacity).
func (iv *inventory) within(amount int64) bool {
	return iv.used+amount <= iv.capacity && amount <= iv.maxUnit
}

func (p *prov) inventory(class int32) *inventory {
	for i := range p.inv {
		if p.inv[i].class == class {
			return &p.inv[i]
		}
	}
	return nil
}

func hasSorted(xs []int32, x int32) bool {
	i := sort.Search(len(xs), func(i int) bool { return xs[i] >= x })
	return i < len(xs) && xs[i] == x
}

// Builder collects rows into a Snapshot.
type Builder struct {
	s      *Snapshot
	parent map[int64]int64
	root   map[int64]int64
	order  []int64
	usage  map[[2]int64]int64
	invs   map[int64][]invRow
	traits map[int64][]string
	aggs   map[int64][]string
	clsID  map[int64]int32
}

type invRow struct {
	classID                                 int64
	total, reserved, minUnit, maxUnit, step int64
	ratio                                   float64
}

// NewBuilder starts an empty snapshot.
func NewBuilder() *Builder {
	return &Builder{
		s: &Snapshot{
			byID: map[int64]int32{}, byUUID: map[string]int32{}, classIdx: map[string]int32{},
			traitIdx: map[string]int32{}, aggIdx: map[string]int32{}, treeOf: map[int32][]int32{},
		},
		parent: map[int64]int64{}, root: map[int64]int64{}, usage: map[[2]int64]int64{},
		invs: map[int64][]invRow{}, traits: map[int64][]string{}, aggs: map[int64][]string{},
		clsID: map[int64]int32{},
	}
}

// AddClass declares a resource class (standard or custom) by its
// database id, which orders classes as upstream does.
func (b *Builder) AddClass(id int64, name string) {
	if _, ok := b.s.classIdx[name]; ok {
		return
	}
	i := int32(len(b.s.classes))
	b.s.classes = append(b.s.classes, name)
	b.s.classIDs = append(b.s.classIDs, id)
	b.s.classIdx[name] = i
	b.clsID[id] = i
}

// AddTrait declares a trait that exists.
func (b *Builder) AddTrait(name string) {
	if _, ok := b.s.traitIdx[name]; ok {
		return
	}
	b.s.traitIdx[name] = int32(len(b.s.traits))
	b.s.traits = append(b.s.traits, name)
}

// AddProvider adds a provider; parentID is 0 for a root.
func (b *Builder) AddProvider(id int64, uuid string, parentID, rootID int64) {
	b.order = append(b.order, id)
	b.s.byUUID[uuid] = int32(len(b.s.provs))
	b.s.byID[id] = int32(len(b.s.provs))
	b.s.provs = append(b.s.provs, prov{id: id, uuid: uuid, parent: -1})
	b.parent[id] = parentID
	b.root[id] = rootID
}

// AddInventory adds one inventory row (class by database id).
func (b *Builder) AddInventory(rpID, classID, total, reserved, minUnit, maxUnit, step int64, ratio float64) {
	b.invs[rpID] = append(b.invs[rpID], invRow{classID, total, reserved, minUnit, maxUnit, step, ratio})
}

// AddUsage adds used amount of a class on a provider.
func (b *Builder) AddUsage(rpID, classID, used int64) { b.usage[[2]int64{rpID, classID}] += used }

// AddProviderTrait associates a trait (declared or not) with a provider.
func (b *Builder) AddProviderTrait(rpID int64, trait string) {
	b.traits[rpID] = append(b.traits[rpID], trait)
}

// AddProviderAggregate puts a provider in an aggregate.
func (b *Builder) AddProviderAggregate(rpID int64, agg string) {
	b.aggs[rpID] = append(b.aggs[rpID], agg)
}

// Capacity is Placement's (total − reserved) × allocation_ratio, truncated.
func Capacity(total, reserved int64, ratio float64) int64 {
	f := float64(total-reserved) * ratio
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	if f <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(f)
}

// Build finishes the snapshot. The builder must not be used afterwards.
func (b *Builder) Build() *Snapshot {
	s := b.s
	s.byClass = make([][]int32, len(s.classes))
	for i := range s.provs {
		p := &s.provs[i]
		if pid := b.parent[p.id]; pid != 0 {
			if pi, ok := s.byID[pid]; ok {
				p.parent = pi
				s.hasTrees = true
			}
		}
		p.root = int32(i)
		if ri, ok := s.byID[b.root[p.id]]; ok {
			p.root = ri
		}
		for _, r := range b.invs[p.id] {
			ci, ok := b.clsID[r.classID]
			if !ok {
				continue
			}
			p.inv = append(p.inv, inventory{
				class: ci, total: r.total, reserved: r.reserved, minUnit: r.minUnit, maxUnit: r.maxUnit,
				step: r.step, ratio: r.ratio, used: b.usage[[2]int64{p.id, r.classID}],
				capacity: Capacity(r.total, r.reserved, r.ratio),
			})
		}
		sort.Slice(p.inv, func(x, y int) bool { return s.classIDs[p.inv[x].class] < s.classIDs[p.inv[y].class] })
		for _, iv := range p.inv {
			s.byClass[iv.class] = append(s.byClass[iv.class], int32(i))
		}
		for _, t := range b.traits[p.id] {
			b.AddTrait(t)
			ti := s.traitIdx[t]
			if !hasSorted(p.traits, ti) {
				p.traits = append(p.traits, ti)
				sort.Slice(p.traits, func(x, y int) bool { return p.traits[x] < p.traits[y] })
			}
			if t == SharingTrait {
				p.isShared = true
				s.sharing = true
			}
		}
		for _, a := range b.aggs[p.id] {
			ai, ok := s.aggIdx[a]
			if !ok {
				ai = int32(len(s.aggs))
				s.aggIdx[a] = ai
				s.aggs = append(s.aggs, a)
				s.aggMember = append(s.aggMember, nil)
			}
			if !hasSorted(p.aggs, ai) {
				p.aggs = append(p.aggs, ai)
				sort.Slice(p.aggs, func(x, y int) bool { return p.aggs[x] < p.aggs[y] })
				s.aggMember[ai] = append(s.aggMember[ai], int32(i))
			}
		}
	}
	for i := range s.provs {
		r := s.provs[i].root
		s.treeOf[r] = append(s.treeOf[r], int32(i))
	}
	for r := range s.treeOf {
		s.roots = append(s.roots, r)
	}
	byID := func(xs []int32) {
		sort.Slice(xs, func(x, y int) bool { return s.provs[xs[x]].id < s.provs[xs[y]].id })
	}
	byID(s.roots)
	order := make([]int32, len(s.provs))
	for i := range order {
		order[i] = int32(i)
	}
	byID(order)
	s.provRank = make([]uint64, len(s.provs))
	for r, p := range order {
		s.provRank[p] = uint64(r) << 32
	}
	corder := make([]int, len(s.classes))
	for i := range corder {
		corder[i] = i
	}
	sort.Slice(corder, func(x, y int) bool { return s.classIDs[corder[x]] < s.classIDs[corder[y]] })
	s.classRank = make([]uint64, len(s.classes))
	for r, c := range corder {
		s.classRank[c] = uint64(r)
	}
	for r := range s.treeOf {
		byID(s.treeOf[r])
	}
	for c := range s.byClass {
		byID(s.byClass[c])
	}
	for i := range s.provs {
		p := &s.provs[i]
		if !p.isShared {
			continue
		}
		seen := map[int32]bool{}
		for _, a := range p.aggs {
			for _, m := range s.aggMember[a] {
				r := s.provs[m].root
				if !seen[r] {
					seen[r] = true
					p.anchors = append(p.anchors, r)
				}
			}
		}
		byID(p.anchors)
	}
	return s
}

// Len is the number of providers.
func (s *Snapshot) Len() int { return len(s.provs) }

// HasTrees reports whether some provider has a parent.
func (s *Snapshot) HasTrees() bool { return s.hasTrees }

func (s *Snapshot) hasTrait(p int32, t int32) bool { return hasSorted(s.provs[p].traits, t) }

func (s *Snapshot) hasAnyTrait(p int32, ts []int32) bool {
	for _, t := range ts {
		if s.hasTrait(p, t) {
			return true
		}
	}
	return false
}

func (s *Snapshot) inAnyAgg(p int32, as []int32) bool {
	for _, a := range as {
		if hasSorted(s.provs[p].aggs, a) {
			return true
		}
	}
	return false
}

// isAncestorOrSelf reports whether a is p or one of p's ancestors.
func (s *Snapshot) isAncestorOrSelf(a, p int32) bool {
	for x := p; x >= 0; x = s.provs[x].parent {
		if x == a {
			return true
		}
	}
	return false
}
