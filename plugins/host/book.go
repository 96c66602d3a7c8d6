package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// choose runs the allocator on the view (never the database: it runs
// inside the write transaction). exclude leaves out one reservation's
// bookings; keep restricts the candidates. A refusal from a view that a
// forced refresh might change is plugins.ErrStale. usedHosts are the hosts
// the reservation or lease already holds (their failure domains count as
// used in the spread). reserve applies the reserve of bigger hosts
// (Config.ReservePercent): not when re-checking hosts a reservation
// already holds. lease's exclusion tags spread the choice away from other
// overlapping leases sharing one (allocator.TagRules.WithExclusion).
func (p *Plugin) choose(tx *plugins.Tx, lease plugins.Lease, ps params, win allocator.Interval, min, max int, exclude string, keep func(string) bool, usedHosts []string, reserve bool) (allocator.HostDecision, error) {
	pct := 0
	if reserve {
		pct = p.cfg.ReservePercent
	}
	req := allocator.HostRequest{Window: win, Cleaning: p.cfg.Cleaning, Min: min, Max: max,
		UsedDomains: p.idx.domainsOf(usedHosts), ReservePercent: pct}
	if len(p.cfg.Rules.ExclusionTags(lease.Tags)) > 0 {
		// Read before view: the index's read lock is not taken twice.
		req = p.cfg.Rules.WithExclusion(req, lease.Tags, p.idx.exclusionBookings(win, lease.ID), p.idx.domainsOf)
	}
	var dec allocator.HostDecision
	var err error
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	p.idx.view(lo, hi, exclude, keep, func(hosts []allocator.Host, ranks []int32, info func(string) *Host) {
		r := req
		r.Match = ps.match(info)
		dec, err = allocator.ChoosePrepared(p.cfg.Rules, allocator.PreparedHosts{Hosts: hosts, Ranks: ranks}, r, allocator.ChooseOptions{})
	})
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) && !tx.Fresh {
		return dec, fmt.Errorf("%w: %w", plugins.ErrStale, err)
	}
	return dec, err
}

// hostnames maps host ids to the names the compute driver knows
// (service_name), from the view.
func (p *Plugin) hostnames(ids []string) []string {
	p.idx.mu.RLock()
	defer p.idx.mu.RUnlock()
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		name := id
		if i, ok := p.idx.pos[id]; ok {
			h := &p.idx.infos[i]
			name = h.HypervisorHostname
			if h.ServiceName != "" {
				name = h.ServiceName
			}
		}
		out = append(out, name)
	}
	return out
}

// notEnough maps the allocator's refusal to Blazar's error (409 here;
// upstream gives 500), keeping the explanation.
func notEnough(err error) error {
	if errors.Is(err, plugins.ErrStale) {
		return err
	}
	var le *lendingLimitError
	if errors.As(err, &le) {
		return plugins.NotEnough("%s", le.Error())
	}
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) {
		return plugins.NotEnough("%s", ne.Error())
	}
	if errors.Is(err, allocator.ErrInvalidRequest) {
		return plugins.BadRequest("%s", err.Error())
	}
	return err
}

// lockAndCheck locks hostIDs and re-checks them for bookings overlapping
// the window (cleaning included), ignoring reservation exclude.
func (p *Plugin) lockAndCheck(ctx context.Context, tx *plugins.Tx, hostIDs []string, win allocator.Interval, exclude string) error {
	if err := plugins.LockResources(tx, ResourceType, hostIDs); err != nil {
		return err
	}
	gone, err := p.unreservable(ctx, tx, hostIDs)
	if err != nil {
		return err
	}
	if len(gone) > 0 {
		return plugins.ErrRetry // the views are refreshed before the retry
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	clash, err := p.clashing(ctx, tx, hostIDs, lo, hi, exclude)
	if err != nil {
		return err
	}
	if len(clash) > 0 {
		return plugins.ErrRetry
	}
	return nil
}

// unreservable returns which of the (locked) hostIDs were deleted or made
// non-reservable since the view was taken (Config.CheckHosts).
func (p *Plugin) unreservable(ctx context.Context, tx *plugins.Tx, hostIDs []string) ([]string, error) {
	if p.cfg.CheckHosts == nil || len(hostIDs) == 0 {
		return nil, nil
	}
	ok, err := p.cfg.CheckHosts(tx.WithContext(ctx), hostIDs)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, id := range hostIDs {
		if !ok[id] {
			gone = append(gone, id)
		}
	}
	return gone, nil
}

func allocRows(resID string, hostIDs []string, win allocator.Interval) []allocRow {
	rows := make([]allocRow, len(hostIDs))
	for i, h := range hostIDs {
		rows[i] = allocRow{ComputeHostID: h, ReservationID: resID, StartDate: win.Start, EndDate: win.End}
	}
	return rows
}

func (p *Plugin) insertAllocs(ctx context.Context, tx *plugins.Tx, resID string, hostIDs []string, win allocator.Interval) error {
	if len(hostIDs) == 0 {
		return nil
	}
	rows := make([]models.ComputeHostAllocation, len(hostIDs))
	for i, h := range hostIDs {
		rows[i] = models.ComputeHostAllocation{
			ID: uuid.NewString(), ReservationID: resID, ComputeHostID: h,
			StartDate: win.Start, EndDate: win.End, CreatedAt: tx.Now,
		}
	}
	return tx.WithContext(ctx).Create(&rows).Error
}

// choice is a new reservation's hosts chosen by Prepare, with what
// choosing again needs.
type choice struct {
	ps  params
	req allocator.HostRequest
	// taken are the hosts of the request's earlier reservations: they are
	// busy over the window too (booked in the same transaction).
	taken  map[string]bool
	chosen []string
	// busyNow are the hosts other projects use now, with the reason (a
	// window that starts now, kinds.go); moves are a BEST-EFFORT lease's
	// planned instance moves (PrepareClearing).
	busyNow map[string]string
	moves   []move
	// order is the project's ownership pools (nil: ownership off);
	// budgets its lenders' lending limits left over the window.
	order   *ownership.Order
	budgets map[string]int
	// cuts are the borrower bookings a reclaim shortens for this choice
	// (ownership_reclaim.go).
	cuts []cut
	// tags are the lease's tags when some are exclusion tags (nil
	// otherwise): the choice spreads over failure domains away from
	// overlapping leases sharing one (allocator.TagRules.WithExclusion).
	tags  []string
	lease string
}

// Prepare implements plugins.Preparer: the hosts of a new reservation,
// chosen from the view (allocator.ChoosePrepared; no database access).
func (p *Plugin) Prepare(ctx context.Context, lease plugins.Lease, r plugins.Request, fresh bool, earlier []any) (any, error) {
	ps, ok := r.(params)
	if !ok {
		return nil, fmt.Errorf("physical:host: request of type %T", r)
	}
	c := &choice{ps: ps, taken: takenBy(earlier), req: allocator.HostRequest{
		Window:   allocator.Interval{Start: lease.Start, End: lease.End},
		Cleaning: p.cfg.Cleaning, Min: ps.min, Max: ps.max, ReservePercent: p.cfg.ReservePercent,
	}}
	if p.startsNow(lease) {
		var err error
		if c.busyNow, err = p.busyNow(ctx, p.db, lease.ProjectID); err != nil {
			return nil, err
		}
	}
	c.order = p.ownershipOrder(lease.ProjectID)
	if len(p.cfg.Rules.ExclusionTags(lease.Tags)) > 0 {
		c.tags, c.lease = lease.Tags, lease.ID
	}
	if ok, err := p.reclaimFirst(ctx, c, lease); err != nil {
		return nil, err
	} else if ok {
		return c, nil
	}
	if err := p.chooseNew(c, nil, fresh); err != nil {
		if err := p.reclaimOr(ctx, c, lease, fresh, err); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err := p.withinLimits(ctx, c, lease, earlier, fresh); err != nil {
		return nil, err
	}
	return c, nil
}

// chooseNew chooses c's hosts from the view, leaving out the hosts of
// c.taken and excluded. A refusal from a view that may be stale (not
// fresh) is plugins.ErrStale.
func (p *Plugin) chooseNew(c *choice, excluded map[string]bool, fresh bool) error {
	match := c.ps.match
	if len(c.taken) > 0 || len(excluded) > 0 || len(c.busyNow) > 0 {
		match = func(info func(string) *Host) func(*allocator.Host) (bool, string) {
			m := c.ps.match(info)
			return func(h *allocator.Host) (bool, string) {
				if c.taken[h.ID] {
					return false, "taken by another reservation of the lease"
				}
				if excluded[h.ID] {
					return false, "booked by a concurrent request"
				}
				if why, ok := c.busyNow[h.ID]; ok {
					return false, why
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}
		}
	}
	req := c.req
	if len(c.taken) > 0 {
		// The lease's earlier reservations count in the spread.
		req.UsedDomains = p.idx.domainsOf(slices.Sorted(maps.Keys(c.taken)))
	}
	if len(c.tags) > 0 {
		req = p.cfg.Rules.WithExclusion(req, c.tags, p.idx.exclusionBookings(req.Window, c.lease), p.idx.domainsOf)
	}
	dec, err := p.chooseByPool(c.order, c.budgets, req, match)
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) && !fresh {
		err = fmt.Errorf("%w: %w", plugins.ErrStale, err)
	}
	if err != nil {
		return withBusyNote(notEnough(err), c.busyNow)
	}
	c.chosen = dec.Chosen
	return nil
}

// takenBy is the set of hosts of earlier choices.
func takenBy(earlier []any) map[string]bool {
	var taken map[string]bool
	for _, e := range earlier {
		if c, ok := e.(*choice); ok {
			for _, id := range c.chosen {
				if taken == nil {
					taken = map[string]bool{}
				}
				taken[id] = true
			}
		}
	}
	return taken
}

// Reserve implements plugins.Plugin.
func (p *Plugin) Reserve(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, r plugins.Request) (string, error) {
	c, err := p.Prepare(ctx, lease, r, tx.Fresh, nil)
	if err != nil {
		return "", err
	}
	return p.ReservePrepared(ctx, tx, lease, res, r, c)
}

// ReservePrepared implements plugins.Preparer: lock and re-check the
// chosen hosts, then book them.
func (p *Plugin) ReservePrepared(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, _ plugins.Request, prepared any) (string, error) {
	c, ok := prepared.(*choice)
	if !ok {
		return "", fmt.Errorf("physical:host: prepared choice of type %T", prepared)
	}
	ps := c.ps
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	id := uuid.NewString()
	if _, err := tx.ExecSQL(`INSERT INTO computehost_reservations
		(id, reservation_id, aggregate_id, count_range, hypervisor_properties, resource_properties, before_end, created_at, updated_at)
		VALUES (?,?,NULL,?,?,?,?,?,NULL)`,
		id, res.ID, strconv.Itoa(ps.min)+"-"+strconv.Itoa(ps.max), ps.hyper, ps.resource, ps.beforeEnd, tx.Now); err != nil {
		return "", err
	}
	// Last: the host locks are held from here to the commit. A host
	// booked or disabled by a concurrent request since the choice is
	// left out and the hosts are chosen again, in this transaction: each
	// round learns at least one busy host, so this ends, and a request
	// is refused only when the hosts really ran out.
	var reclaimed map[string]cut
	if len(c.cuts) > 0 {
		var err error
		if reclaimed, err = p.applyCuts(ctx, tx, lease.ID, c.cuts); err != nil {
			return "", err
		}
	}
	var excluded map[string]bool
	for {
		lost, err := p.lockAndBook(ctx, tx, res.ID, c.chosen, win)
		if err != nil {
			return "", err
		}
		if len(lost) == 0 {
			break
		}
		if c.moves != nil || c.cuts != nil {
			return "", plugins.ErrRetry // a scavenger or reclaim plan is planned again whole
		}
		if excluded == nil {
			excluded = map[string]bool{}
		}
		for _, h := range lost {
			excluded[h] = true
		}
		if err := p.chooseNew(c, excluded, tx.Fresh); err != nil {
			return "", err
		}
	}
	// The reservation's aggregate exists from its creation on, as
	// upstream's (owned by the project, no hosts until the start).
	if err := enqueueAggregate(tx, KindCreateAggregate, lease, res.ID); err != nil {
		return "", err
	}
	if err := p.enqueueMoves(tx, lease, c); err != nil {
		return "", err
	}
	if err := checkLimits(ctx, tx, c.order, win, res.ID, c.chosen, false); err != nil {
		return "", err
	}
	if err := recordPools(ctx, tx, lease.ID, res.ID, c.order, c.chosen, true); err != nil {
		return "", err
	}
	if err := noteReclaimed(ctx, tx, res.ID, reclaimed); err != nil {
		return "", err
	}
	rows := allocRows(res.ID, c.chosen, win)
	if p.idx.withTags {
		tags := encodeTags(lease.Tags)
		for i := range rows {
			rows[i].LeaseID, rows[i].LeaseTags = lease.ID, tags
		}
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, nil, rows) })
	return id, nil
}

// lockAndBook is lockAndCheck and insertAllocs for a new reservation, the
// re-check and the insert in one statement: the allocations are inserted
// only when none of the (locked) hosts has a booking overlapping the
// window, cleaning included, and every one is still reservable. Otherwise
// nothing is inserted and it returns the hosts lost to concurrent writers
// (their view refreshed).
func (p *Plugin) lockAndBook(ctx context.Context, tx *plugins.Tx, resID string, hostIDs []string, win allocator.Interval) ([]string, error) {
	if len(hostIDs) == 0 {
		return nil, nil
	}
	// On SQLite the write transaction (db.Write's writer, BEGIN
	// IMMEDIATE) already excludes every other writer until it ends: the
	// lock rows would serialise nothing more.
	if tx.Dialect != db.SQLite {
		if err := plugins.LockResources(tx, ResourceType, hostIDs); err != nil {
			return nil, err
		}
	}
	if gone, err := p.unreservable(ctx, tx, hostIDs); err != nil || len(gone) > 0 {
		return gone, err // deleted or disabled since the view was taken
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	// The overlap condition on exactly hostIDs, with its arguments.
	cond := make([]byte, 0, 96+2*len(hostIDs))
	cond = append(cond, "SELECT 1 FROM computehost_allocations WHERE compute_host_id IN ("...)
	condArgs := make([]any, 0, len(hostIDs)+2)
	for i, h := range hostIDs {
		if i > 0 {
			cond = append(cond, ',')
		}
		cond = append(cond, '?')
		condArgs = append(condArgs, h)
	}
	cond = append(cond, ") AND end_date > ? AND start_date < ?"...)
	condArgs = append(condArgs, lo, hi)
	args := make([]any, 0, 6*len(hostIDs)+len(condArgs))
	for _, h := range hostIDs {
		args = append(args, uuid.NewString(), resID, h, win.Start, win.End, tx.Now)
	}
	q := make([]byte, 0, 256+len(cond)+40*len(hostIDs))
	q = append(q, "INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at) "...)
	var clashed bool
	if tx.Dialect == db.SQLite {
		// No round trips to save: check, then insert (an INSERT that
		// reads its own table goes through a temporary table in SQLite).
		rows, err := tx.QuerySQL(string(append(cond, " LIMIT 1"...)), condArgs...)
		if err != nil {
			return nil, err
		}
		clashed = rows.Next()
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		if !clashed {
			q = append(q, "VALUES "...)
			q = db.Placeholders(q, len(hostIDs), 6)
			if _, err := tx.ExecSQL(string(q), args...); err != nil {
				return nil, err
			}
		}
	} else {
		// One round trip: insert only when nothing overlaps.
		q = append(q, "SELECT * FROM ("...)
		for i := range hostIDs {
			if i == 0 {
				q = append(q, "SELECT ? AS c1, ? AS c2, ? AS c3, ? AS c4, ? AS c5, ? AS c6"...)
			} else {
				q = append(q, " UNION ALL SELECT ?, ?, ?, ?, ?, ?"...)
			}
		}
		q = append(q, ") AS v WHERE NOT EXISTS ("...)
		q = append(q, cond...)
		q = append(q, ')')
		n, err := tx.ExecSQL(string(q), append(args, condArgs...)...)
		if err != nil {
			return nil, err
		}
		if n != 0 && n != int64(len(hostIDs)) {
			return nil, fmt.Errorf("physical:host: %d of %d allocations inserted", n, len(hostIDs))
		}
		clashed = n == 0
	}
	if !clashed {
		return nil, nil
	}
	return p.clashing(ctx, tx, hostIDs, lo, hi, "")
}

// clashing returns which of hostIDs have a booking overlapping [lo, hi)
// (other than reservation exclude's), and refreshes the view of those
// hosts, which was stale.
func (p *Plugin) clashing(ctx context.Context, tx *plugins.Tx, hostIDs []string, lo, hi time.Time, exclude string) ([]string, error) {
	var clash []string
	q := tx.WithContext(ctx).Table("computehost_allocations").
		Where("compute_host_id IN ? AND end_date > ? AND start_date < ?", hostIDs, lo, hi)
	if exclude != "" {
		q = q.Where("reservation_id <> ?", exclude)
	}
	if err := q.Distinct().Pluck("compute_host_id", &clash).Error; err != nil {
		return nil, err
	}
	if len(clash) == 0 {
		return nil, nil
	}
	rows, err := loadAllocs(ctx, tx.DB, clash, p.idx.withTags)
	if err != nil {
		return nil, err
	}
	p.idx.replaceHosts(clash, rows)
	return clash, nil
}
