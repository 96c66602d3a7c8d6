package hosts

import (
	"context"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/hostquery"
)

// The "is it reserved" checks made before a host, a capability or a
// floating IP is deleted or changed. Inside a write they first take the
// resource's lock (db.LockResources, the lock the host and floating-IP
// plugins take before booking), so a booking and the check are
// serialised: either the booking commits first and the check sees its
// allocation, or the booking waits and then finds the resource gone
// (hosts.ReservableTx, the floating-IP plugin's own re-read).

// hostReservedTx locks the host (API id) and reports whether it has any
// allocation.
func (s *Service) hostReservedTx(ctx context.Context, tx *gorm.DB, hostID string) (bool, error) {
	if err := db.LockResources(ctx, tx, s.db.Dialect, ResourceType, []string{hostID}); err != nil {
		return false, err
	}
	return s.allocated(tx.WithContext(ctx), true, "computehost_allocations", "compute_host_id", hostID)
}

// floatingIPReservedTx locks the floating IP and reports whether it has
// any allocation.
func (s *Service) floatingIPReservedTx(ctx context.Context, tx *gorm.DB, fipID string) (bool, error) {
	if err := db.LockResources(ctx, tx, s.db.Dialect, FloatingIPResourceType, []string{fipID}); err != nil {
		return false, err
	}
	return s.allocated(tx.WithContext(ctx), true, "floatingip_allocations", "floating_ip_id", fipID)
}

// allocated reports whether table has a row whose column is id; with
// lock, through a locking read on MySQL (it waits for a booking that
// holds the row).
func (s *Service) allocated(tx *gorm.DB, lock bool, table, column, id string) (bool, error) {
	q := tx.Table(table).Select(column).Where(column+" = ?", id).Limit(1)
	if lock && s.db.Dialect == db.MySQL {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var ids []string
	if err := q.Pluck(column, &ids).Error; err != nil {
		return false, err
	}
	return len(ids) > 0, nil
}

// keysInUse returns the keys that the hypervisor or resource properties
// of the reservations holding the host (API id) name (never nil). The
// caller's write holds the host's row lock (its UPDATE of the host), but
// a booking takes the host's resource lock, not the row: this takes the
// resource lock too.
func (s *Service) keysInUse(ctx context.Context, tx *gorm.DB, hostID string) (map[string]bool, error) {
	if err := db.LockResources(ctx, tx, s.db.Dialect, ResourceType, []string{hostID}); err != nil {
		return nil, err
	}
	var hrs []models.ComputeHostReservation
	err := tx.WithContext(ctx).Table("computehost_reservations AS h").Select("h.*").
		Joins("JOIN computehost_allocations a ON a.reservation_id = h.reservation_id").
		Where("a.compute_host_id = ?", hostID).Find(&hrs).Error
	if err != nil {
		return nil, err
	}
	// Instance reservations with slots on the host name keys too.
	var instProps []string
	if err := tx.WithContext(ctx).Raw(`SELECT i.resource_properties FROM instance_reservations i
 JOIN instance_allocations a ON a.reservation_id = i.reservation_id WHERE a.compute_host_id = ?`, hostID).Scan(&instProps).Error; err != nil {
		return nil, err
	}
	for _, p := range instProps {
		hrs = append(hrs, models.ComputeHostReservation{ResourceProperties: p})
	}
	keys := map[string]bool{}
	for _, hr := range hrs {
		for _, text := range []string{hr.HypervisorProperties, hr.ResourceProperties} {
			q, err := hostquery.Parse(text)
			if err != nil {
				continue // not a query a booking could have used
			}
			for _, k := range q.Keys() {
				keys[k] = true
			}
		}
	}
	return keys, nil
}
