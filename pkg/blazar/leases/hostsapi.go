package leases

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/hostquery"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// HostsAPI gives pkg/blazar/hosts what it needs from the lease side: the
// allocations per host (GET /v1/os-hosts/allocations) and the "is it
// reserved" checks made before a host, a capability or a floating IP is
// deleted or changed.
type HostsAPI struct {
	DB  *db.DB
	Now func() time.Time
}

var (
	_ hosts.AllocationLister   = (*HostsAPI)(nil)
	_ hosts.ReservationChecker = (*HostsAPI)(nil)
)

// HostAllocations implements hosts.AllocationLister: host and instance
// reservations share computehost_allocations.
func (a *HostsAPI) HostAllocations(ctx context.Context, f hosts.AllocationFilter) (map[string][]hosts.HostReservation, error) {
	type row struct {
		ComputeHostID string
		ReservationID string
		LeaseID       string
		StartDate     time.Time
		EndDate       time.Time
	}
	q := a.DB.WithContext(ctx).Table("computehost_allocations AS a").
		Select("a.compute_host_id, a.reservation_id, r.lease_id, l.start_date, l.end_date").
		Joins("JOIN reservations r ON r.id = a.reservation_id").
		Joins("JOIN leases l ON l.id = r.lease_id")
	switch {
	case f.LeaseID != "" || f.ReservationID != "":
		if f.LeaseID != "" {
			q = q.Where("r.lease_id = ?", f.LeaseID)
		}
		if f.ReservationID != "" {
			q = q.Where("a.reservation_id = ?", f.ReservationID)
		}
	default:
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		q = q.Where("l.end_date >= ?", now().UTC())
	}
	var rows []row
	if err := q.Order("l.start_date, a.reservation_id").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := map[string][]hosts.HostReservation{}
	for _, r := range rows {
		out[r.ComputeHostID] = append(out[r.ComputeHostID], hosts.HostReservation{
			ID: r.ReservationID, LeaseID: r.LeaseID, StartDate: r.StartDate.UTC(), EndDate: r.EndDate.UTC(),
		})
	}
	return out, nil
}

// lockAndCount locks the resource (so a concurrent booking and this check
// are serialised) and counts its allocations with a locking read.
func lockAndCount(ctx context.Context, tx *gorm.DB, resourceType, id, table, column string) (bool, error) {
	dialect := db.SQLite
	if tx.Dialector.Name() == "mysql" {
		dialect = db.MySQL
	}
	ptx := plugins.NewTx(tx.WithContext(ctx), dialect, time.Now())
	if err := plugins.LockResources(ptx, resourceType, []string{id}); err != nil {
		return false, err
	}
	q := tx.WithContext(ctx).Table(table).Select(column).Where(column+" = ?", id).Limit(1)
	if dialect == db.MySQL {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var ids []string
	if err := q.Pluck(column, &ids).Error; err != nil {
		return false, err
	}
	return len(ids) > 0, nil
}

// HostReserved implements hosts.ReservationChecker.
func (a *HostsAPI) HostReserved(ctx context.Context, tx *gorm.DB, hostID string) (bool, error) {
	return lockAndCount(ctx, tx, hostplugin.ResourceType, hostID, "computehost_allocations", "compute_host_id")
}

// FloatingIPReserved implements hosts.ReservationChecker.
func (a *HostsAPI) FloatingIPReserved(ctx context.Context, tx *gorm.DB, fipID string) (bool, error) {
	return lockAndCount(ctx, tx, floatingip.ResourceType, fipID, "floatingip_allocations", "floating_ip_id")
}

// CapabilityInUse implements hosts.ReservationChecker: a reservation
// holding the host names the key in its requirements.
func (a *HostsAPI) CapabilityInUse(ctx context.Context, tx *gorm.DB, hostID, key string) (bool, error) {
	var hrs []models.ComputeHostReservation
	err := tx.WithContext(ctx).Table("computehost_reservations AS h").Select("h.*").
		Joins("JOIN computehost_allocations a ON a.reservation_id = h.reservation_id").
		Where("a.compute_host_id = ?", hostID).Find(&hrs).Error
	if err != nil {
		return false, err
	}
	for _, hr := range hrs {
		for _, s := range []string{hr.HypervisorProperties, hr.ResourceProperties} {
			q, err := hostquery.Parse(s)
			if err != nil {
				continue
			}
			for _, k := range q.Keys() {
				if k == key {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
