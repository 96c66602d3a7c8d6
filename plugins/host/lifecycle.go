package host

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/plugins"
)

func (p *Plugin) load(ctx context.Context, tx *plugins.Tx, resID string) (*models.ComputeHostReservation, []string, error) {
	var hr models.ComputeHostReservation
	if err := tx.WithContext(ctx).Where("reservation_id = ?", resID).Take(&hr).Error; err != nil {
		return nil, nil, fmt.Errorf("physical:host reservation %s: %w", resID, err)
	}
	var hostIDs []string
	if err := tx.WithContext(ctx).Model(&models.ComputeHostAllocation{}).
		Where("reservation_id = ?", resID).Order("compute_host_id").Pluck("compute_host_id", &hostIDs).Error; err != nil {
		return nil, nil, err
	}
	return &hr, hostIDs, nil
}

// Update implements plugins.Plugin, with upstream's rules: a pure
// shortening keeps every host; otherwise a host is kept while it still
// matches and is free over the new window, extra hosts are searched up to
// max, and an active reservation may not lose a host.
func (p *Plugin) Update(ctx context.Context, tx *plugins.Tx, old, lease plugins.Lease, res *models.Reservation, v plugins.Values) error {
	hr, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	ps, err := p.params(v, hr)
	if err != nil {
		return err
	}
	if err := p.checkPrivacy(ps.resource, lease, true); err != nil {
		return err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	active := res.Status == "active"
	paramsChanged := len(v) > 0
	shrinking := !lease.Start.Before(old.Start) && !lease.End.After(old.End)
	keep := held
	var added []string
	var order *ownership.Order
	if p.cfg.Ownership != nil {
		order = p.cfg.Ownership.HostOrder(lease.ProjectID)
	}
	if paramsChanged || !shrinking {
		if !win.Start.Before(win.End) {
			return plugins.BadRequest("End date must be later than current and start date")
		}
		heldSet := map[string]bool{}
		for _, h := range held {
			heldSet[h] = true
		}
		keep = nil
		if len(held) > 0 {
			dec, err := p.choose(tx, lease, ps, win, 0, min(ps.max, len(held)), res.ID, func(id string) bool { return heldSet[id] }, nil, false)
			if err != nil {
				return notEnough(err)
			}
			keep = dec.Chosen
		}
		if active && len(keep) < len(held) && !tx.Fresh {
			return plugins.ErrStale
		}
		if active && len(keep) < len(held) {
			return plugins.NotEnough("Not enough hosts available: %d of the %d hosts of active reservation %s cannot be kept (busy in the new window, no longer matching, or above max %d)",
				len(held)-len(keep), len(held), res.ID, ps.max)
		}
		if len(keep) < ps.max {
			need := max(ps.min-len(keep), 0)
			// Hosts added to the reservation come from the project's
			// ownership pools, as a new reservation's do; hosts it keeps
			// stay whatever pool they came from.
			dec, err := p.chooseAdded(tx, order, win, res.ID, keep, func(allowed func(string) bool) (allocator.HostDecision, error) {
				return p.choose(tx, lease, ps, win, need, ps.max-len(keep), res.ID, func(id string) bool { return !heldSet[id] && allowed(id) }, keep, true)
			})
			if err != nil {
				var ne *allocator.NotEnoughHostsError
				if errors.Is(err, plugins.ErrStale) {
					return err
				}
				var le *lendingLimitError
				if errors.As(err, &le) {
					return plugins.NotEnough("Not enough hosts available: %d kept, %s", len(keep), strings.TrimPrefix(le.Error(), "Not enough hosts available: "))
				}
				if errors.As(err, &ne) {
					return plugins.NotEnough("Not enough hosts available: %d kept, %s", len(keep), strings.TrimPrefix(ne.Error(), "Not enough hosts available: "))
				}
				return notEnough(err)
			}
			added = dec.Chosen
		}
		all := append(slices.Clone(keep), added...)
		if err := p.lockAndCheck(ctx, tx, all, win, res.ID); err != nil {
			return err
		}
	}
	updates := map[string]any{
		"count_range":           fmt.Sprintf("%d-%d", ps.min, ps.max),
		"hypervisor_properties": ps.hyper,
		"resource_properties":   ps.resource,
		"updated_at":            tx.Now,
	}
	if err := tx.WithContext(ctx).Model(&models.ComputeHostReservation{}).Where("id = ?", hr.ID).Updates(updates).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	final := append(slices.Clone(keep), added...)
	if err := p.insertAllocs(ctx, tx, res.ID, final, win); err != nil {
		return err
	}
	if err := p.updatePools(ctx, tx, lease.ID, res.ID, order, win, final, added, paramsChanged || !shrinking); err != nil {
		return err
	}
	if active {
		if err := p.enqueue(tx, KindReserveHost, lease, res.ID, added); err != nil {
			return err
		}
	}
	rows := allocRows(res.ID, final, win)
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, rows) })
	return nil
}

// OnStart implements plugins.Plugin.
func (p *Plugin) OnStart(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	_, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	return p.enqueue(tx, KindReserveHost, lease, res.ID, held)
}

// OnEnd implements plugins.Plugin: the hosts go back, the allocations
// are deleted (as upstream does at the end of a lease). The hosts of a
// reservation that started, or whose start failed part way (error), are
// released (servers removed, back to the freepool), and the last host
// to leave the aggregate deletes it; otherwise the aggregate is deleted
// on its own. (A separate deletion would race the releases, which run
// per host, and could leave a host in no aggregate, open to anyone,
// before its servers are gone.)
func (p *Plugin) OnEnd(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	_, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if (res.Status == "active" || res.Status == "error") && len(held) > 0 {
		if err := p.enqueue(tx, KindReleaseHost, lease, res.ID, held); err != nil {
			return err
		}
	} else if err := enqueueAggregate(tx, KindDeleteAggregate, lease, res.ID); err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, nil) })
	return nil
}

// BeforeEnd implements plugins.Plugin.
func (p *Plugin) BeforeEnd(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	hr, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	action := hr.BeforeEnd
	if action == "default" {
		action = p.cfg.DefaultBeforeEnd
	}
	if action == "snapshot" {
		return p.enqueue(tx, KindSnapshotHost, lease, res.ID, held)
	}
	return nil
}

// Delete implements plugins.Plugin.
func (p *Plugin) Delete(ctx context.Context, tx *plugins.Tx, res *models.Reservation) error {
	var held []string
	if err := tx.WithContext(ctx).Model(&models.ComputeHostAllocation{}).
		Where("reservation_id = ?", res.ID).Pluck("compute_host_id", &held).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostReservation{}).Error; err != nil {
		return err
	}
	if err := dropPools(ctx, tx, res.ID, nil); err != nil {
		return err
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, nil) })
	return nil
}

// Describe implements plugins.Plugin.
func (p *Plugin) Describe(ctx context.Context, g *gorm.DB, res []*models.Reservation) (map[string]map[string]any, error) {
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	var rows []models.ComputeHostReservation
	if err := g.WithContext(ctx).Where("reservation_id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(rows))
	for _, hr := range rows {
		out[hr.ReservationID] = fields(hr.CountRange, hr.HypervisorProperties, hr.ResourceProperties, hr.BeforeEnd)
	}
	if err := DescribePools(ctx, g, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fields are the plugin fields of a reservation shown by the API.
func fields(countRange, hyper, res, beforeEnd string) map[string]any {
	lo, hi, _ := strings.Cut(countRange, "-")
	mn, _ := strconv.Atoi(lo)
	mx, _ := strconv.Atoi(hi)
	return map[string]any{
		"min": mn, "max": mx,
		"hypervisor_properties": hyper,
		"resource_properties":   res,
		"before_end":            beforeEnd,
	}
}

// DescribeListed is Describe for the reservations of every lease of
// project (of every project when project is nil), in one query joined
// on the leases rather than one IN list per 500 reservations: the lease
// listing's read path.
func (p *Plugin) DescribeListed(ctx context.Context, d *sql.DB, project *string) (map[string]map[string]any, error) {
	q := "SELECT c.reservation_id, c.count_range, c.hypervisor_properties, c.resource_properties, c.before_end FROM computehost_reservations c"
	var args []any
	if project != nil {
		q += " JOIN reservations r ON r.id = c.reservation_id JOIN leases l ON l.id = r.lease_id WHERE l.project_id = ?"
		args = append(args, *project)
	}
	rows, err := d.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var id, countRange string
		var hyper, res, beforeEnd sql.NullString
		if err := rows.Scan(&id, &countRange, &hyper, &res, &beforeEnd); err != nil {
			return nil, err
		}
		out[id] = fields(countRange, hyper.String, res.String, beforeEnd.String)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := DescribePoolsListed(ctx, d, project, out); err != nil {
		return nil, err
	}
	return out, nil
}

var (
	_ plugins.Plugin   = (*Plugin)(nil)
	_ plugins.Preparer = (*Plugin)(nil)
)
