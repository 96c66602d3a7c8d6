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
// are at least min. An allocated host is free when no lease on it overlaps
// the window widened by the cleaning time on both sides (upstream's
// get_free_periods over the widened window must return it whole; the
// existing leases are not widened, and one that ends where the widened
// window starts does not overlap). randomize_host_selection is off, as by
// default; no lease of the trace is deleted, so "never allocated" is "no
// booking yet".
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

// oursChoose is Leasehold's choice with the cleaning time and the reserve
// of bigger hosts (percent); ranks overrides the size ranks (all zero:
// the choice before the size ranks).
func oursChoose(rules *TagRules, ranks []int32, cleaning time.Duration, reserve int) chooser {
	pos := map[string]int{}
	return func(hosts []Host, l *traceLease) []int {
		if len(pos) == 0 {
			for i := range hosts {
				pos[hosts[i].ID] = i
			}
		}
		dec, err := ChoosePrepared(rules, PreparedHosts{Hosts: hosts, Ranks: ranks},
			HostRequest{Window: l.win, Cleaning: cleaning, Min: l.min, Max: l.max, Match: l.match, ReservePercent: reserve},
			ChooseOptions{OmitRejected: true})
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

// traceOutcomes are one trace's results: upstream's choice, Leasehold's
// (with the default reserve of bigger hosts), Leasehold's without the
// reserve and without size classes, and the ceiling (the big-host
// requests alone on the big hosts).
type traceOutcomes struct{ upstream, ours, noReserve, noRanks, ceiling traceResult }

// traceOutcome replays one seeded trace through each choice, with the
// given cleaning time.
func traceOutcome(seed uint64, days int, cleaning time.Duration) traceOutcomes {
	r := rand.New(rand.NewPCG(seed, 14))
	base := traceHostSet(r)
	leases := traceLeases(r, 1000, days)
	clone := func() []Host {
		h := make([]Host, len(base))
		copy(h, base)
		return h
	}
	rules := &TagRules{LocationPrefixes: []string{"rack"}}
	var o traceOutcomes
	o.upstream = replay(clone(), leases, func(h []Host, l *traceLease) []int { return upstreamChoose(h, l, cleaning) })
	o.ours = replay(clone(), leases, oursChoose(rules, nil, cleaning, DefaultReservePercent))
	o.noReserve = replay(clone(), leases, oursChoose(rules, nil, cleaning, 0))
	o.noRanks = replay(clone(), leases, oursChoose(rules, make([]int32, traceHosts), cleaning, DefaultReservePercent))
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
	o.ceiling = replay(bigHosts, bigLeases, oursChoose(rules, nil, cleaning, DefaultReservePercent))
	return o
}

// traceLoads are the trace's horizons: 1,000 leases over 10 days ask
// about twice what the hosts hold (heavy: the load at which the choice
// before this trace, best fit in time without size classes, lost 6 % of
// the leases and 28 % of the big-host ones to upstream's, near what issue
// 14 measured); over 30 days, about two thirds.
var traceLoads = []int{10, 30}

// traceCleanings are the cleaning times the trace is replayed with.
var traceCleanings = []time.Duration{0, time.Hour}

// TestHostChoiceQuality replays seeded traces at both loads, without and
// with a cleaning time. On every trace Leasehold's choice accepts no fewer
// big-host leases than upstream's and no more than the ceiling, and
// without cleaning time no fewer leases. Summed over the seeds, no fewer
// leases and at least 10 % more big-host leases than upstream's at both
// loads (measured without cleaning time: +5.4 % and +22 % at the heavy
// load, +0.6 % and +10.2 % at the moderate one, where the ceiling is
// 10.4 % above upstream's). With a 1-hour cleaning time one moderate trace
// (seed 1) accepts 909 leases to upstream's 911: the reserve refuses small
// leases that only a big host could take.
func TestHostChoiceQuality(t *testing.T) {
	for _, cleaning := range traceCleanings {
		for _, days := range traceLoads {
			var sum traceOutcomes
			for seed := uint64(1); seed <= 5; seed++ {
				o := traceOutcome(seed, days, cleaning)
				t.Logf("%d days, cleaning %s, seed %d: upstream %d (big %d of %d), leasehold %d (big %d), without the reserve %d (big %d), without size classes %d (big %d), ceiling big %d",
					days, cleaning, seed, o.upstream.all, o.upstream.big, o.upstream.bigAsked, o.ours.all, o.ours.big,
					o.noReserve.all, o.noReserve.big, o.noRanks.all, o.noRanks.big, o.ceiling.big)
				sum.add(o)
				if cleaning == 0 && o.ours.all < o.upstream.all {
					t.Errorf("%d days, cleaning %s, seed %d: %d leases accepted, upstream's choice accepts %d", days, cleaning, seed, o.ours.all, o.upstream.all)
				}
				if o.ours.big < o.upstream.big {
					t.Errorf("%d days, cleaning %s, seed %d: %d big-host leases accepted, upstream's choice accepts %d", days, cleaning, seed, o.ours.big, o.upstream.big)
				}
				if o.ours.big > o.ceiling.big {
					t.Errorf("%d days, cleaning %s, seed %d: %d big-host leases accepted, above the ceiling %d", days, cleaning, seed, o.ours.big, o.ceiling.big)
				}
			}
			t.Logf("%d days, cleaning %s, 5 seeds: upstream %d (big %d), leasehold %d (big %d), without the reserve %d (big %d), ceiling big %d",
				days, cleaning, sum.upstream.all, sum.upstream.big, sum.ours.all, sum.ours.big, sum.noReserve.all, sum.noReserve.big, sum.ceiling.big)
			if sum.ours.all < sum.upstream.all {
				t.Errorf("%d days, cleaning %s: %d leases accepted over 5 seeds, upstream's choice accepts %d", days, cleaning, sum.ours.all, sum.upstream.all)
			}
			if float64(sum.ours.big) < 1.10*float64(sum.upstream.big) {
				t.Errorf("%d days, cleaning %s: %d big-host leases accepted over 5 seeds, want 110%% of upstream's %d", days, cleaning, sum.ours.big, sum.upstream.big)
			}
		}
	}
}

func (s *traceOutcomes) add(o traceOutcomes) {
	for _, p := range []struct{ to, from *traceResult }{
		{&s.upstream, &o.upstream}, {&s.ours, &o.ours}, {&s.noReserve, &o.noReserve}, {&s.noRanks, &o.noRanks}, {&s.ceiling, &o.ceiling},
	} {
		p.to.all += p.from.all
		p.to.big += p.from.big
		p.to.bigAsked += p.from.bigAsked
	}
}

// BenchmarkHostChoiceQuality reports the trace's outcome (seed 1, each
// load, no cleaning time) as metrics: leases accepted overall and big-host
// leases accepted by upstream's choice, Leasehold's, Leasehold's without
// the reserve and without size classes, and the ceiling.
func BenchmarkHostChoiceQuality(b *testing.B) {
	for _, days := range traceLoads {
		b.Run(strconv.Itoa(days)+"days", func(b *testing.B) {
			var o traceOutcomes
			for b.Loop() {
				o = traceOutcome(1, days, 0)
			}
			b.ReportMetric(float64(o.upstream.all), "upstream-leases")
			b.ReportMetric(float64(o.upstream.big), "upstream-big")
			b.ReportMetric(float64(o.ours.all), "leasehold-leases")
			b.ReportMetric(float64(o.ours.big), "leasehold-big")
			b.ReportMetric(float64(o.noReserve.all), "noreserve-leases")
			b.ReportMetric(float64(o.noReserve.big), "noreserve-big")
			b.ReportMetric(float64(o.noRanks.all), "noranks-leases")
			b.ReportMetric(float64(o.noRanks.big), "noranks-big")
			b.ReportMetric(float64(o.ceiling.big), "ceiling-big")
			b.ReportMetric(float64(o.upstream.bigAsked), "big-asked")
		})
	}
}
