package instance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins/instance"
)

// addInventory adds inventories of classes (with their totals) and
// traits to the compute node provider of host name.
func addInventory(t *testing.T, d *db.DB, name string, totals map[string]int64, maxUnit int64, traits ...string) {
	t.Helper()
	ctx := context.Background()
	var uuid string
	if err := d.Raw("SELECT compute_provider_uuid FROM computehosts WHERE hypervisor_hostname = ?", name).Scan(&uuid).Error; err != nil || uuid == "" {
		t.Fatalf("provider of %s: %q, %v", name, uuid, err)
	}
	ps := placement.NewService(d, placement.Config{})
	_, invs, err := ps.ProviderInventories(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	for class, total := range totals {
		if strings.HasPrefix(class, "CUSTOM_") {
			if _, err := ps.GetResourceClass(ctx, class); err != nil {
				if _, err := ps.CreateResourceClass(ctx, class); err != nil {
					t.Fatal(err)
				}
			}
		}
		inv := placement.DefaultInventory(class)
		inv.Total = total
		if maxUnit > 0 {
			inv.MaxUnit = maxUnit
		}
		invs = append(invs, inv)
	}
	p, _, err := ps.SetInventories(ctx, uuid, nil, invs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(traits) > 0 {
		for _, tr := range traits {
			if _, _, err := ps.EnsureTrait(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ps.SetProviderTraits(ctx, uuid, p.Generation, traits); err != nil {
			t.Fatal(err)
		}
	}
}

func flavorRes(flavor string, amount int, affinity any) map[string]any {
	return map[string]any{"resource_type": instance.FlavorResourceType, "flavor_id": flavor, "amount": amount, "affinity": affinity}
}

// TestFlavorExtraSpecs: a flavor:instance reservation counts PCPU and
// custom classes against the compute node providers' inventories, goes
// only to hosts with the traits it requires and without those it
// forbids, and refuses the specs it cannot count.
func TestFlavorExtraSpecs(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 3, nil)
		// compute-1: 4 PCPUs; compute-2: 2 GPUs and AVX; compute-3: plain.
		addInventory(t, d, "compute-1", map[string]int64{"PCPU": 4}, 0)
		addInventory(t, d, "compute-2", map[string]int64{"CUSTOM_GPU": 2}, 0, "CUSTOM_AVX")
		const start, end = "2030-01-02 00:00", "2030-01-03 00:00"
		ctx := context.Background()

		for _, tc := range []struct {
			flavor   string
			amount   int
			affinity any
			want     map[string]int // slots per host; nil: refused
			kind     errs.Kind
			msg      string
		}{
			{flavor: "pinned", amount: 3, kind: errs.NotEnoughResources, msg: "3 slots of 2 PCPU/1 GiB/10 GB disk needed, 2 free in the window on 3 matching hosts"},
			{flavor: "pinned", amount: 2, want: map[string]int{"compute-1": 2}},
			{flavor: "gpu", amount: 3, kind: errs.NotEnoughResources, msg: "1 CUSTOM_GPU needed, 2 free"},
			{flavor: "gpu", amount: 2, want: map[string]int{"compute-2": 2}},
			{flavor: "avx", amount: 2, affinity: "True", want: map[string]int{"compute-2": 2}},
			{flavor: "no-avx", amount: 3, affinity: "False", kind: errs.NotEnoughResources, msg: "2 of the 2 matching hosts"},
			{flavor: "no-avx", amount: 2, affinity: "False", want: map[string]int{"compute-1": 1, "compute-3": 1}},
			{flavor: "fpga", amount: 1, kind: errs.BadRequest, msg: "CUSTOM_FPGA (resources:CUSTOM_FPGA), but none of the 3 matching hosts has an inventory of CUSTOM_FPGA"},
			{flavor: "numa", amount: 1, kind: errs.BadRequest, msg: "extra spec hw:numa_nodes=2"},
			{flavor: "granular", amount: 1, kind: errs.BadRequest, msg: "extra spec resources1:CUSTOM_GPU=1"},
		} {
			v, err := e.create(t, "l", start, end, flavorRes(tc.flavor, tc.amount, tc.affinity))
			if tc.want == nil {
				if kindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s ×%d: err = %v, want %v containing %q", tc.flavor, tc.amount, err, tc.kind, tc.msg)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s ×%d: %v", tc.flavor, tc.amount, err)
				continue
			}
			if got := e.slots(t, v.Reservations[0]["id"].(string)); !equalSlots(got, tc.want) {
				t.Errorf("%s ×%d: slots %v, want %v", tc.flavor, tc.amount, got, tc.want)
			}
			// One at a time: the next case sees empty hosts.
			if err := e.svc.Delete(ctx, owner, v.ID); err != nil {
				t.Fatal(err)
			}
		}

		// Bookings of dedicated CPUs and of shared ones do not compete:
		// compute-1's 8 VCPUs and 4 PCPUs are both filled.
		pinned := e.mustCreate(t, "p", start, end, flavorRes("pinned", 2, nil))
		shared := e.mustCreate(t, "s", start, end, map[string]any{"resource_type": instance.ResourceType, "amount": 2, "vcpus": 4,
			"memory_mb": 1024, "disk_gb": 0, "affinity": nil, "resource_properties": `["=", "$hypervisor_hostname", "compute-1"]`})
		if got := e.slots(t, shared.Reservations[0]["id"].(string)); got["compute-1"] != 2 {
			t.Errorf("shared slots beside the pinned ones: %v", got)
		}
		if _, err := e.create(t, "p2", start, end, flavorRes("pinned", 1, nil)); kindOf(err) != errs.NotEnoughResources {
			t.Errorf("a third pinned slot: %v", err)
		}
		// An update of the pinned reservation keeps counting PCPU.
		id := pinned.Reservations[0]["id"].(string)
		if _, err := e.svc.Update(ctx, owner, pinned.ID, leasestest.Update(map[string]any{"id": id, "amount": 3})); kindOf(err) != errs.NotEnoughResources {
			t.Errorf("pinned amount 3: %v", err)
		}
	})
}

// TestFlavorMaxUnit: a host whose inventory's max_unit is below what
// one instance asks for takes none of its slots.
func TestFlavorMaxUnit(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		addInventory(t, d, "compute-1", map[string]int64{"CUSTOM_GPU": 8}, 2)
		addInventory(t, d, "compute-2", map[string]int64{"CUSTOM_GPU": 3}, 0)
		v := e.mustCreate(t, "l", "2030-01-02 00:00", "2030-01-03 00:00", flavorRes("bigcustom", 1, nil))
		if got := e.slots(t, v.Reservations[0]["id"].(string)); !equalSlots(got, map[string]int{"compute-2": 1}) {
			t.Errorf("slots %v, want compute-2 only (max_unit 2 on compute-1)", got)
		}
	})
}

func equalSlots(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPolicySizesChangeChoice: configured policy sizes
// ([virtual:instance] policy_sizes) replace the sizes in use in the
// lost-allocations metric. compute-1 has 6 VCPUs free, compute-2 5: with
// the sizes in use (2, 3 and 1 VCPUs) a 1-VCPU slot goes to compute-2,
// where it costs no 3-VCPU allocation; with 5 VCPUs configured it goes
// to compute-1, where it costs no 5-VCPU one.
func TestPolicySizesChangeChoice(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		for _, tc := range []struct {
			sizes []allocator.SlotSize
			want  string
		}{
			{nil, "compute-2"},
			{[]allocator.SlotSize{{VCPUs: 5, MemoryMB: 1024}}, "compute-1"},
		} {
			t.Run(tc.want, func(t *testing.T) {
				e := newEnvWith(t, dbtest.OpenDialect(t, d.Dialect), 2, nil, instance.Config{Sizes: tc.sizes})
				const start, end = "2030-01-02 00:00", "2030-01-03 00:00"
				on := func(host string, vcpus int) map[string]any {
					r := instanceRes(1, vcpus, 1024, 0, nil)
					r["resource_properties"] = `["=", "$hypervisor_hostname", "` + host + `"]`
					return r
				}
				e.mustCreate(t, "a", start, end, on("compute-1", 2))
				e.mustCreate(t, "b", start, end, on("compute-2", 3))
				v := e.mustCreate(t, "c", start, end, instanceRes(1, 1, 1024, 0, nil))
				if got := e.slots(t, v.Reservations[0]["id"].(string)); !equalSlots(got, map[string]int{tc.want: 1}) {
					t.Errorf("sizes %v: slots %v, want %s", tc.sizes, got, tc.want)
				}
			})
		}
	})
}
