package hosts

import (
	"context"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/models"
)

// HostReservation is one reservation holding a host, with its lease's
// window.
type HostReservation struct {
	ID        string
	LeaseID   string
	StartDate time.Time
	EndDate   time.Time
}

// AllocationFilter narrows allocations to a lease or a reservation; with
// neither set only leases ending at or after now are included.
type AllocationFilter struct {
	LeaseID       string
	ReservationID string
}

// HostAllocation is the allocation view of one host.
type HostAllocation struct {
	ResourceID   string
	Reservations []HostReservation
}

// Allocations returns one entry per registered host, by id, with the
// reservations holding it.
func (s *Service) Allocations(ctx context.Context, f AllocationFilter) ([]HostAllocation, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&models.ComputeHost{}).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, err
	}
	byHost, err := s.hostAllocations(ctx, f, "")
	if err != nil {
		return nil, err
	}
	out := make([]HostAllocation, len(ids))
	for i, n := range ids {
		id := strconv.FormatInt(n, 10)
		out[i] = HostAllocation{ResourceID: id, Reservations: nonNil(byHost[id])}
	}
	return out, nil
}

// Allocation returns the allocation view of one host (errs.NotFound if
// unknown).
func (s *Service) Allocation(ctx context.Context, id string, f AllocationFilter) (*HostAllocation, error) {
	h, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	byHost, err := s.hostAllocations(ctx, f, h.ID)
	if err != nil {
		return nil, err
	}
	return &HostAllocation{ResourceID: h.ID, Reservations: nonNil(byHost[h.ID])}, nil
}

// hostAllocations reads the reservations holding each host (of hostID
// only, unless ""), keyed by the host's API id, by start date then
// reservation id. Host and instance reservations share
// computehost_allocations.
func (s *Service) hostAllocations(ctx context.Context, f AllocationFilter, hostID string) (map[string][]HostReservation, error) {
	q := s.db.WithContext(ctx).Table("computehost_allocations AS a").
		Select("a.compute_host_id, a.reservation_id, r.lease_id, l.start_date, l.end_date").
		Joins("JOIN reservations r ON r.id = a.reservation_id").
		Joins("JOIN leases l ON l.id = r.lease_id")
	if hostID != "" {
		q = q.Where("a.compute_host_id = ?", hostID)
	}
	if f.LeaseID != "" {
		q = q.Where("r.lease_id = ?", f.LeaseID)
	}
	if f.ReservationID != "" {
		q = q.Where("a.reservation_id = ?", f.ReservationID)
	}
	if f.LeaseID == "" && f.ReservationID == "" {
		q = q.Where("l.end_date >= ?", s.now().UTC())
	}
	var rows []struct {
		ComputeHostID string
		ReservationID string
		LeaseID       string
		StartDate     time.Time
		EndDate       time.Time
	}
	if err := q.Order("l.start_date, a.reservation_id").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := map[string][]HostReservation{}
	for _, r := range rows {
		out[r.ComputeHostID] = append(out[r.ComputeHostID], HostReservation{
			ID: r.ReservationID, LeaseID: r.LeaseID, StartDate: r.StartDate.UTC(), EndDate: r.EndDate.UTC(),
		})
	}
	return out, nil
}

// nonNil is rs, or an empty list (shown as [] rather than null).
func nonNil(rs []HostReservation) []HostReservation {
	if rs == nil {
		return []HostReservation{}
	}
	return rs
}
