package leases

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// Delete ends a lease's reservations (plugin end actions) and removes the
// lease with everything it holds, in one transaction.
func (s *Service) Delete(ctx context.Context, c Caller, id string) error {
	var onEnd *LeaseValues
	err := s.write(ctx, nil, func(tx *plugins.Tx, _ attempt) error {
		var err error
		onEnd, err = s.delete(ctx, tx, c, id)
		return err
	})
	if err != nil {
		return err
	}
	if onEnd != nil {
		s.runOnEnd(ctx, *onEnd)
	}
	s.eventsChanged()
	return nil
}

// delete is one attempt of Delete; it returns the lease as the
// enforcement filters' on_end sees it when the lease was running.
func (s *Service) delete(ctx context.Context, tx *plugins.Tx, c Caller, id string) (*LeaseValues, error) {
	l, err := lockLease(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := c.check(l, "blazar:leases:delete"); err != nil {
		return nil, err
	}
	if l.Status == StatusDeleting {
		return nil, errs.Conflictf("Invalid lease status: lease %s is already being deleted.", id)
	}
	// The notification shows the lease as it was, DELETING (as Blazar's).
	var gone *View
	if s.notifying() {
		if gone, err = s.storedView(ctx, tx, id); err != nil {
			return nil, err
		}
		gone.Status = StatusDeleting
	}
	var onEnd *LeaseValues
	if now := tx.Now; !now.Before(l.StartDate) && now.Before(l.EndDate) {
		lv := leaseValues(l.ID, l.Name, l.ProjectID, l.UserID, l.StartDate.UTC(), l.EndDate.UTC(), nil)
		onEnd = &lv
	}
	ress, err := reservations(ctx, tx.DB, id)
	if err != nil {
		return nil, err
	}
	pl := pluginLease(l, c.Admin)
	err = s.eachLive(ress, func(string) bool { return true }, func(p plugins.Plugin, r *models.Reservation) error {
		if r.Status != ResDeleted {
			if err := p.OnEnd(ctx, tx, pl, r); err != nil {
				return err
			}
		}
		return p.Delete(ctx, tx, r)
	})
	if err != nil {
		return nil, err
	}
	for _, m := range []any{&models.Event{}, &models.Reservation{}} {
		if err := tx.WithContext(ctx).Where("lease_id = ?", id).Delete(m).Error; err != nil {
			return nil, err
		}
	}
	if err := tx.WithContext(ctx).Where("id = ?", id).Delete(&models.Lease{}).Error; err != nil {
		return nil, err
	}
	if err := enqueueTrustDeletion(tx, l.TrustID); err != nil {
		return nil, err
	}
	if gone != nil {
		return onEnd, s.enqueueNotifications(ctx, tx, gone, NotifyDelete)
	}
	return onEnd, nil
}

// runOnEnd tells the enforcement filters a lease ended (errors only
// logged, as upstream).
func (s *Service) runOnEnd(ctx context.Context, lv LeaseValues) {
	ec := EnforcementContext{UserID: lv.UserID, ProjectID: lv.ProjectID}
	for _, f := range s.cfg.Filters {
		if err := f.OnEnd(ctx, ec, lv); err != nil {
			slog.WarnContext(ctx, "enforcement on_end failed", "lease", lv.ID, "err", err)
		}
	}
}
