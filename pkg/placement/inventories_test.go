package placement

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Service-level tests of the inventory, trait, aggregate, resource-class
// and provider-filter rules, on a real database (SQLite, or MariaDB when
// LEASEHOLD_TEST_MYSQL_DSN is set).

func newInvService(t testing.TB) *Service {
	t.Helper()
	return NewService(dbtest.Open(t), Config{})
}

func ivProvider(t testing.TB, s *Service, name string) *Provider {
	t.Helper()
	p, err := s.CreateProvider(context.Background(), name, "", nil)
	if err != nil {
		t.Fatalf("create provider %s: %v", name, err)
	}
	return p
}

func ivGen(t testing.TB, s *Service, uuid string) int64 {
	t.Helper()
	p, err := s.GetProvider(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	return p.Generation
}

// ivInventories returns the provider's inventories keyed by class, with
// timestamps cleared.
func ivInventories(t testing.TB, s *Service, uuid string) map[string]Inventory {
	t.Helper()
	_, invs, err := s.ProviderInventories(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Inventory{}
	for _, inv := range invs {
		inv.CreatedAt, inv.UpdatedAt = time.Time{}, time.Time{}
		out[inv.ResourceClass] = inv
	}
	return out
}

// ivWantErr checks err is a *Error with status, code ("" = any) and a
// message containing sub.
func ivWantErr(t testing.TB, err error, kind errs.Kind, code, sub string) {
	t.Helper()
	var pe *errs.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a %v *errs.Error", err, err, kind)
	}
	if pe.Kind != kind || (code != "" && pe.Code != code) || !strings.Contains(pe.Msg, sub) {
		t.Fatalf("error %v %s %q, want %v %s containing %q", pe.Kind, pe.Code, pe.Msg, kind, code, sub)
	}
}

// ivWantConflict checks err is an *InventoryConflict with code and msg.
func ivWantConflict(t testing.TB, err error, code, msg string) {
	t.Helper()
	var ic *InventoryConflict
	if !errors.As(err, &ic) {
		t.Fatalf("error %v (%T), want an *InventoryConflict", err, err)
	}
	if ic.Code != code || !strings.Contains(ic.Msg, msg) {
		t.Fatalf("conflict %s %q, want %s containing %q", ic.Code, ic.Msg, code, msg)
	}
}

// ivAllocate writes an allocation row straight into the table (the
// allocation API is tested elsewhere).
func ivAllocate(t testing.TB, s *Service, p *Provider, class string, used int64) {
	t.Helper()
	ids, err := resourceClassIDs(s.conn(context.Background()), []string{class})
	if err != nil {
		t.Fatal(err)
	}
	row := models.Allocation{ResourceProviderID: p.ID, ConsumerID: "c0000000-0000-4000-8000-000000000000",
		ResourceClassID: ids[class], Used: used, CreatedAt: now(), UpdatedAt: now()}
	// The usage summary too, as every allocation write keeps it (the
	// listing and candidates read usage from it); no generation bump, so
	// the tests' generation arithmetic stays as it was.
	err = s.db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return s.addUsage(tx, map[usageKey]int64{{p.ID, ids[class]}: used})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func inventoryOf(rc string, total int64) Inventory {
	inv := DefaultInventory(rc)
	inv.Total = total
	return inv
}

func i64(n int64) *int64 { return &n }

func TestInventoryGenerationRules(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "cn1")

	// POST: no generation compared, bumped.
	p1, out, err := s.AddInventory(ctx, p, inventoryOf("DISK_GB", 100))
	if err != nil {
		t.Fatal(err)
	}
	if p1.Generation != 1 || out.Total != 100 || out.MaxUnit != MaxInventoryInt || out.AllocationRatio != 1 {
		t.Fatalf("after add: generation %d, inventory %+v", p1.Generation, out)
	}
	// The same class again: a conflict, nothing changes.
	_, _, err = s.AddInventory(ctx, p1, inventoryOf("DISK_GB", 5))
	ivWantConflict(t, err, CodeConcurrentUpdate, "Update conflict")
	// An unknown class.
	_, _, err = s.AddInventory(ctx, p1, inventoryOf("CUSTOM_NOPE", 5))
	ivWantErr(t, err, errs.NotFound, "", "No such resource class CUSTOM_NOPE.")
	// A stale provider read: the bump fails and the insert is rolled back.
	_, _, err = s.AddInventory(ctx, p, inventoryOf("VCPU", 5))
	ivWantConflict(t, err, CodeConcurrentUpdate, "concurrently updated")
	if got := ivInventories(t, s, p.UUID); len(got) != 1 || ivGen(t, s, p.UUID) != 1 {
		t.Fatalf("failed writes changed something: %v, generation %d", got, ivGen(t, s, p.UUID))
	}

	// PUT one: generation compared.
	_, _, err = s.UpdateInventory(ctx, p.UUID, 0, inventoryOf("DISK_GB", 50), nil)
	ivWantErr(t, err, errs.Conflict, CodeConcurrentUpdate, "resource provider generation conflict")
	_, _, err = s.UpdateInventory(ctx, p.UUID, 1, inventoryOf("MEMORY_MB", 50), nil)
	if msg, ok := IsNoInventoryOfClass(err); !ok || msg != "No inventory of class MEMORY_MB found." {
		t.Fatalf("update of an absent class: %v", err)
	}
	p2, out, err := s.UpdateInventory(ctx, p.UUID, 1, inventoryOf("DISK_GB", 50), nil)
	if err != nil || p2.Generation != 2 || out.Total != 50 {
		t.Fatalf("update: %v, %+v, %+v", err, p2, out)
	}

	// PUT all: generation compared, add/update/delete, always bumped.
	_, _, err = s.SetInventories(ctx, p.UUID, i64(1), nil, nil)
	ivWantErr(t, err, errs.Conflict, CodeConcurrentUpdate, "resource provider generation conflict")
	_, _, err = s.SetInventories(ctx, p.UUID, i64(2), []Inventory{inventoryOf("VCPU", 8), inventoryOf("HOUSE", 1)}, nil)
	if !IsNoSuchResourceClass(err) {
		t.Fatalf("unknown class: %v", err)
	}
	p3, invs, err := s.SetInventories(ctx, p.UUID, i64(2), []Inventory{inventoryOf("VCPU", 8), inventoryOf("MEMORY_MB", 512)}, nil)
	if err != nil || p3.Generation != 3 || len(invs) != 2 {
		t.Fatalf("set: %v, %+v, %v", err, p3, invs)
	}
	if got := ivInventories(t, s, p.UUID); got["DISK_GB"].Total != 0 || got["VCPU"].Total != 8 {
		t.Fatalf("after set: %v", got)
	}
	// The handler's check runs after the generation check, before writes.
	boom := BadRequest("no")
	_, _, err = s.SetInventories(ctx, p.UUID, i64(3), nil, func(*Provider) error { return boom })
	if err != boom || ivGen(t, s, p.UUID) != 3 {
		t.Fatalf("check: %v, generation %d", err, ivGen(t, s, p.UUID))
	}

	// DELETE one.
	err = s.DeleteInventory(ctx, p.UUID, "DISK_GB")
	ivWantErr(t, err, errs.NotFound, "", "No inventory of class DISK_GB found for delete")
	err = s.DeleteInventory(ctx, p.UUID, "HOUSE")
	ivWantErr(t, err, errs.NotFound, "", "No such resource class HOUSE.")
	if err := s.DeleteInventory(ctx, p.UUID, "VCPU"); err != nil || ivGen(t, s, p.UUID) != 4 {
		t.Fatalf("delete: %v, generation %d", err, ivGen(t, s, p.UUID))
	}
	// DELETE all (no generation): bumped even when there is nothing left.
	for want := int64(5); want <= 6; want++ {
		if _, _, err := s.SetInventories(ctx, p.UUID, nil, nil, nil); err != nil || ivGen(t, s, p.UUID) != want {
			t.Fatalf("delete all: %v, generation %d, want %d", err, ivGen(t, s, p.UUID), want)
		}
	}
	// Unknown provider.
	_, _, err = s.SetInventories(ctx, "no-such", nil, nil, nil)
	ivWantErr(t, err, errs.NotFound, "", "No resource provider with uuid no-such found")
}

func TestInventoryInUse(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "cn1")
	if _, _, err := s.SetInventories(ctx, p.UUID, i64(0), []Inventory{inventoryOf("VCPU", 8), inventoryOf("DISK_GB", 100), inventoryOf("MEMORY_MB", 64)}, nil); err != nil {
		t.Fatal(err)
	}
	p, _ = s.GetProvider(ctx, p.UUID)
	ivAllocate(t, s, p, "DISK_GB", 60)
	ivAllocate(t, s, p, "VCPU", 4)
	before := ivInventories(t, s, p.UUID)

	_, _, err := s.SetInventories(ctx, p.UUID, i64(1), []Inventory{inventoryOf("MEMORY_MB", 64)}, nil)
	ivWantConflict(t, err, CodeInventoryInUse, "Inventory for 'VCPU, DISK_GB' on resource provider '"+p.UUID+"' in use.")
	_, _, err = s.SetInventories(ctx, p.UUID, nil, nil, nil)
	ivWantConflict(t, err, CodeInventoryInUse, "Inventory for 'VCPU, DISK_GB'")
	err = s.DeleteInventory(ctx, p.UUID, "DISK_GB")
	ivWantConflict(t, err, CodeInventoryInUse, "Inventory for 'DISK_GB'")
	if diff := cmp.Diff(before, ivInventories(t, s, p.UUID)); diff != "" || ivGen(t, s, p.UUID) != 1 {
		t.Fatalf("failed writes changed inventory (-before +after):\n%s generation %d", diff, ivGen(t, s, p.UUID))
	}
	// Removing an unused class and shrinking below usage are allowed.
	if _, _, err := s.SetInventories(ctx, p.UUID, i64(1), []Inventory{inventoryOf("VCPU", 2), inventoryOf("DISK_GB", 10)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := ivInventories(t, s, p.UUID); len(got) != 2 || got["DISK_GB"].Total != 10 {
		t.Fatalf("after shrink: %v", got)
	}
}

func TestCheckCapacity(t *testing.T) {
	for _, tc := range []struct {
		total, reserved int64
		ratio           float64
		v126            bool
		wantErr         string
	}{
		{total: 10, reserved: 9, ratio: 1},
		{total: 10, reserved: 10, ratio: 1, wantErr: "The reserved value is greater than or equal to total."},
		{total: 10, reserved: 10, ratio: 1, v126: true},
		{total: 10, reserved: 11, ratio: 1, v126: true, wantErr: "The reserved value is greater than total."},
		{total: 10, reserved: 9, ratio: 0.5, wantErr: "greater than or equal to total"}, // int(0.5) == 0
		{total: 10, reserved: 0, ratio: 0, v126: true},
	} {
		inv := inventoryOf("VCPU", tc.total)
		inv.Reserved, inv.AllocationRatio = tc.reserved, tc.ratio
		err := CheckCapacity("rp", tc.v126, inv)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckCapacity(%+v, 1.26=%v) = %v, want %q", inv, tc.v126, err, tc.wantErr)
		}
	}
}

func TestProviderTraitRules(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "cn1")
	if _, _, err := s.EnsureTrait(ctx, "CUSTOM_GOLD"); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.SetProviderTraits(ctx, p.UUID, 1, []string{"CUSTOM_GOLD"})
	ivWantErr(t, err, errs.Conflict, CodeConcurrentUpdate, "Resource provider's generation already changed.")
	_, _, err = s.SetProviderTraits(ctx, p.UUID, 0, []string{"CUSTOM_GOLD", "CUSTOM_NOPE", "CUSTOM_NADA"})
	ivWantErr(t, err, errs.BadRequest, "", "No such trait CUSTOM_NOPE, CUSTOM_NADA")
	p1, ts, err := s.SetProviderTraits(ctx, p.UUID, 0, []string{"CUSTOM_GOLD", "HW_CPU_X86_AVX"})
	if err != nil || p1.Generation != 1 || len(ts) != 2 {
		t.Fatalf("set traits: %v %+v %v", err, p1, ts)
	}
	// The same set again: no change, no bump.
	if p2, _, err := s.SetProviderTraits(ctx, p.UUID, 1, []string{"HW_CPU_X86_AVX", "CUSTOM_GOLD"}); err != nil || p2.Generation != 1 {
		t.Fatalf("same traits: %v %+v", err, p2)
	}
	// A trait in use cannot be deleted; a standard one never.
	ivWantErr(t, s.DeleteTrait(ctx, "CUSTOM_GOLD"), errs.Conflict, "", "The trait CUSTOM_GOLD is in use by a resource provider.")
	ivWantErr(t, s.DeleteTrait(ctx, "HW_CPU_X86_AVX"), errs.BadRequest, "", "Cannot delete standard trait HW_CPU_X86_AVX.")
	ivWantErr(t, s.DeleteTrait(ctx, "CUSTOM_NOPE"), errs.NotFound, "", "No such trait(s): CUSTOM_NOPE.")
	// DELETE traits bumps once, then is a no-op.
	if err := s.DeleteProviderTraits(ctx, p.UUID); err != nil || ivGen(t, s, p.UUID) != 2 {
		t.Fatalf("delete traits: %v, generation %d", err, ivGen(t, s, p.UUID))
	}
	if err := s.DeleteProviderTraits(ctx, p.UUID); err != nil || ivGen(t, s, p.UUID) != 2 {
		t.Fatalf("delete no traits: %v, generation %d", err, ivGen(t, s, p.UUID))
	}
	if err := s.DeleteTrait(ctx, "CUSTOM_GOLD"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.EnsureTrait(ctx, "CUSTOM_GOLD"); err != nil || !created {
		t.Fatalf("re-create: %v %v", created, err)
	}
	if _, created, err := s.EnsureTrait(ctx, "CUSTOM_GOLD"); err != nil || created {
		t.Fatalf("ensure existing: %v %v", created, err)
	}
}

func TestProviderAggregateRules(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "cn1")
	const a1, a2 = "11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"
	// Before 1.19: no generation, no bump.
	if p1, err := s.SetProviderAggregates(ctx, p.UUID, nil, []string{a1, a2}); err != nil || p1.Generation != 0 {
		t.Fatalf("set 1.1: %v %+v", err, p1)
	}
	// From 1.19: compared and bumped, even when unchanged.
	_, err := s.SetProviderAggregates(ctx, p.UUID, i64(3), []string{a1})
	ivWantErr(t, err, errs.Conflict, CodeConcurrentUpdate, "Resource provider's generation already changed.")
	for want := int64(1); want <= 2; want++ {
		if p1, err := s.SetProviderAggregates(ctx, p.UUID, i64(want-1), []string{a2}); err != nil || p1.Generation != want {
			t.Fatalf("set 1.19: %v %+v", err, p1)
		}
	}
	_, aggs, err := s.ProviderAggregates(ctx, p.UUID)
	if err != nil || !cmp.Equal(aggs, []string{a2}) {
		t.Fatalf("aggregates %v %v", aggs, err)
	}
}

func TestResourceClassRules(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	rcs, err := s.ListResourceClasses(ctx)
	if err != nil || len(rcs) != 21 || rcs[0].Name != "VCPU" || rcs[20].Name != "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC" {
		t.Fatalf("standard classes: %v %v", len(rcs), err)
	}
	rc, err := s.CreateResourceClass(ctx, "CUSTOM_A")
	if err != nil || rc.ID != models.CustomResourceClassMinID {
		t.Fatalf("create: %+v %v", rc, err)
	}
	_, err = s.CreateResourceClass(ctx, "CUSTOM_A")
	ivWantErr(t, err, errs.Conflict, "", "Conflicting resource class already exists: CUSTOM_A")
	if rc, created, err := s.EnsureResourceClass(ctx, "CUSTOM_B"); err != nil || !created || rc.ID != models.CustomResourceClassMinID+1 {
		t.Fatalf("ensure: %+v %v %v", rc, created, err)
	}
	if _, created, err := s.EnsureResourceClass(ctx, "CUSTOM_B"); err != nil || created {
		t.Fatalf("ensure existing: %v %v", created, err)
	}
	_, err = s.RenameResourceClass(ctx, "VCPU", "CUSTOM_V")
	ivWantErr(t, err, errs.BadRequest, "", "Cannot update standard resource class VCPU")
	_, err = s.RenameResourceClass(ctx, "CUSTOM_A", "CUSTOM_B")
	ivWantErr(t, err, errs.Conflict, "", "Resource class already exists: CUSTOM_B")
	if rc, err := s.RenameResourceClass(ctx, "CUSTOM_A", "CUSTOM_C"); err != nil || rc.Name != "CUSTOM_C" {
		t.Fatalf("rename: %+v %v", rc, err)
	}
	p := ivProvider(t, s, "cn1")
	if _, _, err := s.AddInventory(ctx, p, inventoryOf("CUSTOM_C", 1)); err != nil {
		t.Fatal(err)
	}
	ivWantErr(t, s.DeleteResourceClass(ctx, "CUSTOM_C"), errs.Conflict, "", "Class is in use in inventory.")
	ivWantErr(t, s.DeleteResourceClass(ctx, "VCPU"), errs.BadRequest, "", "Cannot delete standard resource class VCPU.")
	ivWantErr(t, s.DeleteResourceClass(ctx, "CUSTOM_Z"), errs.NotFound, "", "No such resource class CUSTOM_Z.")
	if err := s.DeleteResourceClass(ctx, "CUSTOM_B"); err != nil {
		t.Fatal(err)
	}
}

func TestListProvidersFilters(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	const agg1, agg2 = "11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"
	big := ivProvider(t, s, "big")
	small := ivProvider(t, s, "small")
	child, err := s.CreateProvider(ctx, "child", "", &big.UUID)
	if err != nil {
		t.Fatal(err)
	}
	set := func(p *Provider, invs ...Inventory) {
		t.Helper()
		if _, _, err := s.SetInventories(ctx, p.UUID, nil, invs, nil); err != nil {
			t.Fatal(err)
		}
	}
	vcpu := inventoryOf("VCPU", 16)
	vcpu.MaxUnit, vcpu.AllocationRatio = 8, 2 // capacity 32, at most 8 at once
	disk := inventoryOf("DISK_GB", 100)
	disk.StepSize, disk.Reserved = 10, 20 // capacity 80
	set(big, vcpu, disk)
	set(small, inventoryOf("VCPU", 2))
	big, _ = s.GetProvider(ctx, big.UUID)
	ivAllocate(t, s, big, "DISK_GB", 60) // 20 left
	if _, _, err := s.SetProviderTraits(ctx, big.UUID, big.Generation, []string{"HW_CPU_X86_AVX", "HW_CPU_X86_SSE"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetProviderTraits(ctx, small.UUID, ivGen(t, s, small.UUID), []string{"HW_CPU_X86_SSE"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetProviderAggregates(ctx, big.UUID, nil, []string{agg1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetProviderAggregates(ctx, small.UUID, nil, []string{agg1, agg2}); err != nil {
		t.Fatal(err)
	}
	names := func(f ProviderFilter) []string {
		t.Helper()
		ps, err := s.ListProviders(ctx, f)
		if err != nil {
			t.Fatalf("ListProviders(%+v): %v", f, err)
		}
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	res := func(kv ...any) Resources {
		var rs Resources
		for i := 0; i < len(kv); i += 2 {
			rs = append(rs, ResourceAmount{kv[i].(string), int64(kv[i+1].(int))})
		}
		return rs
	}
	for _, tc := range []struct {
		name string
		f    ProviderFilter
		want []string
	}{
		{"all", ProviderFilter{}, []string{"big", "small", "child"}},
		{"name", ProviderFilter{Name: "small"}, []string{"small"}},
		{"in tree", ProviderFilter{InTree: child.UUID}, []string{"big", "child"}},
		{"unknown tree", ProviderFilter{InTree: "nope"}, []string{}},
		{"vcpu 8", ProviderFilter{Resources: res("VCPU", 8)}, []string{"big"}},
		{"vcpu 9 > max_unit", ProviderFilter{Resources: res("VCPU", 9)}, []string{}},
		{"vcpu 2", ProviderFilter{Resources: res("VCPU", 2)}, []string{"big", "small"}},
		{"disk 20 left", ProviderFilter{Resources: res("DISK_GB", 20)}, []string{"big"}},
		{"disk 30 > free", ProviderFilter{Resources: res("DISK_GB", 30)}, []string{}},
		{"disk 15 step", ProviderFilter{Resources: res("DISK_GB", 15)}, []string{}},
		{"traits", ProviderFilter{RequiredTraits: [][]string{{"HW_CPU_X86_SSE"}}}, []string{"big", "small"}},
		{"traits and", ProviderFilter{RequiredTraits: [][]string{{"HW_CPU_X86_SSE"}, {"HW_CPU_X86_AVX"}}}, []string{"big"}},
		{"traits any", ProviderFilter{RequiredTraits: [][]string{{"HW_CPU_X86_AVX", "HW_CPU_X86_SSE"}}}, []string{"big", "small"}},
		{"forbidden trait", ProviderFilter{ForbiddenTraits: []string{"HW_CPU_X86_AVX"}}, []string{"small", "child"}},
		{"member of", ProviderFilter{MemberOf: [][]string{{agg1}}}, []string{"big", "small"}},
		{"member of and", ProviderFilter{MemberOf: [][]string{{agg1}, {agg2}}}, []string{"small"}},
		{"member of any", ProviderFilter{MemberOf: [][]string{{agg2, "33333333-0000-4000-8000-000000000003"}}}, []string{"small"}},
		{"forbidden agg", ProviderFilter{ForbiddenAggs: []string{agg2}}, []string{"big", "child"}},
		// Evaluation order: an empty earlier filter wins over a bad later one.
		{"no tree before bad class", ProviderFilter{InTree: "nope", Resources: res("HOUSE", 1)}, []string{}},
		{"no trait match before bad class", ProviderFilter{RequiredTraits: [][]string{{"HW_CPU_X86_SSE2"}}, Resources: res("HOUSE", 1)}, []string{}},
		{"no agg match before bad class", ProviderFilter{MemberOf: [][]string{{"33333333-0000-4000-8000-000000000003"}}, Resources: res("HOUSE", 1)}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(tc.f)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	_, err = s.ListProviders(ctx, ProviderFilter{Resources: res("HOUSE", 1)})
	ivWantErr(t, err, errs.BadRequest, "", "No such resource class HOUSE.")
	_, err = s.ListProviders(ctx, ProviderFilter{RequiredTraits: [][]string{{"CUSTOM_NOPE"}}})
	ivWantErr(t, err, errs.BadRequest, "", "No such trait(s): CUSTOM_NOPE.")
	_, err = s.ListProviders(ctx, ProviderFilter{ForbiddenTraits: []string{"CUSTOM_NOPE"}})
	ivWantErr(t, err, errs.BadRequest, "", "No such trait(s): CUSTOM_NOPE.")
}

// TestConcurrentInventoryWrites races writers holding the same
// generation: exactly one wins each round, the others get a 409
// placement.concurrent_update, and the generation moves by one per
// round. Bump-less races (POST of distinct classes) all succeed or
// conflict cleanly.
func TestConcurrentInventoryWrites(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "cn1")
	const writers = 8
	for round := int64(0); round < 3; round++ {
		errc := make(chan error, writers)
		start := make(chan struct{})
		for w := 0; w < writers; w++ {
			go func(w int) {
				<-start
				inv := inventoryOf("VCPU", int64(10+w))
				_, _, err := s.SetInventories(ctx, p.UUID, i64(round), []Inventory{inv}, nil)
				errc <- err
			}(w)
		}
		close(start)
		wins := 0
		for w := 0; w < writers; w++ {
			err := <-errc
			if err == nil {
				wins++
				continue
			}
			var pe *errs.Error
			var ic *InventoryConflict
			switch {
			case errors.As(err, &pe) && pe.Kind == errs.Conflict && pe.Code == CodeConcurrentUpdate:
			case errors.As(err, &ic) && ic.Code == CodeConcurrentUpdate:
			default:
				t.Fatalf("round %d: unexpected error %v (%T)", round, err, err)
			}
		}
		if wins != 1 || ivGen(t, s, p.UUID) != round+1 {
			t.Fatalf("round %d: %d winners, generation %d", round, wins, ivGen(t, s, p.UUID))
		}
	}
	// POSTs of distinct classes from one stale read: one wins, the rest
	// conflict on the generation, nothing half-written.
	stale, _ := s.GetProvider(ctx, p.UUID)
	classes := []string{"MEMORY_MB", "DISK_GB", "PCI_DEVICE", "SRIOV_NET_VF"}
	errc := make(chan error, len(classes))
	for _, c := range classes {
		go func(c string) {
			_, _, err := s.AddInventory(ctx, stale, inventoryOf(c, 1))
			errc <- err
		}(c)
	}
	wins := 0
	for range classes {
		if err := <-errc; err == nil {
			wins++
		}
	}
	if got := ivInventories(t, s, p.UUID); wins != 1 || len(got) != 2 || ivGen(t, s, p.UUID) != 4 {
		t.Fatalf("stale POSTs: %d winners, inventories %v, generation %d", wins, got, ivGen(t, s, p.UUID))
	}
}
