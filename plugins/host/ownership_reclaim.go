package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// A reclaim (ownership policy): a request of an owner that its pools
// cannot serve takes back hosts it owns and lent, when their borrowers
// have had at least the lending grace period. Each borrower's lease is
// shortened, in the owner's transaction, to the reclaim time (the
// owner's start less the cleaning time): its end date and end event move
// there (its before-end event too when it was later), its host bookings
// end there, and both leases' ownership entries say what happened. A
// borrower lease holding instance reservations (slots on the owner's
// host) is shortened the same way, those reservations through their own
// plugin (Config.Shorteners). A host loan that has not begun by the
// reclaim time is moved instead to another free host its reservation
// matches, in its project's pools, when there is one (it loses nothing);
// slots are never moved, so a host with slots booked from the reclaim
// time on is not reclaimed. Borrower leases holding other resources, or
// not pending or active, are left alone.

// Lease statuses and event rows a reclaim reads and writes (the lease
// engine's names, pkg/blazar/leases).
const (
	leasePending   = "PENDING"
	leaseActive    = "ACTIVE"
	eventEnd       = "end_lease"
	eventBeforeEnd = "before_end_lease"
	eventUndone    = "UNDONE"
	resError       = "error"
	resDeleted     = "deleted"
)

// cut is one borrower booking a reclaim shortens to At, or, when To is
// set, moves to host To (a loan that had not begun by the reclaim time).
type cut struct {
	ownership.Booking
	At    time.Time
	Grace time.Duration
	To    string
}

// planReclaim chooses c's hosts again allowing the reclaim of the lent
// hosts in grace (with their lending grace periods), from the first
// stages pools of c's order. It reports whether it found a choice
// (c.chosen and c.cuts set); when not, note explains when a reclaim would
// be possible ("" when never).
func (p *Plugin) planReclaim(ctx context.Context, c *choice, lease plugins.Lease, grace map[string]time.Duration, stages int) (ok bool, note string, err error) {
	if len(grace) == 0 {
		return false, "", nil
	}
	lo, hi := lease.Start.Add(-p.cfg.Cleaning), lease.End.Add(p.cfg.Cleaning)
	bookings, err := p.reclaimBookings(ctx, p.db, slices.Sorted(maps.Keys(grace)), lo, hi, lease.ProjectID, c.order)
	if err != nil {
		return false, "", err
	}
	cands, later := ownership.Reclaimable(p.now().UTC(), lease.Start, lease.End, p.cfg.Cleaning, grace, bookings, c.order.RankOf)
	note = reclaimNote(later)
	cands, moveTo, err := p.roomForMoves(ctx, cands)
	if err != nil {
		return false, "", err
	}
	// Cut as few borrowers as serve the request: the best candidate,
	// then the best two, …
	for r := 1; r <= len(cands); r++ {
		cutAt := map[string]ownership.Candidate{}
		avoid := map[string]bool{} // the hosts the moved loans go to
		for _, cd := range cands[:r] {
			cutAt[cd.Host] = cd
			for _, b := range cd.Moves {
				avoid[moveTo[b]] = true
			}
		}
		dec, err := p.chooseReclaiming(c, cutAt, avoid, lo, hi, stages)
		var ne *allocator.NotEnoughHostsError
		if errors.As(err, &ne) {
			continue
		}
		if err != nil {
			return false, "", err
		}
		c.chosen, c.cuts = dec.Chosen, nil
		for _, h := range dec.Chosen {
			if cd, ok := cutAt[h]; ok {
				for _, b := range cd.Cuts {
					c.cuts = append(c.cuts, cut{Booking: b, At: cd.At, Grace: cd.Grace})
				}
				for _, b := range cd.Moves {
					c.cuts = append(c.cuts, cut{Booking: b, At: cd.At, Grace: cd.Grace, To: moveTo[b]})
				}
			}
		}
		return true, "", nil
	}
	return false, note, nil
}

// reclaimNote says from when a reclaim refused for the grace period
// would serve ("" when later is zero).
func reclaimNote(later time.Time) string {
	if later.IsZero() {
		return ""
	}
	// A whole minute, as lease dates are: the first start a lease with
	// "start_date": "earliest" can get (Earliest).
	return fmt.Sprintf("hosts the project owns are held by other projects (lent, or booked before they became its own) and can be reclaimed, after their lending grace period, for a lease starting at %s or later; "+
		`"start_date": "earliest" creates the lease at the first such start`, ceilMinute(later).UTC().Format(time.RFC3339))
}

// chooseReclaiming runs the allocator over the view in which the
// bookings of the candidates end at their reclaim time. Borrowed hosts
// are left out (a reclaim does not borrow on top).
func (p *Plugin) chooseReclaiming(c *choice, cutAt map[string]ownership.Candidate, avoid map[string]bool, lo, hi time.Time, stages int) (allocator.HostDecision, error) {
	o := c.order
	req := c.req
	if len(c.taken) > 0 {
		req.UsedDomains = p.idx.domainsOf(slices.Sorted(maps.Keys(c.taken)))
	}
	var dec allocator.HostDecision
	var err error
	p.idx.view(lo, hi, "", nil, func(hosts []allocator.Host, ranks []int32, info func(string) *Host) {
		hs := make([]allocator.Host, len(hosts))
		copy(hs, hosts)
		for i := range hs {
			cd, ok := cutAt[hs[i].ID]
			if !ok {
				continue
			}
			busy := make([]allocator.Interval, 0, len(hs[i].Busy))
		next:
			for _, iv := range hs[i].Busy {
				for _, b := range cd.Moves {
					if iv.Start.Equal(b.Start) && iv.End.Equal(b.End) {
						continue next // moves elsewhere
					}
				}
				for _, b := range cd.Cuts {
					if iv.Start.Equal(b.Start) && iv.End.Equal(b.End) {
						iv.End = cd.At
						break
					}
				}
				busy = append(busy, iv)
			}
			hs[i].Busy = busy
		}
		m := c.ps.match(info)
		r := req
		r.Match = func(h *allocator.Host) (bool, string) {
			if !o.Allows(stages, h.ID) {
				return false, "not in the project's ownership pools"
			}
			if o.SourceOf(h.ID).LentBy != "" {
				return false, "borrowed: not taken while reclaiming"
			}
			if c.taken[h.ID] {
				return false, "taken by another reservation of the lease"
			}
			if avoid[h.ID] {
				return false, "a reclaimed loan moves there"
			}
			if why, ok := c.busyNow[h.ID]; ok {
				return false, why
			}
			if m == nil {
				return true, ""
			}
			return m(h)
		}
		dec, err = allocator.ChoosePrepared(p.cfg.Rules, allocator.PreparedHosts{Hosts: hs, Ranks: ranks}, r, allocator.ChooseOptions{OmitRejected: true})
	})
	return dec, err
}

// reclaimBookings reads the bookings of hostIDs overlapping [lo, hi)
// (whole hosts, and the hosts of instance reservations' slots) with what
// a reclaim needs to know of each: borrowed (by a lease of another
// project than the owner's, recorded as lent or held outside the host's
// ownership in o: booked before a recomputation handed the busy host
// over), fixed (a lease neither pending nor active, or holding a
// reservation no reclaim shortens: of a type other than hosts and the
// shorteners', or one of theirs in error), and staying (slots, which a
// reclaim cuts but never moves).
func (p *Plugin) reclaimBookings(ctx context.Context, g *gorm.DB, hostIDs []string, lo, hi time.Time, project string, o *ownership.Order) ([]ownership.Booking, error) {
	var rows []struct {
		ComputeHostID, ReservationID, LeaseID, ProjectID, Status, ResourceType string
		StartDate, EndDate                                                     time.Time
		Pool, Consumer, LentBy                                                 *string
		Others                                                                 int
	}
	types := []string{ResourceType}
	for _, pl := range p.cfg.Shorteners {
		types = append(types, pl.ResourceType())
	}
	err := g.WithContext(ctx).Raw(`SELECT a.compute_host_id, a.reservation_id, r.lease_id, l.project_id, l.status, r.resource_type, a.start_date, a.end_date, o.pool, o.consumer, o.lent_by,
 (SELECT COUNT(*) FROM reservations x WHERE x.lease_id = r.lease_id AND (x.resource_type NOT IN ? OR x.resource_type <> ? AND x.status = ?)) AS others
 FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id JOIN leases l ON l.id = r.lease_id
 LEFT JOIN ownership_pools o ON o.reservation_id = a.reservation_id AND o.compute_host_id = a.compute_host_id
 WHERE a.compute_host_id IN ? AND a.end_date > ? AND a.start_date < ?`, types, ResourceType, resError, hostIDs, lo, hi).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the bookings of lent hosts: %w", err)
	}
	out := make([]ownership.Booking, len(rows))
	for i, r := range rows {
		out[i] = ownership.Booking{Host: r.ComputeHostID, Lease: r.LeaseID, Reservation: r.ReservationID, Project: r.ProjectID,
			Start: r.StartDate.UTC(), End: r.EndDate.UTC(),
			Borrowed: r.ProjectID != project && (r.LentBy != nil && *r.LentBy != "" || o.HeldOutside(r.ComputeHostID, r.ProjectID)),
			Fixed:    (r.Status != leasePending && r.Status != leaseActive) || r.Others > 0,
			Stays:    r.ResourceType != ResourceType}
		if r.Pool != nil {
			out[i].Part, out[i].Recorded = ownership.PartOwner(*r.Pool, deref(r.Consumer), deref(r.LentBy)), true
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shortenOthers shortens, in tx, lease l's reservations of the
// shorteners' types to end at at, each through its plugin's own Update
// (a lease update of the end date to at, as the lease engine calls it).
func (p *Plugin) shortenOthers(ctx context.Context, tx *plugins.Tx, l *models.Lease, at time.Time) error {
	var ress []models.Reservation
	if err := tx.WithContext(ctx).Where("lease_id = ? AND resource_type <> ? AND status <> ?", l.ID, ResourceType, resDeleted).
		Order("created_at, id").Find(&ress).Error; err != nil {
		return err
	}
	old := plugins.Lease{ID: l.ID, ProjectID: l.ProjectID, UserID: l.UserID, Start: l.StartDate.UTC(), End: l.EndDate.UTC(), Status: l.Status, Admin: true}
	nl := old
	nl.End = at
	for i := range ress {
		r := &ress[i]
		k := slices.IndexFunc(p.cfg.Shorteners, func(pl plugins.Plugin) bool { return pl.ResourceType() == r.ResourceType })
		if k < 0 {
			// reclaimBookings made such a lease fixed: it changed since.
			return plugins.ErrRetry
		}
		if err := p.cfg.Shorteners[k].Update(ctx, tx, old, nl, r, plugins.Values{}); err != nil {
			return err
		}
	}
	return nil
}

// applyCuts shortens, in tx, the borrower leases of cuts to their
// reclaim time and moves the loans that had not begun to their new hosts,
// after checking under the hosts' locks that each booking is still there
// as planned (otherwise the write runs again and plans again). It returns
// the cut of each reclaimed host (for the owner's notes).
func (p *Plugin) applyCuts(ctx context.Context, tx *plugins.Tx, ownerLease string, cuts []cut) (map[string]cut, error) {
	hosts := map[string]bool{}
	for _, ct := range cuts {
		hosts[ct.Host] = true
		if ct.To != "" {
			hosts[ct.To] = true
		}
	}
	ids := slices.Sorted(maps.Keys(hosts))
	if err := plugins.LockResources(tx, ResourceType, ids); err != nil {
		return nil, err
	}
	g := tx.WithContext(ctx)
	leases := map[string]time.Time{}
	byHost := map[string]cut{}
	for _, ct := range cuts {
		var n int64
		if err := g.Model(&models.ComputeHostAllocation{}).Where("reservation_id = ? AND compute_host_id = ? AND start_date = ? AND end_date = ?",
			ct.Reservation, ct.Host, ct.Start, ct.End).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, plugins.ErrRetry // changed since the plan: plan again
		}
		byHost[ct.Host] = ct
		if ct.To != "" {
			if err := p.moveLoan(ctx, tx, ownerLease, ct); err != nil {
				return nil, err
			}
			continue
		}
		if at, ok := leases[ct.Lease]; !ok || ct.At.Before(at) {
			leases[ct.Lease] = ct.At
		}
	}
	var touched []string
	for _, ct := range cuts {
		if ct.To != "" {
			touched = append(touched, ct.Host, ct.To)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(leases)) {
		at := leases[id]
		var l models.Lease
		if err := g.Where("id = ?", id).Take(&l).Error; err != nil {
			return nil, err
		}
		if !l.EndDate.After(at) {
			continue
		}
		var resIDs []string
		if err := g.Model(&models.Reservation{}).Where("lease_id = ?", id).Pluck("id", &resIDs).Error; err != nil {
			return nil, err
		}
		var held []string
		if err := g.Model(&models.ComputeHostAllocation{}).Where("reservation_id IN ?", resIDs).Distinct().Pluck("compute_host_id", &held).Error; err != nil {
			return nil, err
		}
		touched = append(touched, held...)
		if err := p.shortenOthers(ctx, tx, &l, at); err != nil {
			return nil, err
		}
		if err := g.Model(&models.Lease{}).Where("id = ?", id).Updates(map[string]any{"end_date": at, "updated_at": tx.Now}).Error; err != nil {
			return nil, err
		}
		if err := g.Model(&models.Event{}).Where("lease_id = ? AND event_type = ? AND status = ?", id, eventEnd, eventUndone).
			Updates(map[string]any{"time": at, "updated_at": tx.Now}).Error; err != nil {
			return nil, err
		}
		if err := g.Model(&models.Event{}).Where("lease_id = ? AND event_type = ? AND status = ? AND time > ?", id, eventBeforeEnd, eventUndone, at).
			Updates(map[string]any{"time": at, "updated_at": tx.Now}).Error; err != nil {
			return nil, err
		}
		if err := g.Model(&models.ComputeHostAllocation{}).Where("reservation_id IN ? AND end_date > ?", resIDs, at).
			Update("end_date", at).Error; err != nil {
			return nil, err
		}
		for _, ct := range cuts {
			if ct.Lease != id || ct.To != "" {
				continue
			}
			// A booking made before the host became the owner's (a lease
			// from before the plan) has no pool record yet: record where
			// its project's pools place the host, so the note has a home;
			// on a partly owned host, the part it was taken back from, so
			// that it still counts against that part and no other.
			if ct.Claim != "" && !ct.Recorded {
				if err := g.Create(&models.OwnershipPool{ReservationID: ct.Reservation, ComputeHostID: ct.Host, LeaseID: ct.Lease,
					Pool: ownership.KindOwned, Consumer: ct.Claim, CreatedAt: tx.Now}).Error; err != nil {
					return nil, err
				}
			} else if err := recordPools(ctx, tx, ct.Lease, ct.Reservation, p.ownershipOrder(ct.Project), []string{ct.Host}, false); err != nil {
				return nil, err
			}
			note, _ := json.Marshal(Reclaim{Action: "shortened", At: stamp(at), ByLease: ownerLease, OriginalEnd: stamp(l.EndDate),
				GraceSeconds: int64(ct.Grace / time.Second)})
			if err := g.Model(&models.OwnershipPool{}).Where("reservation_id = ? AND compute_host_id = ?", ct.Reservation, ct.Host).
				Update("reclaim", string(note)).Error; err != nil {
				return nil, err
			}
		}
	}
	if len(touched) > 0 {
		slices.Sort(touched)
		touched = slices.Compact(touched)
		rows, err := loadAllocs(ctx, tx.DB, touched, p.idx.withTags)
		if err != nil {
			return nil, err
		}
		tx.AfterCommit(func() { p.idx.replaceHosts(touched, rows) })
	}
	return byHost, nil
}

// noteReclaimed records on the owner's entries which borrower lease each
// reclaimed host was taken back from.
func noteReclaimed(ctx context.Context, tx *plugins.Tx, resID string, byHost map[string]cut) error {
	for _, h := range slices.Sorted(maps.Keys(byHost)) {
		ct := byHost[h]
		note, _ := json.Marshal(Reclaim{Action: "reclaimed", At: stamp(ct.At), FromLease: ct.Lease, GraceSeconds: int64(ct.Grace / time.Second)})
		if err := tx.WithContext(ctx).Model(&models.OwnershipPool{}).Where("reservation_id = ? AND compute_host_id = ?", resID, h).
			Update("reclaim", string(note)).Error; err != nil {
			return err
		}
	}
	return nil
}

// stamp formats t as the lease bodies' other dates are (UTC, to the
// microsecond).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000") }

// withNote adds note to a refusal for lack of hosts.
func withNote(err error, note string) error {
	if note == "" {
		return err
	}
	var e *errs.Error
	if errors.As(err, &e) && e.Kind == errs.NotEnoughResources {
		return errs.New(errs.NotEnoughResources, "%s (%s)", e.Msg, note)
	}
	return err
}

// reclaimOr answers Prepare's refusal err from the pools: on a fresh
// view, a choice that reclaims the owner's lent hosts when one serves the
// request (nil: c holds it); otherwise err, with a note saying from when
// a reclaim would serve.
func (p *Plugin) reclaimOr(ctx context.Context, c *choice, lease plugins.Lease, fresh bool, err error) error {
	var e *errs.Error
	if c.order == nil || !fresh || !errors.As(err, &e) || e.Kind != errs.NotEnoughResources {
		return err
	}
	ok, note, rerr := p.planReclaim(ctx, c, lease, c.order.Lendable(false), c.order.Stages())
	if rerr != nil {
		return rerr
	}
	if ok {
		return nil
	}
	return withNote(err, note)
}

// reclaimFirst serves c from the project's own hosts, reclaiming lent
// ones of the groups whose plan entry says reclaim (Entry.Reclaim), before
// less preferred pools are tried: true when it did (c.chosen and c.cuts
// set). When the own hosts serve c without a reclaim, the ordinary
// choice does it.
func (p *Plugin) reclaimFirst(ctx context.Context, c *choice, lease plugins.Lease) (bool, error) {
	if c.order == nil {
		return false, nil
	}
	stages := c.order.OwnedStages()
	grace := c.order.Lendable(true)
	if stages == 0 || len(grace) == 0 {
		return false, nil
	}
	lo, hi := lease.Start.Add(-p.cfg.Cleaning), lease.End.Add(p.cfg.Cleaning)
	if _, err := p.chooseReclaiming(c, nil, nil, lo, hi, stages); err == nil {
		return false, nil // served without taking anything back
	}
	ok, _, err := p.planReclaim(ctx, c, lease, grace, stages)
	return ok, err
}

// roomForMoves finds, for the loans of cands that must move (not begun by
// the reclaim time), a host each: free over the loan's window, matching
// its reservation, in its project's pools, not one of the candidates and
// not borrowed from a lender with a lending limit. Candidates with a loan
// that finds no room are dropped.
func (p *Plugin) roomForMoves(ctx context.Context, cands []ownership.Candidate) ([]ownership.Candidate, map[ownership.Booking]string, error) {
	avoid := map[string]bool{}
	for _, cd := range cands {
		avoid[cd.Host] = true
	}
	moveTo := map[ownership.Booking]string{}
	out := cands[:0:0]
	for _, cd := range cands {
		ok := true
		var got []string
		for _, b := range cd.Moves {
			to, err := p.moveTarget(ctx, b, avoid)
			if err != nil {
				return nil, nil, err
			}
			if to == "" {
				ok = false
				break
			}
			moveTo[b] = to
			avoid[to] = true
			got = append(got, to)
		}
		if ok {
			out = append(out, cd)
			continue
		}
		for _, h := range got {
			delete(avoid, h)
		}
	}
	return out, moveTo, nil
}

// moveTarget chooses a host for loan b outside avoid ("" when none).
func (p *Plugin) moveTarget(ctx context.Context, b ownership.Booking, avoid map[string]bool) (string, error) {
	var hr models.ComputeHostReservation
	if err := p.db.WithContext(ctx).Where("reservation_id = ?", b.Reservation).Take(&hr).Error; err != nil {
		return "", fmt.Errorf("physical:host reservation %s: %w", b.Reservation, err)
	}
	ps, err := p.params(nil, &hr)
	if err != nil {
		return "", err
	}
	o := p.ownershipOrder(b.Project)
	lo, hi := b.Start.Add(-p.cfg.Cleaning), b.End.Add(p.cfg.Cleaning)
	var dec allocator.HostDecision
	// The reservation's own bookings stay busy: its other hosts are no
	// room for the loan (the one it leaves is in avoid).
	p.idx.view(lo, hi, "", func(id string) bool { return !avoid[id] }, func(hosts []allocator.Host, ranks []int32, info func(string) *Host) {
		m := ps.match(info)
		req := allocator.HostRequest{Window: allocator.Interval{Start: b.Start, End: b.End}, Cleaning: p.cfg.Cleaning, Min: 1, Max: 1,
			Match: func(h *allocator.Host) (bool, string) {
				if o != nil {
					if !o.Allows(o.Stages(), h.ID) {
						return false, "not in the project's ownership pools"
					}
					for _, x := range o.Charges(h.ID) {
						if o.Limit(x) >= 0 {
							return false, "lent under a lending limit"
						}
					}
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}}
		dec, err = allocator.ChoosePrepared(p.cfg.Rules, allocator.PreparedHosts{Hosts: hosts, Ranks: ranks}, req, allocator.ChooseOptions{OmitRejected: true})
	})
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return dec.Chosen[0], nil
}

// moveLoan moves loan ct to host ct.To in tx (locked by the caller),
// after checking that the host is still free over the loan's window, and
// moves its pool record with a note of the move.
func (p *Plugin) moveLoan(ctx context.Context, tx *plugins.Tx, ownerLease string, ct cut) error {
	lo, hi := ct.Start.Add(-p.cfg.Cleaning), ct.End.Add(p.cfg.Cleaning)
	clash, err := p.clashing(ctx, tx, []string{ct.To}, lo, hi, ct.Reservation)
	if err != nil {
		return err
	}
	if len(clash) > 0 {
		return plugins.ErrRetry
	}
	g := tx.WithContext(ctx)
	if err := g.Model(&models.ComputeHostAllocation{}).Where("reservation_id = ? AND compute_host_id = ? AND start_date = ?", ct.Reservation, ct.Host, ct.Start).
		Update("compute_host_id", ct.To).Error; err != nil {
		return err
	}
	// The moved booking's record follows it (a booking with none, made
	// before the host became the owner's, gets one: the move is shown).
	if err := g.Where("reservation_id = ? AND compute_host_id = ?", ct.Reservation, ct.Host).Delete(&models.OwnershipPool{}).Error; err != nil {
		return err
	}
	if err := recordPools(ctx, tx, ct.Lease, ct.Reservation, p.ownershipOrder(ct.Project), []string{ct.To}, false); err != nil {
		return err
	}
	note, _ := json.Marshal(Reclaim{Action: "moved", At: stamp(ct.At), ByLease: ownerLease, MovedTo: ct.To, GraceSeconds: int64(ct.Grace / time.Second)})
	return g.Model(&models.OwnershipPool{}).Where("reservation_id = ? AND compute_host_id = ?", ct.Reservation, ct.To).
		Update("reclaim", string(note)).Error
}
