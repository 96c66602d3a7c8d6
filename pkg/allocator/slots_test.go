package allocator

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func boolp(b bool) *bool { return &b }

// quarter-node sizes over 8 VCPU / 16 GiB / 800 GB hosts.
var (
	slotNode    = SlotSize{VCPUs: 8, MemoryMB: 16384, DiskGB: 800}
	slotQuarter = SlotSize{VCPUs: 2, MemoryMB: 4096, DiskGB: 200}
	slotHalf    = SlotSize{VCPUs: 4, MemoryMB: 8192, DiskGB: 400}
)

func slotHost(id string, used SlotSize) SlotHost {
	return SlotHost{ID: id, Free: slotNode.Sub(used, 1), Capacity: slotNode}
}

func TestChooseSlots(t *testing.T) {
	sizes := []SlotSize{slotNode, slotHalf, slotQuarter}
	empty := SlotSize{}
	for _, tc := range []struct {
		name  string
		hosts []SlotHost
		req   SlotRequest
		want  map[string]int
		err   string
	}{
		{
			// The seed's example: a quarter prefers the three-quarter
			// filled node, then the quarter filled one, then the half
			// filled one, then an empty one.
			name: "quarter goes to the fullest node",
			hosts: []SlotHost{slotHost("empty", empty), slotHost("half", slotHalf), slotHost("quarter", slotQuarter),
				slotHost("threeq", SlotSize{VCPUs: 6, MemoryMB: 12288, DiskGB: 600})},
			req:  SlotRequest{Size: slotQuarter, Amount: 1, Sizes: sizes},
			want: map[string]int{"threeq": 1},
		},
		{
			name:  "quarter prefers a quarter-filled node over a half-filled one",
			hosts: []SlotHost{slotHost("empty", empty), slotHost("half", slotHalf), slotHost("quarter", slotQuarter)},
			req:   SlotRequest{Size: slotQuarter, Amount: 1, Sizes: sizes},
			want:  map[string]int{"quarter": 1},
		},
		{
			name:  "half prefers the half-filled node",
			hosts: []SlotHost{slotHost("empty", empty), slotHost("quarter", slotQuarter), slotHost("half", slotHalf)},
			req:   SlotRequest{Size: slotHalf, Amount: 1, Sizes: sizes},
			want:  map[string]int{"half": 1},
		},
		{
			name:  "any split packs more instances than hosts",
			hosts: []SlotHost{slotHost("a", empty), slotHost("b", empty)},
			req:   SlotRequest{Size: slotQuarter, Amount: 6, Sizes: sizes},
			want:  map[string]int{"a": 4, "b": 2},
		},
		{
			name:  "affinity puts all on one host",
			hosts: []SlotHost{slotHost("a", slotQuarter), slotHost("b", empty)},
			req:   SlotRequest{Size: slotQuarter, Amount: 3, Affinity: boolp(true), Sizes: sizes},
			want:  map[string]int{"a": 3},
		},
		{
			name:  "affinity refuses when no host has room for all",
			hosts: []SlotHost{slotHost("a", slotQuarter), slotHost("b", slotHalf)},
			req:   SlotRequest{Size: slotQuarter, Amount: 4, Affinity: boolp(true), Sizes: sizes},
			err:   "Not enough hosts available: 4 slots of 2 VCPU/4 GiB/200 GB disk needed on one host (affinity), at most 3 free on one host in the window, 2 matching hosts",
		},
		{
			name:  "anti-affinity one per host",
			hosts: []SlotHost{slotHost("a", empty), slotHost("b", empty), slotHost("c", empty)},
			req:   SlotRequest{Size: slotQuarter, Amount: 2, Affinity: boolp(false), Sizes: sizes},
			want:  map[string]int{"a": 1, "b": 1},
		},
		{
			name: "anti-affinity spreads over failure domains",
			hosts: []SlotHost{{ID: "a", Domain: "r1", Free: slotNode, Capacity: slotNode}, {ID: "b", Domain: "r1", Free: slotNode, Capacity: slotNode},
				{ID: "c", Domain: "r2", Free: slotNode, Capacity: slotNode}},
			req:  SlotRequest{Size: slotQuarter, Amount: 2, Affinity: boolp(false), Sizes: sizes},
			want: map[string]int{"a": 1, "c": 1},
		},
		{
			name:  "anti-affinity with more instances than hosts",
			hosts: []SlotHost{slotHost("a", empty), slotHost("b", empty)},
			req:   SlotRequest{Size: slotQuarter, Amount: 3, Affinity: boolp(false), Sizes: sizes},
			err:   "3 slots of 2 VCPU/4 GiB/200 GB disk needed on distinct hosts (anti-affinity), 2 of the 2 matching hosts have a free slot in the window",
		},
		{
			name:  "too many for the capacity",
			hosts: []SlotHost{slotHost("a", slotHalf), slotHost("b", empty), slotHost("c", slotNode)},
			req:   SlotRequest{Size: slotHalf, Amount: 4},
			err:   "4 slots of 4 VCPU/8 GiB/400 GB disk needed, 3 free in the window on 3 matching hosts",
		},
		{
			name:  "held slots are kept and more added elsewhere",
			hosts: []SlotHost{{ID: "a", Free: slotNode, Capacity: slotNode, Held: 1}, slotHost("b", slotQuarter)},
			req:   SlotRequest{Size: slotHalf, Amount: 3},
			want:  map[string]int{"a": 2, "b": 1},
		},
		{
			// 10 VCPU hosts and a 4 VCPU policy size: a 2 VCPU slot costs
			// no 4 VCPU allocation on the empty host (10/4 = 8/4) but one
			// on the host using 1 VCPU (9/4 > 7/4); the empty host still
			// stays closed while the used one has room.
			name: "never a fresh host while one in use has room",
			hosts: []SlotHost{{ID: "empty", Free: SlotSize{VCPUs: 10, MemoryMB: 0, DiskGB: 0}, Capacity: SlotSize{VCPUs: 10, MemoryMB: 0, DiskGB: 0}},
				{ID: "used", Free: SlotSize{VCPUs: 9, MemoryMB: 0, DiskGB: 0}, Capacity: SlotSize{VCPUs: 10, MemoryMB: 0, DiskGB: 0}}},
			req:  SlotRequest{Size: SlotSize{VCPUs: 2, MemoryMB: 0, DiskGB: 0}, Amount: 1, Sizes: []SlotSize{{VCPUs: 4, MemoryMB: 0, DiskGB: 0}}},
			want: map[string]int{"used": 1},
		},
		{
			// Over time: both hosts have the same peak, but "late" is busy
			// only for the last quarter of the window, "most" for three
			// quarters; the slot goes where the whole host is lost for the
			// least time.
			name: "the host busy for most of the window",
			hosts: []SlotHost{
				{ID: "late", Free: slotNode.Sub(slotQuarter, 1), Capacity: slotNode,
					Profile: []SlotSegment{{Dur: 3, Free: slotNode}, {Dur: 1, Free: slotNode.Sub(slotQuarter, 1)}}},
				{ID: "most", Free: slotNode.Sub(slotQuarter, 1), Capacity: slotNode,
					Profile: []SlotSegment{{Dur: 1, Free: slotNode}, {Dur: 3, Free: slotNode.Sub(slotQuarter, 1)}}},
			},
			req:  SlotRequest{Size: slotQuarter, Amount: 1, Sizes: sizes},
			want: map[string]int{"most": 1},
		},
		{
			// Same lost allocations (whole hosts and quarters) and peak: the
			// remaining capacity, averaged over the window, breaks the tie
			// (the fuller host).
			name: "ties go to the host with less left over the window",
			hosts: []SlotHost{
				{ID: "thin", Free: slotNode.Sub(slotQuarter, 1), Capacity: slotNode,
					Profile: []SlotSegment{{Dur: 2, Free: slotNode.Sub(slotQuarter, 1)}, {Dur: 2, Free: slotNode.Sub(slotQuarter, 1)}}},
				{ID: "thick", Free: slotNode.Sub(slotQuarter, 1), Capacity: slotNode,
					Profile: []SlotSegment{{Dur: 2, Free: slotNode.Sub(slotQuarter, 1)}, {Dur: 2, Free: slotNode.Sub(slotHalf, 1)}}},
			},
			req:  SlotRequest{Size: slotQuarter, Amount: 1, Sizes: []SlotSize{slotNode}},
			want: map[string]int{"thick": 1},
		},
		{
			name:  "held slots that no longer fit",
			hosts: []SlotHost{{ID: "a", Free: slotQuarter, Capacity: slotNode, Held: 1}},
			req:   SlotRequest{Size: slotHalf, Amount: 1},
			err:   "the slots already held no longer fit",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := ChooseSlots(tc.hosts, tc.req)
			if tc.err != "" {
				var ne *NotEnoughSlotsError
				if !errors.As(err, &ne) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want NotEnoughSlotsError with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, dec.Slots); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChooseSlotsProperties: a choice never puts more on a host than fits
// in its free capacity, gives exactly the amount, keeps held slots,
// honours affinity, and is the same on the same input; a refusal happens
// only when the simple bound says it must for the any-split case.
func TestChooseSlotsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "hosts")
		var hosts []SlotHost
		for i := range n {
			capa := sz(int64(rapid.IntRange(0, 16).Draw(t, "vcpus")), int64(rapid.IntRange(0, 8).Draw(t, "mem"))*1024, int64(rapid.IntRange(0, 4).Draw(t, "disk"))*100)
			used := sz(int64(rapid.IntRange(0, int(capa.VCPUs)).Draw(t, "uv")), int64(rapid.IntRange(0, int(capa.MemoryMB/1024)).Draw(t, "um"))*1024, 0)
			hosts = append(hosts, SlotHost{ID: "h" + strconv.Itoa(i), Domain: rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, "dom"), Free: capa.Sub(used, 1), Capacity: capa})
		}
		size := sz(int64(rapid.IntRange(1, 4).Draw(t, "sv")), int64(rapid.IntRange(1, 4).Draw(t, "sm"))*1024, int64(rapid.IntRange(0, 2).Draw(t, "sd"))*50)
		held := 0
		for i := range hosts {
			if rapid.Bool().Draw(t, "held") {
				hosts[i].Held = min(hosts[i].Free.Fits(size), 1)
				held += hosts[i].Held
			}
		}
		var aff *bool
		switch rapid.IntRange(0, 2).Draw(t, "aff") {
		case 1:
			aff = boolp(true)
		case 2:
			aff = boolp(false)
		}
		if aff != nil && *aff && held > 1 {
			for i := range hosts {
				hosts[i].Held = 0
			}
			held = 0
		}
		req := SlotRequest{Size: size, Amount: held + rapid.IntRange(1, 10).Draw(t, "amount"), Affinity: aff,
			Sizes: []SlotSize{{VCPUs: 8, MemoryMB: 16384}, {VCPUs: 1, MemoryMB: 1024}}}
		dec, err := ChooseSlots(hosts, req)
		dec2, err2 := ChooseSlots(hosts, req)
		if (err == nil) != (err2 == nil) || !cmp.Equal(dec.Slots, dec2.Slots) {
			t.Fatalf("not deterministic: %v %v / %v %v", dec.Slots, err, dec2.Slots, err2)
		}
		total := 0
		for _, h := range hosts {
			total += h.Free.Fits(size)
		}
		if err != nil {
			var ne *NotEnoughSlotsError
			if !errors.As(err, &ne) {
				t.Fatalf("unexpected error %v", err)
			}
			if aff == nil && total >= req.Amount {
				t.Fatalf("refused %d with %d free: %v", req.Amount, total, err)
			}
			return
		}
		sum := 0
		for _, h := range hosts {
			k := dec.Slots[h.ID]
			sum += k
			if k > h.Free.Fits(size) {
				t.Fatalf("host %s: %d slots, %d fit", h.ID, k, h.Free.Fits(size))
			}
			if k < h.Held {
				t.Fatalf("host %s: held %d, kept %d", h.ID, h.Held, k)
			}
			if aff != nil && !*aff && k > 1 {
				t.Fatalf("anti-affinity: %d on %s", k, h.ID)
			}
		}
		if sum != req.Amount {
			t.Fatalf("%d slots placed, %d asked", sum, req.Amount)
		}
		if aff != nil && *aff && len(dec.Slots) != 1 {
			t.Fatalf("affinity over %d hosts", len(dec.Slots))
		}
	})
}

// TestChooseSlotsKeepsFreshHostsClosed: a single slot (any split) never
// goes to a host unused throughout the window while a host in use has
// room for it, whatever the policy sizes and the use over time.
func TestChooseSlotsKeepsFreshHostsClosed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capa := sz(int64(rapid.IntRange(1, 16).Draw(t, "vcpus")), int64(rapid.IntRange(1, 8).Draw(t, "mem"))*1024, 0)
		var hosts []SlotHost
		for i := range rapid.IntRange(1, 6).Draw(t, "hosts") {
			h := SlotHost{ID: "h" + strconv.Itoa(i), Capacity: capa, Free: capa}
			for range rapid.IntRange(0, 3).Draw(t, "segs") {
				used := sz(int64(rapid.IntRange(0, int(capa.VCPUs)).Draw(t, "uv")), int64(rapid.IntRange(0, int(capa.MemoryMB/1024)).Draw(t, "um"))*1024, 0)
				seg := SlotSegment{Dur: int64(rapid.IntRange(1, 5).Draw(t, "dur")), Free: capa.Sub(used, 1)}
				h.Profile = append(h.Profile, seg)
				h.Free = sz(min(h.Free.VCPUs, seg.Free.VCPUs), min(h.Free.MemoryMB, seg.Free.MemoryMB), 0)
			}
			hosts = append(hosts, h)
		}
		size := sz(int64(rapid.IntRange(1, 4).Draw(t, "sv")), int64(rapid.IntRange(1, 4).Draw(t, "sm"))*1024, 0)
		var sizes []SlotSize
		for range rapid.IntRange(0, 3).Draw(t, "nsizes") {
			sizes = append(sizes, sz(int64(rapid.IntRange(1, 8).Draw(t, "pv")), int64(rapid.IntRange(1, 8).Draw(t, "pm"))*1024, 0))
		}
		dec, err := ChooseSlots(hosts, SlotRequest{Size: size, Amount: 1, Sizes: sizes})
		if err != nil {
			return
		}
		fresh := func(h SlotHost) bool {
			if h.Free != h.Capacity {
				return false
			}
			for _, s := range h.Profile {
				if s.Free != h.Capacity {
					return false
				}
			}
			return true
		}
		var chosen SlotHost
		for _, h := range hosts {
			if dec.Slots[h.ID] > 0 {
				chosen = h
			}
		}
		if !fresh(chosen) {
			return
		}
		for _, h := range hosts {
			if !fresh(h) && h.Free.Fits(size) >= 1 {
				t.Fatalf("fresh host %s chosen while %s (free %s) is in use and has room", chosen.ID, h.ID, h.Free)
			}
		}
	})
}

// sz is a size of VCPUs, memory and disk only.
func sz(vcpus, memoryMB, diskGB int64) SlotSize {
	return SlotSize{VCPUs: vcpus, MemoryMB: memoryMB, DiskGB: diskGB}
}
