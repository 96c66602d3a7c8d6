package placement

import (
	"database/sql"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// The Placement side of instance reservations (seed
// blazar-placement-instance-reservation.txt), for the virtual:instance
// plugin, every function inside the caller's transaction: each
// reservation has its own custom class, and while it is active each
// reserved host's child provider blazar_<hostname> has an inventory of
// that class with one unit per slot, so allocation candidates for
// "<class>:1" are exactly the reservation's hosts with a slot left.

// ReservationClassPrefix starts the custom class of a reservation.
const ReservationClassPrefix = "CUSTOM_RESERVATION_"

// ReservationClass is the custom resource class of reservation id:
// CUSTOM_RESERVATION_ and the id upper-cased with "-" replaced by "_".
func ReservationClass(id string) string {
	return ReservationClassPrefix + strings.ReplaceAll(strings.ToUpper(id), "-", "_")
}

// EnsureClassTx creates the custom class name unless it exists.
func EnsureClassTx(tx *gorm.DB, name string) error {
	_, _, err := ensureResourceClass(tx, name)
	return err
}

// ComputeCapacity is what a compute node provider offers of VCPU,
// MEMORY_MB and DISK_GB: int((total - reserved) * allocation_ratio) per
// class; Has tells which classes it has inventory of. The built-in
// Placement also reads its other classes, max_units and traits.
type ComputeCapacity struct {
	VCPUs, MemoryMB, DiskGB int64
	Has                     [3]bool
	// Other is the capacity of the provider's other classes (PCPU,
	// CUSTOM_*, …) by class name, computed the same way.
	Other map[string]int64
	// MaxUnit is each class's max_unit (a class missing: no limit); an
	// instance asking for more of a class than its max_unit cannot land.
	MaxUnit map[string]int64
	// Traits are the provider's traits.
	Traits map[string]bool
}

// ComputeCapacitiesTx returns the capacities of the providers with uuids
// (those without any inventory or trait are missing from the map).
func ComputeCapacitiesTx(tx *gorm.DB, uuids []string) (map[string]ComputeCapacity, error) {
	out := map[string]ComputeCapacity{}
	if len(uuids) == 0 {
		return out, nil
	}
	var rows []struct {
		UUID            string
		Name            string
		Total, Reserved int64
		MaxUnit         int64
		AllocationRatio float64
	}
	err := tx.Raw(`SELECT p.uuid, c.name, i.total, i.reserved, i.max_unit, i.allocation_ratio FROM inventories i
 JOIN resource_providers p ON p.id = i.resource_provider_id JOIN resource_classes c ON c.id = i.resource_class_id
 WHERE p.uuid IN ?`, uuids).Scan(&rows).Error
	if err != nil {
		return nil, wrap("compute capacities", err)
	}
	for _, r := range rows {
		c := out[r.UUID]
		inv := Inventory{Total: r.Total, Reserved: r.Reserved, AllocationRatio: r.AllocationRatio}
		switch r.Name {
		case "VCPU":
			c.VCPUs, c.Has[0] = max(inv.Capacity(), 0), true
		case "MEMORY_MB":
			c.MemoryMB, c.Has[1] = max(inv.Capacity(), 0), true
		case "DISK_GB":
			c.DiskGB, c.Has[2] = max(inv.Capacity(), 0), true
		default:
			if c.Other == nil {
				c.Other = map[string]int64{}
			}
			c.Other[r.Name] = max(inv.Capacity(), 0)
		}
		if c.MaxUnit == nil {
			c.MaxUnit = map[string]int64{}
		}
		c.MaxUnit[r.Name] = r.MaxUnit
		out[r.UUID] = c
	}
	var traits []struct{ UUID, Name string }
	err = tx.Raw(`SELECT p.uuid, t.name FROM resource_provider_traits rpt
 JOIN resource_providers p ON p.id = rpt.resource_provider_id JOIN traits t ON t.id = rpt.trait_id
 WHERE p.uuid IN ?`, uuids).Scan(&traits).Error
	if err != nil {
		return nil, wrap("compute provider traits", err)
	}
	for _, r := range traits {
		c := out[r.UUID]
		if c.Traits == nil {
			c.Traits = map[string]bool{}
		}
		c.Traits[r.Name] = true
		out[r.UUID] = c
	}
	return out, nil
}

// SetReservationInventoryTx sets the inventory of class on the provider
// with uuid providerUUID to total slots (reserved 0, min_unit 1,
// max_unit 1, step_size 1, allocation_ratio 1), or removes it when total
// is 0, bumping the provider's generation (a concurrent change of the
// provider is a 409 concurrent update, and the caller's transaction
// rolls back). A total below what servers already use there keeps the
// inventory at that use with all of it reserved: the used units stay
// valid and no new server lands.
func SetReservationInventoryTx(tx *gorm.DB, providerUUID, class string, total int64) error {
	return SetReservationInventoriesTx(tx, class, map[string]int64{providerUUID: total})
}

// resInvRow is a provider with its inventory of one class, if any.
type resInvRow struct {
	ID, Generation  int64
	UUID            string
	Total, Reserved sql.NullInt64
	MaxUnit         sql.NullInt64
}

// SetReservationInventoriesTx is SetReservationInventoryTx for several
// providers (uuid → total) at once, with a fixed number of reads.
func SetReservationInventoriesTx(tx *gorm.DB, class string, totals map[string]int64) error {
	if len(totals) == 0 {
		return nil
	}
	uuids := make([]string, 0, len(totals))
	for u := range totals {
		uuids = append(uuids, u)
	}
	slices.Sort(uuids)
	ids, err := resourceClassIDs(tx, []string{class})
	if err != nil {
		return err
	}
	rcID := ids[class]
	var rows []resInvRow
	if err := tx.Raw(`SELECT p.id, p.generation, p.uuid, i.total, i.reserved, i.max_unit FROM resource_providers p
 LEFT JOIN inventories i ON i.resource_provider_id = p.id AND i.resource_class_id = ? WHERE p.uuid IN ?`, rcID, uuids).Scan(&rows).Error; err != nil {
		return wrap("reservation inventories", err)
	}
	if len(rows) != len(uuids) {
		found := map[string]bool{}
		for _, r := range rows {
			found[r.UUID] = true
		}
		for _, u := range uuids {
			if !found[u] {
				return NotFound("No resource provider with uuid %s found", u)
			}
		}
	}
	pids := make([]int64, len(rows))
	for i, r := range rows {
		pids[i] = r.ID
	}
	var usedRows []struct {
		ResourceProviderID int64
		Used               int64
	}
	if err := tx.Raw(`SELECT resource_provider_id, SUM(used) AS used FROM allocations
 WHERE resource_class_id = ? AND resource_provider_id IN ? GROUP BY resource_provider_id`, rcID, pids).Scan(&usedRows).Error; err != nil {
		return wrap("reservation inventory use", err)
	}
	used := map[int64]int64{}
	for _, u := range usedRows {
		used[u.ResourceProviderID] = u.Used
	}
	// One order for every writer: generation bumps never deadlock.
	slices.SortFunc(rows, func(a, b resInvRow) int { return strings.Compare(a.UUID, b.UUID) })
	t := now()
	for _, r := range rows {
		inv := Inventory{ResourceClass: class, Total: totals[r.UUID], MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}
		if u := used[r.ID]; u > inv.Total {
			inv.Total, inv.Reserved = u, u
		}
		has := r.Total.Valid
		switch {
		case !has && inv.Total == 0:
			continue
		case !has:
			if err := insertInventory(tx, r.ID, rcID, inv, t); err != nil {
				return err
			}
		case inv.Total == 0:
			if err := tx.Exec("DELETE FROM inventories WHERE resource_provider_id = ? AND resource_class_id = ?", r.ID, rcID).Error; err != nil {
				return err
			}
		case r.Total.Int64 == inv.Total && r.Reserved.Int64 == inv.Reserved && r.MaxUnit.Int64 == 1:
			continue
		default:
			if err := updateInventory(tx, r.ID, rcID, inv, t); err != nil {
				return err
			}
		}
		if err := bumpGeneration(tx, r.ID, r.Generation, t); err != nil {
			return concurrentInventoryUpdate()
		}
	}
	return nil
}

// DeleteClassIfUnusedTx deletes the custom class name when no inventory
// and no allocation refers to it any more, and reports whether it did (a
// missing class counts as deleted).
func DeleteClassIfUnusedTx(tx *gorm.DB, name string) (bool, error) {
	rc, err := getResourceClass(tx, name)
	if IsNotFoundErr(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if rc.IsStandard() {
		return false, nil
	}
	var n int64
	if err := tx.Raw(`SELECT (SELECT COUNT(*) FROM inventories WHERE resource_class_id = ?) + (SELECT COUNT(*) FROM allocations WHERE resource_class_id = ?)`, rc.ID, rc.ID).Scan(&n).Error; err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	return true, tx.Exec("DELETE FROM resource_classes WHERE id = ?", rc.ID).Error
}
