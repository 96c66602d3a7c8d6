package allocator

import (
	"errors"
	"strings"
	"testing"
)

func TestSlotSizeClasses(t *testing.T) {
	gpu := func(n int64) [MaxCustomClasses]int64 { return [MaxCustomClasses]int64{0, n} }
	for _, tc := range []struct {
		name      string
		free, use SlotSize
		fits      int
		format    string
	}{
		{"pcpu limits", SlotSize{VCPUs: 64, PCPUs: 8, MemoryMB: 65536}, SlotSize{PCPUs: 4, MemoryMB: 1024}, 2, "4 PCPU/1 GiB"},
		{"no pcpu inventory", SlotSize{VCPUs: 64, MemoryMB: 65536}, SlotSize{PCPUs: 1, MemoryMB: 1024}, 0, "1 PCPU/1 GiB"},
		{"custom limits", SlotSize{VCPUs: 64, MemoryMB: 65536, Custom: gpu(3)}, SlotSize{VCPUs: 1, MemoryMB: 1024, Custom: gpu(1)}, 3, "1 VCPU/1 GiB/1 CUSTOM_GPU"},
		{"custom unused", SlotSize{VCPUs: 2, MemoryMB: 65536}, SlotSize{VCPUs: 1, MemoryMB: 1024}, 2, "1 VCPU/1 GiB"},
		{"both cpus", SlotSize{VCPUs: 4, PCPUs: 4, MemoryMB: 8192}, SlotSize{VCPUs: 1, PCPUs: 2, MemoryMB: 1024}, 2, "1 VCPU/2 PCPU/1 GiB"},
	} {
		if got := tc.free.Fits(tc.use); got != tc.fits {
			t.Errorf("%s: Fits = %d, want %d", tc.name, got, tc.fits)
		}
		if got := tc.use.Format([]string{"CUSTOM_FPGA", "CUSTOM_GPU"}); got != tc.format {
			t.Errorf("%s: Format = %q, want %q", tc.name, got, tc.format)
		}
		if left := tc.free.Sub(tc.use, int64(tc.fits)); left.negative() {
			t.Errorf("%s: %s minus %d of %s is negative", tc.name, tc.free, tc.fits, tc.use)
		}
	}
}

// A dedicated-CPU request only goes where there are PCPUs, and a refusal
// names the custom class.
func TestChooseSlotsClasses(t *testing.T) {
	hosts := []SlotHost{
		{ID: "shared", Free: SlotSize{VCPUs: 64, MemoryMB: 65536}, Capacity: SlotSize{VCPUs: 64, MemoryMB: 65536}},
		{ID: "pinned", Free: SlotSize{PCPUs: 8, MemoryMB: 65536}, Capacity: SlotSize{PCPUs: 8, MemoryMB: 65536}},
	}
	dec, err := ChooseSlots(hosts, SlotRequest{Size: SlotSize{PCPUs: 4, MemoryMB: 1024}, Amount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Slots["pinned"] != 2 || dec.Slots["shared"] != 0 {
		t.Errorf("slots %v, want 2 on pinned", dec.Slots)
	}
	_, err = ChooseSlots(hosts, SlotRequest{Size: SlotSize{VCPUs: 1, MemoryMB: 1024, Custom: [MaxCustomClasses]int64{1}}, Amount: 1,
		CustomNames: []string{"CUSTOM_GPU"}})
	var ne *NotEnoughSlotsError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "1 slot of 1 VCPU/1 GiB/1 CUSTOM_GPU needed, 0 free") {
		t.Errorf("err = %v, want a refusal naming CUSTOM_GPU", err)
	}
}
