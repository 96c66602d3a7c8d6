package placement

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"
)

// TestReservationInventory: the instance-reservation helpers set, shrink
// and remove a class's inventory on a provider, bumping its generation,
// keep units in use (all reserved) and delete the class only when unused.
func TestReservationInventory(t *testing.T) {
	s := newInvService(t)
	ctx := context.Background()
	p := ivProvider(t, s, "blazar_c1")
	class := ReservationClass("0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e02")
	if class != "CUSTOM_RESERVATION_0F6E7D8C_9B0A_4C1D_8E2F_3A4B5C6D7E02" {
		t.Fatalf("class %s", class)
	}
	write := func(fn func(tx *gorm.DB) error) {
		t.Helper()
		if err := s.db.WithContext(ctx).Transaction(fn); err != nil {
			t.Fatal(err)
		}
	}
	inv := func(total, reserved int64) map[string]Inventory {
		if total == 0 {
			return map[string]Inventory{}
		}
		return map[string]Inventory{class: {ResourceClass: class, Total: total, Reserved: reserved, MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}}
	}
	write(func(tx *gorm.DB) error { return EnsureClassTx(tx, class) })
	write(func(tx *gorm.DB) error { return EnsureClassTx(tx, class) }) // idempotent
	gen := ivGen(t, s, p.UUID)
	write(func(tx *gorm.DB) error { return SetReservationInventoryTx(tx, p.UUID, class, 3) })
	if diff := cmp.Diff(inv(3, 0), ivInventories(t, s, p.UUID)); diff != "" {
		t.Errorf("set 3 (-want +got):\n%s", diff)
	}
	if g := ivGen(t, s, p.UUID); g != gen+1 {
		t.Errorf("generation %d, want %d", g, gen+1)
	}
	ivAllocate(t, s, p, class, 2)
	write(func(tx *gorm.DB) error { return SetReservationInventoryTx(tx, p.UUID, class, 1) })
	if diff := cmp.Diff(inv(2, 2), ivInventories(t, s, p.UUID)); diff != "" {
		t.Errorf("shrunk below use (-want +got):\n%s", diff)
	}
	write(func(tx *gorm.DB) error {
		deleted, err := DeleteClassIfUnusedTx(tx, class)
		if deleted {
			t.Error("class in use deleted")
		}
		return err
	})
	if err := s.db.Exec("DELETE FROM allocations").Error; err != nil {
		t.Fatal(err)
	}
	write(func(tx *gorm.DB) error { return SetReservationInventoryTx(tx, p.UUID, class, 0) })
	if diff := cmp.Diff(inv(0, 0), ivInventories(t, s, p.UUID)); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	write(func(tx *gorm.DB) error {
		deleted, err := DeleteClassIfUnusedTx(tx, class)
		if !deleted {
			t.Error("unused class kept")
		}
		return err
	})
	if _, err := s.GetResourceClass(ctx, class); !IsNotFoundErr(err) {
		t.Errorf("class after delete: %v", err)
	}
}
