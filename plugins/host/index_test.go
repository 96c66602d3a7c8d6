package host

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// TestAroundSameDecision: giving the allocator only the bookings around
// the window (around) yields the same decision as giving it all of them.
func TestAroundSameDecision(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(rt, "hosts")
		full := make([]allocator.Host, n)
		for i := range full {
			full[i].ID = fmt.Sprint(i + 1)
			at := rapid.IntRange(0, 5).Draw(rt, "first")
			for range rapid.IntRange(0, 12).Draw(rt, "bookings") {
				start := at + rapid.IntRange(0, 6).Draw(rt, "gap")
				end := start + rapid.IntRange(1, 6).Draw(rt, "len")
				full[i].Busy = append(full[i].Busy, allocator.Interval{Start: base.Add(time.Duration(start) * time.Hour), End: base.Add(time.Duration(end) * time.Hour)})
				at = end
			}
		}
		ws := rapid.IntRange(0, 80).Draw(rt, "start")
		win := allocator.Interval{Start: base.Add(time.Duration(ws) * time.Hour), End: base.Add(time.Duration(ws+rapid.IntRange(1, 10).Draw(rt, "wlen")) * time.Hour)}
		cleaning := time.Duration(rapid.IntRange(0, 2).Draw(rt, "cleaning")) * 30 * time.Minute
		req := allocator.HostRequest{Window: win, Cleaning: cleaning, Min: rapid.IntRange(0, n).Draw(rt, "min"), Max: n}
		req.Max = max(req.Min, rapid.IntRange(1, n).Draw(rt, "max"))
		trimmed := make([]allocator.Host, n)
		for i, h := range full {
			h.Busy = around(h.Busy, boundsOf(h.Busy), win.Start.Add(-cleaning).UnixNano(), win.End.Add(cleaning).UnixNano())
			trimmed[i] = h
		}
		d1, e1 := allocator.ChooseHosts(nil, full, req)
		d2, e2 := allocator.ChooseHosts(nil, trimmed, req)
		if (e1 == nil) != (e2 == nil) {
			rt.Fatalf("errors differ: %v vs %v", e1, e2)
		}
		if diff := cmp.Diff(d1, d2); diff != "" {
			rt.Fatalf("decisions differ (-full +trimmed):\n%s", diff)
		}
	})
}

// TestIndexChooseSameDecision: the view's prepared choice (index.choose)
// decides as allocator.ChooseHosts over the view's hosts with all their
// bookings, after loads, packing, bookings added and removed in place.
func TestIndexChooseSameDecision(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 10).Draw(rt, "hosts")
		infos := make([]Host, n)
		for i := range infos {
			infos[i] = Host{ID: fmt.Sprint(i + 1), HypervisorHostname: fmt.Sprint("h", i+1),
				MemoryMB:          int64(rapid.SampledFrom([]int{0, 128, 1024}).Draw(rt, "mem")),
				ExtraCapabilities: map[string]string{"rack": fmt.Sprint(rapid.IntRange(0, 2).Draw(rt, "rack"))}}
		}
		var rules *allocator.TagRules
		var x index
		if rapid.Bool().Draw(rt, "racks") {
			rules = &allocator.TagRules{LocationPrefixes: []string{"rack"}}
			x.tagKeys = rules.LocationPrefixes
		}
		x.setHostsLocked(infos)
		row := func(res string) allocRow {
			h := rapid.IntRange(1, n).Draw(rt, "host")
			s := rapid.IntRange(0, 60).Draw(rt, "start")
			return allocRow{ComputeHostID: fmt.Sprint(h), ReservationID: res, StartDate: hour(s), EndDate: hour(s + rapid.IntRange(0, 8).Draw(rt, "len"))}
		}
		var rows []allocRow
		for k := range rapid.IntRange(0, 30).Draw(rt, "rows") {
			rows = append(rows, row(fmt.Sprint("r", k)))
		}
		x.addRowsLocked(rows)
		x.packBoundsLocked()
		for k := range rapid.IntRange(0, 6).Draw(rt, "changes") {
			res := fmt.Sprint("r", rapid.IntRange(0, 40).Draw(rt, "res"))
			var old []string
			for i := range x.hosts {
				old = append(old, x.hosts[i].ID)
			}
			var nrows []allocRow
			for range rapid.IntRange(0, 3).Draw(rt, "newRows") {
				nrows = append(nrows, row(res))
			}
			if k%2 == 0 {
				x.setReservation(res, old, nrows)
			} else {
				x.replaceHosts([]string{fmt.Sprint(rapid.IntRange(1, n).Draw(rt, "replaced"))}, nrows)
			}
		}
		ws := rapid.IntRange(0, 60).Draw(rt, "wstart")
		req := allocator.HostRequest{
			Window:   allocator.Interval{Start: hour(ws), End: hour(ws + rapid.IntRange(1, 8).Draw(rt, "wlen"))},
			Cleaning: time.Duration(rapid.IntRange(0, 2).Draw(rt, "cleaning")) * 30 * time.Minute,
			Min:      rapid.IntRange(0, n).Draw(rt, "min"),
		}
		req.Max = max(req.Min, 1) + rapid.IntRange(0, 3).Draw(rt, "extra")
		got, gerr := x.choose(rules, req, func(func(string) *Host) func(*allocator.Host) (bool, string) { return nil })
		want, werr := allocator.ChooseHosts(rules, x.hosts, req)
		want.Rejected = nil
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			rt.Fatalf("errors differ: %v vs %v", gerr, werr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			rt.Fatalf("decisions differ (-ChooseHosts +index.choose):\n%s", diff)
		}
	})
}
