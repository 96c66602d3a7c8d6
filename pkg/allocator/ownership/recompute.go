package ownership

import (
	"fmt"
	"sort"
)

// Change is one consumer's ownership of one host before and after a
// recomputation.
type Change struct {
	Host     string `json:"host"`
	Consumer string `json:"consumer"`
	Group    string `json:"group"`
	// Before and After are the owned slots (0: not owned).
	Before int `json:"before"`
	After  int `json:"after"`
	// Step is the seed's recomputation step that decided the change (1:
	// stale ownership dropped, 2: missing ownership filled by rank, 3:
	// trimmed on shrink, 4: released busy ownership, whose workload is
	// rebalanced under the lending grace period).
	Step   int    `json:"step"`
	Reason string `json:"reason"`
	// Workload is the consumer's (and its descendants') workload on the
	// host: a busy host that changes owner is handed over only after the
	// lender's grace period.
	Workload int `json:"workload"`
}

// Shortfall is a consumer that did not get its configured ownership.
type Shortfall struct {
	Consumer string `json:"consumer"`
	Group    string `json:"group"`
	Want     int    `json:"want"`
	Got      int    `json:"got"`
	Unit     string `json:"unit"`
}

// Result is a recomputation's outcome.
type Result struct {
	Ownership  Ownership   `json:"ownership"`
	Changes    []Change    `json:"changes"`
	Shortfalls []Shortfall `json:"shortfalls"`
	// MovedHosts counts the distinct hosts whose ownership changed.
	MovedHosts int `json:"moved_hosts"`
}

// Recompute assigns ownership for plan p over hosts, starting from prev
// (nil for the first assignment) and following the seed's steps for each
// resource group, level by level from the top of the tree (siblings share
// their parent's ownership; top-level consumers share the group):
//
//  1. stale ownership is dropped (host down or out of the group, entry or
//     parent ownership gone); idle owned hosts are released to the pool
//     and remembered so their owner takes them back first;
//  2. consumers below their ownership fill it in rank order: their own
//     released hosts, then free hosts least loaded first, then idle hosts
//     of other consumers from the lowest rank up, then busy hosts of
//     lower-rank consumers above their recalculated ownership (least
//     workload first); a consumer that owns whole hosts takes the rest of
//     a partly owned host only when nothing else is left;
//  3. consumers above their recalculated ownership (the group shrank or
//     the plan lowered it) are trimmed, least workload first, without
//     regard to what higher ranks would like;
//  4. busy hosts that changed hands are reported with their workload
//     (Change.Workload, Step 4) so that the lease layer hands them over
//     after the lender's grace period.
//
// Recomputing with an unchanged plan and hosts changes nothing; running
// it periodically is the seed's redistribution of free owned capacity.
func Recompute(p *Plan, hosts []Host, prev Ownership) (*Result, error) {
	ix, err := compile(p)
	if err != nil {
		return nil, err
	}
	s := &rstate{
		ix: ix, hosts: make(map[string]*Host, len(hosts)), prev: prev, next: Ownership{},
		use: map[string]map[string]int{}, why: map[[2]string]why{},
	}
	for i := range hosts {
		h := &hosts[i]
		s.hosts[h.ID] = h
		for u, n := range h.Users {
			if n <= 0 || ix.cons[u] == nil {
				continue
			}
			for id := u; id != ""; id = ix.cons[id].Parent {
				if s.use[id] == nil {
					s.use[id] = map[string]int{}
				}
				s.use[id][h.ID] += n
			}
		}
	}
	// Hosts by (load, ID): the order "least workload first" everywhere.
	order := make([]*Host, 0, len(hosts))
	for i := range hosts {
		order = append(order, &hosts[i])
	}
	sort.Slice(order, func(a, b int) bool {
		if order[a].Load != order[b].Load {
			return order[a].Load < order[b].Load
		}
		return order[a].ID < order[b].ID
	})
	groupOf := ix.resolve(hosts)
	for _, g := range ix.groups {
		var hs []string
		capy := map[string]int{}
		for _, h := range order {
			if groupOf[h.ID] == g {
				hs = append(hs, h.ID)
				capy[h.ID] = h.slots()
			}
		}
		s.level("", g, hs, capy)
	}
	return s.finish(), nil
}

type why struct {
	step int
	text string
}

type rstate struct {
	ix         *index
	hosts      map[string]*Host
	prev, next Ownership
	use        map[string]map[string]int // consumer → host → workload of its subtree
	why        map[[2]string]why
	short      []Shortfall
}

// member is one sibling's state while its level is computed.
type member struct {
	id     string
	e      *Entry
	target int
	own    map[string]int // host → slots
	have   int            // hosts (whole) or slots (partial)
	sticky []string       // idle hosts released in step 1, least loaded first
	prevSl map[string]int // their previous slots
	sc     int            // cursor into sticky for other consumers
	free   int            // released units nobody has taken yet
}

// unit is what sl slots of a host count for m: one host, or sl slots.
func (m *member) unit(sl int) int {
	if m.e.Partial {
		return sl
	}
	return 1
}

// nextSticky returns m's next released host that is still wholly free.
func (m *member) nextSticky(used map[string]int) string {
	for ; m.sc < len(m.sticky); m.sc++ {
		if h := m.sticky[m.sc]; used[h] == 0 {
			m.sc++
			return h
		}
	}
	return ""
}

func (m *member) add(h string, n int) {
	if m.own[h] == 0 {
		if !m.e.Partial {
			m.have++
		}
	}
	m.own[h] += n
	if m.e.Partial {
		m.have += n
	}
}

func (m *member) remove(h string, n int) {
	m.own[h] -= n
	if m.e.Partial {
		m.have -= n
	}
	if m.own[h] <= 0 {
		delete(m.own, h)
		if !m.e.Partial {
			m.have--
		}
	}
}

// level computes the ownership of parent's children in group g, where
// hosts (least loaded first) have capy slots to give at this level.
func (s *rstate) level(parent, g string, hosts []string, capy map[string]int) {
	ix := s.ix
	var ms []*member
	for _, id := range ix.children[parent] {
		if e := ix.entries[id][g]; e != nil {
			ms = append(ms, &member{id: id, e: e, own: map[string]int{}, prevSl: map[string]int{}})
		}
	}
	if len(ms) == 0 {
		return
	}
	pool := "the public pool"
	if parent != "" {
		pool = fmt.Sprintf("the private pool of %q", parent)
	}
	used := make(map[string]int, len(hosts))
	pos := make(map[string]int, len(hosts))
	for i, h := range hosts {
		pos[h] = i
	}
	stickyTo := map[string]*member{}
	stickyOwners := map[string][]*member{}
	gone := map[string]bool{} // released hosts someone took

	// Step 1: keep valid busy ownership (rank order, so a higher rank keeps
	// a host two consumers claim); release idle ownership, remembered.
	for _, m := range ms {
		var prevHosts []string
		for h, sh := range s.prev[m.id] {
			if sh.Group == g && capy[h] > 0 {
				prevHosts = append(prevHosts, h)
			}
		}
		sort.Slice(prevHosts, func(a, b int) bool { return pos[prevHosts[a]] < pos[prevHosts[b]] })
		for _, h := range prevHosts {
			sl := s.prev[m.id][h].Slots
			if free := capy[h] - used[h]; sl > free {
				sl = free
			}
			if sl <= 0 {
				continue
			}
			if s.use[m.id][h] > 0 {
				m.add(h, sl)
				used[h] += sl
				continue
			}
			// Partial owners may share a host: each remembers its part.
			m.sticky = append(m.sticky, h)
			m.prevSl[h] = sl
			m.free += m.unit(sl)
			stickyOwners[h] = append(stickyOwners[h], m)
			if stickyTo[h] == nil {
				stickyTo[h] = m
			}
		}
	}

	s.targets(ms, hosts, capy)

	// Step 2: fill by rank.
	fresh := 0 // cursor over hosts for untouched, unclaimed hosts
	var partly []string
	seenPartly := map[string]bool{}
	markPartly := func(h string) {
		if used[h] > 0 && used[h] < capy[h] && !seenPartly[h] {
			seenPartly[h] = true
			partly = append(partly, h)
		}
	}
	for h := range used {
		markPartly(h)
	}
	sort.Slice(partly, func(a, b int) bool { return pos[partly[a]] < pos[partly[b]] })
	for ci, m := range ms {
		need := func() int { return m.target - m.have }
		take := func(h string, limit int, step int, text string) {
			free := capy[h] - used[h]
			n := free
			if m.e.Partial && need() < n {
				n = need()
			}
			if limit > 0 && limit < n {
				n = limit
			}
			if n <= 0 || (!m.e.Partial && m.own[h] > 0) {
				return
			}
			if used[h] == 0 && !gone[h] {
				gone[h] = true
				for _, o := range stickyOwners[h] {
					o.free -= o.unit(o.prevSl[h])
				}
			}
			m.add(h, n)
			used[h] += n
			markPartly(h)
			s.why[[2]string{m.id, h}] = why{step, text}
		}
		// a) its own released hosts, as they were.
		for _, h := range m.sticky {
			if need() <= 0 {
				break
			}
			take(h, m.prevSl[h], 2, "kept: idle ownership released and given back")
		}
		// Partial owners fill partly owned hosts before starting new ones.
		if m.e.Partial {
			for _, h := range partly {
				if need() <= 0 {
					break
				}
				if st := stickyTo[h]; st == nil || st == m {
					take(h, 0, 2, "filled from "+pool+" (partly owned host)")
				}
			}
		}
		// b) untouched hosts nobody released, least loaded first.
		for need() > 0 && fresh < len(hosts) {
			h := hosts[fresh]
			if used[h] > 0 || stickyTo[h] != nil {
				fresh++
				continue
			}
			take(h, 0, 2, "filled from "+pool+", least loaded first")
			if used[h] >= capy[h] {
				fresh++
			}
		}
		// c) hosts of other consumers above their recalculated ownership,
		// lowest rank first: their idle released hosts, then (lower ranks
		// only) their busy hosts, least workload first. Taking only from
		// consumers above their ownership keeps the change from cascading.
		for j := len(ms) - 1; j >= 0 && need() > 0; j-- {
			o := ms[j]
			if o == m {
				continue
			}
			for need() > 0 && o.have+o.free > o.target {
				if h := o.nextSticky(used); h != "" {
					take(h, 0, 2, fmt.Sprintf("filled from idle ownership released by %q", o.id))
					s.why[[2]string{o.id, h}] = why{2, fmt.Sprintf("idle ownership given to %q", m.id)}
					stickyTo[h] = nil
					continue
				}
				if j <= ci || o.have <= o.target {
					break
				}
				h := s.leastBusy(o)
				n := o.own[h]
				if m.e.Partial && need() < n {
					n = need()
				}
				if o.e.Partial && o.have-o.target < n {
					n = o.have - o.target
				}
				o.remove(h, n)
				used[h] -= n
				s.why[[2]string{o.id, h}] = why{2, fmt.Sprintf("taken by higher-rank %q", m.id)}
				take(h, n, 2, fmt.Sprintf("taken from lower-rank %q", o.id))
			}
		}
		// d) idle hosts released by anyone else, lowest rank first.
		for j := len(ms) - 1; j >= 0 && need() > 0; j-- {
			o := ms[j]
			if o == m {
				continue
			}
			for need() > 0 {
				h := o.nextSticky(used)
				if h == "" {
					break
				}
				take(h, 0, 2, fmt.Sprintf("filled from idle ownership released by %q", o.id))
				s.why[[2]string{o.id, h}] = why{2, fmt.Sprintf("idle ownership given to %q", m.id)}
				stickyTo[h] = nil
			}
		}
		// e) whole owners take the rest of partly owned hosts last.
		if !m.e.Partial {
			for _, h := range partly {
				if need() <= 0 {
					break
				}
				if used[h] < capy[h] {
					take(h, 0, 2, "filled with the rest of a host partly owned by a higher rank")
				}
			}
		}
	}

	// Step 3: trim consumers above their recalculated ownership (idle
	// hosts released in step 1 and not taken back are trimmed too).
	for _, m := range ms {
		for _, h := range m.sticky {
			k := [2]string{m.id, h}
			if _, ok := s.why[k]; !ok && m.own[h] == 0 {
				s.why[k] = why{3, fmt.Sprintf("trimmed to the recalculated ownership (%d %s) into %s", m.target, unit(m.e.Partial), pool)}
			}
		}
		for m.have > m.target {
			h := s.leastBusy(m)
			n := m.own[h]
			if m.e.Partial && m.have-m.target < n {
				n = m.have - m.target
			}
			m.remove(h, n)
			used[h] -= n
			s.why[[2]string{m.id, h}] = why{3, fmt.Sprintf("trimmed to the recalculated ownership (%d %s) into %s", m.target, unit(m.e.Partial), pool)}
		}
		if m.have < m.e.Amount {
			s.short = append(s.short, Shortfall{Consumer: m.id, Group: g, Want: m.e.Amount, Got: m.have, Unit: unit(m.e.Partial)})
		}
	}
	for _, m := range ms {
		var kids []string
		kcap := make(map[string]int, len(m.own))
		for _, h := range hosts {
			if n := m.own[h]; n > 0 {
				s.next.set(m.id, h, Share{Group: g, Slots: n})
				kids = append(kids, h)
				kcap[h] = n
			}
		}
		s.level(m.id, g, kids, kcap)
	}
}

// leastBusy returns the host of m with the least workload of m's subtree
// (then least load, then ID).
func (s *rstate) leastBusy(m *member) string {
	best, bw, bl := "", 0, 0
	for h := range m.own {
		w, l := s.use[m.id][h], s.hosts[h].Load
		if best == "" || w < bw || (w == bw && (l < bl || (l == bl && h < best))) {
			best, bw, bl = h, w, l
		}
	}
	return best
}

// targets sets each member's recalculated ownership: what a fresh
// assignment in rank order would give it out of the level's capacity.
func (s *rstate) targets(ms []*member, hosts []string, capy map[string]int) {
	fi := 0
	var part []int // remaining slots of partly taken hosts, oldest first
	ph := 0
	for _, m := range ms {
		need := m.e.Amount
		got := 0
		if !m.e.Partial {
			for got < need && fi < len(hosts) {
				fi++
				got++
			}
			for got < need && ph < len(part) {
				ph++
				got++
			}
		} else {
			for got < need && ph < len(part) {
				t := min(need-got, part[ph])
				part[ph] -= t
				got += t
				if part[ph] == 0 {
					ph++
				}
			}
			for got < need && fi < len(hosts) {
				c := capy[hosts[fi]]
				fi++
				t := min(need-got, c)
				got += t
				if c > t {
					part = append(part, c-t)
				}
			}
		}
		m.target = got
	}
}

func (s *rstate) finish() *Result {
	r := &Result{Ownership: s.next, Shortfalls: s.short}
	add := func(c, h string, b, a Share) {
		if b.Slots == a.Slots && (a.Slots == 0 || a.Group == b.Group) {
			return
		}
		ch := Change{Host: h, Consumer: c, Group: a.Group, Before: b.Slots, After: a.Slots, Workload: s.use[c][h]}
		if ch.Group == "" {
			ch.Group = b.Group
		}
		if w, ok := s.why[[2]string{c, h}]; ok {
			ch.Step, ch.Reason = w.step, w.text
		} else {
			ch.Step, ch.Reason = 1, "dropped: the host is down or left the group, or the consumer's plan entry or its parent's ownership of the host is gone"
		}
		if ch.After < ch.Before && ch.Workload > 0 {
			ch.Step = 4
			ch.Reason += "; its workload is rebalanced after the lending grace period"
		}
		r.Changes = append(r.Changes, ch)
	}
	for c, hs := range s.prev {
		nx := s.next[c]
		for h, b := range hs {
			add(c, h, b, nx[h])
		}
	}
	for c, hs := range s.next {
		pv := s.prev[c]
		for h, a := range hs {
			if _, ok := pv[h]; !ok {
				add(c, h, Share{}, a)
			}
		}
	}
	sort.Slice(r.Changes, func(a, b int) bool {
		x, y := r.Changes[a], r.Changes[b]
		if x.Host != y.Host {
			return x.Host < y.Host
		}
		dx, dy := s.ix.depth[x.Consumer], s.ix.depth[y.Consumer]
		if dx != dy {
			return dx < dy
		}
		return x.Consumer < y.Consumer
	})
	moved := map[string]bool{}
	for _, c := range r.Changes {
		moved[c.Host] = true
	}
	r.MovedHosts = len(moved)
	sort.Slice(r.Shortfalls, func(a, b int) bool {
		x, y := r.Shortfalls[a], r.Shortfalls[b]
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		return x.Consumer < y.Consumer
	})
	return r
}
