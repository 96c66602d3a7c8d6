package hosts

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
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
	ids, byHost, err := s.allAllocations(ctx, f, s.now().UTC())
	if err != nil {
		return nil, err
	}
	out := make([]HostAllocation, len(ids))
	for i, id := range ids {
		out[i] = HostAllocation{ResourceID: id, Reservations: nonNil(byHost[id])}
	}
	return out, nil
}

// AppendAllocations appends to b the JSON array of Allocations as the API
// shows it (what encoding/json writes for each host's
// {"resource_id", "reservations": [{"id", "lease_id", "start_date",
// "end_date"}]} maps: keys sorted), rendered from the rows.
func (s *Service) AppendAllocations(ctx context.Context, f AllocationFilter, b []byte) ([]byte, error) {
	body, err := s.AllocationsJSON(ctx, f)
	if err != nil {
		return nil, err
	}
	return append(b, body...), nil
}

// AllocationsJSON returns the JSON array AppendAllocations appends. The
// bytes may be shared with other callers (the cached listing): read
// them, never write.
func (s *Service) AllocationsJSON(ctx context.Context, f AllocationFilter) ([]byte, error) {
	if f == (AllocationFilter{}) {
		if body, err := s.cachedAllocations(ctx); err != nil || body != nil {
			return body, err
		}
		body, _, err := s.incrementalAllocations(ctx, s.now().UTC())
		return body, err
	}
	ids, byHost, err := s.allAllocations(ctx, f, s.now().UTC())
	if err != nil {
		return nil, err
	}
	return renderAllocations(ids, byHost), nil
}

// renderAllocations renders the rows of allAllocations.
func renderAllocations(ids []string, byHost map[string][]HostReservation) []byte {
	n := 0
	for _, rs := range byHost {
		n += len(rs)
	}
	// A generous estimate of the body: one allocation for the whole of it.
	b := make([]byte, 0, 2+40*len(ids)+190*n)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"reservations":[`...)
		for j, r := range byHost[id] {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"end_date":`...)
			b = leases.AppendDate(b, r.EndDate)
			b = append(b, `,"id":`...)
			b = leases.AppendString(b, r.ID)
			b = append(b, `,"lease_id":`...)
			b = leases.AppendString(b, r.LeaseID)
			b = append(b, `,"start_date":`...)
			b = leases.AppendDate(b, r.StartDate)
			b = append(b, '}')
		}
		b = append(b, `],"resource_id":`...)
		b = leases.AppendString(b, id)
		b = append(b, '}')
	}
	return append(b, ']')
}

// allocCache is the last unfiltered allocation listing rendered. The
// listing depends on the clock as well as on the database (only leases
// ending at or after now are shown), so it also records the span of
// time it holds for: from the clock reading it was loaded at until the
// earliest end among the leases it shows.
type allocCache struct {
	watch leases.ChangeWatch
	gate  leases.Gate
	loads atomic.Int64 // listings read into the cache (tests)
	mu    sync.Mutex
	at    leases.DataVersion
	from  time.Time
	until time.Time // zero: no lease shown, no end in sight
	body  []byte
}

// get returns the body cached at version v (or later) that holds at now.
func (c *allocCache) get(v leases.DataVersion, now time.Time) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body == nil || !c.at.AtLeast(v) || now.Before(c.from) {
		return nil
	}
	// At the end itself the lease is still shown (end_date >= now), but
	// the stored text and the clock compare by different rules there:
	// reload rather than guess.
	if !c.until.IsZero() && !now.Before(c.until) {
		return nil
	}
	return c.body
}

// cachedAllocations returns the unfiltered listing from the cache,
// loading it when the database or the clock moved it; nil (and no
// error) when the database offers no change counter.
func (s *Service) cachedAllocations(ctx context.Context) ([]byte, error) {
	c := &s.allocCache
	v, ok, err := c.watch.Version(ctx, s.db)
	if err != nil || !ok {
		return nil, err
	}
	now := s.now().UTC()
	if body := c.get(v, now); body != nil {
		return body, nil
	}
	if err := c.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer c.gate.Leave()
	if body := c.get(v, now); body != nil {
		return body, nil
	}
	// Read after the version: a write racing with this load moves the
	// version again, and the next request reloads.
	c.loads.Add(1)
	body, until, err := s.incrementalAllocations(ctx, now)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.at, c.from, c.until, c.body = v, now, until, body
	c.mu.Unlock()
	return body, nil
}

// allAllocations reads the API ids of every host, in id order, and the
// reservations holding them: two queries, typed rows.
func (s *Service) allAllocations(ctx context.Context, f AllocationFilter, now time.Time) ([]string, map[string][]HostReservation, error) {
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, nil, err
	}
	ids, err := hostIDs(ctx, sqlDB)
	if err != nil {
		return nil, nil, err
	}
	byHost, err := s.hostAllocations(ctx, sqlDB, f, "", now)
	return ids, byHost, err
}

// Allocation returns the allocation view of one host (errs.NotFound if
// unknown).
func (s *Service) Allocation(ctx context.Context, id string, f AllocationFilter) (*HostAllocation, error) {
	h, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	byHost, err := s.hostAllocations(ctx, sqlDB, f, h.ID, s.now().UTC())
	if err != nil {
		return nil, err
	}
	return &HostAllocation{ResourceID: h.ID, Reservations: nonNil(byHost[h.ID])}, nil
}

// hostAllocations reads the reservations holding each host (of hostID
// only, unless ""), keyed by the host's API id, by start date then
// reservation id. Host and instance reservations share
// computehost_allocations.
func (s *Service) hostAllocations(ctx context.Context, d *sql.DB, f AllocationFilter, hostID string, now time.Time) (map[string][]HostReservation, error) {
	t := func(col string) string { return leases.TimeExpr(s.db.Dialect, col) }
	q := "SELECT a.compute_host_id, a.reservation_id, r.lease_id, " + t("l.start_date") + ", " + t("l.end_date") +
		" FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id JOIN leases l ON l.id = r.lease_id WHERE 1 = 1"
	var args []any
	if hostID != "" {
		q += " AND a.compute_host_id = ?"
		args = append(args, hostID)
	}
	if f.LeaseID != "" {
		q += " AND r.lease_id = ?"
		args = append(args, f.LeaseID)
	}
	if f.ReservationID != "" {
		q += " AND a.reservation_id = ?"
		args = append(args, f.ReservationID)
	}
	if f.LeaseID == "" && f.ReservationID == "" {
		q += " AND l.end_date >= ?"
		args = append(args, now)
	}
	rows, err := d.QueryContext(ctx, q+" ORDER BY l.start_date, a.reservation_id", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]HostReservation{}
	for rows.Next() {
		var host string
		var r HostReservation
		var start, end leases.TimeCol
		if err := rows.Scan(leases.Str{P: &host}, leases.Str{P: &r.ID}, leases.Str{P: &r.LeaseID}, &start, &end); err != nil {
			return nil, err
		}
		r.StartDate, r.EndDate = start.T, end.T
		out[host] = append(out[host], r)
	}
	return out, rows.Err()
}

// nonNil is rs, or an empty list (shown as [] rather than null).
func nonNil(rs []HostReservation) []HostReservation {
	if rs == nil {
		return []HostReservation{}
	}
	return rs
}
