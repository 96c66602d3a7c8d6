package placement

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

type reshapeWorld struct {
	svc           *Service
	parent, child *Provider
	consumer      string
}

// newReshapeWorld: parent with VCPU 8 and DISK_GB 100, child without
// inventory, consumer holding VCPU 2 + DISK_GB 10 on the parent.
func newReshapeWorld(t *testing.T) *reshapeWorld {
	t.Helper()
	ctx := context.Background()
	svc := NewService(dbtest.Open(t), Config{IncompleteConsumerProjectID: "p", IncompleteConsumerUserID: "u"})
	parent, err := svc.CreateProvider(ctx, "parent", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	child, err := svc.CreateProvider(ctx, "child", "", &parent.UUID)
	if err != nil {
		t.Fatal(err)
	}
	vcpu, disk := DefaultInventory("VCPU"), DefaultInventory("DISK_GB")
	vcpu.Total, disk.Total = 8, 100
	if _, _, err := svc.SetInventories(ctx, parent.UUID, nil, []Inventory{vcpu, disk}, nil); err != nil {
		t.Fatal(err)
	}
	c := "11111111-2222-4333-8444-555555555555"
	if err := svc.WriteAllocations(ctx, []ConsumerWrite{{UUID: c, ProjectID: "p", UserID: "u",
		Allocations: map[string]map[string]int64{parent.UUID: {"VCPU": 2, "DISK_GB": 10}}}}, false); err != nil {
		t.Fatal(err)
	}
	w := &reshapeWorld{svc: svc, consumer: c}
	w.parent, _ = svc.GetProvider(ctx, parent.UUID)
	w.child, _ = svc.GetProvider(ctx, child.UUID)
	return w
}

// state summarises inventories, allocations and generations.
func (w *reshapeWorld) state(t *testing.T) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, p := range []*Provider{w.parent, w.child} {
		pp, invs, err := w.svc.ProviderInventories(ctx, p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{"generation": pp.Generation}
		for _, inv := range invs {
			m[inv.ResourceClass] = inv.Total
		}
		out[p.Name] = m
	}
	ca, err := w.svc.GetConsumerAllocations(ctx, w.consumer)
	if err != nil {
		t.Fatal(err)
	}
	allocs := map[string]map[string]int64{}
	for uuid, pr := range ca.Providers {
		name := "parent"
		if uuid == w.child.UUID {
			name = "child"
		}
		allocs[name] = pr.Resources
	}
	out["allocations"] = allocs
	if ca.Consumer != nil {
		out["consumer_generation"] = ca.Consumer.Generation
	}
	return out
}

func reshapeInv(rc string, total int64) Inventory {
	i := DefaultInventory(rc)
	i.Total = total
	return i
}

func TestReshapeMovesInventoryAndAllocations(t *testing.T) {
	w := newReshapeWorld(t)
	gen := w.state(t)["consumer_generation"].(int64)
	err := w.svc.Reshape(context.Background(), []ReshapeInventory{
		{ProviderUUID: w.parent.UUID, Generation: w.parent.Generation, Inventories: []Inventory{reshapeInv("DISK_GB", 100)}},
		{ProviderUUID: w.child.UUID, Generation: w.child.Generation, Inventories: []Inventory{reshapeInv("VCPU", 8)}},
	}, []ConsumerWrite{{UUID: w.consumer, ProjectID: "p", UserID: "u", CheckGeneration: true, Generation: &gen,
		Allocations: map[string]map[string]int64{w.parent.UUID: {"DISK_GB": 10}, w.child.UUID: {"VCPU": 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := w.state(t)
	want := map[string]any{
		// parent: interim inventory, allocation write, final inventory
		"parent":              map[string]int64{"generation": w.parent.Generation + 3, "DISK_GB": 100},
		"child":               map[string]int64{"generation": w.child.Generation + 3, "VCPU": 8},
		"allocations":         map[string]map[string]int64{"parent": {"DISK_GB": 10}, "child": {"VCPU": 2}},
		"consumer_generation": gen + 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after reshape (-want +got):\n%s", diff)
	}
}

func TestReshapeAllOrNothing(t *testing.T) {
	gen := int64(1)
	for _, tc := range []struct {
		name   string
		invs   func(w *reshapeWorld) []ReshapeInventory
		writes func(w *reshapeWorld) []ConsumerWrite
		kind   errs.Kind
		code   string
	}{
		{"allocation does not fit", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: w.child.UUID, Generation: w.child.Generation, Inventories: []Inventory{reshapeInv("VCPU", 1)}}}
		}, func(w *reshapeWorld) []ConsumerWrite {
			return []ConsumerWrite{{UUID: w.consumer, ProjectID: "p", UserID: "u", CheckGeneration: true, Generation: &gen,
				Allocations: map[string]map[string]int64{w.child.UUID: {"VCPU": 2}}}}
		}, errs.NotEnoughResources, CodeUndefined},
		{"removed class still in use", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: w.parent.UUID, Generation: w.parent.Generation, Inventories: []Inventory{reshapeInv("DISK_GB", 100)}}}
		}, func(w *reshapeWorld) []ConsumerWrite { return nil }, errs.Conflict, CodeInventoryInUse},
		{"provider generation", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: w.child.UUID, Generation: w.child.Generation + 7, Inventories: []Inventory{reshapeInv("VCPU", 8)}}}
		}, func(w *reshapeWorld) []ConsumerWrite { return nil }, errs.Conflict, CodeConcurrentUpdate},
		{"unknown provider", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: "99999999-2222-4333-8444-555555555555", Inventories: []Inventory{reshapeInv("VCPU", 8)}}}
		}, func(w *reshapeWorld) []ConsumerWrite { return nil }, errs.BadRequest, CodeProviderNotFound},
		{"unknown class", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: w.child.UUID, Generation: w.child.Generation, Inventories: []Inventory{reshapeInv("CUSTOM_NOPE", 8)}}}
		}, func(w *reshapeWorld) []ConsumerWrite { return nil }, errs.BadRequest, CodeUndefined},
		{"consumer generation", func(w *reshapeWorld) []ReshapeInventory {
			return []ReshapeInventory{{ProviderUUID: w.child.UUID, Generation: w.child.Generation, Inventories: []Inventory{reshapeInv("VCPU", 8)}}}
		}, func(w *reshapeWorld) []ConsumerWrite {
			stale := int64(0)
			return []ConsumerWrite{{UUID: w.consumer, ProjectID: "p", UserID: "u", CheckGeneration: true, Generation: &stale,
				Allocations: map[string]map[string]int64{w.child.UUID: {"VCPU": 2}}}}
		}, errs.Conflict, CodeConcurrentUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newReshapeWorld(t)
			before := w.state(t)
			err := w.svc.Reshape(context.Background(), tc.invs(w), tc.writes(w))
			var pe *errs.Error
			if !errors.As(err, &pe) || pe.Kind != tc.kind || pe.Code != tc.code {
				t.Fatalf("got %v, want %v %s", err, tc.kind, tc.code)
			}
			if diff := cmp.Diff(before, w.state(t)); diff != "" {
				t.Errorf("state changed by a failed reshape (-before +after):\n%s", diff)
			}
		})
	}
}
