package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// Lease kinds (capacity-leasing seed), the lease body's "lease_type", a
// Leasehold extension of the Blazar API:
//
//   - SCHEDULE (the default, what every client that sends no lease_type
//     gets): the given window, or a refusal; Blazar's behaviour.
//   - IMMEDIATE: start now, or a 409 with the reason and nothing stored.
//     The lease is ACTIVE at once; the compute side follows through the
//     outbox.
//   - BEST-EFFORT: as IMMEDIATE when enough hosts are free now; otherwise
//     a scavenger hunt (allocator.PlanScavenge) plans which eligible hosts
//     to clear by moving other projects' instances away. No complete plan
//     is a 409 with the reason; a plan stores the lease IN-PROGRESS with
//     its hosts booked and the moves in the outbox. The lease turns ACTIVE
//     when its hosts are clear, or TIMEDOUT when "timeout" seconds pass
//     first (its hosts are released; moves already made stay made).
//
// While a BEST-EFFORT lease is IN-PROGRESS its start_lease event sits at
// the deadline: if it runs, the lease times out; the activation marks it
// DONE at the time the hosts were clear.
const (
	KindSchedule   = "SCHEDULE"
	KindImmediate  = "IMMEDIATE"
	KindBestEffort = "BEST-EFFORT"
)

// DefaultTimeout is a BEST-EFFORT lease's timeout (seconds) when the
// request gives none.
const DefaultTimeout = 3600

// Clearer is implemented by the resource plugins whose resources a
// BEST-EFFORT lease may have to clear of other projects' workloads
// (plugins/host).
type Clearer interface {
	// PrepareClearing is plugins.Preparer's Prepare for a lease that may
	// clear resources: the choice it returns carries the moves, which its
	// ReservePrepared records in the outbox. No complete plan is an
	// errs.NotEnoughResources error with the reason.
	PrepareClearing(ctx context.Context, lease plugins.Lease, req plugins.Request, fresh bool, earlier []any) (any, error)
	// Cleared reports, in tx, whether no other project's workload is left
	// on the reservation's resources.
	Cleared(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) (bool, error)
}

// leaseKind is a create request's parsed kind.
type leaseKind struct {
	typ     string
	timeout int // seconds, BEST-EFFORT only
}

// leaseType is a stored lease_type as the API shows it (rows written
// before migration 0009 have the column's default).
func leaseType(s string) string {
	if s == "" {
		return KindSchedule
	}
	return s
}

// parseKind reads lease_type and timeout.
func parseKind(typ *string, timeout any) (leaseKind, error) {
	k := leaseKind{typ: KindSchedule}
	if typ != nil {
		k.typ = strings.ToUpper(strings.TrimSpace(*typ))
	}
	switch k.typ {
	case KindSchedule, KindImmediate, KindBestEffort:
	default:
		return k, plugins.BadRequest("Invalid lease_type %q: want SCHEDULE, IMMEDIATE or BEST-EFFORT", *typ)
	}
	if timeout == nil {
		if k.typ == KindBestEffort {
			k.timeout = DefaultTimeout
		}
		return k, nil
	}
	if k.typ != KindBestEffort {
		return k, plugins.BadRequest("timeout is only for lease_type BEST-EFFORT")
	}
	var n int64
	var err error
	switch v := timeout.(type) {
	case json.Number:
		n, err = strconv.ParseInt(string(v), 10, 32)
	case string:
		n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	case float64:
		n = int64(v)
		if float64(n) != v {
			err = errors.New("not an integer")
		}
	default:
		err = errors.New("not a number")
	}
	if err != nil || n < 1 {
		return k, plugins.BadRequest("Invalid timeout %v: want a whole number of seconds, at least 1", timeout)
	}
	k.timeout = int(n)
	return k, nil
}

// startsNow checks the start_date of a lease that starts now (IMMEDIATE,
// BEST-EFFORT): absent, "now", or the current minute.
func startsNow(k leaseKind, startS *string, now time.Time) (string, error) {
	if startS == nil || *startS == "now" {
		return "now", nil
	}
	t, err := ParseDate(*startS, now)
	if err != nil {
		return "", err
	}
	if !t.Equal(now.Truncate(time.Minute)) {
		return "", plugins.BadRequest("A lease of type %s starts now: leave start_date out or give \"now\"", k.typ)
	}
	return "now", nil
}

// clearingEvents moves a BEST-EFFORT lease's start_lease event to the
// deadline, and its before_end_lease event to no earlier than that.
func clearingEvents(evs []models.Event, deadline time.Time) []models.Event {
	out := append([]models.Event(nil), evs...)
	for i := range out {
		switch out[i].EventType {
		case EventStart:
			out[i].Time = deadline
		case EventBeforeEnd:
			if out[i].Time.Before(deadline) {
				out[i].Time = deadline
			}
		}
	}
	return out
}

// prepareClearing is createPlan.prepare for the scavenger hunt: plugins
// that can clear resources plan it, the others choose as usual.
func (p *createPlan) prepareClearing(ctx context.Context, a attempt) error {
	for i := range p.res {
		r := &p.res[i]
		var earlier []any
		for j := range i {
			if p.res[j].p == r.p {
				earlier = append(earlier, p.res[j].prepared)
			}
		}
		var c any
		var err error
		switch pp := r.p.(type) {
		case Clearer:
			c, err = pp.PrepareClearing(ctx, p.lease, r.req, a.fresh, earlier)
		case plugins.Preparer:
			c, err = pp.Prepare(ctx, p.lease, r.req, a.fresh, earlier)
		default:
			continue
		}
		if err != nil {
			return err
		}
		r.prepared = c
	}
	return nil
}

// InProgress reports whether lease id is still IN-PROGRESS (a move of
// its scavenger hunt is still wanted). A deleted lease is not.
func (s *Service) InProgress(ctx context.Context, id string) (bool, error) {
	var st []string
	if err := s.db.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", id).Pluck("status", &st).Error; err != nil {
		return false, err
	}
	return len(st) == 1 && st[0] == StatusInProgress, nil
}

// activateIfClear starts an IN-PROGRESS lease whose resources are all
// clear, in tx (the outbox's completion of one of its moves): the
// reservations start as start_lease would start them, the start_lease
// event is DONE at now, and the lease is ACTIVE. Anything else is left
// alone.
func (s *Service) activateIfClear(ctx context.Context, g *gorm.DB, leaseID string) error {
	// Most completed actions are not a scavenger hunt's: a plain read
	// first, the lock only for a lease in progress.
	var st []string
	if err := g.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", leaseID).Pluck("status", &st).Error; err != nil {
		return err
	}
	if len(st) != 1 || st[0] != StatusInProgress {
		return nil
	}
	tx := plugins.NewTx(g, s.db.Dialect, s.now())
	l, err := lockLease(ctx, tx, leaseID)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		return err
	}
	if l.Status != StatusInProgress {
		return nil
	}
	ress, err := reservations(ctx, tx.DB, l.ID)
	if err != nil {
		return err
	}
	pl := pluginLease(l, true)
	for i := range ress {
		if ress[i].Status != ResPending {
			continue
		}
		p, err := s.plugins.Get(ress[i].ResourceType)
		if err != nil {
			return err
		}
		if c, ok := p.(Clearer); ok {
			clear, err := c.Cleared(ctx, tx, pl, &ress[i])
			if err != nil || !clear {
				return err
			}
		}
	}
	now := Stamp(tx.Now)
	pl.Status = StatusActive
	err = s.eachLive(ress, func(st string) bool { return st == ResPending }, func(p plugins.Plugin, r *models.Reservation) error {
		if err := p.OnStart(ctx, tx, pl, r); err != nil {
			return fmt.Errorf("start reservation %s: %w", r.ID, err)
		}
		return tx.WithContext(ctx).Model(&models.Reservation{}).Where("id = ?", r.ID).
			Updates(map[string]any{"status": ResActive, "updated_at": now}).Error
	})
	if err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Model(&models.Event{}).
		Where("lease_id = ? AND event_type = ? AND status IN ?", l.ID, EventStart, []string{EventUndone, EventInProgress}).
		Updates(map[string]any{"status": EventDone, "time": now, "updated_at": now}).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", l.ID).
		Updates(map[string]any{"status": StatusActive, "updated_at": now}).Error; err != nil {
		return err
	}
	if !s.notifying() {
		return nil
	}
	return s.notifyStored(ctx, tx, l.ID, "", NotifyStartLease)
}

// timeOut ends an IN-PROGRESS lease whose deadline (its start_lease
// event) came before its resources were clear: the reservations release
// what they hold, the lease's events are DONE, the lease is TIMEDOUT.
func (s *Service) timeOut(ctx context.Context, tx *plugins.Tx, l *models.Lease, ress []models.Reservation) error {
	pl := pluginLease(l, true)
	now := Stamp(tx.Now)
	err := s.eachLive(ress, func(st string) bool { return st != ResDeleted }, func(p plugins.Plugin, r *models.Reservation) error {
		if err := p.OnEnd(ctx, tx, pl, r); err != nil {
			return fmt.Errorf("release reservation %s: %w", r.ID, err)
		}
		return tx.WithContext(ctx).Model(&models.Reservation{}).Where("id = ?", r.ID).
			Updates(map[string]any{"status": ResDeleted, "updated_at": now}).Error
	})
	if err != nil {
		return err
	}
	// The end and before-end events have nothing left to do.
	if err := tx.WithContext(ctx).Model(&models.Event{}).
		Where("lease_id = ? AND event_type IN ? AND status = ?", l.ID, []string{EventEnd, EventBeforeEnd}, EventUndone).
		Updates(map[string]any{"status": EventDone, "updated_at": now}).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", l.ID).
		Updates(map[string]any{"status": StatusTimedOut, "updated_at": now}).Error; err != nil {
		return err
	}
	if !s.notifying() {
		return nil
	}
	// Blazar has no event for it: the lease's new status is an update.
	return s.notifyStored(ctx, tx, l.ID, "", NotifyUpdate)
}
