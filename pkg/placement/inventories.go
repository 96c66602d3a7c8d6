package placement

import (
	"context"
	"log/slog"
	"math"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
)

// MaxInventoryInt is the largest total/reserved/min_unit/max_unit/step_size
// (db constants MAX_INT, a signed 32-bit integer).
const MaxInventoryInt = 2147483647

// MaxAllocationRatio is the largest allocation_ratio: the largest
// single-precision float, as SQL FLOAT holds it (SQL_SP_FLOAT_MAX).
const MaxAllocationRatio = 3.40282e+38

// Inventory is one resource class of a provider.
type Inventory struct {
	ResourceClass   string
	Total           int64
	Reserved        int64
	MinUnit         int64
	MaxUnit         int64
	StepSize        int64
	AllocationRatio float64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// DefaultInventory returns an inventory of class rc with Placement's
// defaults: reserved 0, min_unit 1, max_unit MaxInventoryInt,
// step_size 1, allocation_ratio 1.0 (total must be set).
func DefaultInventory(rc string) Inventory {
	return Inventory{ResourceClass: rc, MinUnit: 1, MaxUnit: MaxInventoryInt, StepSize: 1, AllocationRatio: 1.0}
}

// Capacity is int((total - reserved) * allocation_ratio), what
// allocations may use.
func (inv *Inventory) Capacity() int64 {
	c := float64(inv.Total-inv.Reserved) * inv.AllocationRatio
	if c >= math.MaxInt64 {
		return math.MaxInt64
	}
	if c <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(c)
}

// CheckCapacity is _validate_inventory_capacity: below microversion 1.26
// (reservedCanBeTotal false) capacity must be > 0, from 1.26 ≥ 0. The
// error message is exception.InvalidInventoryCapacity(ReservedCanBeTotal).
func CheckCapacity(providerUUID string, reservedCanBeTotal bool, invs ...Inventory) error {
	for _, inv := range invs {
		c := inv.Capacity()
		if !reservedCanBeTotal && c <= 0 {
			return BadRequest("Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than or equal to total.", inv.ResourceClass, providerUUID)
		}
		if reservedCanBeTotal && c < 0 {
			return BadRequest("Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than total.", inv.ResourceClass, providerUUID)
		}
	}
	return nil
}

// InventoryConflict is the error of an inventory write that upstream
// reports as a 409 (in use, duplicate class, concurrent update), with
// the code and the bare message; the handler words the final detail.
type InventoryConflict struct {
	Code string
	Msg  string
}

func (e *InventoryConflict) Error() string { return e.Msg }

// inventoryRow is the inventories table joined with the class name.
type inventoryRow struct {
	ResourceClassID int64
	ResourceClass   string
	Total           int64
	Reserved        int64
	MinUnit         int64
	MaxUnit         int64
	StepSize        int64
	AllocationRatio float64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (r inventoryRow) inventory() Inventory {
	return Inventory{ResourceClass: r.ResourceClass, Total: r.Total, Reserved: r.Reserved, MinUnit: r.MinUnit,
		MaxUnit: r.MaxUnit, StepSize: r.StepSize, AllocationRatio: r.AllocationRatio, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func inventoryRows(tx *gorm.DB, providerID int64) ([]inventoryRow, error) {
	var rows []inventoryRow
	err := tx.Raw(`SELECT i.resource_class_id, rc.name AS resource_class, i.total, i.reserved, i.min_unit, i.max_unit,
 i.step_size, i.allocation_ratio, i.created_at, i.updated_at
 FROM inventories i JOIN resource_classes rc ON rc.id = i.resource_class_id
 WHERE i.resource_provider_id = ? ORDER BY i.resource_class_id`, providerID).Scan(&rows).Error
	return rows, wrap("inventories", err)
}

// ProviderInventories returns the provider and its inventories (ordered
// by class id).
func (s *Service) ProviderInventories(ctx context.Context, uuid string) (*Provider, []Inventory, error) {
	c := s.conn(ctx)
	p, err := getProvider(c, uuid)
	if err != nil {
		return nil, nil, err
	}
	rows, err := inventoryRows(c, p.ID)
	if err != nil {
		return nil, nil, err
	}
	invs := make([]Inventory, len(rows))
	for i, r := range rows {
		invs[i] = r.inventory()
	}
	return p, invs, nil
}

// AddInventory adds inv to a provider that has no inventory of that
// class, bumping the generation (POST …/inventories; the generation in
// the body is not compared). An unknown class is a NotFound error (the handler
// turns it into its 400); an existing one an *InventoryConflict.
func (s *Service) AddInventory(ctx context.Context, p *Provider, inv Inventory) (*Provider, Inventory, error) {
	var outP *Provider
	var out Inventory
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		ids, err := resourceClassIDs(tx, []string{inv.ResourceClass})
		if err != nil {
			return err
		}
		rcID := ids[inv.ResourceClass]
		var n int64
		if err := tx.Model(&models.Inventory{}).Where("resource_provider_id = ? AND resource_class_id = ?", p.ID, rcID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return &InventoryConflict{Code: CodeConcurrentUpdate, Msg: "Update conflict: (sqlite3.IntegrityError) UNIQUE constraint failed: inventories.resource_provider_id, inventories.resource_class_id"}
		}
		t := now()
		if err := insertInventory(tx, p.ID, rcID, inv, t); err != nil {
			return err
		}
		if err := bumpGeneration(tx, p.ID, p.Generation, t); err != nil {
			return concurrentInventoryUpdate()
		}
		inv.CreatedAt, inv.UpdatedAt = t, t
		out = inv
		outP, err = getProviderByID(tx, p.ID)
		return err
	})
	if err != nil && db.IsDuplicate(err) {
		return nil, Inventory{}, &InventoryConflict{Code: CodeConcurrentUpdate, Msg: "Update conflict: " + err.Error()}
	}
	return outP, out, err
}

func concurrentInventoryUpdate() *InventoryConflict {
	return &InventoryConflict{Code: CodeConcurrentUpdate, Msg: "Another thread concurrently updated the resource provider data. Please retry your update"}
}

func insertInventory(tx *gorm.DB, providerID, rcID int64, inv Inventory, t time.Time) error {
	row := models.Inventory{
		ResourceProviderID: providerID, ResourceClassID: rcID,
		Total: inv.Total, Reserved: inv.Reserved, MinUnit: inv.MinUnit, MaxUnit: inv.MaxUnit,
		StepSize: inv.StepSize, AllocationRatio: inv.AllocationRatio, CreatedAt: t, UpdatedAt: t,
	}
	return tx.Create(&row).Error
}

func updateInventory(tx *gorm.DB, providerID, rcID int64, inv Inventory, t time.Time) error {
	return tx.Model(&models.Inventory{}).Where("resource_provider_id = ? AND resource_class_id = ?", providerID, rcID).
		Updates(map[string]any{
			"total": inv.Total, "reserved": inv.Reserved, "min_unit": inv.MinUnit, "max_unit": inv.MaxUnit,
			"step_size": inv.StepSize, "allocation_ratio": inv.AllocationRatio, "updated_at": t,
		}).Error
}

// usedByClass returns the total allocated per class id on a provider.
func usedByClass(tx *gorm.DB, providerID int64, rcIDs []int64) (map[int64]int64, error) {
	out := map[int64]int64{}
	if len(rcIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		ResourceClassID int64
		Used            int64
	}
	err := tx.Raw(`SELECT resource_class_id, SUM(used) AS used FROM allocations
 WHERE resource_provider_id = ? AND resource_class_id IN ? GROUP BY resource_class_id ORDER BY resource_class_id`,
		providerID, rcIDs).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.ResourceClassID] = r.Used
	}
	return out, nil
}

// UpdateInventory replaces the inventory of class inv.ResourceClass of a
// provider after comparing generation (PUT …/inventories/{rc}). Errors:
// 409 placement.concurrent_update on a generation mismatch (message
// "resource provider generation conflict"); a NotFound error when the class
// does not exist; an *InventoryConflict… The handler words them.
// Shrinking below current usage is allowed (and logged), as upstream.
func (s *Service) UpdateInventory(ctx context.Context, uuid string, generation int64, inv Inventory, check func(p *Provider) error) (*Provider, Inventory, error) {
	var outP *Provider
	var out Inventory
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		if p.Generation != generation {
			return errConcurrent("resource provider generation conflict")
		}
		if check != nil {
			if err := check(p); err != nil {
				return err
			}
		}
		ids, err := resourceClassIDs(tx, []string{inv.ResourceClass})
		if err != nil {
			return err
		}
		rcID := ids[inv.ResourceClass]
		t := now()
		// Existence is checked explicitly: MySQL reports an UPDATE that
		// changes nothing as 0 rows affected.
		var n int64
		if err := tx.Model(&models.Inventory{}).Where("resource_provider_id = ? AND resource_class_id = ?", p.ID, rcID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return &noInventoryOfClass{class: inv.ResourceClass}
		}
		used, err := usedByClass(tx, p.ID, []int64{rcID})
		if err != nil {
			return err
		}
		if err := updateInventory(tx, p.ID, rcID, inv, t); err != nil {
			return err
		}
		if u := used[rcID]; u > inv.Capacity() {
			slog.WarnContext(ctx, "resource provider is now over capacity", "provider", p.UUID, "resource_class", inv.ResourceClass, "used", u)
		}
		if err := bumpGeneration(tx, p.ID, p.Generation, t); err != nil {
			return concurrentInventoryUpdate()
		}
		out = inv
		var rows []inventoryRow
		if rows, err = inventoryRows(tx, p.ID); err == nil {
			for _, r := range rows {
				if r.ResourceClassID == rcID {
					out = r.inventory()
				}
			}
		}
		outP, err = getProviderByID(tx, p.ID)
		return err
	})
	return outP, out, err
}

// noInventoryOfClass is exception.InventoryWithResourceClassNotFound.
type noInventoryOfClass struct{ class string }

func (e *noInventoryOfClass) Error() string { return "No inventory of class " + e.class + " found." }

// IsNoInventoryOfClass reports exception.InventoryWithResourceClassNotFound
// and returns its message.
func IsNoInventoryOfClass(err error) (string, bool) {
	e, ok := err.(*noInventoryOfClass)
	if !ok {
		return "", false
	}
	return e.Error(), true
}

// SetInventories replaces all of a provider's inventories with invs
// after comparing generation (PUT …/inventories, DELETE …/inventories
// with generation nil = no comparison). check, when set, runs after the
// generation comparison and before anything is written (the handler's
// capacity validation). Errors, in upstream's order: 409
// concurrent_update "resource provider generation conflict"; check's
// error; a NotFound error for an unknown class (the handler words its 400);
// *InventoryConflict with CodeInventoryInUse when a removed class has
// allocations; *InventoryConflict with CodeConcurrentUpdate on a race.
func (s *Service) SetInventories(ctx context.Context, uuid string, generation *int64, invs []Inventory, check func(p *Provider) error) (*Provider, []Inventory, error) {
	var outP *Provider
	var out []Inventory
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		if generation != nil && p.Generation != *generation {
			return errConcurrent("resource provider generation conflict")
		}
		if check != nil {
			if err := check(p); err != nil {
				return err
			}
		}
		if err := setInventories(ctx, tx, p, invs); err != nil {
			return err
		}
		rows, err := inventoryRows(tx, p.ID)
		if err != nil {
			return err
		}
		for _, r := range rows {
			out = append(out, r.inventory())
		}
		outP, err = getProviderByID(tx, p.ID)
		return err
	})
	return outP, out, err
}

// SetInventoriesTx is setInventories for services that replace inventory
// inside their own transaction (the reshaper): p must have been read in tx.
func SetInventoriesTx(ctx context.Context, tx *gorm.DB, p *Provider, invs []Inventory) error {
	return setInventories(ctx, tx, p, invs)
}

func setInventories(ctx context.Context, tx *gorm.DB, p *Provider, invs []Inventory) error {
	names := make([]string, 0, len(invs))
	for _, inv := range invs {
		names = append(names, inv.ResourceClass)
	}
	ids, err := resourceClassIDs(tx, names)
	if err != nil {
		return err
	}
	rows, err := inventoryRows(tx, p.ID)
	if err != nil {
		return err
	}
	existing := map[int64]bool{}
	for _, r := range rows {
		existing[r.ResourceClassID] = true
	}
	wanted := map[int64]Inventory{}
	for _, inv := range invs {
		wanted[ids[inv.ResourceClass]] = inv
	}
	var toDelete, toUpdate []int64
	for _, r := range rows {
		if _, ok := wanted[r.ResourceClassID]; ok {
			toUpdate = append(toUpdate, r.ResourceClassID)
		} else {
			toDelete = append(toDelete, r.ResourceClassID)
		}
	}
	var toAdd []int64
	for id := range wanted {
		if !existing[id] {
			toAdd = append(toAdd, id)
		}
	}
	sort.Slice(toAdd, func(i, j int) bool { return toAdd[i] < toAdd[j] })
	t := now()
	if len(toDelete) > 0 {
		if err := deleteInventories(tx, p, toDelete); err != nil {
			return err
		}
	}
	for _, id := range toAdd {
		if err := insertInventory(tx, p.ID, id, wanted[id], t); err != nil {
			if db.IsDuplicate(err) {
				return &InventoryConflict{Code: CodeConcurrentUpdate, Msg: "update conflict: " + err.Error()}
			}
			return err
		}
	}
	if len(toUpdate) > 0 {
		used, err := usedByClass(tx, p.ID, toUpdate)
		if err != nil {
			return err
		}
		for _, id := range toUpdate {
			inv := wanted[id]
			// The row was read in this transaction; a concurrent delete
			// also bumps the generation, which the bump below catches.
			if err := updateInventory(tx, p.ID, id, inv, t); err != nil {
				return err
			}
			if u := used[id]; u > inv.Capacity() {
				slog.WarnContext(ctx, "resource provider is now over capacity", "provider", p.UUID, "resource_class", inv.ResourceClass, "used", u)
			}
		}
	}
	if err := bumpGeneration(tx, p.ID, p.Generation, t); err != nil {
		return concurrentInventoryUpdate()
	}
	p.Generation++
	return nil
}

// deleteInventories removes the inventories of classes rcIDs, failing
// with an in-use conflict when any has allocations.
func deleteInventories(tx *gorm.DB, p *Provider, rcIDs []int64) error {
	used, err := usedByClass(tx, p.ID, rcIDs)
	if err != nil {
		return err
	}
	var inUse []int64
	for id := range used {
		inUse = append(inUse, id)
	}
	if len(inUse) > 0 {
		sort.Slice(inUse, func(i, j int) bool { return inUse[i] < inUse[j] })
		names, err := resourceClassNames(tx)
		if err != nil {
			return err
		}
		var list []string
		for _, id := range inUse {
			list = append(list, names[id])
		}
		return &InventoryConflict{Code: CodeInventoryInUse,
			Msg: "Inventory for '" + strings.Join(list, ", ") + "' on resource provider '" + p.UUID + "' in use."}
	}
	return tx.Exec("DELETE FROM inventories WHERE resource_provider_id = ? AND resource_class_id IN ?", p.ID, rcIDs).Error
}

// DeleteInventory removes a provider's inventory of class rc (DELETE
// …/inventories/{rc}). No inventory of the class (or no such class) is
// a *NoInventoryToDelete; allocations against it an *InventoryConflict.
func (s *Service) DeleteInventory(ctx context.Context, uuid, rc string) error {
	return s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		ids, err := resourceClassIDs(tx, []string{rc})
		if err != nil {
			return err
		}
		rcID := ids[rc]
		var n int64
		if err := tx.Model(&models.Inventory{}).Where("resource_provider_id = ? AND resource_class_id = ?", p.ID, rcID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return NotFound("No inventory of class %s found for delete", rc)
		}
		if err := deleteInventories(tx, p, []int64{rcID}); err != nil {
			return err
		}
		if err := bumpGeneration(tx, p.ID, p.Generation, now()); err != nil {
			return concurrentInventoryUpdate()
		}
		return nil
	})
}
