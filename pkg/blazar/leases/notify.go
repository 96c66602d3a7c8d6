package leases

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/notify"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/plugins"
)

// The event types of the usage notifications, as Blazar sends them.
const (
	NotifyCreate            = "lease.create"
	NotifyUpdate            = "lease.update"
	NotifyDelete            = "lease.delete"
	NotifyStartLease        = "lease.event.start_lease"
	NotifyEndLease          = "lease.event.end_lease"
	NotifyBeforeEndLease    = "lease.event.before_end_lease"
	NotifyBeforeEndLeaseEnd = "lease.event.before_end_lease.stop"
)

// notifyEvent is the notification of a lease event that ran.
var notifyEvent = map[string]string{
	EventStart: NotifyStartLease, EventEnd: NotifyEndLease, EventBeforeEnd: NotifyBeforeEndLease,
}

// Payload is a notification's payload: the lease as Blazar's
// format_lease_payload gives it (the lease dict with lease_id for id,
// its reservations with their plugin fields and its events), dates as
// oslo's JSON encoder writes a datetime ("2026-11-25T10:35:00.000000").
type Payload struct {
	LeaseID      string           `json:"lease_id"`
	UserID       string           `json:"user_id"`
	ProjectID    string           `json:"project_id"`
	TrustID      *string          `json:"trust_id"`
	StartDate    string           `json:"start_date"`
	EndDate      string           `json:"end_date"`
	Status       string           `json:"status"`
	Reservations []map[string]any `json:"reservations"`
	Events       []map[string]any `json:"events"`
	Name         string           `json:"name"`
	CreatedAt    string           `json:"created_at"`
	UpdatedAt    *string          `json:"updated_at"`
	Degraded     bool             `json:"degraded"`
}

// PayloadOf is the notification payload of lease view v.
func PayloadOf(v *View) Payload {
	p := Payload{
		LeaseID: v.ID, UserID: v.UserID, ProjectID: v.ProjectID, TrustID: v.TrustID,
		StartDate: v.StartDate, EndDate: v.EndDate, Status: v.Status, Name: v.Name,
		CreatedAt: isoStamp(v.CreatedAt), UpdatedAt: isoStampPtr(v.UpdatedAt), Degraded: v.Degraded,
		Reservations: make([]map[string]any, 0, len(v.Reservations)), Events: make([]map[string]any, 0, len(v.Events)),
	}
	for _, r := range v.Reservations {
		m := make(map[string]any, len(r))
		for k, x := range r {
			m[k] = x
		}
		for _, k := range []string{"created_at", "updated_at"} {
			switch s := m[k].(type) {
			case string:
				m[k] = isoStamp(s)
			case *string:
				m[k] = isoStampPtr(s)
			}
		}
		p.Reservations = append(p.Reservations, m)
	}
	for _, e := range v.Events {
		p.Events = append(p.Events, map[string]any{
			"id": e.ID, "lease_id": e.LeaseID, "event_type": e.EventType, "time": e.Time, "status": e.Status,
			"created_at": isoStamp(e.CreatedAt), "updated_at": isoStampPtr(e.UpdatedAt),
		})
	}
	return p
}

// isoStamp turns an API stamp ("2026-11-25 10:35:07.123456", or without
// the fraction) into the notification's date format.
func isoStamp(s string) string {
	t, err := time.Parse("2006-01-02 15:04:05.999999999", s)
	if err != nil {
		return s
	}
	return FormatDate(t)
}

func isoStampPtr(s *string) *string {
	if s == nil {
		return nil
	}
	x := isoStamp(*s)
	return &x
}

// notifying reports whether notifications are on.
func (s *Service) notifying() bool { return s.cfg.Notifier.Enabled() }

// enqueueNotifications records the notifications eventTypes about lease
// view v in tx's outbox, with one Enqueue. A lease too large for an
// outbox row is notified without its reservations and events (logged),
// rather than failing the request.
func (s *Service) enqueueNotifications(ctx context.Context, tx *plugins.Tx, v *View, eventTypes ...string) error {
	acts := make([]outbox.Action, 0, len(eventTypes))
	for _, et := range eventTypes {
		p := PayloadOf(v)
		a, err := s.cfg.Notifier.Action(et, v.ID, p, tx.Now)
		if errors.Is(err, notify.ErrTooLarge) {
			slog.WarnContext(ctx, "lease notification sent without reservations and events: too large", "lease", v.ID, "event_type", et, "err", err)
			p.Reservations, p.Events = []map[string]any{}, []map[string]any{}
			a, err = s.cfg.Notifier.Action(et, v.ID, p, tx.Now)
		}
		if err != nil {
			return err
		}
		acts = append(acts, a)
	}
	return tx.Enqueue(acts...)
}

// notifyStored enqueues eventTypes about lease id as stored in tx, its
// status shown as status when not "" (Blazar notifies updates and deletes
// while the lease is UPDATING or DELETING).
func (s *Service) notifyStored(ctx context.Context, tx *plugins.Tx, id, status string, eventTypes ...string) error {
	v, err := s.storedView(ctx, tx, id)
	if err != nil {
		return err
	}
	if status != "" {
		v.Status = status
	}
	return s.enqueueNotifications(ctx, tx, v, eventTypes...)
}

// storedView is lease id's view as tx sees it.
func (s *Service) storedView(ctx context.Context, tx *plugins.Tx, id string) (*View, error) {
	var l models.Lease
	if err := tx.WithContext(ctx).Where("id = ?", id).Take(&l).Error; err != nil {
		return nil, err
	}
	vs, err := s.views(ctx, tx.DB, []models.Lease{l})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}
