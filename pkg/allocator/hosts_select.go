package allocator

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// maxTop bounds the Max for which chooseTop keeps the best candidates in
// a small insertion-sorted array.
const maxTop = 32

// topDecision is chooseTop's outcome.
type topDecision struct {
	top            []hostCand
	hosts          []Host
	matching, free int
	// best is the best size rank among the matching hosts; atBest counts
	// the matching and free hosts of that rank (the rest are bigger).
	best                    int32
	matchAtBest, freeAtBest int
}

// chooseTop is the one-pass choice without rejections or failure domains:
// match, scan and keep the req.Max best candidates by fit, host by host
// (the same ones pickHosts keeps: candLess is a total order on distinct
// IDs). It gives up (false) when a host carries a failure-domain tag.
func chooseTop(hosts []Host, p PreparedHosts, req HostRequest, lo, hi int64, locPrefixes []string) (topDecision, bool) {
	n := req.Max
	d := topDecision{hosts: hosts, top: make([]hostCand, 0, n+1)}
	for i := range hosts {
		h := &hosts[i]
		if len(locPrefixes) > 0 {
			for _, t := range h.Tags {
				if hasAnyPrefixColon(t, locPrefixes) {
					return d, false
				}
			}
		}
		if req.Match != nil {
			if ok, _ := req.Match(h); !ok {
				continue
			}
		}
		d.matching++
		rank := p.rank(i)
		if d.matching == 1 || rank < d.best {
			d.best, d.matchAtBest, d.freeAtBest = rank, 0, 0
		}
		if rank == d.best {
			d.matchAtBest++
		}
		sc := p.scan(i, lo, hi)
		if sc.conflictAt >= 0 {
			continue
		}
		d.free++
		if rank == d.best {
			d.freeAtBest++
		}
		c := hostCand{idx: int32(i), open: sc.open, gap: sc.gap, rank: rank}
		top := d.top
		if len(top) == n && !candLess(hosts, &c, &top[n-1]) {
			continue
		}
		k := len(top)
		top = append(top, c)
		for k > 0 && candLess(hosts, &c, &top[k-1]) {
			top[k] = top[k-1]
			k--
		}
		top[k] = c
		if len(top) > n {
			top = top[:n]
		}
		d.top = top
	}
	return d, true
}

// finish turns chooseTop's outcome into ChooseHosts' decision.
func (d topDecision) finish(nHosts int, req HostRequest) (HostDecision, error) {
	dec := HostDecision{Matching: d.matching, Free: d.free}
	if req.ReservePercent > 0 {
		// The held hosts are the worst free bigger ones by candLess: the
		// top keeps the best, bigger ones last (rank first), so at most
		// the free bigger hosts not held stay in it.
		freeBigger := d.free - d.freeAtBest
		dec.Held = min(freeBigger, reserveCount(d.matching-d.matchAtBest, req.ReservePercent))
		n := len(d.top)
		for n > 0 && d.top[n-1].rank > d.best {
			n--
		}
		d.top = d.top[:min(len(d.top), n+freeBigger-dec.Held)]
	}
	if dec.Free-dec.Held < req.Min {
		dec.Summary = fmt.Sprintf("%s considered, %s the properties, %s free in the window%s, %d needed",
			countNoun(nHosts, "host", "hosts"), plural(dec.Matching, "host", "hosts"), isAre(dec.Free), heldNote(dec.Held), req.Min)
		return dec, &NotEnoughHostsError{Decision: dec, Needed: req.Min}
	}
	dec.Chosen = make([]string, len(d.top))
	for i, c := range d.top {
		dec.Chosen[i] = d.hosts[c.idx].ID
	}
	dec.Summary = fmt.Sprintf("chose %d of %s (%s considered, %s the properties)%s",
		len(d.top), countNoun(dec.Free, "free host", "free hosts"), countNoun(nHosts, "host", "hosts"),
		plural(dec.Matching, "host", "hosts"), keptNote(dec.Held))
	return dec, nil
}

// candLess orders free hosts: the smaller size rank first (the host
// whose use loses the fewest big fits, see SizeRanks), then by fit in
// time (timeClass: a hole between two reservations last), then smaller
// leftover gap, then ID.
func candLess(hosts []Host, a, b *hostCand) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if ta, tb := timeClass(a.open), timeClass(b.open); ta != tb {
		return ta < tb
	}
	if a.gap != b.gap {
		return a.gap < b.gap
	}
	return compareIDs(hosts[a.idx].ID, hosts[b.idx].ID) < 0
}

// candCmp is candLess as a comparison function.
func candCmp(hosts []Host, a, b *hostCand) int {
	if candLess(hosts, a, b) {
		return -1
	}
	if candLess(hosts, b, a) {
		return 1
	}
	return 0
}

// timeClass orders a window's fit in time by its host's free interval
// around it (open is the number of its unbounded sides). The lost
// allocations in time: a window in a free interval unbounded on a side
// loses no fit of any length there (what is left stays unbounded), one in
// a hole between two reservations loses the fits the hole held. So a
// host bounded on one side comes first (the window extends a booked
// stretch: the smaller the gap the better), then an idle host, then a
// hole (the tightest first). On the issue-14 trace this accepts 5 % more
// leases than filling holes first at twice the hosts' capacity
// (TestHostChoiceQuality).
func timeClass(open int8) int8 {
	if open == 0 {
		return 3
	}
	return open
}

// compareIDs compares host IDs, numerically when both are decimal numbers
// (Blazar host IDs are), else as strings.
func compareIDs(a, b string) int {
	if isDigits(a) && isDigits(b) {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pickHosts chooses n candidates. Without failure domains it keeps the n
// best by fit (a bounded selection, O(len·n) for small n). With failure
// domains it picks greedily: each step takes the candidate whose domains
// already hold the fewest chosen hosts, then the best by candLess.
//
// used, when not nil, holds per domain the hosts already placed there
// (HostRequest.UsedDomains).
func pickHosts(hosts []Host, cands []hostCand, doms []int32, nDoms, n int, used []int32) []hostCand {
	if nDoms == 0 && n <= 32 && n < len(cands) {
		// Keep the n best in an insertion-sorted array.
		top := make([]hostCand, 0, n+1)
		for i := range cands {
			top = keepBest(hosts, top, &cands[i], n)
		}
		return top
	}
	if nDoms > 0 && n < len(cands) {
		cands = preselect(hosts, cands, doms, n)
	}
	if n >= len(cands) || n > 32 {
		slices.SortFunc(cands, func(a, b hostCand) int { return candCmp(hosts, &a, &b) })
		if nDoms == 0 {
			return cands[:n]
		}
	}
	usage := make([]int32, nDoms)
	copy(usage, used)
	taken := make([]bool, len(cands))
	out := make([]hostCand, 0, n)
	for len(out) < n {
		best := -1
		var bestUse int32
		for i := range cands {
			if taken[i] {
				continue
			}
			c := &cands[i]
			var use int32
			for _, d := range doms[c.dOff : c.dOff+c.dLen] {
				use += usage[d]
			}
			if best < 0 || use < bestUse || (use == bestUse && candLess(hosts, c, &cands[best])) {
				best, bestUse = i, use
			}
		}
		taken[best] = true
		c := cands[best]
		for _, d := range doms[c.dOff : c.dOff+c.dLen] {
			usage[d]++
		}
		out = append(out, c)
	}
	return out
}

// preselect keeps, for every set of failure domains, only its n best
// candidates by fit. Hosts with the same set of domains always have the same
// domain usage, so the greedy choice takes them in fit order and never more
// than n of them: the result is unchanged, and the greedy passes run over
// (number of domain sets) × n candidates instead of all free hosts.
func preselect(hosts []Host, cands []hostCand, doms []int32, n int) []hostCand {
	single := true
	maxDom := int32(-1)
	for i := range cands {
		if cands[i].dLen > 1 {
			single = false
			break
		}
		if cands[i].dLen == 1 {
			maxDom = max(maxDom, doms[cands[i].dOff])
		}
	}
	if single {
		// one domain at most per host: index the groups by domain id
		tops := make([][]hostCand, maxDom+2)
		for i := range cands {
			c := &cands[i]
			k := 0
			if c.dLen == 1 {
				k = int(doms[c.dOff]) + 1
			}
			tops[k] = keepBest(hosts, tops[k], c, n)
		}
		var out []hostCand
		for _, t := range tops {
			out = append(out, t...)
		}
		return out
	}
	type sig [4]int32
	groups := map[sig][]hostCand{}
	var order []sig
	var out []hostCand
	for i := range cands {
		c := &cands[i]
		if c.dLen > 4 {
			out = append(out, *c) // unusual: keep it, it is simply not pruned
			continue
		}
		var k sig
		for j := range k {
			k[j] = -1
		}
		copy(k[:], doms[c.dOff:c.dOff+c.dLen])
		slices.Sort(k[:c.dLen])
		top, ok := groups[k]
		if !ok {
			order = append(order, k)
			top = make([]hostCand, 0, n+1)
		}
		groups[k] = keepBest(hosts, top, c, n)
	}
	for _, k := range order {
		out = append(out, groups[k]...)
	}
	return out
}

// hostWorkspace holds ChooseHosts' scratch slices; they are pooled so that
// repeated calls do not churn the garbage collector (the caller's hosts
// and reservations are usually a large, pointer-rich heap to scan).
type hostWorkspace struct {
	status []int8
	scans  []scanResult
	cands  []hostCand
}

var workspaces sync.Pool

func getWorkspace(n int) *hostWorkspace {
	ws, _ := workspaces.Get().(*hostWorkspace)
	if ws == nil {
		ws = &hostWorkspace{}
	}
	if cap(ws.status) < n {
		ws.status = make([]int8, n)
		ws.scans = make([]scanResult, n)
		ws.cands = make([]hostCand, 0, n)
	}
	ws.status = ws.status[:n]
	clear(ws.status)
	ws.scans = ws.scans[:n]
	clear(ws.scans)
	return ws
}

func putWorkspace(ws *hostWorkspace) { workspaces.Put(ws) }

// keepBest inserts c into top (sorted by fit, at most n long).
func keepBest(hosts []Host, top []hostCand, c *hostCand, n int) []hostCand {
	if len(top) == n && !candLess(hosts, c, &top[n-1]) {
		return top
	}
	if top == nil {
		top = make([]hostCand, 0, n+1)
	}
	p := len(top)
	for p > 0 && candLess(hosts, c, &top[p-1]) {
		p--
	}
	top = slices.Insert(top, p, *c)
	if len(top) > n {
		top = top[:n]
	}
	return top
}
