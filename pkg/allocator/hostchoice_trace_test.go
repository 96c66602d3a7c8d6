package allocator

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// The host-choice quality trace (issue 14): host leases over 100 hosts,
// a fifth of them big-memory, replayed in an arbitrary arrival order (not
// by start date) with windows anywhere in the coming weeks, through
// Leasehold's choice and through a simulation of upstream Blazar's.

const (
	traceHosts    = 100
	traceBigShare = 5 // one host in traceBigShare is big
	traceRacks    = 5
	bigMemMB      = 1 << 20 // 1 TiB
	smallMemMB    = 192 << 10
)

// traceLease is one host reservation of the trace.
type traceLease struct {
	win      Interval
	min, max int
	big      bool // needs a big-memory host (memory_mb >= bigMemMB)
}

// traceHostSet makes the 100 hosts: numeric ids in registration order, the
// big ones at seeded positions, five racks (failure domains).
func traceHostSet(r *rand.Rand) []Host {
	hosts := make([]Host, traceHosts)
	big := r.Perm(traceHosts)[:traceHosts/traceBigShare]
	for i := range hosts {
		hosts[i] = Host{ID: strconv.Itoa(i + 1), VCPUs: 64, MemoryMB: smallMemMB, DiskGB: 2000,
			Tags: []string{"rack:r" + strconv.Itoa(i%traceRacks)}}
	}
	for _, i := range big {
		hosts[i].MemoryMB = bigMemMB
	}
	return hosts
}

// traceLeases makes n leases: a quarter need a big host; windows start
// anywhere in the next days days and last 1 h to 7 days (log-uniform); 1, 2, 4 or 8
// hosts, a fifth of them with min below max.
func traceLeases(r *rand.Rand, n, days int) []traceLease {
	out := make([]traceLease, n)
	for i := range out {
		l := &out[i]
		l.big = r.IntN(4) == 0
		start := t0.Add(time.Duration(r.IntN(days*24)) * time.Hour)
		hours := math.Exp(r.Float64() * math.Log(168))
		l.win = Interval{Start: start, End: start.Add(time.Duration(math.Ceil(hours)) * time.Hour)}
		switch x := r.IntN(20); {
		case x < 12:
			l.max = 1
		case x < 16:
			l.max = 2
		case x < 19:
			l.max = 4
		default:
			l.max = 8
		}
		l.min = l.max
		if l.max > 1 && r.IntN(5) == 0 {
			l.min = l.max / 2
		}
	}
	return out
}

func (l *traceLease) match(h *Host) (bool, string) {
	if l.big && h.MemoryMB < bigMemMB {
		return false, "memory_mb >= " + strconv.Itoa(bigMemMB)
	}
	return true, ""
}

// upstreamChoose simulates upstream Blazar's _matching_hosts: the matching
// reservable hosts in id order; if at least min of them were never
// allocated, the first max of those; otherwise the first max of the
// allocated-but-free ones followed by the never-allocated ones, when there
// are at least min.
func upstreamChoose(hosts []Host, l *traceLease, cleaning time.Duration) []int {
	lo, hi := l.win.Start.Add(-cleaning), l.win.End.Add(cleaning)
	var never, free []int
	for i := range hosts {
		h := &hosts[i]
		if ok, _ := l.match(h); !ok {
			continue
		}
		if len(h.Busy) == 0 {
			never = append(never, i)
		} else if !overlaps(h, lo, hi) {
			free = append(free, i)
		}
	}
	if len(never) >= l.min {
		return never[:min(l.max, len(never))]
	}
	all := append(free, never...)
	if len(all) < l.min {
		return nil
	}
	return all[:min(l.max, len(all))]
}

// traceResult counts accepted leases.
type traceResult struct{ all, big, bigAsked int }

type chooser func(hosts []Host, l *traceLease) []int

// replay books the leases in order with choose; hosts are modified.
func replay(hosts []Host, leases []traceLease, choose chooser) traceResult {
	var res traceResult
	for i := range leases {
		l := &leases[i]
		if l.big {
			res.bigAsked++
		}
		got := choose(hosts, l)
		if len(got) == 0 {
			continue
		}
		for _, k := range got {
			hosts[k].Busy = append(hosts[k].Busy, l.win)
		}
		res.all++
		if l.big {
			res.big++
		}
	}
	return res
}

// oursChoose is Leasehold's choice; ranks overrides the size ranks
// (all zero: today's choice before the size ranks).
func oursChoose(rules *TagRules, ranks []int32) chooser {
	pos := map[string]int{}
	return func(hosts []Host, l *traceLease) []int {
		if len(pos) == 0 {
			for i := range hosts {
				pos[hosts[i].ID] = i
			}
		}
		dec, err := ChoosePrepared(rules, PreparedHosts{Hosts: hosts, Ranks: ranks},
			HostRequest{Window: l.win, Min: l.min, Max: l.max, Match: l.match}, ChooseOptions{OmitRejected: true})
		if err != nil {
			return nil
		}
		out := make([]int, len(dec.Chosen))
		for i, id := range dec.Chosen {
			out[i] = pos[id]
		}
		return out
	}
}

// traceOutcome replays one seeded trace through upstream's choice,
// Leasehold's choice, Leasehold's choice without size classes, and the
// ceiling (the big-host requests alone on the big hosts).
func traceOutcome(seed uint64, days int) (upstream, ours, noRanks, ceiling traceResult) {
	r := rand.New(rand.NewPCG(seed, 14))
	base := traceHostSet(r)
	leases := traceLeases(r, 1000, days)
	clone := func() []Host {
		h := make([]Host, len(base))
		copy(h, base)
		return h
	}
	rules := &TagRules{LocationPrefixes: []string{"rack"}}
	upstream = replay(clone(), leases, func(h []Host, l *traceLease) []int { return upstreamChoose(h, l, 0) })
	ours = replay(clone(), leases, oursChoose(rules, nil))
	noRanks = replay(clone(), leases, oursChoose(rules, make([]int32, traceHosts)))
	var bigHosts []Host
	for _, h := range base {
		if h.MemoryMB >= bigMemMB {
			bigHosts = append(bigHosts, h)
		}
	}
	var bigLeases []traceLease
	for _, l := range leases {
		if l.big {
			bigLeases = append(bigLeases, l)
		}
	}
	ceiling = replay(bigHosts, bigLeases, oursChoose(rules, nil))
	return
}

// traceLoads are the trace's horizons: 1,000 leases over 10 days ask
// about twice what the hosts hold (heavy: the load at which the choice
// before this trace, best fit in time without size classes, lost 6 % of
// the leases and 28 % of the big-host ones to upstream's, near what issue
// 14 measured); over 30 days, about two thirds.
var traceLoads = []int{10, 30}

// TestHostChoiceQuality replays seeded traces at both loads. On every
// trace Leasehold's choice accepts no fewer leases than upstream's, no
// fewer big-host leases, and no more than the ceiling. Summed over the
// seeds, at least 10 % more big-host leases than upstream's at the heavy
// load (measured: 16 %, and 6 % more leases overall) and 5 % more at the
// moderate one (measured: 8 %; the ceiling is only 10 % above upstream
// there).
func TestHostChoiceQuality(t *testing.T) {
	for _, days := range traceLoads {
		var sumUp, sumOurs traceResult
		for seed := uint64(1); seed <= 5; seed++ {
			up, ours, noRanks, ceil := traceOutcome(seed, days)
			t.Logf("%d days, seed %d: upstream %d (big %d of %d), leasehold %d (big %d), without size classes %d (big %d), ceiling big %d",
				days, seed, up.all, up.big, up.bigAsked, ours.all, ours.big, noRanks.all, noRanks.big, ceil.big)
			sumUp.all += up.all
			sumUp.big += up.big
			sumOurs.all += ours.all
			sumOurs.big += ours.big
			if ours.all < up.all {
				t.Errorf("%d days, seed %d: %d leases accepted, upstream's choice accepts %d", days, seed, ours.all, up.all)
			}
			if ours.big < up.big {
				t.Errorf("%d days, seed %d: %d big-host leases accepted, upstream's choice accepts %d", days, seed, ours.big, up.big)
			}
			if ours.big > ceil.big {
				t.Errorf("%d days, seed %d: %d big-host leases accepted, above the ceiling %d", days, seed, ours.big, ceil.big)
			}
		}
		t.Logf("%d days, 5 seeds: upstream %d (big %d), leasehold %d (big %d)", days, sumUp.all, sumUp.big, sumOurs.all, sumOurs.big)
		want := 1.05
		if days < 30 {
			want = 1.10
		}
		if float64(sumOurs.big) < want*float64(sumUp.big) {
			t.Errorf("%d days: %d big-host leases accepted over 5 seeds, want %.0f%% of upstream's %d", days, sumOurs.big, 100*want, sumUp.big)
		}
	}
}

// BenchmarkHostChoiceQuality reports the trace's outcome (seed 1, each
// load) as metrics: leases accepted overall and big-host leases accepted
// by upstream's choice, Leasehold's, and Leasehold's without size
// classes, and the ceiling.
func BenchmarkHostChoiceQuality(b *testing.B) {
	for _, days := range traceLoads {
		b.Run(strconv.Itoa(days)+"days", func(b *testing.B) {
			var up, ours, noRanks, ceil traceResult
			for b.Loop() {
				up, ours, noRanks, ceil = traceOutcome(1, days)
			}
			b.ReportMetric(float64(up.all), "upstream-leases")
			b.ReportMetric(float64(up.big), "upstream-big")
			b.ReportMetric(float64(ours.all), "leasehold-leases")
			b.ReportMetric(float64(ours.big), "leasehold-big")
			b.ReportMetric(float64(noRanks.all), "noranks-leases")
			b.ReportMetric(float64(noRanks.big), "noranks-big")
			b.ReportMetric(float64(ceil.big), "ceiling-big")
			b.ReportMetric(float64(up.bigAsked), "big-asked")
		})
	}
}
