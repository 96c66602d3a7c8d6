package instance

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/host"
)

// Reserve implements plugins.Plugin: choose the slots, store the
// reservation and its allocations, create its Placement class and, with
// a flavor driver, record the flavor's creation.
func (p *Plugin) Reserve(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, r plugins.Request) (string, error) {
	req, ok := r.(*request)
	if !ok {
		return "", fmt.Errorf("%s: request of type %T", ResourceType, r)
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	o := p.ownershipOrder(lease.ProjectID)
	// An owner whose entry says reclaim takes back what it lent before
	// less preferred pools are tried.
	dec, bp, reclaimed, own, err := p.reclaimFirst(ctx, tx, lease, res.ID, req.params, o)
	if err != nil {
		return "", err
	}
	if !own {
		dec, bp, err = p.choose(ctx, tx, req.params, win, res.ID, nil, o, nil, 0)
		if err != nil {
			// An owner whose pools cannot serve takes back what it lent.
			if dec, bp, reclaimed, err = p.reclaimOr(ctx, tx, lease, res.ID, req.params, o, err); err != nil {
				return "", err
			}
		}
	}
	id := uuid.NewString()
	ps := req.params
	if _, err := tx.ExecSQL(`INSERT INTO instance_reservations
		(id, reservation_id, vcpus, memory_mb, disk_gb, amount, affinity, resource_properties, flavor_id, server_group_id, aggregate_id, source_flavor, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,NULL,NULL,?,?,NULL)`,
		id, res.ID, ps.size.VCPUs, ps.size.MemoryMB, ps.size.DiskGB, ps.amount, ps.affinity, ps.resourceProperties, res.ID, req.source, tx.Now); err != nil {
		return "", err
	}
	if err := insertAllocs(tx, res.ID, dec, win); err != nil {
		return "", err
	}
	if err := recordPools(ctx, tx, lease.ID, res.ID, bp, dec.Order); err != nil {
		return "", err
	}
	if err := noteReclaimed(ctx, tx, res, reclaimed); err != nil {
		return "", err
	}
	if p.cfg.External != nil {
		err = p.enqueueExtCreate(ctx, tx, lease.ID, res.ID, dec.Order)
	} else {
		err = ensureClass(ctx, tx, res.ID)
	}
	if err != nil {
		return "", err
	}
	if err := p.enqueueFlavor(tx, lease, res.ID, ps, req.source); err != nil {
		return "", err
	}
	if err := p.enqueueGroup(tx, lease, res.ID, ps.affinity); err != nil {
		return "", err
	}
	req.resID = res.ID
	return id, nil
}

// ensureClass creates the reservation's Placement class unless it
// exists. Custom class ids are the next free number: a concurrent
// transaction creating another class may take it first, and the write
// then runs again.
func ensureClass(ctx context.Context, tx *plugins.Tx, resID string) error {
	err := placement.EnsureClassTx(tx.WithContext(ctx), placement.ReservationClass(resID))
	if err != nil && db.IsDuplicate(err) {
		return fmt.Errorf("%w: %w", plugins.ErrRetry, err)
	}
	return err
}

// insertAllocs books dec's slots over win: one instance_allocations row
// and one computehost_allocations row per host.
func insertAllocs(tx *plugins.Tx, resID string, dec allocator.SlotDecision, win allocator.Interval) error {
	for _, h := range dec.Order {
		if _, err := tx.ExecSQL(`INSERT INTO instance_allocations (id, reservation_id, compute_host_id, slots, start_date, end_date, span_s, created_at) VALUES (?,?,?,?,?,?,?,?)`,
			uuid.NewString(), resID, h, dec.Slots[h], win.Start, win.End, span(win), tx.Now); err != nil {
			return err
		}
		if _, err := tx.ExecSQL(`INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at) VALUES (?,?,?,?,?,?)`,
			uuid.NewString(), resID, h, win.Start, win.End, tx.Now); err != nil {
			return err
		}
	}
	return nil
}

// span is a window's length in whole seconds, rounded up.
func span(win allocator.Interval) int64 {
	d := win.End.Sub(win.Start)
	return int64((d + time.Second - 1) / time.Second)
}

// deleteAllocs removes a reservation's allocations from both tables.
func deleteAllocs(tx *plugins.Tx, resID string) error {
	for _, q := range []string{
		"DELETE FROM instance_allocations WHERE reservation_id = ?",
		"DELETE FROM computehost_allocations WHERE reservation_id = ?",
	} {
		if _, err := tx.ExecSQL(q, resID); err != nil {
			return err
		}
	}
	return nil
}

// load reads a reservation's row and its slots per host.
func load(ctx context.Context, tx *plugins.Tx, resID string) (*row, map[string]int, error) {
	var r row
	if err := tx.WithContext(ctx).Where("reservation_id = ?", resID).Take(&r).Error; err != nil {
		return nil, nil, fmt.Errorf("%s reservation %s: %w", ResourceType, resID, err)
	}
	held, err := slotsOf(ctx, tx, resID)
	return &r, held, err
}

// slotsOf returns a reservation's slots per host.
func slotsOf(ctx context.Context, tx *plugins.Tx, resID string) (map[string]int, error) {
	var rows []struct {
		ComputeHostID string
		Slots         int
	}
	if err := tx.WithContext(ctx).Raw("SELECT compute_host_id, slots FROM instance_allocations WHERE reservation_id = ?", resID).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.ComputeHostID] += r.Slots
	}
	return out, nil
}

// Update implements plugins.Plugin with upstream's rules: a pure
// shortening keeps every slot; a pending reservation is placed again
// (sizes, amount, affinity and properties may change); an active one may
// only grow its amount, keeping its slots where they are, and its hosts
// must still hold them over a changed window.
func (p *Plugin) Update(ctx context.Context, tx *plugins.Tx, old, lease plugins.Lease, res *models.Reservation, v plugins.Values) error {
	r, held, err := load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if res.Status == "error" {
		return plugins.Conflict("Reservation %s is in status error and cannot be updated.", res.ID)
	}
	cur := r.params()
	ps, ch, err := parseParams(v, &cur)
	if err != nil {
		return err
	}
	active := res.Status == "active"
	if active && (ch.size || ch.other) {
		return plugins.Conflict("Invalid state update: only amount can be changed for an active %s reservation.", ResourceType)
	}
	if active && ps.amount < cur.amount {
		return plugins.Conflict("Cannot update parameter amount: an active reservation cannot reduce its amount (%d to %d).", cur.amount, ps.amount)
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	shrinking := !lease.Start.Before(old.Start) && !lease.End.After(old.End)
	slots := held
	if ch.any() || !shrinking {
		if !win.Start.Before(win.End) {
			return plugins.BadRequest("End date must be later than current and start date")
		}
		var keep map[string]int
		if active {
			keep = held
		}
		o := p.ownershipOrder(lease.ProjectID)
		dec, bp, err := p.choose(ctx, tx, ps, win, res.ID, keep, o, nil, 0)
		var reclaimed map[string]host.Cut
		if err != nil {
			// A pending reservation placed again reclaims as a new one
			// does; an active one grows where it is.
			if active {
				return err
			}
			if dec, bp, reclaimed, err = p.reclaimOr(ctx, tx, lease, res.ID, ps, o, err); err != nil {
				return err
			}
		}
		slots = dec.Slots
		if bp != nil {
			// A pending reservation placed again forgets its old sources;
			// an active one keeps those of the hosts it still holds.
			var kept []string
			if active {
				kept = sortedKeys(slots)
			}
			if err := dropPools(tx, res.ID, kept); err != nil {
				return err
			}
			if err := recordPools(ctx, tx, lease.ID, res.ID, bp, dec.Order); err != nil {
				return err
			}
			if err := noteReclaimed(ctx, tx, res, reclaimed); err != nil {
				return err
			}
		}
	}
	cols := map[string]any{
		"vcpus": ps.size.VCPUs, "memory_mb": ps.size.MemoryMB, "disk_gb": ps.size.DiskGB, "amount": ps.amount,
		"affinity": ps.affinity, "resource_properties": ps.resourceProperties, "updated_at": tx.Now,
	}
	// A pending reservation's new affinity replaces its server group
	// (an active one cannot change it).
	regroup := !sameAffinity(cur.affinity, ps.affinity)
	if regroup {
		cols["server_group_id"] = nil
	}
	if err := tx.WithContext(ctx).Model(&row{}).Where("id = ?", r.ID).Updates(cols).Error; err != nil {
		return err
	}
	if regroup {
		if err := p.enqueueGroupDelete(tx, lease, res.ID, cur.affinity); err != nil {
			return err
		}
		if err := p.enqueueGroup(tx, lease, res.ID, ps.affinity); err != nil {
			return err
		}
	}
	if err := deleteAllocs(tx, res.ID); err != nil {
		return err
	}
	order := sortedKeys(slots)
	if err := insertAllocs(tx, res.ID, allocator.SlotDecision{Slots: slots, Order: order}, win); err != nil {
		return err
	}
	if active {
		if err := p.setInventories(ctx, tx, lease.ID, res.ID, held, slots); err != nil {
			return err
		}
	} else if ch.size {
		if err := p.enqueueFlavorResize(tx, lease, res.ID, ps); err != nil {
			return err
		}
	}
	return nil
}

// setInventories sets the reservation class's inventory on the child
// provider of every host of before or after to its slots in after (0
// removes it): in the built-in Placement, or by outbox actions on the
// external one.
func (p *Plugin) setInventories(ctx context.Context, tx *plugins.Tx, leaseID, resID string, before, after map[string]int) error {
	if p.cfg.External != nil {
		return p.enqueueExtInventories(ctx, tx, leaseID, resID, before, after)
	}
	ids := map[string]int{}
	for h := range before {
		ids[h] = 0
	}
	for h, n := range after {
		ids[h] = n
	}
	if len(ids) == 0 {
		return nil
	}
	children, err := childProviders(ctx, tx, sortedKeys(ids))
	if err != nil {
		return err
	}
	class := placement.ReservationClass(resID)
	if err := ensureClass(ctx, tx, resID); err != nil {
		return err
	}
	totals := make(map[string]int64, len(ids))
	for h, n := range ids {
		if u := children[h]; u != "" { // else a host registered without one
			totals[u] = int64(n)
		}
	}
	return placement.SetReservationInventoriesTx(tx.WithContext(ctx), class, totals)
}

// childProviders maps host ids to their blazar_<hostname> provider uuid.
func childProviders(ctx context.Context, tx *plugins.Tx, ids []string) (map[string]string, error) {
	nums := make([]int64, 0, len(ids))
	for _, id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			nums = append(nums, n)
		}
	}
	out := map[string]string{}
	if len(nums) == 0 {
		return out, nil
	}
	var rows []struct {
		ID                      int64
		ReservationProviderUUID string
	}
	if err := tx.WithContext(ctx).Raw("SELECT id, reservation_provider_uuid FROM computehosts WHERE id IN ?", nums).Scan(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[strconv.FormatInt(r.ID, 10)] = r.ReservationProviderUUID
	}
	return out, nil
}

// OnStart implements plugins.Plugin: the slots become Placement inventory
// and the project gets the flavor.
func (p *Plugin) OnStart(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	held, err := slotsOf(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if err := p.setInventories(ctx, tx, lease.ID, res.ID, nil, held); err != nil {
		return err
	}
	return p.enqueueAccess(tx, lease, res.ID)
}

// OnEnd implements plugins.Plugin: the inventory and the class go, the
// slots are freed, and the flavor is deleted.
func (p *Plugin) OnEnd(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	r, held, err := load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if err := p.setInventories(ctx, tx, lease.ID, res.ID, held, nil); err != nil {
		return err
	}
	if err := p.deleteClass(ctx, tx, lease.ID, res.ID); err != nil {
		return err
	}
	if err := deleteAllocs(tx, res.ID); err != nil {
		return err
	}
	if err := p.enqueueDelete(tx, lease, res.ID); err != nil {
		return err
	}
	return p.enqueueGroupDelete(tx, lease, res.ID, r.Affinity)
}

// sameAffinity reports whether two affinities (nil: none) are equal.
func sameAffinity(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// BeforeEnd implements plugins.Plugin: instance reservations have no
// before-end action.
func (p *Plugin) BeforeEnd(context.Context, *plugins.Tx, plugins.Lease, *models.Reservation) error {
	return nil
}

// Delete implements plugins.Plugin.
func (p *Plugin) Delete(ctx context.Context, tx *plugins.Tx, res *models.Reservation) error {
	if err := deleteAllocs(tx, res.ID); err != nil {
		return err
	}
	if err := dropPools(tx, res.ID, nil); err != nil {
		return err
	}
	if err := p.deleteClass(ctx, tx, res.LeaseID, res.ID); err != nil {
		return err
	}
	_, err := tx.ExecSQL("DELETE FROM instance_reservations WHERE reservation_id = ?", res.ID)
	return err
}

// deleteClass deletes the reservation's class when nothing refers to it
// any more: in the built-in Placement, or by an outbox action on the
// external one.
func (p *Plugin) deleteClass(ctx context.Context, tx *plugins.Tx, leaseID, resID string) error {
	if p.cfg.External != nil {
		return p.enqueueExtDeleteClass(ctx, tx, leaseID, resID)
	}
	_, err := placement.DeleteClassIfUnusedTx(tx.WithContext(ctx), placement.ReservationClass(resID))
	return err
}
