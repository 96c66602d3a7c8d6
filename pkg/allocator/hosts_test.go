package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

func iv(a, b int) Interval { return Interval{Start: at(a), End: at(b)} }

func TestChooseHosts(t *testing.T) {
	vcpus4 := func(h *Host) (bool, string) {
		if h.VCPUs >= 4 {
			return true, ""
		}
		return false, "vcpus >= 4"
	}
	tests := []struct {
		name      string
		rules     *TagRules
		hosts     []Host
		req       HostRequest
		want      HostDecision
		wantErr   string
		notEnough bool
	}{
		{
			name:  "idle hosts by id",
			hosts: []Host{{ID: "2"}, {ID: "10"}, {ID: "1"}},
			req:   HostRequest{Window: iv(10, 12), Min: 1, Max: 2},
			want: HostDecision{Chosen: []string{"1", "2"}, Matching: 3, Free: 3,
				Summary: "chose 2 of 3 free hosts (3 hosts considered, 3 hosts match the properties)"},
		},
		{
			// Bounded on one side first (nothing of the unbounded side is
			// lost), then idle, then holes, the tightest first.
			name: "fit in time",
			hosts: []Host{
				{ID: "a"},                             // idle: both sides open
				{ID: "b", Busy: []Interval{iv(0, 9)}}, // one side bounded
				{ID: "c", Busy: []Interval{iv(13, 20), iv(0, 8)}},  // hole of 2+1 h
				{ID: "d", Busy: []Interval{iv(12, 20), iv(0, 10)}}, // exact hole
				{ID: "e", Busy: []Interval{iv(0, 7)}},              // one side, 3 h away
			},
			req: HostRequest{Window: iv(10, 12), Min: 1, Max: 4},
			want: HostDecision{Chosen: []string{"b", "e", "a", "d"}, Matching: 5, Free: 5,
				Summary: "chose 4 of 5 free hosts (5 hosts considered, 5 hosts match the properties)"},
		},
		{
			name: "busy and properties",
			hosts: []Host{
				{ID: "1", VCPUs: 8, Busy: []Interval{iv(11, 13), iv(9, 10)}},
				{ID: "2", VCPUs: 2},
				{ID: "3", VCPUs: 8},
			},
			req: HostRequest{Window: iv(10, 12), Min: 1, Max: 5, Match: vcpus4},
			want: HostDecision{
				Chosen: []string{"3"},
				Rejected: []Rejection{
					{HostID: "1", Reason: "busy 2030-01-01T11:00Z–2030-01-01T13:00Z"},
					{HostID: "2", Reason: "does not match properties: vcpus >= 4"},
				},
				Matching: 2, Free: 1,
				Summary: "chose 1 of 1 free host (3 hosts considered, 2 hosts match the properties)",
			},
		},
		{
			name:  "cleaning time makes an adjacent reservation conflict",
			hosts: []Host{{ID: "1", Busy: []Interval{iv(12, 13)}}, {ID: "2", Busy: []Interval{iv(13, 14)}}},
			req:   HostRequest{Window: iv(10, 12), Cleaning: 30 * time.Minute, Min: 1, Max: 2},
			want: HostDecision{
				Chosen:   []string{"2"},
				Rejected: []Rejection{{HostID: "1", Reason: "busy 2030-01-01T12:00Z–2030-01-01T13:00Z (window plus 30m0s cleaning time)"}},
				Matching: 2, Free: 1,
				Summary: "chose 1 of 1 free host (2 hosts considered, 2 hosts match the properties)",
			},
		},
		{
			name:  "back to back without cleaning is free",
			hosts: []Host{{ID: "1", Busy: []Interval{iv(12, 13), iv(8, 10)}}},
			req:   HostRequest{Window: iv(10, 12), Min: 1, Max: 1},
			want: HostDecision{Chosen: []string{"1"}, Matching: 1, Free: 1,
				Summary: "chose 1 of 1 free host (1 host considered, 1 host matches the properties)"},
		},
		{
			name:  "spread over failure domains",
			rules: &TagRules{LocationPrefixes: []string{"rack"}},
			hosts: []Host{
				{ID: "1", Tags: []string{"rack:a"}, Busy: []Interval{iv(12, 14)}},
				{ID: "2", Tags: []string{"rack:a"}, Busy: []Interval{iv(12, 15)}},
				{ID: "3", Tags: []string{"rack:b"}},
				{ID: "4", Tags: []string{"rack:b"}, Busy: []Interval{iv(0, 1)}},
				{ID: "5", Tags: []string{"other:x"}},
			},
			req: HostRequest{Window: iv(10, 12), Min: 3, Max: 4},
			want: HostDecision{Chosen: []string{"1", "4", "5", "2"}, Matching: 5, Free: 5,
				Summary: "chose 4 of 5 free hosts (5 hosts considered, 5 hosts match the properties)"},
		},
		{
			name:      "not enough",
			hosts:     []Host{{ID: "1", VCPUs: 8, Busy: []Interval{iv(11, 13)}}, {ID: "2", VCPUs: 8}, {ID: "3", VCPUs: 8}, {ID: "4"}},
			req:       HostRequest{Window: iv(10, 12), Min: 3, Max: 3, Match: vcpus4},
			wantErr:   "Not enough hosts available: 3 hosts match the properties, 2 are free in the window, 3 needed",
			notEnough: true,
		},
		{
			name:    "bad window",
			hosts:   []Host{{ID: "1"}},
			req:     HostRequest{Window: iv(12, 10), Min: 1, Max: 1},
			wantErr: "invalid host request: window end 2030-01-01T10:00Z is not after its start 2030-01-01T12:00Z",
		},
		{
			name:    "bad counts",
			hosts:   []Host{{ID: "1"}},
			req:     HostRequest{Window: iv(10, 12), Min: 2, Max: 1},
			wantErr: "invalid host request: need 0 <= min <= max and max >= 1, got min 2, max 1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseHosts(tc.rules, tc.hosts, tc.req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				var ne *NotEnoughHostsError
				if errors.As(err, &ne) != tc.notEnough {
					t.Fatalf("errors.As(*NotEnoughHostsError) = %v, want %v", !tc.notEnough, tc.notEnough)
				}
				if !tc.notEnough && !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// genHosts makes n hosts with about perHost reservations each, in random
// order, spread over two weeks.
func genHosts(r *rand.Rand, n, perHost, racks int) []Host {
	hosts := make([]Host, n)
	for i := range hosts {
		h := &hosts[i]
		h.ID = strconv.Itoa(i + 1)
		h.Name = "host" + h.ID
		h.VCPUs = int64(8 << r.IntN(3))
		if racks > 0 {
			h.Tags = []string{"rack:r" + strconv.Itoa(r.IntN(racks)), "hv:new"}
		}
		k := perHost
		if perHost > 1 {
			k = perHost/2 + r.IntN(perHost+1)
		}
		for j := 0; j < k; j++ {
			s := t0.Add(time.Duration(r.Int64N(14*24*60)) * time.Minute)
			h.Busy = append(h.Busy, Interval{Start: s, End: s.Add(time.Duration(1+r.IntN(12)) * time.Hour)})
		}
	}
	return hosts
}

func overlaps(h *Host, lo, hi time.Time) bool {
	for _, b := range h.Busy {
		if b.End.After(b.Start) && b.Start.Before(hi) && lo.Before(b.End) {
			return true
		}
	}
	return false
}

func TestChooseHostsProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		n := rapid.IntRange(1, 90).Draw(rt, "hosts")
		per := rapid.IntRange(0, 6).Draw(rt, "perHost")
		racks := rapid.IntRange(0, 4).Draw(rt, "racks")
		hosts := genHosts(rand.New(rand.NewPCG(seed, 1)), n, per, racks)
		start := t0.Add(time.Duration(rapid.IntRange(0, 14*24).Draw(rt, "startHour")) * time.Hour)
		req := HostRequest{
			Window:   Interval{Start: start, End: start.Add(time.Duration(rapid.IntRange(1, 48).Draw(rt, "len")) * time.Hour)},
			Cleaning: time.Duration(rapid.IntRange(0, 3).Draw(rt, "clean")) * 30 * time.Minute,
			Min:      rapid.IntRange(0, 5).Draw(rt, "min"),
		}
		req.Max = req.Min + rapid.SampledFrom([]int{0, 1, 3, 5, 40}).Draw(rt, "extra")
		if req.Max == 0 {
			req.Max = 1
		}
		req.ReservePercent = rapid.SampledFrom([]int{0, 0, 15, 50, 100}).Draw(rt, "reserve")
		vmin := int64(rapid.SampledFrom([]int{0, 8, 16, 32}).Draw(rt, "vmin"))
		req.Match = func(h *Host) (bool, string) { return h.VCPUs >= vmin, fmt.Sprintf("vcpus >= %d", vmin) }
		var rules *TagRules
		if racks > 0 {
			rules = &TagRules{LocationPrefixes: []string{"rack"}}
			for range rapid.IntRange(0, 3).Draw(rt, "used") {
				req.UsedDomains = append(req.UsedDomains, "rack:r"+strconv.Itoa(rapid.IntRange(0, racks).Draw(rt, "usedRack")))
			}
		}
		dec, err := ChooseHosts(rules, hosts, req)
		dec2, err2 := ChooseHosts(rules, hosts, req)
		if diff := cmp.Diff(dec, dec2); diff != "" || fmt.Sprint(err) != fmt.Sprint(err2) {
			rt.Fatalf("not deterministic: %s", diff)
		}
		lo, hi := req.Window.Start.Add(-req.Cleaning), req.Window.End.Add(req.Cleaning)
		free := 0
		for i := range hosts {
			if hosts[i].VCPUs >= vmin && !overlaps(&hosts[i], lo, hi) {
				free++
			}
		}
		if free != dec.Free {
			rt.Fatalf("Free = %d, want %d", dec.Free, free)
		}
		if dec.Held < 0 || dec.Held > free || (req.ReservePercent == 0 && dec.Held != 0) {
			rt.Fatalf("Held = %d of %d free (reserve %d%%)", dec.Held, free, req.ReservePercent)
		}
		if err != nil {
			var ne *NotEnoughHostsError
			if !errors.As(err, &ne) || free-dec.Held >= req.Min {
				rt.Fatalf("unexpected error %v (free %d, held %d, min %d)", err, free, dec.Held, req.Min)
			}
			if want := naiveChoose(rules, hosts, req); want != nil {
				rt.Fatalf("refused, naive greedy chooses %v", want)
			}
			return
		}
		if want := min(free-dec.Held, req.Max); len(dec.Chosen) != want {
			rt.Fatalf("chose %d hosts, want %d", len(dec.Chosen), want)
		}
		seen := map[string]bool{}
		for _, id := range dec.Chosen {
			i, _ := strconv.Atoi(id)
			h := &hosts[i-1]
			if seen[id] || h.VCPUs < vmin || overlaps(h, lo, hi) {
				rt.Fatalf("chosen host %s is duplicate, unmatched or busy", id)
			}
			seen[id] = true
		}
		if want := naiveChoose(rules, hosts, req); !slices.Equal(want, dec.Chosen) {
			rt.Fatalf("chose %v, naive greedy chooses %v", dec.Chosen, want)
		}
		if len(dec.Rejected)+dec.Free != len(hosts) {
			rt.Fatalf("%d rejected + %d free != %d hosts", len(dec.Rejected), dec.Free, len(hosts))
		}
		for _, r := range dec.Rejected {
			if !strings.HasPrefix(r.Reason, "busy ") && !strings.HasPrefix(r.Reason, "does not match properties") {
				rt.Fatalf("bad reason %q", r.Reason)
			}
		}
	})
}

// BenchmarkChooseHosts chooses 10 hosts out of 10,000 with 100,000 existing
// reservations.
func BenchmarkChooseHosts(b *testing.B) {
	for _, bc := range []struct {
		name  string
		racks int
		match bool
	}{{"plain", 0, false}, {"racks", 20, false}, {"racks+match", 20, true}} {
		b.Run(bc.name, func(b *testing.B) {
			hosts := genHosts(rand.New(rand.NewPCG(42, 1)), 10000, 10, bc.racks)
			var rules *TagRules
			if bc.racks > 0 {
				rules = &TagRules{LocationPrefixes: []string{"rack"}}
			}
			req := HostRequest{Window: Interval{Start: at(100), End: at(104)}, Cleaning: time.Hour, Min: 10, Max: 10}
			if bc.match {
				req.Match = func(h *Host) (bool, string) {
					if h.VCPUs >= 16 {
						return true, ""
					}
					return false, "vcpus >= 16"
				}
			}
			b.ReportAllocs()
			var dec HostDecision
			start := cpuNow()
			for b.Loop() {
				var err error
				dec, err = ChooseHosts(rules, hosts, req)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(dec.Free), "free")
		})
	}
}

// cpuNow is the process CPU time (user+system) in ns: on a shared machine
// it is steadier than wall time.
func cpuNow() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// naiveChoose is the documented rule written plainly: repeatedly take the
// free matching host whose failure domains hold the fewest chosen hosts,
// then the one losing the fewest big fits (naiveLoses), then the fit in
// time (naiveTimeClass, then least slack), then the smallest ID.
func naiveChoose(rules *TagRules, hosts []Host, req HostRequest) []string {
	lo, hi := req.Window.Start.Add(-req.Cleaning), req.Window.End.Add(req.Cleaning)
	type cand struct {
		h    *Host
		open int
		gap  time.Duration
		doms []string
	}
	loses := naiveLoses(hosts)
	match := func(h *Host) (bool, string) {
		if req.Match == nil {
			return true, ""
		}
		return req.Match(h)
	}
	var cs []cand
	for i := range hosts {
		h := &hosts[i]
		if ok, _ := match(h); !ok {
			continue
		}
		if overlaps(h, lo, hi) {
			continue
		}
		c := cand{h: h}
		var prev, next *time.Time
		for _, b := range h.Busy {
			if !b.End.After(b.Start) {
				continue
			}
			if !b.End.After(lo) && (prev == nil || b.End.After(*prev)) {
				e := b.End
				prev = &e
			}
			if !b.Start.Before(hi) && (next == nil || b.Start.Before(*next)) {
				st := b.Start
				next = &st
			}
		}
		if prev == nil {
			c.open++
		} else {
			c.gap += lo.Sub(*prev)
		}
		if next == nil {
			c.open++
		} else {
			c.gap += next.Sub(hi)
		}
		c.doms = rules.LocationTags(h.Tags)
		cs = append(cs, c)
	}
	less := func(c, b cand) bool {
		switch {
		case loses(c.h, b.h) != 0:
			return loses(c.h, b.h) < 0
		case naiveTimeClass(c.open) != naiveTimeClass(b.open):
			return naiveTimeClass(c.open) < naiveTimeClass(b.open)
		case c.gap != b.gap:
			return c.gap < b.gap
		}
		return compareIDs(c.h.ID, b.h.ID) < 0
	}
	if req.ReservePercent > 0 {
		// The bigger hosts lose more big fits than the best matching
		// host; a rounded-down share of them stays free: the worst free
		// ones are held.
		var best *Host
		for i := range hosts {
			if ok, _ := match(&hosts[i]); ok && (best == nil || loses(&hosts[i], best) < 0) {
				best = &hosts[i]
			}
		}
		bigger := 0
		for i := range hosts {
			if ok, _ := match(&hosts[i]); ok && loses(&hosts[i], best) > 0 {
				bigger++
			}
		}
		var freeBigger []cand
		for _, c := range cs {
			if loses(c.h, best) > 0 {
				freeBigger = append(freeBigger, c)
			}
		}
		held := min(len(freeBigger), bigger*req.ReservePercent/100)
		slices.SortFunc(freeBigger, func(a, b cand) int {
			if less(a, b) {
				return -1
			}
			return 1
		})
		heldHost := map[*Host]bool{}
		for _, c := range freeBigger[len(freeBigger)-held:] {
			heldHost[c.h] = true
		}
		cs = slices.DeleteFunc(cs, func(c cand) bool { return heldHost[c.h] })
	}
	if len(cs) < req.Min {
		return nil
	}
	used := map[string]int{}
	for _, d := range req.UsedDomains {
		used[d]++
	}
	var out []string
	taken := make([]bool, len(cs))
	for len(out) < min(req.Max, len(cs)) {
		best, bestUse := -1, 0
		for i, c := range cs {
			if taken[i] {
				continue
			}
			use := 0
			for _, d := range c.doms {
				use += used[d]
			}
			better := best < 0 || use < bestUse
			if !better && use == bestUse {
				better = less(c, cs[best])
			}
			if better {
				best, bestUse = i, use
			}
		}
		taken[best] = true
		for _, d := range cs[best].doms {
			used[d]++
		}
		out = append(out, cs[best].h.ID)
	}
	return out
}

// naiveTimeClass: bounded on one side first, then idle, then a hole
// between two reservations.
func naiveTimeClass(open int) int {
	return map[int]int{1: 0, 2: 1, 0: 2}[open]
}

// naiveLoses compares two hosts by the big fits their use loses: the size
// classes are the (memory, vCPUs, disk) profiles of all hosts, largest
// first; a host loses a fit of every class it can hold; the first class
// where exactly one of the two loses decides (-1: a loses less).
func naiveLoses(hosts []Host) func(a, b *Host) int {
	type prof [3]int64
	seen := map[prof]bool{}
	var classes []prof
	for _, h := range hosts {
		p := prof{h.MemoryMB, h.VCPUs, h.DiskGB}
		if !seen[p] {
			seen[p] = true
			classes = append(classes, p)
		}
	}
	slices.SortFunc(classes, func(a, b prof) int {
		for k := range a {
			if a[k] != b[k] {
				return cmpInt(b[k], a[k])
			}
		}
		return 0
	})
	holds := func(h *Host, c prof) bool { return h.MemoryMB >= c[0] && h.VCPUs >= c[1] && h.DiskGB >= c[2] }
	return func(a, b *Host) int {
		for _, c := range classes {
			ha, hb := holds(a, c), holds(b, c)
			if ha != hb {
				if hb {
					return -1
				}
				return 1
			}
		}
		return 0
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// prepare builds PreparedHosts for hosts: a host whose reservations are
// non-empty and pairwise disjoint gets them sorted and its bounds.
func prepare(hosts []Host) PreparedHosts {
	p := PreparedHosts{Hosts: hosts, Bounds: make([][]int64, len(hosts)), Sorted: make([]bool, len(hosts))}
	total := 0
	for i := range hosts {
		total += 2 * len(hosts[i].Busy)
	}
	arena := make([]int64, 0, total) // contiguous, as a long-lived view would keep them
	for i := range hosts {
		busy := hosts[i].Busy
		slices.SortStableFunc(busy, func(a, b Interval) int { return a.Start.Compare(b.Start) })
		ok := true
		for k := range busy {
			if !busy[k].End.After(busy[k].Start) || (k > 0 && busy[k].Start.Before(busy[k-1].End)) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		p.Sorted[i] = true
		from := len(arena)
		for _, b := range busy {
			arena = append(arena, b.Start.UnixNano(), b.End.UnixNano())
		}
		p.Bounds[i] = arena[from:len(arena):len(arena)]
	}
	return p
}

// TestChoosePreparedSameDecision: ChoosePrepared decides exactly as
// ChooseHosts (Rejected left out when asked), with prepared and
// unprepared hosts, failure domains, properties and every count range.
func TestChoosePreparedSameDecision(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "hosts")
		racks := rapid.IntRange(0, 3).Draw(rt, "racks")
		hosts := make([]Host, n)
		for i := range hosts {
			h := &hosts[i]
			h.ID = strconv.Itoa(rapid.IntRange(1, 3*n).Draw(rt, "id"))
			if rapid.Bool().Draw(rt, "named") {
				h.ID = "h" + h.ID
			}
			h.VCPUs = int64(rapid.SampledFrom([]int{8, 16, 32}).Draw(rt, "vcpus"))
			if racks > 0 && rapid.Bool().Draw(rt, "tagged") {
				h.Tags = []string{"rack:r" + strconv.Itoa(rapid.IntRange(0, racks-1).Draw(rt, "rack"))}
			}
			disjoint := rapid.IntRange(0, 3).Draw(rt, "disjoint") > 0
			at := rapid.IntRange(0, 6).Draw(rt, "first")
			for range rapid.IntRange(0, 10).Draw(rt, "bookings") {
				var s, e int
				if disjoint {
					s = at + rapid.IntRange(0, 5).Draw(rt, "gap")
					e = s + rapid.IntRange(1, 6).Draw(rt, "len")
					at = e
				} else {
					s = rapid.IntRange(0, 60).Draw(rt, "s")
					e = s + rapid.IntRange(-1, 6).Draw(rt, "len")
				}
				h.Busy = append(h.Busy, iv(s, e))
			}
			if !disjoint || rapid.Bool().Draw(rt, "shuffle") {
				rand.New(rand.NewPCG(uint64(i), 3)).Shuffle(len(h.Busy), func(a, b int) { h.Busy[a], h.Busy[b] = h.Busy[b], h.Busy[a] })
			}
		}
		ws := rapid.IntRange(0, 60).Draw(rt, "start")
		req := HostRequest{
			Window:   iv(ws, ws+rapid.IntRange(1, 10).Draw(rt, "wlen")),
			Cleaning: time.Duration(rapid.IntRange(0, 2).Draw(rt, "cleaning")) * 30 * time.Minute,
			Min:      rapid.IntRange(0, n).Draw(rt, "min"),
		}
		req.Max = max(req.Min, 1) + rapid.SampledFrom([]int{0, 1, 2, 5, 40}).Draw(rt, "extra")
		req.ReservePercent = rapid.SampledFrom([]int{0, 0, 20, 50, 100}).Draw(rt, "reserve")
		if rapid.Bool().Draw(rt, "match") {
			req.Match = func(h *Host) (bool, string) { return h.VCPUs >= 16, "vcpus >= 16" }
		}
		var rules *TagRules
		if racks > 0 {
			rules = &TagRules{LocationPrefixes: []string{"rack"}}
		}
		want, werr := ChooseHosts(rules, hosts, req)
		opt := ChooseOptions{OmitRejected: rapid.Bool().Draw(rt, "omit")}
		if opt.OmitRejected {
			want.Rejected = nil
		}
		var p PreparedHosts
		if rapid.Bool().Draw(rt, "prepared") {
			p = prepare(hosts)
		} else {
			p = PreparedHosts{Hosts: hosts}
		}
		got, gerr := ChoosePrepared(rules, p, req, opt)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			rt.Fatalf("errors differ: %v vs %v", werr, gerr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			rt.Fatalf("decisions differ (-ChooseHosts +ChoosePrepared):\n%s", diff)
		}
	})
}

// BenchmarkChoosePrepared is BenchmarkChooseHosts/plain over prepared
// hosts (the physical:host plugin's view), without rejections.
func BenchmarkChoosePrepared(b *testing.B) {
	r := rand.New(rand.NewPCG(42, 1))
	hosts := make([]Host, 10000)
	for i := range hosts {
		hosts[i].ID = strconv.Itoa(i + 1)
		at := t0.Add(time.Duration(r.IntN(48)) * time.Hour)
		for range 10 {
			s := at.Add(time.Duration(r.IntN(24*60)) * time.Minute)
			e := s.Add(time.Duration(1+r.IntN(12)) * time.Hour)
			hosts[i].Busy = append(hosts[i].Busy, Interval{Start: s, End: e})
			at = e
		}
	}
	p := prepare(hosts)
	req := HostRequest{Window: Interval{Start: at(100), End: at(104)}, Cleaning: time.Hour, Min: 10, Max: 10}
	b.ReportAllocs()
	var dec HostDecision
	start := cpuNow()
	for b.Loop() {
		var err error
		dec, err = ChoosePrepared(nil, p, req, ChooseOptions{OmitRejected: true})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(dec.Free), "free")
}

// TestAppendUnixNano: the fast formatting of reservation bounds matches
// appendTime over the whole int64 range, whole minutes, seconds and not.
func TestAppendUnixNano(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ns := rapid.Int64().Draw(rt, "ns")
		switch rapid.IntRange(0, 2).Draw(rt, "unit") {
		case 0:
			ns -= ns % 60e9
		case 1:
			ns -= ns % 1e9
		}
		want := string(appendTime(nil, time.Unix(0, ns)))
		if got := string(appendUnixNano(nil, ns)); got != want {
			rt.Fatalf("appendUnixNano(%d) = %q, want %q", ns, got, want)
		}
	})
	for _, ns := range []int64{0, -1e9, -86400e9, 951782400e9, 4107542400e9, -62135596800e9 / 10} {
		if got, want := string(appendUnixNano(nil, ns)), string(appendTime(nil, time.Unix(0, ns))); got != want {
			t.Errorf("appendUnixNano(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestReserveKeepsBiggerHosts: with small hosts busy, a small request
// takes big hosts only while more than the reserve stay free; a request
// only big hosts match has no bigger hosts and no reserve.
func TestReserveKeepsBiggerHosts(t *testing.T) {
	var hosts []Host
	for i := 1; i <= 10; i++ {
		hosts = append(hosts, sized(strconv.Itoa(i), 1024, 64, 100))
	}
	hosts = append(hosts, sized("11", 128, 64, 100), sized("12", 128, 64, 100))
	hosts[10].Busy = []Interval{iv(0, 20)}
	hosts[11].Busy = []Interval{iv(0, 20)}
	bigOnly := func(h *Host) (bool, string) { return h.MemoryMB >= 1024, "memory_mb >= 1024" }
	ids := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, strconv.Itoa(i))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		min, max int
		match    func(*Host) (bool, string)
		want     []string
		held     int
		err      string
	}{
		{name: "one big host of the 8 not kept", min: 1, max: 1, want: []string{"1"}, held: 2},
		{name: "as many as the reserve lets", min: 1, max: 12, want: ids(1, 8), held: 2},
		{name: "refused beyond the reserve", min: 9, max: 9, held: 2,
			err: "Not enough hosts available: 12 hosts match the properties, 10 are free in the window (2 of them bigger hosts kept for the requests only bigger hosts serve), 9 needed"},
		{name: "big request: no bigger hosts", min: 10, max: 10, match: bigOnly, want: ids(1, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := HostRequest{Window: iv(10, 12), Min: tc.min, Max: tc.max, Match: tc.match, ReservePercent: 20}
			for _, omit := range []bool{false, true} {
				dec, err := ChoosePrepared(nil, PreparedHosts{Hosts: hosts}, req, ChooseOptions{OmitRejected: omit})
				got := ""
				if err != nil {
					got = err.Error()
				}
				if got != tc.err {
					t.Fatalf("omit %v: error %q, want %q", omit, got, tc.err)
				}
				if diff := cmp.Diff(tc.want, dec.Chosen); diff != "" {
					t.Errorf("omit %v: chosen (-want +got):\n%s", omit, diff)
				}
				if dec.Held != tc.held || dec.Free != 10 {
					t.Errorf("omit %v: held %d of %d free, want %d of 10", omit, dec.Held, dec.Free, tc.held)
				}
			}
		})
	}
}
