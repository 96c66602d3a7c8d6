package allocator

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// bruteEarliest tries every start that can be the earliest: After and
// each reservation's end plus the cleaning time (a host becomes free
// only there), in order, counting the free matching hosts at each (with
// a reserve: asking ChooseHosts for Min hosts there).
func bruteEarliest(hosts []Host, req EarliestRequest) (time.Time, bool) {
	cands := []time.Time{req.After}
	for _, h := range hosts {
		for _, b := range h.Busy {
			if t := b.End.Add(req.Cleaning); t.After(req.After) {
				cands = append(cands, t)
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Before(cands[j]) })
	for _, t := range cands {
		if !req.NotAfter.IsZero() && t.After(req.NotAfter) {
			break
		}
		if req.ReservePercent > 0 {
			_, err := ChooseHosts(nil, hosts, HostRequest{Window: Interval{Start: t, End: t.Add(req.Duration)},
				Cleaning: req.Cleaning, Min: req.Min, Max: req.Min, Match: req.Match, ReservePercent: req.ReservePercent})
			if err == nil {
				return t, true
			}
			continue
		}
		free := 0
		for i := range hosts {
			if req.Match != nil {
				if ok, _ := req.Match(&hosts[i]); !ok {
					continue
				}
			}
			if !overlaps(&hosts[i], t.Add(-req.Cleaning), t.Add(req.Duration+req.Cleaning)) {
				free++
			}
		}
		if free >= req.Min {
			return t, true
		}
	}
	return time.Time{}, false
}

// TestEarliestWindowBruteForce: the sweep finds the start a brute force
// over every candidate start finds, on random timelines (overlapping,
// empty, back-to-back reservations; prepared and unprepared hosts).
func TestEarliestWindowBruteForce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "hosts")
		hosts := make([]Host, n)
		for i := range hosts {
			hosts[i].ID = strconv.Itoa(i + 1)
			hosts[i].VCPUs = int64(rapid.IntRange(1, 3).Draw(rt, "vcpus"))
			for range rapid.IntRange(0, 8).Draw(rt, "bookings") {
				s := rapid.IntRange(0, 24).Draw(rt, "start")
				hosts[i].Busy = append(hosts[i].Busy, iv(s, s+rapid.IntRange(-1, 12).Draw(rt, "len")))
			}
		}
		req := EarliestRequest{
			After:    at(rapid.IntRange(0, 28).Draw(rt, "after")),
			Duration: time.Duration(rapid.IntRange(1, 8).Draw(rt, "dur")) * time.Hour,
			Cleaning: time.Duration(rapid.IntRange(0, 3).Draw(rt, "clean")) * 30 * time.Minute,
			Min:      rapid.IntRange(1, n+1).Draw(rt, "min"),
		}
		req.ReservePercent = rapid.SampledFrom([]int{0, 0, 30, 50, 100}).Draw(rt, "reserve")
		if rapid.Bool().Draw(rt, "limit") {
			req.NotAfter = req.After.Add(time.Duration(rapid.IntRange(0, 80).Draw(rt, "limitH")) * time.Hour)
		}
		if vmin := int64(rapid.IntRange(0, 3).Draw(rt, "vmin")); vmin > 0 {
			req.Match = func(h *Host) (bool, string) { return h.VCPUs >= vmin, "vcpus" }
		}
		want, wantOK := bruteEarliest(hosts, req)
		for _, p := range []PreparedHosts{{Hosts: hosts}, prepare(slices.Clone(hosts))} {
			got, err := EarliestWindow(p, req)
			if err != nil {
				rt.Fatal(err)
			}
			if got.Found != wantOK || (wantOK && !got.Window.Start.Equal(want)) {
				rt.Fatalf("EarliestWindow = %v (found %v), brute force %v (found %v)", got.Window.Start, got.Found, want, wantOK)
			}
			if got.Found && !got.Window.End.Equal(got.Window.Start.Add(req.Duration)) {
				rt.Fatalf("window %v does not last %s", got.Window, req.Duration)
			}
			if got.Found {
				// The window found is one ChooseHosts can fill.
				if _, err := ChooseHosts(nil, hosts, HostRequest{Window: got.Window, Cleaning: req.Cleaning, Min: req.Min, Max: req.Min, Match: req.Match, ReservePercent: req.ReservePercent}); err != nil {
					rt.Fatalf("ChooseHosts at the earliest window: %v", err)
				}
			}
		}
	})
}

func TestEarliestWindowInvalid(t *testing.T) {
	for _, req := range []EarliestRequest{
		{Duration: 0, Min: 1},
		{Duration: time.Hour, Min: 0},
		{Duration: time.Hour, Min: 1, Cleaning: -time.Minute},
	} {
		if _, err := EarliestWindow(PreparedHosts{}, req); err == nil {
			t.Errorf("EarliestWindow(%+v) = nil error", req)
		}
	}
}

// BenchmarkEarliestWindow searches 10,000 prepared hosts with 100,000
// reservations (two weeks of 1-12 h bookings, ~10 a host) for the
// earliest 4-hour window of 10 hosts after a random time, and reports the
// p50 and p99 of the search.
func BenchmarkEarliestWindow(b *testing.B) {
	for _, bc := range []struct {
		name string
		min  int
		dur  time.Duration
	}{{"10hosts-4h", 10, 4 * time.Hour}, {"500hosts-24h", 500, 24 * time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			hosts := genHosts(rand.New(rand.NewPCG(42, 1)), 10000, 10, 0)
			total := 0
			for i := range hosts {
				total += len(hosts[i].Busy)
			}
			// Bookings of one host may overlap in genHosts: the view
			// prepares the disjoint ones; the others are merged per call.
			p := prepare(hosts)
			r := rand.New(rand.NewPCG(7, 7))
			var lat []time.Duration
			var found int
			for b.Loop() {
				req := EarliestRequest{After: t0.Add(time.Duration(r.IntN(14*24)) * time.Hour), Duration: bc.dur, Cleaning: time.Hour, Min: bc.min}
				s := time.Now()
				res, err := EarliestWindow(p, req)
				lat = append(lat, time.Since(s))
				if err != nil || !res.Found {
					b.Fatal(err, res.Found)
				}
				found++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(total), "allocations")
		})
	}
}
