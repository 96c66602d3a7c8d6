package leases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// ErrLeaseBusy is returned by RunEvent when the lease is in a transitional
// status or a status the event cannot start from yet: the event manager
// puts the event back and retries later.
var ErrLeaseBusy = errors.New("lease is busy")

// ErrClaimLost is returned by RunEvent when the event is no longer
// claimed by this runner (a stale claim was taken back): nothing was done.
var ErrClaimLost = errors.New("event claim lost")

// RunEvent runs one claimed event (status IN_PROGRESS, claimed_by =
// claimant) in one transaction: the plugins' actions, the reservation and
// lease statuses, and the event's own DONE status, which is written only
// while the claim still holds — so the action takes effect exactly once.
// If the action fails, the transaction is rolled back and the failure is
// recorded (event ERROR, reservations error, lease ERROR) in a second one.
func (s *Service) RunEvent(ctx context.Context, ev models.Event, claimant string) error {
	var onEnd *LeaseValues
	err := s.write(ctx, nil, func(tx *plugins.Tx, _ attempt) error {
		var err error
		onEnd, err = s.runEvent(ctx, tx, ev, claimant)
		return err
	})
	if err == nil {
		s.eventsChanged() // the event's actions are in the outbox now
		if onEnd != nil {
			s.runOnEnd(ctx, *onEnd)
		}
		return nil
	}
	if errors.Is(err, ErrLeaseBusy) || errors.Is(err, ErrClaimLost) || ctx.Err() != nil {
		return err
	}
	slog.ErrorContext(ctx, "lease event failed", "event", ev.ID, "type", ev.EventType, "lease", ev.LeaseID, "err", err)
	if ferr := s.recordFailure(ctx, ev, claimant); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// runEvent is one attempt of RunEvent.
func (s *Service) runEvent(ctx context.Context, tx *plugins.Tx, ev models.Event, claimant string) (*LeaseValues, error) {
	l, err := lockLease(ctx, tx, ev.LeaseID)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil, nil // deleted meanwhile; its events went with it
		}
		return nil, err
	}
	timedOut := l.Status == StatusInProgress && ev.EventType == EventStart
	if !IsStable(l.Status) && !timedOut {
		return nil, ErrLeaseBusy
	}
	ress, err := reservations(ctx, tx.DB, l.ID)
	if err != nil {
		return nil, err
	}
	if timedOut {
		// A BEST-EFFORT lease's start_lease is its deadline while its
		// hosts are being cleared (kinds.go).
		if err := s.timeOut(ctx, tx, l, ress); err != nil {
			return nil, err
		}
		return nil, markEvent(ctx, tx.DB, ev.ID, claimant, EventDone, Stamp(tx.Now))
	}
	pl := pluginLease(l, true)
	now := Stamp(tx.Now)
	setRes := func(r *models.Reservation, st string) error {
		if !ReservationCanTransition(r.Status, st) {
			return nil
		}
		r.Status = st
		return tx.WithContext(ctx).Model(&models.Reservation{}).Where("id = ?", r.ID).
			Updates(map[string]any{"status": st, "updated_at": now}).Error
	}
	is := func(want string) func(string) bool { return func(st string) bool { return st == want } }
	var onEnd *LeaseValues
	switch ev.EventType {
	case EventStart:
		if !CanTransition(l.Status, StatusStarting) {
			return nil, fmt.Errorf("%w: cannot start a lease in status %s", ErrLeaseBusy, l.Status)
		}
		err = s.eachLive(ress, is(ResPending), func(p plugins.Plugin, r *models.Reservation) error {
			if err := p.OnStart(ctx, tx, pl, r); err != nil {
				return fmt.Errorf("start reservation %s: %w", r.ID, err)
			}
			return setRes(r, ResActive)
		})
	case EventEnd:
		if !CanTransition(l.Status, StatusTerminating) {
			return nil, fmt.Errorf("%w: cannot end a lease in status %s", ErrLeaseBusy, l.Status)
		}
		lv := leaseValues(l.ID, l.Name, l.ProjectID, l.UserID, l.StartDate.UTC(), l.EndDate.UTC(), nil)
		onEnd = &lv
		err = s.eachLive(ress, func(st string) bool { return st != ResDeleted }, func(p plugins.Plugin, r *models.Reservation) error {
			if err := p.OnEnd(ctx, tx, pl, r); err != nil {
				return fmt.Errorf("end reservation %s: %w", r.ID, err)
			}
			return setRes(r, ResDeleted)
		})
		if err == nil {
			// The lease is over: nothing acts for its project any more.
			err = enqueueTrustDeletion(tx, l.TrustID)
		}
	case EventBeforeEnd:
		err = s.eachLive(ress, is(ResActive), func(p plugins.Plugin, r *models.Reservation) error {
			if err := p.BeforeEnd(ctx, tx, pl, r); err != nil {
				return fmt.Errorf("before end of reservation %s: %w", r.ID, err)
			}
			return nil
		})
	default:
		// Extra events are stored and never run.
	}
	if err != nil {
		return nil, err
	}
	if err := markEvent(ctx, tx.DB, ev.ID, claimant, EventDone, now); err != nil {
		return nil, err
	}
	if ev.EventType == EventStart || ev.EventType == EventEnd {
		st, err := s.derived(ctx, tx.DB, l.ID)
		if err != nil {
			return nil, err
		}
		if err := tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", l.ID).
			Updates(map[string]any{"status": st, "updated_at": now}).Error; err != nil {
			return nil, err
		}
	}
	if et, ok := notifyEvent[ev.EventType]; ok && s.notifying() {
		if err := s.notifyStored(ctx, tx, l.ID, "", et); err != nil {
			return nil, err
		}
	}
	return onEnd, nil
}

// markEvent sets the status of a claimed event, only while claimant still
// holds the claim.
func markEvent(ctx context.Context, g *gorm.DB, id, claimant, status string, now time.Time) error {
	res := g.WithContext(ctx).Model(&models.Event{}).
		Where("id = ? AND status = ? AND claimed_by = ?", id, EventInProgress, claimant).
		Updates(map[string]any{"status": status, "updated_at": now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return ErrClaimLost
	}
	return nil
}

// recordFailure marks a failed event ERROR; a failed start or end also
// puts the lease's live reservations and the lease in error.
func (s *Service) recordFailure(ctx context.Context, ev models.Event, claimant string) error {
	return s.write(ctx, nil, func(tx *plugins.Tx, _ attempt) error {
		now := Stamp(tx.Now)
		if err := markEvent(ctx, tx.DB, ev.ID, claimant, EventError, now); err != nil {
			return err
		}
		if ev.EventType != EventStart && ev.EventType != EventEnd {
			return nil
		}
		if err := tx.WithContext(ctx).Model(&models.Reservation{}).
			Where("lease_id = ? AND status IN ?", ev.LeaseID, []string{ResPending, ResActive}).
			Updates(map[string]any{"status": ResError, "updated_at": now}).Error; err != nil {
			return err
		}
		return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", ev.LeaseID).
			Updates(map[string]any{"status": StatusError, "updated_at": now}).Error
	})
}
