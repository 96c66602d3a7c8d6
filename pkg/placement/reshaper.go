package placement

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/pkg/errs"
	"gorm.io/gorm"
)

// ReshapeInventory is the inventory one provider must end up with after
// a reshape, with the generation the caller last saw.
type ReshapeInventory struct {
	ProviderUUID string
	Generation   int64
	Inventories  []Inventory
}

// Reshape is POST /reshaper (objects/reshaper.py): it replaces the
// inventories of the listed providers and the allocations of the listed
// consumers atomically, in one transaction, all or nothing. As upstream
// it writes each provider's inventory twice: first the union of the old
// and the new (so allocations may move onto new classes before old ones
// disappear), then, after the allocations are replaced, exactly the new
// inventory (which fails if an allocation still uses a removed class).
//
// Errors, in upstream's order: 400 placement.resource_provider.not_found
// for an unknown provider in inventories; 409 concurrent_update for a
// provider generation mismatch; consumer generation conflicts (409);
// allocations on unknown providers (400); unknown resource classes (400
// "malformed reshaper data"); allocations that do not fit (409 "Unable to
// allocate inventory"); inventory still in use (409 inventory.inuse);
// lost races (409 concurrent_update).
func (s *Service) Reshape(ctx context.Context, invs []ReshapeInventory, writes []ConsumerWrite) error {
	typeIDs, err := s.consumerTypeIDs(ctx, writes)
	if err != nil {
		return err
	}
	err = s.writeTx(ctx, func(tx *gorm.DB) error {
		providers := make([]*Provider, len(invs))
		for i, ri := range invs {
			p, err := getProvider(tx, ri.ProviderUUID)
			if err != nil {
				if IsNotFoundErr(err) {
					return BadRequestCode(CodeProviderNotFound, "Resource provider %s in inventories not found: No resource provider with uuid %s found",
						ri.ProviderUUID, ri.ProviderUUID)
				}
				return err
			}
			if p.Generation != ri.Generation {
				return Conflict(CodeConcurrentUpdate, "resource provider generation conflict for provider %s: actual: %d, given: %d",
					ri.ProviderUUID, p.Generation, ri.Generation)
			}
			providers[i] = p
		}
		if err := checkReshapeConsumers(tx, writes); err != nil {
			return err
		}
		// Interim inventories: old ∪ new.
		for i, ri := range invs {
			if len(ri.Inventories) == 0 {
				continue
			}
			p := providers[i]
			rows, err := inventoryRows(tx, p.ID)
			if err != nil {
				return err
			}
			union := map[string]int{}
			var list []Inventory
			for _, r := range rows {
				union[r.ResourceClass] = len(list)
				list = append(list, r.inventory())
			}
			for _, inv := range ri.Inventories {
				if j, ok := union[inv.ResourceClass]; ok {
					list[j] = inv
					continue
				}
				union[inv.ResourceClass] = len(list)
				list = append(list, inv)
			}
			if err := SetInventoriesTx(ctx, tx, p, list); err != nil {
				return reshapeInventoryError(err)
			}
		}
		if len(writes) > 0 {
			if err := s.writeAllocations(tx, writes, typeIDs, true); err != nil {
				return err
			}
		}
		// Final inventories, on freshly read providers (the allocation
		// write bumped their generations).
		for i, ri := range invs {
			p, err := getProviderByID(tx, providers[i].ID)
			if err != nil {
				return err
			}
			if err := SetInventoriesTx(ctx, tx, p, ri.Inventories); err != nil {
				return reshapeInventoryError(err)
			}
		}
		return nil
	})
	var r *errRetry
	if errors.As(err, &r) {
		return Conflict(CodeConcurrentUpdate, "update conflict: %s", r.msg)
	}
	if isLockConflict(err) {
		return Conflict(CodeConcurrentUpdate, "update conflict: %s", msgProviderRace)
	}
	return err
}

// checkReshapeConsumers checks the consumer generations first, as
// upstream's inspect_consumers does before anything is written.
func checkReshapeConsumers(tx *gorm.DB, writes []ConsumerWrite) error {
	if len(writes) == 0 {
		return nil
	}
	if err := checkWrites(writes); err != nil {
		return err
	}
	uuids := make([]string, len(writes))
	for i, w := range writes {
		uuids[i] = w.UUID
	}
	existing, err := readConsumers(tx, uuids)
	if err != nil {
		return err
	}
	if err := checkConsumerGenerations(writes, existing); err != nil {
		return err
	}
	// Providers of the new allocations must exist (create_allocation_list).
	for _, w := range writes {
		rps := allocKeys(w.Allocations)
		found, err := readProvidersByUUID(tx, rps)
		if err != nil {
			return err
		}
		for _, rp := range rps {
			if found[rp] == nil {
				return BadRequest("Allocation for resource provider '%s' that does not exist.", rp)
			}
		}
	}
	return nil
}

// reshapeInventoryError words an inventory replacement failure as the
// reshaper handler does.
func reshapeInventoryError(err error) error {
	var ic *InventoryConflict
	pe := errs.As(err)
	switch {
	case errors.As(err, &ic):
		code := ic.Code
		if code == "" {
			code = CodeConcurrentUpdate
		}
		return Conflict(code, "update conflict: %s", ic.Msg)
	case IsNoSuchResourceClass(err):
		return BadRequest("malformed reshaper data: %s", err.Error())
	case pe != nil && (pe.Kind == errs.Conflict || pe.Kind == errs.NotEnoughResources):
		return Conflict(CodeConcurrentUpdate, "update conflict: %s", pe.Msg)
	}
	return err
}
