package allocator

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
)

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

// rank is host i's size rank (0 without ranks).
func (p *PreparedHosts) rank(i int) int32 {
	if p.Ranks == nil {
		return 0
	}
	return p.Ranks[i]
}

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
