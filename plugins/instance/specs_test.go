package instance

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/errs"
)

func TestFlavorDemand(t *testing.T) {
	base := Flavor{ID: "f", VCPUs: 4, RAM: 8192, Disk: 20, Ephemeral: 10}
	with := func(specs map[string]string) Flavor {
		f := base
		f.ExtraSpecs = specs
		return f
	}
	std := map[string]int64{"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 30}
	for _, tc := range []struct {
		name      string
		fl        Flavor
		amounts   map[string]int64
		required  []string
		forbidden []string
		size      allocator.SlotSize
		refused   string // a part of the 400's message
	}{
		{name: "no specs", fl: base, amounts: std, size: allocator.SlotSize{VCPUs: 4, MemoryMB: 8192, DiskGB: 30}},
		{name: "shared policy and unrelated specs", fl: with(map[string]string{"hw:cpu_policy": "shared", "quota:cpu_shares": "10", "hw:watchdog_action": "reset"}),
			amounts: std, size: allocator.SlotSize{VCPUs: 4, MemoryMB: 8192, DiskGB: 30}},
		{name: "dedicated", fl: with(map[string]string{"hw:cpu_policy": "dedicated"}),
			amounts: map[string]int64{"PCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 30}, size: allocator.SlotSize{PCPUs: 4, MemoryMB: 8192, DiskGB: 30}},
		{name: "dedicated isolate", fl: with(map[string]string{"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}),
			amounts: map[string]int64{"PCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 30}, forbidden: []string{"HW_CPU_HYPERTHREADING"},
			size: allocator.SlotSize{PCPUs: 4, MemoryMB: 8192, DiskGB: 30}},
		{name: "dedicated require", fl: with(map[string]string{"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"}),
			amounts: map[string]int64{"PCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 30}, required: []string{"HW_CPU_HYPERTHREADING"},
			size: allocator.SlotSize{PCPUs: 4, MemoryMB: 8192, DiskGB: 30}},
		{name: "override and custom", fl: with(map[string]string{"resources:VCPU": "0", "resources:DISK_GB": "0", "resources:CUSTOM_GPU_A100": "2", "resources:CUSTOM_BAREMETAL_X": " 1"}),
			amounts: map[string]int64{"MEMORY_MB": 8192, "CUSTOM_GPU_A100": 2, "CUSTOM_BAREMETAL_X": 1},
			size:    allocator.SlotSize{MemoryMB: 8192, Custom: [allocator.MaxCustomClasses]int64{1, 2}}},
		{name: "explicit PCPU", fl: with(map[string]string{"resources:PCPU": "2", "resources:VCPU": "2"}),
			amounts: map[string]int64{"VCPU": 2, "PCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 30}, size: allocator.SlotSize{VCPUs: 2, PCPUs: 2, MemoryMB: 8192, DiskGB: 30}},
		{name: "traits", fl: with(map[string]string{"trait:HW_CPU_X86_AVX512F": "required", "trait:CUSTOM_SLOW": "forbidden", "trait:CUSTOM_ODD": "preferred"}),
			amounts: std, required: []string{"HW_CPU_X86_AVX512F"}, forbidden: []string{"CUSTOM_SLOW"}, size: allocator.SlotSize{VCPUs: 4, MemoryMB: 8192, DiskGB: 30}},

		{name: "mixed policy", fl: with(map[string]string{"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"}), refused: "hw:cpu_dedicated_mask=^0"},
		{name: "mixed policy alone", fl: with(map[string]string{"hw:cpu_policy": "mixed"}), refused: "hw:cpu_policy=mixed"},
		{name: "numa", fl: with(map[string]string{"hw:numa_nodes": "2"}), refused: "hw:numa_nodes=2"},
		{name: "page size", fl: with(map[string]string{"hw:mem_page_size": "large"}), refused: "hw:mem_page_size=large"},
		{name: "emulator threads", fl: with(map[string]string{"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"}), refused: "hw:emulator_threads_policy"},
		{name: "granular resources", fl: with(map[string]string{"resources1:CUSTOM_GPU": "1"}), refused: "resources1:CUSTOM_GPU=1"},
		{name: "granular trait", fl: with(map[string]string{"trait_net:CUSTOM_PHYSNET": "required"}), refused: "granular request groups"},
		{name: "nested class", fl: with(map[string]string{"resources:VGPU": "1"}), refused: "resources:VGPU=1"},
		{name: "pci alias", fl: with(map[string]string{"pci_passthrough:alias": "a1:2"}), refused: "pci_passthrough:alias"},
		{name: "bad amount", fl: with(map[string]string{"resources:CUSTOM_GPU": "two"}), refused: "not a non-negative integer"},
		{name: "negative amount", fl: with(map[string]string{"resources:CUSTOM_GPU": "-1"}), refused: "not a non-negative integer"},
		{name: "bad class", fl: with(map[string]string{"resources:custom_gpu": "1"}), refused: "class name is malformed"},
		{name: "reservation class", fl: with(map[string]string{"resources:CUSTOM_RESERVATION_ABC": "1"}), refused: "another reservation's class"},
		{name: "dedicated with explicit cpus", fl: with(map[string]string{"hw:cpu_policy": "dedicated", "resources:VCPU": "1"}), refused: "cannot be combined"},
		{name: "bad thread policy", fl: with(map[string]string{"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "sometimes"}), refused: "hw:cpu_thread_policy=sometimes"},
		{name: "required and forbidden", fl: with(map[string]string{"trait:CUSTOM_A": "required", "hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate", "trait:HW_CPU_HYPERTHREADING": "required"}), refused: "both required and forbidden"},
		{name: "nothing asked", fl: with(map[string]string{"resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}), refused: "asks for no resources"},
		{name: "too many classes", fl: with(map[string]string{"resources:CUSTOM_A": "1", "resources:CUSTOM_B": "1", "resources:CUSTOM_C": "1", "resources:CUSTOM_D": "1", "resources:CUSTOM_E": "1"}), refused: "5 custom resource classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := flavorDemand(tc.fl)
			if tc.refused != "" {
				if e := errs.As(err); e == nil || e.Kind != errs.BadRequest || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v, want a 400 containing %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.amounts, d.amounts); diff != "" {
				t.Errorf("amounts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.required, d.required, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("required (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.forbidden, d.forbidden, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("forbidden (-want +got):\n%s", diff)
			}
			if got := dimsOf(&d).size(&d); got != tc.size {
				t.Errorf("size = %+v, want %+v", got, tc.size)
			}
		})
	}
}

func TestHostOK(t *testing.T) {
	d := demand{required: []string{"A", "B"}, forbidden: []string{"C"}}
	for _, tc := range []struct {
		traits map[string]bool
		want   bool
	}{
		{map[string]bool{"A": true, "B": true}, true},
		{map[string]bool{"A": true, "B": true, "D": true}, true},
		{map[string]bool{"A": true}, false},
		{map[string]bool{"A": true, "B": true, "C": true}, false},
		{nil, false},
	} {
		if got := d.hostOK(tc.traits); got != tc.want {
			t.Errorf("hostOK(%v) = %v, want %v", tc.traits, got, tc.want)
		}
	}
	if !(&demand{}).hostOK(nil) {
		t.Error("a demand without traits refused a host without traits")
	}
}

// stubExternal stands for a configured external Placement (checkExternal
// calls none of its methods).
type stubExternal struct{ ExternalPlacement }

func TestCheckExternal(t *testing.T) {
	plain, err := flavorDemand(Flavor{ID: "f", VCPUs: 2, RAM: 1024, ExtraSpecs: map[string]string{"hw:cpu_policy": "shared"}})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := flavorDemand(Flavor{ID: "f", VCPUs: 2, RAM: 1024, ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated"}})
	if err != nil {
		t.Fatal(err)
	}
	traits, err := flavorDemand(Flavor{ID: "f", VCPUs: 2, RAM: 1024, ExtraSpecs: map[string]string{"trait:CUSTOM_X": "required"}})
	if err != nil {
		t.Fatal(err)
	}
	ext := New(nil, Config{External: stubExternal{}})
	builtin := New(nil, Config{})
	for _, tc := range []struct {
		name    string
		p       *Plugin
		flavor  *demand
		refused bool
	}{
		{"virtual", ext, nil, false},
		{"plain flavor", ext, &plain, false},
		{"pinned flavor", ext, &pinned, true},
		{"traits", ext, &traits, true},
		{"pinned, built-in", builtin, &pinned, false},
	} {
		err := tc.p.checkExternal(&params{flavor: tc.flavor})
		if got := err != nil; got != tc.refused {
			t.Errorf("%s: err = %v, want refused %v", tc.name, err, tc.refused)
		} else if err != nil && errs.As(err).Kind != errs.BadRequest {
			t.Errorf("%s: err = %v, want a 400", tc.name, err)
		}
	}
}
