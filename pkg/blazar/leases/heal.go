package leases

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/plugins"
)

// Healer is implemented by the plugins whose reservations can be moved
// off a failed host (physical:host).
type Healer interface {
	// Heal re-places res's current or future bookings on the failed host
	// hostID (lookup gives its fields and capabilities) in tx; it returns
	// the new host, or "" when none was free and the booking was
	// dropped.
	Heal(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, hostID string, lookup func(string) (string, bool)) (string, error)
}

// Healed is the outcome of healing one reservation.
type Healed struct {
	LeaseID, ReservationID string
	// To is the host that took the booking; empty when none could
	// (the reservation is then missing_resources).
	To string
}

// HealHost re-places the current and future reservations on host hostID,
// which was just made non-reservable or is being deleted by force (lookup
// gives its fields and capabilities), as upstream's host healing does
// (reference blazar.md §6.4), each reservation in its own transaction:
//
//   - a reservation that gets a new host keeps it; an active one is
//     flagged resources_changed (the new host is reserved and the failed
//     one released through the outbox);
//   - one for which no equivalent host is free loses the booking and is
//     flagged missing_resources, which is how the lease reports it;
//   - any flag set marks the lease degraded. Nothing resets the flags.
//
// Reservations of types whose plugin cannot heal, and of leases not
// pending or active, are left alone.
func (s *Service) HealHost(ctx context.Context, hostID string, lookup func(string) (string, bool)) ([]Healed, error) {
	type target struct{ ResID, LeaseID, Type string }
	var targets []target
	err := s.db.WithContext(ctx).Table("computehost_allocations AS a").
		Select("DISTINCT r.id AS res_id, r.lease_id AS lease_id, r.resource_type AS type, l.start_date, l.id, r.created_at").
		Joins("JOIN reservations r ON r.id = a.reservation_id").
		Joins("JOIN leases l ON l.id = r.lease_id").
		Where("a.compute_host_id = ? AND a.end_date > ? AND r.status IN ? AND l.status IN ?",
			hostID, s.now(), []string{"pending", "active"}, []string{StatusPending, StatusActive}).
		// The earliest leases first: the active ones take their pick
		// of the free hosts before the future ones.
		Order("l.start_date, l.id, r.created_at, r.id").Scan(&targets).Error
	if err != nil {
		return nil, err
	}
	var out []Healed
	for _, t := range targets {
		p, err := s.plugins.Get(t.Type)
		if err != nil {
			return out, err
		}
		h, ok := p.(Healer)
		if !ok {
			slog.Warn("reservation on a failed host cannot be healed", "reservation", t.ResID, "type", t.Type, "host", hostID)
			continue
		}
		var healed *Healed
		err = s.write(ctx, nil, func(tx *plugins.Tx, _ attempt) error {
			healed = nil
			l, err := lockLease(ctx, tx, t.LeaseID)
			if err != nil {
				return err
			}
			var res models.Reservation
			if err := tx.WithContext(ctx).Where("id = ?", t.ResID).Take(&res).Error; err != nil {
				return err
			}
			if (l.Status != StatusPending && l.Status != StatusActive) || (res.Status != "pending" && res.Status != "active") {
				return nil // ended or deleted meanwhile
			}
			to, err := h.Heal(ctx, tx, pluginLease(l, true), &res, hostID, lookup)
			if err != nil {
				return err
			}
			healed = &Healed{LeaseID: l.ID, ReservationID: res.ID, To: to}
			flag := ""
			switch {
			case to == "":
				flag = "missing_resources"
			case res.Status == "active":
				flag = "resources_changed"
			}
			if flag == "" {
				return nil
			}
			if err := tx.WithContext(ctx).Model(&models.Reservation{}).Where("id = ?", res.ID).
				Updates(map[string]any{flag: true, "updated_at": tx.Now}).Error; err != nil {
				return err
			}
			return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", l.ID).
				Updates(map[string]any{"degraded": true, "updated_at": tx.Now}).Error
		})
		if err != nil {
			return out, err
		}
		if healed != nil {
			slog.Info("healed a reservation of a failed host", "lease", healed.LeaseID, "reservation", healed.ReservationID,
				"from", hostID, "to", healed.To, "missing_resources", healed.To == "")
			out = append(out, *healed)
		}
	}
	s.eventsChanged() // outbox actions may have been recorded
	return out, nil
}
