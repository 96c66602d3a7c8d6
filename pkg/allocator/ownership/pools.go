package ownership

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Pool kinds, in the order a request uses them (lent hosts sit at the
// level of the tree they were lent to).
const (
	// KindOwned is the consumer's own ownership.
	KindOwned = "owned"
	// KindPrivate is an ancestor's private share pool (what it owns and
	// gives to none of its children).
	KindPrivate = "private"
	// KindLent is idle ownership another consumer lends into a pool the
	// requester may use.
	KindLent = "lent"
	// KindPublic is what no top-level consumer owns.
	KindPublic = "public"
)

// Pool is a set of hosts a consumer's request may draw from.
type Pool struct {
	Kind string `json:"kind"`
	// Owner is the consumer whose ownership or private pool this is ("" for
	// the public pool).
	Owner string `json:"owner,omitempty"`
	// Level is where in the tree the pool sits: the consumer itself, one of
	// its ancestors, or "" for the public pool.
	Level      string `json:"level,omitempty"`
	Group      string `json:"group,omitempty"`
	Preference int    `json:"preference"`
	// Grace is the lender's grace period (lent pools): when the owner
	// reclaims, the borrower keeps the host at least this long.
	Grace time.Duration `json:"-"`
	// GraceSeconds is Grace in seconds (for JSON).
	GraceSeconds int64 `json:"grace_seconds,omitempty"`
	// Limit is the lender's lending limit (lent pools; negative: none).
	Limit int      `json:"limit"`
	Hosts []string `json:"hosts"`
	// Parts are the parts of partly owned hosts in the pool (slot
	// requests only: a whole-host request never takes a part).
	Parts []Part `json:"parts,omitempty"`
	// Why says why the requester may use the pool.
	Why string `json:"why"`
}

// Refusal is a host a consumer may not use, and why.
type Refusal struct {
	Host   string `json:"host"`
	Holder string `json:"holder"`
	// Slots is the refused part of a partly owned host (0: the whole
	// host).
	Slots  int    `json:"slots,omitempty"`
	Reason string `json:"reason"`
}

// View is computed ownership ready for requests: which consumer holds
// each host whole, which pools a consumer's request draws from.
type View struct {
	ix       *index
	own      Ownership
	projects map[string]string
	holder   map[string]string // host → deepest consumer owning it whole
	split    map[string]string // host → consumer whose children own part of it
	group    map[string]string // host → group (owned hosts)
	hosts    []string          // up hosts, least loaded first
	parts    map[string][]Part // split host → its parts

	mu     sync.Mutex
	orders map[string]*Order // HostOrder's cache
}

// NewView builds the view of ownership own (a Recompute result) over
// hosts for plan p.
func NewView(p *Plan, hosts []Host, own Ownership) (*View, error) {
	ix, err := compile(p)
	if err != nil {
		return nil, err
	}
	v := &View{ix: ix, own: own, projects: map[string]string{}, holder: map[string]string{},
		split: map[string]string{}, group: map[string]string{}, parts: map[string][]Part{}}
	for _, c := range p.Consumers {
		if c.Project != "" {
			v.projects[c.Project] = c.ID
		}
	}
	hs := make([]*Host, 0, len(hosts))
	for i := range hosts {
		if !hosts[i].Down {
			hs = append(hs, &hosts[i])
		}
	}
	sort.Slice(hs, func(a, b int) bool {
		if hs[a].Load != hs[b].Load {
			return hs[a].Load < hs[b].Load
		}
		return hs[a].ID < hs[b].ID
	})
	for _, h := range hs {
		v.hosts = append(v.hosts, h.ID)
		full := h.slots()
		// Walk down from the top-level consumers while one consumer owns
		// the whole host.
		kids := ix.children[""]
		for {
			next := ""
			partial := false
			for _, k := range kids {
				sh, ok := own[k][h.ID]
				if !ok {
					continue
				}
				if sh.Slots >= full {
					next = k
					v.group[h.ID] = sh.Group
				} else {
					partial = true
				}
			}
			if next == "" {
				if partial {
					if up := v.holder[h.ID]; up != "" {
						v.split[h.ID] = up
					} else {
						v.split[h.ID] = "(top level)"
					}
					delete(v.holder, h.ID)
					v.parts[h.ID] = ix.partsOf(own, h.ID, full)
				}
				break
			}
			v.holder[h.ID] = next
			kids = ix.children[next]
		}
	}
	return v, nil
}

// ConsumerOf returns the consumer standing for a project ("" if none:
// such a project uses the public pool only).
func (v *View) ConsumerOf(project string) string { return v.projects[project] }

// Holder returns the consumer owning host h whole at the deepest level
// ("" for a public or split host).
func (v *View) Holder(h string) string { return v.holder[h] }

// Order returns the pools a request of consumer c draws from, in order:
// its ownership (most preferred group first), then for itself, its
// parent, grandparent …: hosts lent into that level, and that ancestor's
// private pool; then the public pool and hosts lent to it. Hosts of other
// consumers that do not lend to c (or whose grace period is shorter than
// c's borrowing grace) are in no pool. c == "" gets the public pool.
func (v *View) Order(c string) []Pool {
	pools, _ := v.order(c, false)
	return pools
}

// Explain is Order with the refused hosts and their reasons.
func (v *View) Explain(c string) ([]Pool, []Refusal) { return v.order(c, true) }

type poolKey struct {
	kind, owner, level, group string
}

func (v *View) order(c string, explain bool) ([]Pool, []Refusal) {
	ix := v.ix
	levels := []string{}
	at := map[string]int{}
	if c != "" && ix.cons[c] != nil {
		levels = append(levels, c)
		levels = append(levels, ix.ancestors(c)...)
	}
	for i, l := range levels {
		at[l] = i
	}
	pub := len(levels)
	var borrowGrace time.Duration
	if c != "" && ix.cons[c] != nil {
		borrowGrace = ix.cons[c].BorrowGrace
	}
	// Per level: owned/private pools, then lent pools.
	buckets := map[poolKey]*Pool{}
	var keys []poolKey
	var refused []Refusal
	add := func(k poolKey, mk func() Pool, h string) {
		p := buckets[k]
		if p == nil {
			np := mk()
			p = &np
			buckets[k] = p
			keys = append(keys, k)
		}
		p.Hosts = append(p.Hosts, h)
	}
	levelOf := func(k poolKey) int {
		if k.level == "" {
			return pub
		}
		return at[k.level]
	}
	// classify puts capacity of holder d in group g (a whole host, or
	// d's own part of a partly owned host) in its pool for c, or says why
	// c may not use it.
	classify := func(d, g string) (poolKey, func() Pool, string) {
		if d == "" {
			return poolKey{KindPublic, "", "", ""}, func() Pool {
				return Pool{Kind: KindPublic, Limit: -1, Why: "owned by no consumer"}
			}, ""
		}
		if d == c {
			return poolKey{KindOwned, d, d, g}, func() Pool {
				return Pool{Kind: KindOwned, Owner: d, Level: d, Group: g, Preference: ix.preference(d, g), Limit: -1,
					Why: fmt.Sprintf("owned by %q", d)}
			}, ""
		}
		if _, ok := at[d]; ok {
			// An ancestor's capacity that none of its children own.
			return poolKey{KindPrivate, d, d, g}, func() Pool {
				return Pool{Kind: KindPrivate, Owner: d, Level: d, Group: g, Preference: ix.preference(d, g), Limit: -1,
					Why: fmt.Sprintf("private share pool of %q, an ancestor", d)}
			}, ""
		}
		// Another consumer's capacity: lent up the tree while each
		// consumer on the way lends, to the first level that is c or its
		// ancestor.
		e := ix.entries[d][g]
		lvl, blocker := "", ""
		reached := false
		for x := d; ; {
			xe := ix.entries[x][g]
			if xe == nil || !xe.Lend {
				blocker = x
				break
			}
			x = ix.cons[x].Parent
			if x == "" {
				reached = true
				break
			}
			if _, ok := at[x]; ok {
				lvl, reached = x, true
				break
			}
		}
		switch {
		case !reached:
			why := fmt.Sprintf("owned by %q, which does not lend it", d)
			if blocker != d {
				why = fmt.Sprintf("owned by %q and lent, but %q does not lend further up", d, blocker)
			}
			return poolKey{}, nil, why
		case e == nil || borrowGrace > e.LendGrace:
			return poolKey{}, nil, fmt.Sprintf("lent by %q with a grace period of %s, shorter than the borrowing grace period %s", d, e.LendGrace, borrowGrace)
		}
		return poolKey{KindLent, d, lvl, g}, func() Pool {
			where := "the public pool"
			if lvl != "" {
				where = fmt.Sprintf("the private pool of %q", lvl)
			}
			return Pool{Kind: KindLent, Owner: d, Level: lvl, Group: g, Preference: ix.preference(d, g),
				Grace: e.LendGrace, GraceSeconds: int64(e.LendGrace / time.Second), Limit: ix.cons[d].LendingLimit,
				Why: fmt.Sprintf("idle ownership lent by %q to %s (grace %s ≥ borrowing grace %s)", d, where, e.LendGrace, borrowGrace)}
		}, ""
	}
	for _, h := range v.hosts {
		if s, ok := v.split[h]; ok {
			if explain {
				refused = append(refused, Refusal{Host: h, Holder: s, Reason: "partly owned by a child consumer: not available as a whole host"})
			}
			// Its parts serve slot requests: each part in its holder's
			// pool, as a whole host would be.
			for _, pt := range v.parts[h] {
				k, mk, why := classify(pt.Owner, pt.Group)
				if mk == nil {
					if explain {
						refused = append(refused, Refusal{Host: h, Holder: pt.Owner, Slots: pt.Slots, Reason: why})
					}
					continue
				}
				if buckets[k] == nil {
					np := mk()
					buckets[k] = &np
					keys = append(keys, k)
				}
				buckets[k].Parts = append(buckets[k].Parts, pt)
			}
			continue
		}
		d := v.holder[h]
		k, mk, why := classify(d, v.group[h])
		if mk == nil {
			if explain {
				refused = append(refused, Refusal{Host: h, Holder: d, Reason: why})
			}
			continue
		}
		add(k, mk, h)
	}
	kindRank := map[string]int{KindOwned: 0, KindPrivate: 1, KindLent: 2, KindPublic: 3}
	sort.SliceStable(keys, func(a, b int) bool {
		x, y := keys[a], keys[b]
		lx, ly := levelOf(x), levelOf(y)
		if lx != ly {
			return lx < ly
		}
		// Within a level: owned, the level's private pool, then what is
		// lent into it.
		if kindRank[x.kind] != kindRank[y.kind] {
			return kindRank[x.kind] < kindRank[y.kind]
		}
		px, py := buckets[x].Preference, buckets[y].Preference
		if px != py {
			return px > py
		}
		if x.group != y.group {
			return x.group < y.group
		}
		return x.owner < y.owner
	})
	out := make([]Pool, 0, len(keys))
	for _, k := range keys {
		p := *buckets[k]
		if p.Hosts == nil {
			p.Hosts = []string{} // a pool of parts only
		}
		out = append(out, p)
	}
	return out, refused
}

// ReclaimAt says when an owner who asks, at now, for a host it lent, gets
// it to use from start: the borrower keeps the host at least the lender's
// grace period, so the owner gets it at start only if start is at least
// grace after now. The borrower's lease on the host ends at the returned
// time.
func ReclaimAt(now, start time.Time, grace time.Duration) (time.Time, bool) {
	earliest := now.Add(grace)
	if start.Before(earliest) {
		return earliest, false
	}
	return start, true
}

// Order is one consumer's pool order as the host plugin uses it: a
// request tries the first pool, then the first two, … so that it takes
// hosts from earlier pools whenever they suffice.
type Order struct {
	Pools  []Pool
	poolOf map[string]int
	known  map[string]bool
	ix     *index
	// parts are the partly owned hosts' parts in the pools (by host).
	parts map[string][]PartUse
	// hostParts are all the parts of every partly owned host, whatever
	// pools they are in (the view's, shared and never written).
	hostParts map[string][]Part
}

// HostOrder returns c's Order, computed once per consumer (a View never
// changes; the lease path asks for the same consumers again and again).
func (v *View) HostOrder(c string) *Order {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o, ok := v.orders[c]; ok {
		return o
	}
	if v.orders == nil {
		v.orders = map[string]*Order{}
	}
	o := v.hostOrder(c)
	v.orders[c] = o
	return o
}

func (v *View) hostOrder(c string) *Order {
	o := &Order{Pools: v.Order(c), poolOf: map[string]int{}, known: make(map[string]bool, len(v.hosts)), ix: v.ix, hostParts: v.parts}
	for i, p := range o.Pools {
		for _, h := range p.Hosts {
			o.poolOf[h] = i
		}
		for _, pt := range p.Parts {
			if o.parts == nil {
				o.parts = map[string][]PartUse{}
			}
			o.parts[pt.Host] = append(o.parts[pt.Host], PartUse{Part: pt, Pool: i})
		}
	}
	// A partly owned host none of whose parts the consumer may use is
	// still split: it offers nothing.
	for h := range v.split {
		if _, ok := o.parts[h]; !ok {
			if o.parts == nil {
				o.parts = map[string][]PartUse{}
			}
			o.parts[h] = nil
		}
	}
	for _, h := range v.hosts {
		o.known[h] = true
	}
	return o
}

// Stages is how many prefixes of the pools a request may try (at least 1).
func (o *Order) Stages() int { return max(1, len(o.Pools)) }

// Allows reports whether host h may be used at stage k (1-based: the
// first k pools). A host the view does not know (registered after it was
// built) is public: allowed at the last stage only.
func (o *Order) Allows(k int, h string) bool {
	if i, ok := o.poolOf[h]; ok {
		return i < k
	}
	return !o.known[h] && k >= o.Stages()
}

// PoolOf returns the kind and owner of the pool h is in ("" if none).
func (o *Order) PoolOf(h string) (kind, owner string) {
	if i, ok := o.poolOf[h]; ok {
		return o.Pools[i].Kind, o.Pools[i].Owner
	}
	if !o.known[h] {
		return KindPublic, ""
	}
	return "", ""
}

// Source is where a host of a lease came from, as lease bodies show it:
// Pool is KindOwned, KindPrivate or KindPublic; Consumer the consumer
// whose ownership or private pool it is ("" for the public pool); LentBy
// the consumer that lent the host when it was borrowed (its pool is then
// the private pool it was lent into, or the public pool). Grace is the
// lender's grace period and Limit its lending limit (borrowed hosts only;
// negative: none).
type Source struct {
	Pool     string
	Consumer string
	LentBy   string
	Grace    time.Duration
	Limit    int
}

// SourceOf returns where host h comes from for this order's consumer. A
// host the view does not know is public; a host in none of the pools has
// Pool "".
func (o *Order) SourceOf(h string) Source {
	i, ok := o.poolOf[h]
	if !ok {
		if !o.known[h] {
			return Source{Pool: KindPublic, Limit: -1}
		}
		return Source{Limit: -1}
	}
	return o.sourceOfPool(i)
}

func (o *Order) sourceOfPool(i int) Source {
	p := &o.Pools[i]
	switch p.Kind {
	case KindLent:
		s := Source{Pool: KindPublic, LentBy: p.Owner, Grace: p.Grace, Limit: p.Limit}
		if p.Level != "" {
			s.Pool, s.Consumer = KindPrivate, p.Level
		}
		return s
	case KindPublic:
		return Source{Pool: KindPublic, Limit: -1}
	}
	return Source{Pool: p.Kind, Consumer: p.Owner, Limit: -1}
}

// Loan is a booking of a borrowed host: LentBy lent it into the private
// pool of Level ("" for the public pool), and a lease holds it over
// [Start, End).
type Loan struct {
	Host       string
	LentBy     string
	Level      string
	Start, End time.Time
}

// limiters returns the consumers whose lending limits a host lent by
// lentBy into level counts against: lentBy and its ancestors below level
// (what leaves each one's subtree), those with a limit.
func (ix *index) limiters(lentBy, level string) []string {
	if ix == nil || lentBy == "" {
		return nil
	}
	var out []string
	for x := lentBy; x != "" && x != level; {
		c := ix.cons[x]
		if c == nil {
			break
		}
		if c.LendingLimit >= 0 {
			out = append(out, x)
		}
		x = c.Parent
	}
	return out
}

// Charges returns the consumers whose lending limits using host h (from
// o's pools) counts against: none for a host that is not borrowed.
func (o *Order) Charges(h string) []string {
	s := o.SourceOf(h)
	if s.LentBy == "" {
		return nil
	}
	return o.ix.limiters(s.LentBy, s.Consumer)
}

// Limit returns consumer c's lending limit (negative: none).
func (o *Order) Limit(c string) int {
	if o.ix == nil || o.ix.cons[c] == nil {
		return -1
	}
	return o.ix.cons[c].LendingLimit
}

// Budgets returns, for each consumer with a lending limit that o's pools
// borrow from, how many more hosts it may lend at once over [start, end)
// given the existing loans: its limit less the most hosts it lends at any
// one time in the window (never below zero). A consumer lends a host when
// the host leaves its subtree: lent by it or a descendant into a pool
// above it.
func (o *Order) Budgets(loans []Loan, start, end time.Time) map[string]int {
	out := map[string]int{}
	for _, p := range o.Pools {
		if p.Kind != KindLent {
			continue
		}
		for _, x := range o.ix.limiters(p.Owner, p.Level) {
			out[x] = o.ix.cons[x].LendingLimit
		}
	}
	if len(out) == 0 {
		return out
	}
	type edge struct {
		at    time.Time
		delta int
	}
	edges := map[string][]edge{}
	for _, l := range loans {
		if !l.Start.Before(end) || !l.End.After(start) {
			continue
		}
		for _, x := range o.ix.limiters(l.LentBy, l.Level) {
			if _, ok := out[x]; ok {
				edges[x] = append(edges[x], edge{maxTime(l.Start, start), 1}, edge{minTime(l.End, end), -1})
			}
		}
	}
	for x, es := range edges {
		// Ends before starts at one instant: [a, b) and [b, c) never
		// overlap.
		sort.Slice(es, func(a, b int) bool {
			if !es[a].at.Equal(es[b].at) {
				return es[a].at.Before(es[b].at)
			}
			return es[a].delta < es[b].delta
		})
		cur, peak := 0, 0
		for _, e := range es {
			cur += e.delta
			peak = max(peak, cur)
		}
		out[x] = max(0, out[x]-peak)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
