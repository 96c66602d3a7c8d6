package placement

import (
	"context"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
)

// ProviderAggregates returns the provider and the uuids of its
// aggregates (in association order).
func (s *Service) ProviderAggregates(ctx context.Context, uuid string) (*Provider, []string, error) {
	c := s.conn(ctx)
	p, err := getProvider(c, uuid)
	if err != nil {
		return nil, nil, err
	}
	aggs, err := providerAggregates(c, p.ID)
	return p, aggs, err
}

type aggRow struct {
	ID   int64
	UUID string
}

func providerAggregateRows(tx *gorm.DB, providerID int64) ([]aggRow, error) {
	var rows []aggRow
	err := tx.Raw(`SELECT a.id, a.uuid FROM placement_aggregates a
 JOIN resource_provider_aggregates rpa ON rpa.aggregate_id = a.id
 WHERE rpa.resource_provider_id = ? ORDER BY a.id`, providerID).Scan(&rows).Error
	return rows, wrap("provider aggregates", err)
}

func providerAggregates(tx *gorm.DB, providerID int64) ([]string, error) {
	rows, err := providerAggregateRows(tx, providerID)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.UUID)
	}
	return out, nil
}

// SetProviderAggregates replaces the provider's aggregates (PUT
// /resource_providers/{uuid}/aggregates). With a non-nil generation
// (microversion ≥ 1.19) it is compared first (409
// placement.concurrent_update on mismatch) and the generation is bumped;
// without one (1.1–1.18) the generation is left alone.
func (s *Service) SetProviderAggregates(ctx context.Context, uuid string, generation *int64, aggs []string) (*Provider, error) {
	var out *Provider
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		if generation != nil && p.Generation != *generation {
			return errConcurrent("Resource provider's generation already changed. Please update the generation and try again.")
		}
		if err := setProviderAggregates(tx, p, aggs); err != nil {
			return err
		}
		if generation != nil {
			if err := bumpGeneration(tx, p.ID, p.Generation, now()); err != nil {
				return errConcurrent("Update conflict: Another thread concurrently updated the resource provider data. Please retry your update")
			}
		}
		out, err = getProviderByID(tx, p.ID)
		return err
	})
	if err != nil && db.IsDuplicate(err) {
		return nil, Conflict("", "Update conflict: %s", err.Error())
	}
	return out, err
}

// setProviderAggregates makes p's aggregate associations exactly aggs,
// creating unknown aggregates.
func setProviderAggregates(tx *gorm.DB, p *Provider, aggs []string) error {
	have, err := providerAggregateRows(tx, p.ID)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, a := range aggs {
		want[a] = true
	}
	haveUUID := map[string]bool{}
	var del []int64
	for _, r := range have {
		haveUUID[r.UUID] = true
		if !want[r.UUID] {
			del = append(del, r.ID)
		}
	}
	if len(del) > 0 {
		if err := tx.Exec("DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ? AND aggregate_id IN ?", p.ID, del).Error; err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, a := range aggs {
		if haveUUID[a] || seen[a] {
			continue
		}
		seen[a] = true
		id, err := ensureAggregate(tx, a)
		if err != nil {
			return err
		}
		if err := tx.Create(&models.ResourceProviderAggregate{ResourceProviderID: p.ID, AggregateID: id}).Error; err != nil && !db.IsDuplicate(err) {
			return err
		}
	}
	return nil
}

// ensureAggregate returns the id of the aggregate uuid, creating it.
func ensureAggregate(tx *gorm.DB, uuid string) (int64, error) {
	var ids []int64
	if err := tx.Raw("SELECT id FROM placement_aggregates WHERE uuid = ?", uuid).Scan(&ids).Error; err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		return ids[0], nil
	}
	row := models.PlacementAggregate{UUID: uuid}
	if err := tx.Create(&row).Error; err != nil {
		return 0, err
	}
	return row.ID, nil
}
