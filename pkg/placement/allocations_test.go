package placement

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

const (
	incompleteID = "00000000-0000-0000-0000-000000000000"
	consumerA    = "aaaaaaaa-0000-4000-8000-000000000001"
	consumerB    = "bbbbbbbb-0000-4000-8000-000000000002"
	consumerC    = "cccccccc-0000-4000-8000-000000000003"
)

func newAllocService(t testing.TB) *Service {
	t.Helper()
	return NewService(dbtest.Open(t), Config{IncompleteConsumerProjectID: incompleteID, IncompleteConsumerUserID: incompleteID})
}

// inv is an inventory to seed straight into the table (the inventory API
// is tested elsewhere).
type inv struct {
	class                               string
	total, reserved, minU, maxU, stepSz int64
	ratio                               float64
}

func mkProvider(t testing.TB, s *Service, name string, invs ...inv) *Provider {
	t.Helper()
	ctx := context.Background()
	p, err := s.CreateProvider(ctx, name, "", nil)
	if err != nil {
		t.Fatalf("create provider %s: %v", name, err)
	}
	for _, in := range invs {
		var classID int64
		if err := s.db.Raw("SELECT id FROM resource_classes WHERE name = ?", in.class).Scan(&classID).Error; err != nil || classID == 0 {
			t.Fatalf("class %s: id %d, %v", in.class, classID, err)
		}
		row := models.Inventory{ResourceProviderID: p.ID, ResourceClassID: classID, Total: in.total, Reserved: in.reserved,
			MinUnit: max(in.minU, 1), MaxUnit: in.maxU, StepSize: max(in.stepSz, 1), AllocationRatio: in.ratio, CreatedAt: now(), UpdatedAt: now()}
		if row.MaxUnit == 0 {
			row.MaxUnit = in.total
		}
		if row.AllocationRatio == 0 {
			row.AllocationRatio = 1
		}
		if err := s.db.Create(&row).Error; err != nil {
			t.Fatalf("inventory %s on %s: %v", in.class, name, err)
		}
	}
	return p
}

func gen(n int64) *int64 { return &n }

func alloc(rp string, kv ...any) map[string]map[string]int64 {
	res := map[string]int64{}
	for i := 0; i < len(kv); i += 2 {
		res[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return map[string]map[string]int64{rp: res}
}

func providerGen(t testing.TB, s *Service, uuid string) int64 {
	t.Helper()
	p, err := s.GetProvider(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	return p.Generation
}

func usages(t testing.TB, s *Service, uuid string) map[string]int64 {
	t.Helper()
	u, err := s.GetProviderUsages(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	return u.Usages
}

// wantErr checks err is a *Error with status and a message containing sub.
func wantErr(t testing.TB, err error, kind errs.Kind, code, sub string) {
	t.Helper()
	var pe *errs.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a %v *errs.Error", err, err, kind)
	}
	if pe.Kind != kind || (code != "" && pe.Code != code) || !strings.Contains(pe.Msg, sub) {
		t.Fatalf("error %v %s %q, want %v %s containing %q", pe.Kind, pe.Code, pe.Msg, kind, code, sub)
	}
}

func TestWriteAllocationsErrors(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	defer checkUsageTable(t, s)
	rp := mkProvider(t, s, "cn1",
		inv{class: "VCPU", total: 8, reserved: 2, maxU: 4, ratio: 2},      // capacity 12
		inv{class: "DISK_GB", total: 100, minU: 10, maxU: 50, stepSz: 10}, // steps of 10
	)
	bare := mkProvider(t, s, "bare")
	// A consumer that exists, at generation 1.
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, ProjectID: "p", UserID: "u", CheckGeneration: true,
		Allocations: alloc(rp.UUID, "VCPU", 4)}}, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		w     ConsumerWrite
		multi bool
		kind  errs.Kind
		code  string
		msg   string
	}{
		{"unknown provider", ConsumerWrite{UUID: consumerB, Allocations: alloc("9f3c6f9e-1111-4222-8333-944455556666", "VCPU", 1)},
			false, errs.BadRequest, "", "Allocation for resource provider '9f3c6f9e-1111-4222-8333-944455556666' that does not exist."},
		{"unknown class put", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "COWS", 1)},
			false, errs.BadRequest, "", "Unable to allocate inventory for consumer " + consumerB + ": No such resource class COWS."},
		{"unknown class post", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "CUSTOM_PONY", 1, "VCPU", 1)},
			true, errs.BadRequest, "", "Unable to allocate inventory No such resource class CUSTOM_PONY."},
		{"class not in inventory", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "MEMORY_MB", 1, "VCPU", 1)},
			false, errs.Conflict, CodeUndefined, "Inventory for 'MEMORY_MB' on resource provider '" + rp.UUID + "' invalid."},
		{"provider without inventory", ConsumerWrite{UUID: consumerB, Allocations: alloc(bare.UUID, "VCPU", 1)},
			false, errs.Conflict, CodeUndefined, "Inventory for 'VCPU' on resource provider '" + bare.UUID + "' invalid."},
		{"above max_unit", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "VCPU", 5)},
			false, errs.Conflict, CodeUndefined, "The requested amount would violate inventory constraints."},
		{"below min_unit", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "DISK_GB", 5)},
			false, errs.Conflict, CodeUndefined, "would violate inventory constraints"},
		{"off step", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "DISK_GB", 15)},
			false, errs.Conflict, CodeUndefined, "would violate inventory constraints"},
		{"new consumer with a generation", ConsumerWrite{UUID: consumerC, CheckGeneration: true, Generation: gen(5), Allocations: alloc(rp.UUID, "VCPU", 1)},
			false, errs.Conflict, CodeConcurrentUpdate, "consumer generation conflict - expected null but got 5"},
		{"existing consumer with null", ConsumerWrite{UUID: consumerA, CheckGeneration: true, Allocations: alloc(rp.UUID, "VCPU", 1)},
			false, errs.Conflict, CodeConcurrentUpdate, "consumer generation conflict - expected 1 but got None"},
		{"existing consumer stale", ConsumerWrite{UUID: consumerA, CheckGeneration: true, Generation: gen(7), Allocations: alloc(rp.UUID, "VCPU", 1)},
			false, errs.Conflict, CodeConcurrentUpdate, "consumer generation conflict - expected 1 but got 7"},
		{"zero amount", ConsumerWrite{UUID: consumerB, Allocations: alloc(rp.UUID, "VCPU", 0)},
			false, errs.BadRequest, "", "must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := usages(t, s, rp.UUID)
			g := providerGen(t, s, rp.UUID)
			err := s.WriteAllocations(ctx, []ConsumerWrite{tc.w}, tc.multi)
			wantErr(t, err, tc.kind, tc.code, tc.msg)
			if diff := cmp.Diff(before, usages(t, s, rp.UUID)); diff != "" {
				t.Errorf("failed write changed usage (-before +after):\n%s", diff)
			}
			if got := providerGen(t, s, rp.UUID); got != g {
				t.Errorf("failed write bumped generation %d → %d", g, got)
			}
		})
	}
	// Capacity: 4 used, capacity (8-2)*2 = 12; 4+4 fits, then 4 more (12)
	// fits exactly, then 1 more does not.
	for i, c := range []string{consumerB, consumerC} {
		if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: c, Allocations: alloc(rp.UUID, "VCPU", 4)}}, false); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: "dddddddd-0000-4000-8000-000000000004", Allocations: alloc(rp.UUID, "VCPU", 1)}}, false)
	wantErr(t, err, errs.NotEnoughResources, CodeUndefined, "Unable to create allocation for 'VCPU' on resource provider '"+rp.UUID+"'. The requested amount would exceed the capacity.")
	if got := usages(t, s, rp.UUID)["VCPU"]; got != 12 {
		t.Errorf("VCPU usage %d, want 12", got)
	}
}

func TestWriteAllocationsConsumerLifecycle(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	defer checkUsageTable(t, s)
	rp1 := mkProvider(t, s, "rp1", inv{class: "VCPU", total: 16}, inv{class: "MEMORY_MB", total: 4096})
	rp2 := mkProvider(t, s, "rp2", inv{class: "DISK_GB", total: 1000})

	get := func() *ConsumerAllocations {
		t.Helper()
		ca, err := s.GetConsumerAllocations(ctx, consumerA)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	// Below 1.8: incomplete project/user, generation 1, no type.
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, Allocations: alloc(rp1.UUID, "VCPU", 2)}}, false); err != nil {
		t.Fatal(err)
	}
	want := &Consumer{UUID: consumerA, ProjectID: incompleteID, UserID: incompleteID, Generation: 1}
	if diff := cmp.Diff(want, get().Consumer); diff != "" {
		t.Errorf("consumer (-want +got):\n%s", diff)
	}
	// Rewrite with a project, user and type on two providers: everything
	// updated, generation 2, both providers bumped.
	g1, g2 := providerGen(t, s, rp1.UUID), providerGen(t, s, rp2.UUID)
	w := ConsumerWrite{UUID: consumerA, ProjectID: "proj", UserID: "user", CheckGeneration: true, Generation: gen(1), Type: "INSTANCE",
		Allocations: map[string]map[string]int64{rp1.UUID: {"VCPU": 1, "MEMORY_MB": 512}, rp2.UUID: {"DISK_GB": 20}}}
	if err := s.WriteAllocations(ctx, []ConsumerWrite{w}, false); err != nil {
		t.Fatal(err)
	}
	ca := get()
	if diff := cmp.Diff(&Consumer{UUID: consumerA, ProjectID: "proj", UserID: "user", Generation: 2, Type: "INSTANCE"}, ca.Consumer); diff != "" {
		t.Errorf("consumer (-want +got):\n%s", diff)
	}
	wantProv := map[string]*ProviderResources{
		rp1.UUID: {ProviderUUID: rp1.UUID, ProviderGeneration: g1 + 1, Resources: map[string]int64{"VCPU": 1, "MEMORY_MB": 512}},
		rp2.UUID: {ProviderUUID: rp2.UUID, ProviderGeneration: g2 + 1, Resources: map[string]int64{"DISK_GB": 20}},
	}
	if diff := cmp.Diff(wantProv, ca.Providers); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	if ca.LastModified.IsZero() {
		t.Error("no last-modified")
	}
	// A write below 1.38 (no type) keeps the type.
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, ProjectID: "proj", UserID: "user", Allocations: alloc(rp1.UUID, "VCPU", 3)}}, false); err != nil {
		t.Fatal(err)
	}
	if got := get().Consumer; got.Type != "INSTANCE" || got.Generation != 3 {
		t.Errorf("consumer after untyped write: %+v", got)
	}
	// Moving off rp2 does not bump rp2 (as upstream); rp1 is bumped.
	if g := providerGen(t, s, rp2.UUID); g != g2+1 {
		t.Errorf("rp2 generation %d, want %d", g, g2+1)
	}
	// Provider allocations show the consumer generation.
	pa, err := s.GetProviderAllocations(ctx, rp1.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]*ConsumerResources{consumerA: {Generation: 3, Resources: map[string]int64{"VCPU": 3}}}, pa.Consumers); diff != "" {
		t.Errorf("provider allocations (-want +got):\n%s", diff)
	}
	// Clearing with an empty set (1.28 PUT {}): consumer gone, the
	// provider it held is bumped, and null works again afterwards.
	g1 = providerGen(t, s, rp1.UUID)
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, ProjectID: "proj", UserID: "user", CheckGeneration: true, Generation: gen(3)}}, false); err != nil {
		t.Fatal(err)
	}
	if ca := get(); ca.Consumer != nil || len(ca.Providers) != 0 {
		t.Errorf("cleared consumer still there: %+v", ca)
	}
	if g := providerGen(t, s, rp1.UUID); g != g1+1 {
		t.Errorf("clearing did not bump rp1: %d → %d", g1, g)
	}
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, ProjectID: "p", UserID: "u", CheckGeneration: true, Allocations: alloc(rp1.UUID, "VCPU", 1)}}, false); err != nil {
		t.Fatalf("recreate with null generation: %v", err)
	}
	// DELETE: removes allocations and consumer, no generation bump; a
	// second DELETE is 404.
	g1 = providerGen(t, s, rp1.UUID)
	if err := s.DeleteAllocations(ctx, consumerA); err != nil {
		t.Fatal(err)
	}
	if g := providerGen(t, s, rp1.UUID); g != g1 {
		t.Errorf("delete bumped rp1: %d → %d", g1, g)
	}
	wantErr(t, s.DeleteAllocations(ctx, consumerA), errs.NotFound, "", "No allocations for consumer '"+consumerA+"'")
	var n int64
	s.db.Model(&models.Consumer{}).Count(&n)
	if n != 0 {
		t.Errorf("%d consumers left", n)
	}
}

// TestWriteAllocationsMultiAtomic is bug 1778743: three consumers each
// asking 1 of a 2-VCPU provider fail together, leaving nothing behind.
func TestWriteAllocationsMultiAtomic(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	defer checkUsageTable(t, s)
	rp := mkProvider(t, s, "small", inv{class: "VCPU", total: 2})
	var ws []ConsumerWrite
	for _, c := range []string{consumerA, consumerB, consumerC} {
		ws = append(ws, ConsumerWrite{UUID: c, ProjectID: "p", UserID: "u", CheckGeneration: true, Allocations: alloc(rp.UUID, "VCPU", 1)})
	}
	wantErr(t, s.WriteAllocations(ctx, ws, true), errs.NotEnoughResources, CodeUndefined, "would exceed the capacity")
	if got := usages(t, s, rp.UUID); got["VCPU"] != 0 {
		t.Errorf("usage %v after failed multi write", got)
	}
	var n int64
	s.db.Model(&models.Consumer{}).Count(&n)
	if n != 0 {
		t.Errorf("%d consumers created by a failed write", n)
	}
	// Two fit; a POST that clears one and grows the other in one go works.
	if err := s.WriteAllocations(ctx, ws[:2], true); err != nil {
		t.Fatal(err)
	}
	move := []ConsumerWrite{
		{UUID: consumerA, ProjectID: "p", UserID: "u"},
		{UUID: consumerB, ProjectID: "p", UserID: "u", Allocations: alloc(rp.UUID, "VCPU", 2)},
	}
	if err := s.WriteAllocations(ctx, move, true); err != nil {
		t.Fatal(err)
	}
	if got := usages(t, s, rp.UUID); got["VCPU"] != 2 {
		t.Errorf("usage %v, want VCPU 2", got)
	}
}

// TestWriteAllocationsShrunkInventory: after inventory shrinks below the
// usage, a write that reduces the overage is allowed, one that grows it
// is not.
func TestWriteAllocationsShrunkInventory(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	defer checkUsageTable(t, s)
	rp := mkProvider(t, s, "shrink", inv{class: "VCPU", total: 10})
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, Allocations: alloc(rp.UUID, "VCPU", 8)}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Exec("UPDATE inventories SET total = 4").Error; err != nil {
		t.Fatal(err)
	}
	if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, Allocations: alloc(rp.UUID, "VCPU", 6)}}, false); err != nil {
		t.Fatalf("reducing an overage: %v", err)
	}
	wantErr(t, s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, Allocations: alloc(rp.UUID, "VCPU", 7)}}, false),
		errs.NotEnoughResources, "", "would exceed the capacity")
	wantErr(t, s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerB, Allocations: alloc(rp.UUID, "VCPU", 1)}}, false),
		errs.NotEnoughResources, "", "would exceed the capacity")
}

func TestNormalizeConsumerUUID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"75d0f5f7-75d9-458c-b204-f90ac91604ec", "75d0f5f7-75d9-458c-b204-f90ac91604ec", true},
		{"75d0f5f775d9458cb204f90ac91604ec", "75d0f5f7-75d9-458c-b204-f90ac91604ec", true},
		{"{75D0F5F7-75D9-458C-B204-F90AC91604EC}", "75d0f5f7-75d9-458c-b204-f90ac91604ec", true},
		{"urn:uuid:75d0f5f7-75d9-458c-b204-f90ac91604ec", "75d0f5f7-75d9-458c-b204-f90ac91604ec", true},
		{"not-a-uuid", "", false},
		{"75d0f5f775d9458cb204f90ac91604e", "", false},
		{"75d0f5f775d9458cb204f90ac91604eg", "", false},
		{"", "", false},
	} {
		got, ok := NormalizeConsumerUUID(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeConsumerUUID(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzNormalizeConsumerUUID(f *testing.F) {
	for _, s := range []string{"75d0f5f7-75d9-458c-b204-f90ac91604ec", "{75d0f5f775d9458cb204f90ac91604ec}", "urn:uuid:x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := NormalizeConsumerUUID(in)
		if !ok {
			return
		}
		if len(got) != 36 || strings.ToLower(got) != got {
			t.Fatalf("%q → %q is not canonical", in, got)
		}
		again, ok := NormalizeConsumerUUID(got)
		if !ok || again != got {
			t.Fatalf("not idempotent: %q → %q → %q", in, got, again)
		}
	})
}

func TestUsages(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	defer checkUsageTable(t, s)
	rp := mkProvider(t, s, "u1", inv{class: "VCPU", total: 100}, inv{class: "DISK_GB", total: 1000}, inv{class: "MEMORY_MB", total: 100})
	writes := []ConsumerWrite{
		{UUID: consumerA, ProjectID: "p1", UserID: "u1", Allocations: alloc(rp.UUID, "VCPU", 2, "DISK_GB", 10)},
		{UUID: consumerB, ProjectID: "p1", UserID: "u2", Type: "INSTANCE", Allocations: alloc(rp.UUID, "VCPU", 3)},
		{UUID: consumerC, ProjectID: "p2", UserID: "u1", Type: "MIGRATION", Allocations: alloc(rp.UUID, "VCPU", 5)},
	}
	if err := s.WriteAllocations(ctx, writes, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"VCPU": 10, "DISK_GB": 10, "MEMORY_MB": 0}, usages(t, s, rp.UUID)); diff != "" {
		t.Errorf("provider usages (-want +got):\n%s", diff)
	}
	if _, err := s.GetProviderUsages(ctx, "c0c0c0c0-0000-4000-8000-000000000000"); err == nil {
		t.Error("usages of a missing provider: no error")
	}
	for _, tc := range []struct {
		f    UsageFilter
		want map[string]int64
	}{
		{UsageFilter{ProjectID: "p1"}, map[string]int64{"VCPU": 5, "DISK_GB": 10}},
		{UsageFilter{ProjectID: "p1", UserID: "u2"}, map[string]int64{"VCPU": 3}},
		{UsageFilter{ProjectID: "p2"}, map[string]int64{"VCPU": 5}},
		{UsageFilter{ProjectID: "nope"}, map[string]int64{}},
	} {
		got, err := s.TotalUsages(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("TotalUsages(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
	for _, tc := range []struct {
		typ  string
		want map[string]*TypeUsage
	}{
		{"", map[string]*TypeUsage{
			"unknown":  {Resources: map[string]int64{"VCPU": 2, "DISK_GB": 10}, ConsumerCount: 1},
			"INSTANCE": {Resources: map[string]int64{"VCPU": 3}, ConsumerCount: 1},
		}},
		{"all", map[string]*TypeUsage{"all": {Resources: map[string]int64{"VCPU": 5, "DISK_GB": 10}, ConsumerCount: 2}}},
		{"unknown", map[string]*TypeUsage{"unknown": {Resources: map[string]int64{"VCPU": 2, "DISK_GB": 10}, ConsumerCount: 1}}},
		{"INSTANCE", map[string]*TypeUsage{"INSTANCE": {Resources: map[string]int64{"VCPU": 3}, ConsumerCount: 1}}},
		{"MIGRATION", map[string]*TypeUsage{}},
	} {
		got, err := s.UsagesByConsumerType(ctx, UsageFilter{ProjectID: "p1"}, tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("UsagesByConsumerType(p1, %q) (-want +got):\n%s", tc.typ, diff)
		}
	}
}
