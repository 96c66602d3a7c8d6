package allocator

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var slotT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func slotAt(min int) time.Time { return slotT0.Add(time.Duration(min) * time.Minute) }

func TestEarliestSlots(t *testing.T) {
	quarterBooking := func(from, to int, slots int64) SlotBooking {
		return SlotBooking{Start: slotAt(from), End: slotAt(to), Size: slotQuarter, Slots: slots}
	}
	for _, tc := range []struct {
		name  string
		hosts []SlotTimeline
		req   SlotRequest
		w     SlotWindow
		want  int // minutes after slotT0; -1: none
	}{
		{
			name:  "free now",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(0, 60, 2)}}},
			req:   SlotRequest{Size: slotHalf, Amount: 1},
			w:     SlotWindow{After: slotAt(0), Duration: time.Hour},
			want:  0,
		},
		{
			name:  "after the booking that leaves too little room",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(10, 60, 3)}}},
			req:   SlotRequest{Size: slotHalf, Amount: 1},
			w:     SlotWindow{After: slotAt(0), Duration: time.Hour},
			want:  60,
		},
		{
			name: "cleaning time after the booking",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode, Bookings: []SlotBooking{
				{Start: slotAt(10), End: slotAt(60), Whole: true}}}},
			req:  SlotRequest{Size: slotQuarter, Amount: 1},
			w:    SlotWindow{After: slotAt(0), Duration: time.Hour, Cleaning: 5 * time.Minute},
			want: 65,
		},
		{
			name: "anti-affinity waits for a second host",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode},
				{ID: "b", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(0, 30, 4), quarterBooking(30, 90, 4)}}},
			req:  SlotRequest{Size: slotQuarter, Amount: 2, Affinity: boolp(false)},
			w:    SlotWindow{After: slotAt(0), Duration: time.Hour},
			want: 90,
		},
		{
			name: "affinity needs all on one host; any split fits at once",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(0, 40, 2)}},
				{ID: "b", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(0, 20, 2)}}},
			req:  SlotRequest{Size: slotQuarter, Amount: 3, Affinity: boolp(true)},
			w:    SlotWindow{After: slotAt(0), Duration: time.Hour},
			want: 20,
		},
		{
			name:  "not by the latest start",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode, Bookings: []SlotBooking{quarterBooking(10, 60, 3)}}},
			req:   SlotRequest{Size: slotHalf, Amount: 1},
			w:     SlotWindow{After: slotAt(0), NotAfter: slotAt(59), Duration: time.Hour},
			want:  -1,
		},
		{
			name:  "more than the hosts ever hold",
			hosts: []SlotTimeline{{ID: "a", Capacity: slotNode}},
			req:   SlotRequest{Size: slotHalf, Amount: 3},
			w:     SlotWindow{After: slotAt(0), Duration: time.Hour},
			want:  -1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := EarliestSlots(tc.hosts, tc.req, tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want < 0 {
				if found {
					t.Fatalf("found %s, want none", got)
				}
				return
			}
			if !found || !got.Equal(slotAt(tc.want)) {
				t.Fatalf("got %s (found %v), want %s", got, found, slotAt(tc.want))
			}
		})
	}
	if _, _, err := EarliestSlots(nil, SlotRequest{Size: slotHalf}, SlotWindow{Duration: time.Hour}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("amount 0: err = %v, want ErrInvalidRequest", err)
	}
}

// TestEarliestSlotsBruteForce: on whole-minute timelines, EarliestSlots
// finds the first minute at which a minute-by-minute count of the use
// (per-resource peak over the window with cleaning, nothing beside a
// whole-host booking) leaves room for the request under its affinity.
func TestEarliestSlotsBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var hosts []SlotTimeline
		lastEnd := 0
		for i := range rapid.IntRange(0, 4).Draw(t, "hosts") {
			h := SlotTimeline{ID: "h" + strconv.Itoa(i), Capacity: sz(int64(rapid.IntRange(0, 8).Draw(t, "vcpus")), int64(rapid.IntRange(0, 4).Draw(t, "mem"))*1024, 0)}
			for range rapid.IntRange(0, 5).Draw(t, "bookings") {
				s := rapid.IntRange(0, 40).Draw(t, "start")
				e := s + rapid.IntRange(0, 20).Draw(t, "len")
				lastEnd = max(lastEnd, e)
				h.Bookings = append(h.Bookings, SlotBooking{Start: slotAt(s), End: slotAt(e),
					Size:  sz(int64(rapid.IntRange(0, 2).Draw(t, "bv")), int64(rapid.IntRange(0, 2).Draw(t, "bm"))*1024, 0),
					Slots: int64(rapid.IntRange(1, 3).Draw(t, "slots")), Whole: rapid.IntRange(0, 5).Draw(t, "whole") == 0})
			}
			hosts = append(hosts, h)
		}
		req := SlotRequest{Size: sz(int64(rapid.IntRange(0, 3).Draw(t, "sv")), int64(rapid.IntRange(0, 2).Draw(t, "sm"))*1024, 0),
			Amount: rapid.IntRange(1, 4).Draw(t, "amount")}
		switch rapid.IntRange(0, 2).Draw(t, "aff") {
		case 1:
			req.Affinity = boolp(true)
		case 2:
			req.Affinity = boolp(false)
		}
		after, d, c := rapid.IntRange(0, 30).Draw(t, "after"), rapid.IntRange(1, 15).Draw(t, "dur"), rapid.IntRange(0, 3).Draw(t, "clean")
		w := SlotWindow{After: slotAt(after), Duration: time.Duration(d) * time.Minute, Cleaning: time.Duration(c) * time.Minute}
		limit := max(after, lastEnd+c) // past every booking nothing changes
		if rapid.Bool().Draw(t, "bounded") {
			na := after + rapid.IntRange(0, 40).Draw(t, "notafter")
			w.NotAfter = slotAt(na)
			limit = min(limit, na)
		}
		want := -1
		for m := after; m <= limit && want < 0; m++ {
			if bruteFits(hosts, req, m-c, m+d+c) {
				want = m
			}
		}
		got, found, err := EarliestSlots(hosts, req, w)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want < 0 && found:
			t.Fatalf("found %s, brute force finds none by minute %d", got.Sub(slotT0), limit)
		case want >= 0 && (!found || !got.Equal(slotAt(want))):
			t.Fatalf("got %s (found %v), brute force minute %d", got.Sub(slotT0), found, want)
		}
	})
}

// bruteFits counts the use minute by minute over [lo, hi).
func bruteFits(hosts []SlotTimeline, req SlotRequest, lo, hi int) bool {
	total, withSlot, most := 0, 0, 0
	for _, h := range hosts {
		var peak SlotSize
		whole := false
		for m := lo; m < hi; m++ {
			var use SlotSize
			for _, b := range h.Bookings {
				if !b.Start.After(slotAt(m)) && b.End.After(slotAt(m)) {
					whole = whole || b.Whole
					use = use.Sub(b.Size, -b.Slots)
				}
			}
			peak = sz(max(peak.VCPUs, use.VCPUs), max(peak.MemoryMB, use.MemoryMB), max(peak.DiskGB, use.DiskGB))
		}
		n := 0
		if !whole {
			n = h.Capacity.Sub(peak, 1).Fits(req.Size)
		}
		total += n
		most = max(most, n)
		if n > 0 {
			withSlot++
		}
	}
	switch {
	case req.Affinity != nil && *req.Affinity:
		return most >= req.Amount
	case req.Affinity != nil:
		return withSlot >= req.Amount
	}
	return total >= req.Amount
}

// BenchmarkEarliestSlots: 1,000 hosts with 10,000 one-slot bookings over
// a year; the request (a slot on each of 990 hosts, anti-affinity) fits
// only where few bookings overlap, so the sweep checks many starts.
func BenchmarkEarliestSlots(b *testing.B) {
	hosts := make([]SlotTimeline, 1000)
	for i := range hosts {
		hosts[i] = SlotTimeline{ID: strconv.Itoa(i), Capacity: SlotSize{VCPUs: 1, MemoryMB: 1024, DiskGB: 0}}
	}
	for i := range 10000 {
		h := &hosts[(i*7919)%len(hosts)]
		start := slotAt((i * 52) % (365 * 24 * 60))
		h.Bookings = append(h.Bookings, SlotBooking{Start: start, End: start.Add(48 * time.Hour), Size: SlotSize{VCPUs: 1, MemoryMB: 1024, DiskGB: 0}, Slots: 1})
	}
	req := SlotRequest{Size: SlotSize{VCPUs: 1, MemoryMB: 1024, DiskGB: 0}, Amount: 990, Affinity: boolp(false)}
	w := SlotWindow{After: slotT0, Duration: 24 * time.Hour}
	for b.Loop() {
		if _, found, err := EarliestSlots(hosts, req, w); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}
