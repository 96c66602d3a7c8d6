package hosts

import (
	"context"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
)

// HealFunc re-places the current and future reservations of a failed
// host (the lease service's HealHost); lookup gives the host's fields
// and capabilities.
type HealFunc func(ctx context.Context, hostID string, lookup func(string) (string, bool)) error

// SetHealer sets what runs after a host is made non-reservable (PUT
// reservable=false) and before a forced delete: healing, wired by the
// composition root. Without one, nothing is re-placed.
func (s *Service) SetHealer(f HealFunc) { s.healer = f }

// heal runs the healer for h, if any.
func (s *Service) heal(ctx context.Context, h *Host) error {
	if s.healer == nil || h == nil {
		return nil
	}
	return s.healer(ctx, h.ID, h.Lookup)
}

// DeleteForce unregisters a failed host even while it is reserved
// (Leasehold's DELETE /v1/os-hosts/{id}?force=true): the host is made
// non-reservable first (no new booking lands on it), its current and
// future reservations are healed (moved to equivalent free hosts, or
// flagged missing_resources), and the host is deleted with its ended
// bookings. The compute service is not asked about servers (the host is
// presumed dead). A current or future booking that healing could not
// handle (a reservation type that cannot heal) still refuses the delete.
func (s *Service) DeleteForce(ctx context.Context, id string) error {
	h, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if h.Reservable {
		n, _ := parseID(id)
		err := s.write(ctx, func(tx *gorm.DB) error {
			return tx.Model(&models.ComputeHost{}).Where("id = ?", n).
				Updates(map[string]any{"reservable": false, "updated_at": s.now()}).Error
		})
		if err != nil {
			return err
		}
		h.Reservable = false
	}
	if err := s.heal(ctx, h); err != nil {
		return err
	}
	return s.write(ctx, func(tx *gorm.DB) error {
		if _, err := s.hostReservedTx(ctx, tx, id); err != nil { // takes the host's resource lock
			return err
		}
		var left int64
		if err := tx.Model(&models.ComputeHostAllocation{}).Where("compute_host_id = ? AND end_date > ?", id, s.now()).
			Count(&left).Error; err != nil {
			return err
		}
		if left > 0 {
			return errs.Conflictf("Can't delete host %s. %d current or future reservations could not be moved off it.", id, left)
		}
		if err := tx.Where("compute_host_id = ?", id).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
			return err
		}
		return s.deleteHostTx(ctx, tx, id, h.HypervisorHostname)
	})
}
