package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/plugins"
)

// Heal re-places reservation res's current or future booking on the
// failed host hostID (made non-reservable or deleted by force; lookup
// gives its fields and capabilities) as upstream's host healing does: one
// matching host free over [max(now, start), end] takes the booking; the
// choice spreads over failure domains with the reservation's other hosts
// and honours the migration classes ([physical:host] migration_classes,
// allow_migration: the new host must be able to receive the failed host's
// classes). It returns the new host, or "" when none is free: the booking
// is then deleted. For an active reservation the failed host is released
// and the new one reserved through the outbox. Runs in the caller's
// transaction.
func (p *Plugin) Heal(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, hostID string, lookup func(string) (string, bool)) (string, error) {
	var rows []models.ComputeHostAllocation
	if err := tx.WithContext(ctx).Where("reservation_id = ? AND compute_host_id = ? AND end_date > ?", res.ID, hostID, tx.Now).
		Find(&rows).Error; err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "", nil
	}
	hr, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return "", err
	}
	ps, err := p.params(nil, hr)
	if err != nil {
		return "", err
	}
	others := slices.DeleteFunc(slices.Clone(held), func(id string) bool { return id == hostID })
	heldSet := map[string]bool{hostID: true}
	for _, id := range held {
		heldSet[id] = true
	}
	srcMig := p.migrationTags(lookup)
	active := res.Status == "active"
	var moved string
	for _, row := range rows {
		win := allocator.Interval{Start: row.StartDate.UTC(), End: row.EndDate.UTC()}
		if win.Start.Before(tx.Now) {
			win.Start = tx.Now
		}
		to, err := p.replacement(tx, lease, ps, win, res.ID, heldSet, others, srcMig)
		if err != nil {
			return "", err
		}
		if err := p.healPools(ctx, tx, lease, res.ID, hostID, to); err != nil {
			return "", err
		}
		if to == "" {
			if err := tx.WithContext(ctx).Where("id = ?", row.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
				return "", err
			}
			continue
		}
		if err := p.lockAndCheck(ctx, tx, []string{to}, win, res.ID); err != nil {
			return "", err
		}
		if err := tx.WithContext(ctx).Model(&models.ComputeHostAllocation{}).Where("id = ?", row.ID).
			Update("compute_host_id", to).Error; err != nil {
			return "", err
		}
		if active {
			if err := p.enqueue(tx, KindReserveHost, lease, res.ID, []string{to}); err != nil {
				return "", err
			}
		}
		heldSet[to] = true
		others = append(others, to)
		moved = to
	}
	if active {
		if err := p.enqueueFailed(tx, lease, res.ID, hostID, lookup); err != nil {
			return "", err
		}
	}
	var newRows []allocRow
	if moved != "" {
		for _, row := range rows {
			newRows = append(newRows, allocRow{ComputeHostID: moved, ReservationID: res.ID, StartDate: row.StartDate, EndDate: row.EndDate})
		}
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, []string{hostID}, newRows) })
	return moved, nil
}

// replacement chooses one host for win from the view: not one of held,
// matching the reservation, able to receive srcMig, spread away from the
// domains of others and, by lease's exclusion tags, of overlapping leases
// sharing one. "" when there is none (from a fresh view; from a
// view that may be stale it is plugins.ErrStale, so the caller's retry
// decides on a fresh one).
func (p *Plugin) replacement(tx *plugins.Tx, lease plugins.Lease, ps params, win allocator.Interval, resID string, held map[string]bool, others []string, srcMig []string) (string, error) {
	req := allocator.HostRequest{Window: win, Cleaning: p.cfg.Cleaning, Min: 1, Max: 1, UsedDomains: p.idx.domainsOf(others)}
	if len(p.cfg.Rules.ExclusionTags(lease.Tags)) > 0 {
		req = p.cfg.Rules.WithExclusion(req, lease.Tags, p.idx.exclusionBookings(win, lease.ID), p.idx.domainsOf)
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	var dec allocator.HostDecision
	var err error
	keep := func(id string) bool { return !held[id] }
	if o := p.ownershipOrder(lease.ProjectID); o != nil {
		// The replacement comes from the project's ownership pools.
		keep = func(id string) bool { return !held[id] && o.Allows(o.Stages(), id) }
	}
	p.idx.view(lo, hi, resID, keep, func(hosts []allocator.Host, ranks []int32, info func(string) *Host) {
		m := ps.match(info)
		match := func(h *allocator.Host) (bool, string) {
			if len(srcMig) > 0 {
				hi := info(h.ID)
				if hi == nil || !allocator.MigrationAllowed(srcMig, p.cfg.Rules.ReceivableMigrationTags(p.migrationTags(hi.Lookup))) {
					return false, "cannot receive the failed host's migration classes"
				}
			}
			if m == nil {
				return true, ""
			}
			return m(h)
		}
		r := req
		r.Match = match
		dec, err = allocator.ChoosePrepared(p.cfg.Rules, allocator.PreparedHosts{Hosts: hosts, Ranks: ranks}, r, allocator.ChooseOptions{OmitRejected: true})
	})
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) {
		if !tx.Fresh {
			return "", fmt.Errorf("%w: %w", plugins.ErrStale, err)
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return dec.Chosen[0], nil
}

// migrationTags are the migration-class tags ("key:value") of a host
// read through lookup, sorted.
func (p *Plugin) migrationTags(lookup func(string) (string, bool)) []string {
	if p.cfg.Rules == nil || lookup == nil {
		return nil
	}
	var tags []string
	for _, k := range p.cfg.Rules.MigrationPrefixes {
		if v, ok := lookup(k); ok && v != "" {
			tags = append(tags, k+":"+v)
		}
	}
	slices.Sort(tags)
	return tags
}

// enqueueFailed releases the failed host of an active reservation (it
// may no longer be in the view, so its name comes from lookup).
func (p *Plugin) enqueueFailed(tx *plugins.Tx, lease plugins.Lease, resID, hostID string, lookup func(string) (string, bool)) error {
	name := hostID
	if lookup != nil {
		if v, ok := lookup("service_name"); ok && v != "" {
			name = v
		} else if v, ok := lookup("hypervisor_hostname"); ok && v != "" {
			name = v
		}
	}
	return tx.Enqueue(outbox.Action{Kind: KindReleaseHost, Key: "host:" + hostID, LeaseID: lease.ID,
		Payload: hostAction{ReservationID: resID, ProjectID: lease.ProjectID, HostID: hostID, Host: name}})
}
