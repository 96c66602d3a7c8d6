package leases

import (
	"context"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// OutboxFailure is the outbox worker's failure hook, run in the
// transaction that records the failure: the action's lease shows
// `degraded` while it is retried, and when the retry budget is spent the
// lease and its live reservations go to ERROR, as upstream does when a
// lease's start or end cannot be applied in the compute service.
func (s *Service) OutboxFailure(ctx context.Context, tx *gorm.DB, r outbox.Record, final bool) error {
	if r.LeaseID == "" {
		return nil
	}
	now := Stamp(s.now())
	updates := map[string]any{"degraded": true, "updated_at": now}
	if final {
		// A BEST-EFFORT lease whose hosts are being cleared does not fail
		// with one of its moves: its timeout decides (kinds.go).
		var st []string
		if err := tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", r.LeaseID).Pluck("status", &st).Error; err != nil {
			return err
		}
		final = len(st) == 0 || st[0] != StatusInProgress
	}
	if final {
		updates["status"] = StatusError
		if err := tx.WithContext(ctx).Model(&models.Reservation{}).
			Where("lease_id = ? AND status IN ?", r.LeaseID, []string{ResPending, ResActive}).
			Updates(map[string]any{"status": ResError, "updated_at": now}).Error; err != nil {
			return err
		}
	}
	return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", r.LeaseID).Updates(updates).Error
}

// OutboxSuccess is the outbox worker's success hook, run in the
// transaction that completes the action: a degraded lease is clear again
// once none of its other actions is failing.
//
// The completion of any action of an IN-PROGRESS lease (a move of its
// scavenger hunt) also starts the lease if its hosts are clear now.
func (s *Service) OutboxSuccess(ctx context.Context, tx *gorm.DB, r outbox.Record) error {
	if r.LeaseID == "" {
		return nil
	}
	if err := s.activateIfClear(ctx, tx, r.LeaseID); err != nil {
		return err
	}
	if r.LastError == "" {
		return nil // it never failed, so it never marked the lease
	}
	var failing int64
	if err := tx.WithContext(ctx).Model(&models.OutboxAction{}).
		Where("lease_id = ? AND id <> ? AND last_error <> ''", r.LeaseID, r.ID).Count(&failing).Error; err != nil {
		return err
	}
	if failing > 0 {
		return nil
	}
	return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ? AND degraded = ?", r.LeaseID, true).
		Updates(map[string]any{"degraded": false, "updated_at": Stamp(s.now())}).Error
}
