package allocator

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Interval is a half-open time interval [Start, End).
type Interval struct{ Start, End time.Time }

// Host is a Blazar compute host mapped onto the allocator's model.
type Host struct {
	ID    string
	Name  string
	Group string
	Tags  []string

	VCPUs, MemoryMB, DiskGB int64

	// Busy holds the existing reservations on this host, in any order.
	// Empty intervals (End <= Start) are ignored.
	Busy []Interval
}

// HostRequest asks for between Min and Max whole hosts over Window.
type HostRequest struct {
	// Window is the reservation window.
	Window Interval
	// Cleaning is the time a host needs between two reservations: the host
	// must be free over [Window.Start-Cleaning, Window.End+Cleaning).
	Cleaning time.Duration
	// Min and Max bound the number of hosts; as many as possible up to Max
	// are chosen (Blazar semantics).
	Min, Max int
	// Match evaluates the caller's property requirements; nil matches all
	// hosts. When ok is false, reason says which requirement failed.
	Match func(*Host) (ok bool, reason string)
}

// Rejection tells why a host cannot be used.
type Rejection struct {
	HostID string
	Reason string
}

// HostDecision is the outcome of ChooseHosts.
type HostDecision struct {
	// Chosen lists the IDs of the chosen hosts, best first.
	Chosen []string
	// Rejected lists the hosts that do not match the properties or are busy
	// in the window, in input order. Free hosts that were not needed are not
	// listed here.
	Rejected []Rejection
	// Matching is the number of hosts that match the properties; Free the
	// number of those that are also free in the window (cleaning included).
	Matching, Free int
	// Summary is a one-line human-readable account of the decision.
	Summary string
}

// NotEnoughHostsError is returned by ChooseHosts when fewer than Min hosts
// are available. It carries the full decision (with no host chosen).
type NotEnoughHostsError struct {
	Decision HostDecision
	Needed   int
}

func (e *NotEnoughHostsError) Error() string {
	return fmt.Sprintf("Not enough hosts available: %s the properties, %s free in the window, %d needed",
		plural(e.Decision.Matching, "host", "hosts"),
		isAre(e.Decision.Free), e.Needed)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one + " matches"
	}
	return strconv.Itoa(n) + " " + many + " match"
}

func isAre(n int) string {
	if n == 1 {
		return "1 is"
	}
	return strconv.Itoa(n) + " are"
}

// ErrInvalidRequest is wrapped by the errors ChooseHosts returns for a
// malformed request.
var ErrInvalidRequest = errors.New("invalid host request")

// hostCand is a free, matching host.
type hostCand struct {
	idx int32
	// open is the number of sides (0..2) of the window without any
	// reservation; gap is the free time (ns) between the window (with
	// cleaning) and the neighbouring reservations on the bounded sides.
	open int8
	gap  int64
	// domains indexes doms[dOff:dOff+dLen] (failure-domain ids).
	dOff, dLen int32
}

// ChooseHosts chooses between req.Min and req.Max hosts for a whole-host
// reservation. It is pure and deterministic; see the package documentation
// for the scoring rules. rules may be nil.
func ChooseHosts(rules *TagRules, hosts []Host, req HostRequest) (HostDecision, error) {
	return chooseHosts(rules, PreparedHosts{Hosts: hosts}, req, ChooseOptions{})
}

// PreparedHosts are hosts whose reservations the caller keeps ready for
// fast scans (a long-lived view such as the physical:host plugin's):
// when Sorted[i] is true, Bounds[i] holds the start and end (Unix ns) of
// Hosts[i].Busy[k] at [2k] and [2k+1], and Hosts[i].Busy is sorted by
// start, has no empty reservation and no two that overlap (each starts at
// or after the previous one's end). A host is then checked with one
// binary search instead of a pass over all its reservations. Bounds and
// Sorted may be nil (or Sorted[i] false): those hosts are scanned in full.
type PreparedHosts struct {
	Hosts  []Host
	Bounds [][]int64
	Sorted []bool
}

// ChooseOptions tune ChoosePrepared.
type ChooseOptions struct {
	// OmitRejected leaves HostDecision.Rejected nil (callers that only
	// need the choice and the counts skip formatting a reason per host).
	OmitRejected bool
}

// ChoosePrepared is ChooseHosts over prepared hosts: the decision is the
// one ChooseHosts(rules, p.Hosts, req) makes (Rejected aside when
// opt.OmitRejected), provided p meets PreparedHosts' contract.
func ChoosePrepared(rules *TagRules, p PreparedHosts, req HostRequest, opt ChooseOptions) (HostDecision, error) {
	return chooseHosts(rules, p, req, opt)
}

func chooseHosts(rules *TagRules, p PreparedHosts, req HostRequest, opt ChooseOptions) (HostDecision, error) {
	hosts := p.Hosts
	var dec HostDecision
	if !req.Window.Start.Before(req.Window.End) {
		return dec, fmt.Errorf("%w: window end %s is not after its start %s", ErrInvalidRequest,
			fmtTime(req.Window.End), fmtTime(req.Window.Start))
	}
	if req.Min < 0 || req.Max < 1 || req.Max < req.Min {
		return dec, fmt.Errorf("%w: need 0 <= min <= max and max >= 1, got min %d, max %d", ErrInvalidRequest, req.Min, req.Max)
	}
	if req.Cleaning < 0 {
		return dec, fmt.Errorf("%w: negative cleaning time %s", ErrInvalidRequest, req.Cleaning)
	}
	lo := req.Window.Start.Add(-req.Cleaning).UnixNano()
	hi := req.Window.End.Add(req.Cleaning).UnixNano()

	var locPrefixes []string
	if rules != nil {
		locPrefixes = rules.LocationPrefixes
	}
	if opt.OmitRejected && req.Max <= maxTop {
		if d, ok := chooseTop(hosts, p, req, lo, hi, locPrefixes); ok {
			return d.finish(len(hosts), req)
		}
	}
	// Rejection reasons are written into one buffer and sliced out of a
	// single string at the end: one allocation instead of one per host.
	var rb reasonBuf
	if req.Cleaning > 0 {
		rb.cleaning = " (window plus " + req.Cleaning.String() + " cleaning time)"
	}
	domIDs := map[string]int32{}
	var doms []int32
	// Pass 1 (caller's code, sequential): properties.
	matchReason := make([]string, 0)
	ws := getWorkspace(len(hosts))
	defer putWorkspace(ws)
	status := ws.status // 0 match, 1 no match
	if req.Match != nil {
		for i := range hosts {
			if ok, reason := req.Match(&hosts[i]); !ok {
				status[i] = 1
				matchReason = append(matchReason, reason)
			}
		}
	}
	// Pass 2 (pure, parallel for large inputs): reservations.
	scans := scanAll(p, status, lo, hi, ws.scans)
	// Pass 3 (sequential, input order): rejections and candidates, in
	// exactly sized slices.
	nRej, nBusy := len(matchReason), 0
	for i := range scans {
		if status[i] == 0 && scans[i].conflictAt >= 0 {
			nBusy++
		}
	}
	nRej += nBusy
	cands := ws.cands[:0]
	if !opt.OmitRejected {
		dec.Rejected = make([]Rejection, 0, nRej)
		rb.buf = make([]byte, 0, 48*nBusy+64*len(matchReason)+len(rb.cleaning)*nBusy)
		rb.ends = make([]int, 0, nRej)
	}
	nm := 0
	for i := range hosts {
		h := &hosts[i]
		if status[i] == 1 {
			reason := matchReason[nm]
			nm++
			if opt.OmitRejected {
				continue
			}
			start := len(rb.buf)
			rb.buf = append(rb.buf, "does not match properties"...)
			if reason != "" {
				rb.buf = append(rb.buf, ": "...)
				rb.buf = append(rb.buf, reason...)
			}
			rb.add(&dec, h.ID, start)
			continue
		}
		dec.Matching++
		sc := &scans[i]
		if sc.conflictAt >= 0 {
			if opt.OmitRejected {
				continue
			}
			start := len(rb.buf)
			rb.buf = appendBusyReasonNs(rb.buf, sc.gap, sc.end, rb.cleaning)
			rb.add(&dec, h.ID, start)
			continue
		}
		c := hostCand{open: sc.open, gap: sc.gap}
		c.idx = int32(i)
		if len(locPrefixes) > 0 {
			c.dOff = int32(len(doms))
			for _, t := range h.Tags {
				if !hasAnyPrefixColon(t, locPrefixes) {
					continue
				}
				id, ok := domIDs[t]
				if !ok {
					id = int32(len(domIDs))
					domIDs[t] = id
				}
				if !slices.Contains(doms[c.dOff:], id) {
					doms = append(doms, id)
				}
			}
			c.dLen = int32(len(doms)) - c.dOff
		}
		cands = append(cands, c)
	}
	rb.finish(&dec)
	if len(dec.Rejected) == 0 {
		dec.Rejected = nil
	}
	dec.Free = len(cands)
	if dec.Free < req.Min {
		dec.Summary = fmt.Sprintf("%s considered, %s the properties, %s free in the window, %d needed",
			countNoun(len(hosts), "host", "hosts"), plural(dec.Matching, "host", "hosts"), isAre(dec.Free), req.Min)
		return dec, &NotEnoughHostsError{Decision: dec, Needed: req.Min}
	}
	n := min(req.Max, len(cands))
	chosen := pickHosts(hosts, cands, doms, len(domIDs), n)
	dec.Chosen = make([]string, len(chosen))
	for i, c := range chosen {
		dec.Chosen[i] = hosts[c.idx].ID
	}
	dec.Summary = fmt.Sprintf("chose %d of %s (%s considered, %s the properties)",
		len(chosen), countNoun(dec.Free, "free host", "free hosts"), countNoun(len(hosts), "host", "hosts"),
		plural(dec.Matching, "host", "hosts"))
	return dec, nil
}

func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func hasAnyPrefixColon(t string, prefixes []string) bool {
	for _, p := range prefixes {
		if len(t) > len(p) && t[len(p)] == ':' && strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// scanResult is the outcome of scanBusy for one host.
type scanResult struct {
	// gap is the fit of a free host; for a busy one, gap and end are the
	// bounds (Unix ns) of the conflicting reservation, kept so that its
	// rejection reason needs no second look at the reservations.
	gap, end   int64
	conflictAt int32 // index of the earliest conflicting reservation, or -1
	open       int8
}

// parallelScanMin is the number of reservations above which the scan is
// split over the available CPUs.
const parallelScanMin = 20000

// scanAll runs scanBusy for every matching host (status 0). The work is
// split into contiguous chunks over GOMAXPROCS goroutines when there are
// many reservations; each host's result depends only on its own input, so
// the outcome is the same either way.
func scanAll(p PreparedHosts, status []int8, lo, hi int64, out []scanResult) []scanResult {
	hosts := p.Hosts
	run := func(from, to int) {
		for i := from; i < to; i++ {
			if status[i] == 0 {
				out[i] = p.scan(i, lo, hi)
			}
		}
	}
	total := 0
	for i := range hosts {
		if !p.sorted(i) {
			total += len(hosts[i].Busy)
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if total < parallelScanMin || workers < 2 || len(hosts) < 2*workers {
		run(0, len(hosts))
		return out
	}
	var wg sync.WaitGroup
	chunk := (len(hosts) + workers - 1) / workers
	for from := 0; from < len(hosts); from += chunk {
		to := min(from+chunk, len(hosts))
		wg.Go(func() { run(from, to) })
	}
	wg.Wait()
	return out
}

// scanBusy checks one host's reservations against [lo, hi) in a single pass
// without allocating. It returns the fit of the window (when free) or the
// earliest conflicting reservation.
func scanBusy(busy []Interval, lo, hi int64) scanResult {
	const (
		minT = int64(-1 << 63)
		maxT = int64(1<<63 - 1)
	)
	prevEnd, nextStart := minT, maxT
	conflictStart, conflictEnd := maxT, maxT
	conflictAt := -1
	for k := range busy {
		s := busy[k].Start.UnixNano()
		e := busy[k].End.UnixNano()
		if e <= s {
			continue
		}
		// Written so that the compiler can use conditional moves: the
		// relative order of reservations and window is random.
		pe := e
		if e > lo {
			pe = minT
		}
		prevEnd = max(prevEnd, pe)
		ns := s
		if s < hi {
			ns = maxT
		}
		nextStart = min(nextStart, ns)
		if s < hi && lo < e && s < conflictStart {
			conflictStart, conflictEnd, conflictAt = s, e, k
		}
	}
	r := scanResult{conflictAt: int32(conflictAt)}
	if conflictAt >= 0 {
		r.gap, r.end = conflictStart, conflictEnd
		return r
	}
	if prevEnd == minT {
		r.open++
	} else {
		r.gap += lo - prevEnd
	}
	if nextStart == maxT {
		r.open++
	} else {
		r.gap += nextStart - hi
	}
	return r
}

func (p *PreparedHosts) sorted(i int) bool { return p.Sorted != nil && p.Sorted[i] }

// scan is scanBusy for host i, by binary search when it is prepared.
func (p *PreparedHosts) scan(i int, lo, hi int64) scanResult {
	if p.sorted(i) {
		return scanSorted(p.Bounds[i], lo, hi)
	}
	return scanBusy(p.Hosts[i].Busy, lo, hi)
}

// scanSorted is scanBusy for sorted, non-empty, disjoint reservations
// given by their bounds: the first reservation ending after lo is the only
// candidate for the earliest conflict; the one before it ends last before
// the window, and when it does not conflict it is the first to start after.
func scanSorted(b []int64, lo, hi int64) scanResult {
	n := len(b) / 2
	l, r := 0, n
	for l < r {
		m := int(uint(l+r) >> 1)
		if b[2*m+1] > lo {
			r = m
		} else {
			l = m + 1
		}
	}
	if l < n && b[2*l] < hi {
		return scanResult{conflictAt: int32(l), gap: b[2*l], end: b[2*l+1]}
	}
	res := scanResult{conflictAt: -1}
	if l == 0 {
		res.open++
	} else {
		res.gap += lo - b[2*l-1]
	}
	if l == n {
		res.open++
	} else {
		res.gap += b[2*l] - hi
	}
	return res
}

// maxTop bounds the Max for which chooseTop keeps the best candidates in
// a small insertion-sorted array.
const maxTop = 32

// topDecision is chooseTop's outcome.
type topDecision struct {
	top            []hostCand
	hosts          []Host
	matching, free int
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
		sc := p.scan(i, lo, hi)
		if sc.conflictAt >= 0 {
			continue
		}
		d.free++
		c := hostCand{idx: int32(i), open: sc.open, gap: sc.gap}
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
	if dec.Free < req.Min {
		dec.Summary = fmt.Sprintf("%s considered, %s the properties, %s free in the window, %d needed",
			countNoun(nHosts, "host", "hosts"), plural(dec.Matching, "host", "hosts"), isAre(dec.Free), req.Min)
		return dec, &NotEnoughHostsError{Decision: dec, Needed: req.Min}
	}
	dec.Chosen = make([]string, len(d.top))
	for i, c := range d.top {
		dec.Chosen[i] = d.hosts[c.idx].ID
	}
	dec.Summary = fmt.Sprintf("chose %d of %s (%s considered, %s the properties)",
		len(d.top), countNoun(dec.Free, "free host", "free hosts"), countNoun(nHosts, "host", "hosts"),
		plural(dec.Matching, "host", "hosts"))
	return dec, nil
}

// reasonBuf accumulates rejection reasons in one byte buffer.
type reasonBuf struct {
	buf      []byte
	ends     []int
	cleaning string // suffix for busy reasons
}

func (rb *reasonBuf) add(dec *HostDecision, id string, start int) {
	_ = start
	dec.Rejected = append(dec.Rejected, Rejection{HostID: id})
	rb.ends = append(rb.ends, len(rb.buf))
}

func (rb *reasonBuf) finish(dec *HostDecision) {
	if len(rb.buf) == 0 {
		return
	}
	// The buffer is never written again: the reasons share it instead of
	// a copy.
	all := unsafe.String(&rb.buf[0], len(rb.buf))
	prev := 0
	for i, e := range rb.ends {
		dec.Rejected[i].Reason = all[prev:e]
		prev = e
	}
}

// appendBusyReasonNs appends a busy host's reason for the reservation [start, end) (Unix ns).
func appendBusyReasonNs(b []byte, start, end int64, suffix string) []byte {
	b = append(b, "busy "...)
	b = appendUnixNano(b, start)
	b = append(b, "–"...)
	b = appendUnixNano(b, end)
	return append(b, suffix...)
}

// appendTime appends t in UTC as 2006-01-02T15:04Z, or in full RFC 3339
// when it has seconds.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if t.Nanosecond() != 0 || y < 0 || y > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	hh, mm, ss := t.Clock()
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+hh/10), byte('0'+hh%10), ':', byte('0'+mm/10), byte('0'+mm%10))
	if ss != 0 {
		b = append(b, ':', byte('0'+ss/10), byte('0'+ss%10))
	}
	return append(b, 'Z')
}

func fmtTime(t time.Time) string { return string(appendTime(nil, t)) }

// appendUnixNano is appendTime(b, time.Unix(0, ns)) with one conversion
// from the Unix time to the civil date (days to year/month/day as in
// Howard Hinnant's days_from_civil inverse) instead of three.
func appendUnixNano(b []byte, ns int64) []byte {
	if ns%1e9 != 0 {
		return appendTime(b, time.Unix(0, ns))
	}
	sec := ns / 1e9
	days := sec / 86400
	rem := sec % 86400
	if rem < 0 {
		days--
		rem += 86400
	}
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	mo := mp + 3
	if mp >= 10 {
		mo = mp - 9
	}
	if mo <= 2 {
		y++
	}
	hh, mm, ss := rem/3600, rem%3600/60, rem%60
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+hh/10), byte('0'+hh%10), ':', byte('0'+mm/10), byte('0'+mm%10))
	if ss != 0 {
		b = append(b, ':', byte('0'+ss/10), byte('0'+ss%10))
	}
	return append(b, 'Z')
}

// candLess orders free hosts by fit: fewer unbounded sides first (the window
// fills a hole between reservations), then smaller leftover gap, then ID.
func candLess(hosts []Host, a, b *hostCand) bool {
	if a.open != b.open {
		return a.open < b.open
	}
	if a.gap != b.gap {
		return a.gap < b.gap
	}
	return compareIDs(hosts[a.idx].ID, hosts[b.idx].ID) < 0
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
// already hold the fewest chosen hosts, then the best fit.
func pickHosts(hosts []Host, cands []hostCand, doms []int32, nDoms, n int) []hostCand {
	if nDoms == 0 && n <= 32 && n < len(cands) {
		// Keep the n best in an insertion-sorted array.
		top := make([]hostCand, 0, n+1)
		for i := range cands {
			c := &cands[i]
			if len(top) == n && !candLess(hosts, c, &top[n-1]) {
				continue
			}
			k := len(top)
			for k > 0 && candLess(hosts, c, &top[k-1]) {
				k--
			}
			top = slices.Insert(top, k, *c)
			if len(top) > n {
				top = top[:n]
			}
		}
		return top
	}
	if nDoms > 0 && n < len(cands) {
		cands = preselect(hosts, cands, doms, n)
	}
	if n >= len(cands) || n > 32 {
		slices.SortFunc(cands, func(a, b hostCand) int {
			if candLess(hosts, &a, &b) {
				return -1
			}
			if candLess(hosts, &b, &a) {
				return 1
			}
			return 0
		})
		if nDoms == 0 {
			return cands[:n]
		}
	}
	usage := make([]int32, nDoms)
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
		if len(top) == n && !candLess(hosts, c, &top[n-1]) {
			continue
		}
		p := len(top)
		for p > 0 && candLess(hosts, c, &top[p-1]) {
			p--
		}
		top = slices.Insert(top, p, *c)
		if len(top) > n {
			top = top[:n]
		}
		groups[k] = top
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
