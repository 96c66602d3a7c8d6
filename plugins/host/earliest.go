package host

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// Earliest finds the earliest start in [after, notAfter] (notAfter zero:
// no limit) of a window of length d in which reservation r's min hosts
// are free (cleaning time included), leaving out the hosts in taken. It
// reads the view (allocator.EarliestWindow over its sorted bounds):
// nothing is booked. With ownership on, the project's pools and lending
// limits apply and an owner's lent hosts count from when a reclaim
// could take them back (earliestOwned).
func (p *Plugin) Earliest(ctx context.Context, r plugins.Request, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error) {
	ps, ok := r.(params)
	if !ok {
		return time.Time{}, false, fmt.Errorf("physical:host: request of type %T", r)
	}
	if err := p.ensureView(ctx, false); err != nil {
		return time.Time{}, false, err
	}
	req := allocator.EarliestRequest{
		After: after, NotAfter: notAfter, Duration: d, Cleaning: p.cfg.Cleaning, Min: ps.min,
		ReservePercent: p.cfg.ReservePercent,
	}
	if o := p.ownershipOrder(ps.project); o != nil {
		return p.earliestOwned(ctx, ps, o, req, taken)
	}
	res, err := p.idx.earliest(req, ps.matchExcept(taken))
	if err != nil {
		return time.Time{}, false, notEnough(err)
	}
	return res.Window.Start, res.Found, nil
}

// maxOwnedChecks bounds the windows earliestOwned checks against the
// create's choice before it gives up.
const maxOwnedChecks = 256

// earliestOwned is Earliest for a project with ownership pools o. Two
// sweeps of the timeline give the earliest start the pools could serve:
// over the hosts of o's pools as booked (what the create's choice draws
// from), and over o's hosts that are not borrowed, with the owner's lent
// hosts booked by borrowers only until a reclaim could take them back
// (reclaimedBusy: what the create's reclaim draws from). Both ignore
// what only the choice itself knows (lending limits, the room a moved
// loan needs, hosts other projects use now, the placement rules), so the
// start is then checked by the create's own choice (Prepare, which books
// nothing); when that refuses, the search goes on from the next time a
// window can change.
func (p *Plugin) earliestOwned(ctx context.Context, ps params, o *ownership.Order, req allocator.EarliestRequest, taken []string) (time.Time, bool, error) {
	now := p.now().UTC()
	pooled := func(borrowed bool) func(info func(string) *Host) func(*allocator.Host) (bool, string) {
		return func(info func(string) *Host) func(*allocator.Host) (bool, string) {
			m := ps.matchExcept(taken)(info)
			return func(h *allocator.Host) (bool, string) {
				if !o.Allows(o.Stages(), h.ID) {
					return false, "not in the project's ownership pools"
				}
				if !borrowed && o.SourceOf(h.ID).LentBy != "" {
					return false, "borrowed: not taken while reclaiming"
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}
		}
	}
	reclaimed, cutFrom, err := p.reclaimedBusy(ctx, ps.project, o, now, req)
	if err != nil {
		return time.Time{}, false, err
	}
	// The times a window may next change besides the end of a booking of
	// a host of the pools: a loan ends (a lender's lending limit has
	// more left), a reclaim becomes possible (a loan that could only
	// move, for lack of room, can be cut from then on), the window no
	// longer starts now.
	changes := append(slices.Clip(cutFrom), p.nowBoundary(now))
	loansRead := len(o.Budgets(nil, req.After, req.After)) == 0 // no lending limit: no need
	inPools := func(id string) bool { return o.Allows(o.Stages(), id) }
	at := req.After
	for range maxOwnedChecks {
		r := req
		r.After = at
		res, err := p.idx.earliest(r, pooled(true))
		if err != nil {
			return time.Time{}, false, notEnough(err)
		}
		if reclaimed != nil {
			rr, err := p.idx.earliestWithBusy(r, pooled(false), reclaimed)
			if err != nil {
				return time.Time{}, false, notEnough(err)
			}
			if rr.Found && (!res.Found || rr.Window.Start.Before(res.Window.Start)) {
				res = rr
			}
		}
		if !res.Found {
			return time.Time{}, false, nil
		}
		t := res.Window.Start
		_, err = p.chooseOwned(ctx, ps, t, t.Add(req.Duration), taken)
		if err == nil {
			return t, true, nil
		}
		if !errs.Is(err, errs.NotEnoughResources) {
			return time.Time{}, false, err
		}
		if !loansRead {
			// Read once, after the first refused start (most searches
			// have none).
			ends, err := loanEnds(ctx, p.db, req.After, searchEnd(req))
			if err != nil {
				return time.Time{}, false, err
			}
			changes, loansRead = append(changes, ends...), true
		}
		at = p.idx.nextFree(t, p.cfg.Cleaning, inPools)
		for _, s := range changes {
			if s.After(t) && (at.IsZero() || s.Before(at)) {
				at = s
			}
		}
		if at.IsZero() || (!req.NotAfter.IsZero() && at.After(req.NotAfter)) {
			return time.Time{}, false, nil
		}
	}
	return time.Time{}, false, errs.New(errs.NotEnoughResources,
		"No window found within %d starts checked against the project's ownership pools; ask for a later start.", maxOwnedChecks)
}

// nowBoundary is the first whole minute at which a window no longer
// starts now (startsNow): other projects' running instances stop
// counting there.
func (p *Plugin) nowBoundary(now time.Time) time.Time {
	return now.Add(nowSlack + p.cfg.Cleaning).Truncate(time.Minute).Add(time.Minute)
}

// reclaimAfter is the first whole minute from which a borrower of a host
// lent with grace period g, asked at now, can be cut: at least g after
// now (and after now), as ownership.Reclaimable requires.
func reclaimAfter(now time.Time, g time.Duration) time.Time {
	return ceilMinute(now.Add(max(g, time.Minute)))
}

// ceilMinute rounds t up to a whole minute (lease dates are whole
// minutes).
func ceilMinute(t time.Time) time.Time {
	if r := t.Truncate(time.Minute); !r.Equal(t) {
		return r.Add(time.Minute)
	}
	return t
}

// reclaimedBusy returns the bookings of the hosts o's consumer owns and
// lends as a reclaim asked at now would leave them (nil when it lends
// none): a borrowed booking (not fixed) stays busy only where a reclaim
// cannot take it. A window starting at s takes it back by cutting it to
// s - cleaning when it began before (allowed from reclaimAfter on) or by
// moving it when it begins later (allowed at any time), so the windows
// it forbids are those with s - cleaning in (start, reclaimAfter): for
// the sweep, the booking [start + d + 2·cleaning, reclaimAfter). A loan
// begun by now, or slots of an instance reservation (never moved), stays
// busy from its start until reclaimAfter (slots: at least a minute after
// their start, from when they are cut). cutFrom
// are the starts at which a reclaim of a loan becomes possible
// (reclaimAfter plus cleaning, and a minute after a loan's start plus
// cleaning, from when it is cut rather than moved).
func (p *Plugin) reclaimedBusy(ctx context.Context, project string, o *ownership.Order, now time.Time, req allocator.EarliestRequest) (busy map[string][]allocator.Interval, cutFrom []time.Time, err error) {
	grace := o.Lendable(false)
	if len(grace) == 0 {
		return nil, nil, nil
	}
	c := req.Cleaning
	bookings, err := p.reclaimBookings(ctx, p.db, slices.Sorted(maps.Keys(grace)), req.After.Add(-c), searchEnd(req), project, o)
	if err != nil {
		return nil, nil, err
	}
	type key struct {
		host       string
		start, end int64
	}
	// The loans a reclaim may take, and whether each stays (slots: cut,
	// never moved).
	loan := map[key]bool{}
	for _, b := range bookings {
		if b.Borrowed && !b.Fixed {
			k := key{b.Host, b.Start.UnixNano(), b.End.UnixNano()}
			stays, seen := loan[k]
			loan[k] = b.Stays || seen && stays
		}
	}
	busy = make(map[string][]allocator.Interval, len(grace))
	for h, g := range grace {
		ivs := p.idx.busyOf(h)
		kept := ivs[:0]
		for _, iv := range ivs {
			stays, ok := loan[key{h, iv.Start.UnixNano(), iv.End.UnixNano()}]
			if !ok {
				kept = append(kept, iv)
				continue
			}
			to := reclaimAfter(now, g)
			// Cut from then on; a loan not begun is moved before that
			// (if there is room) and cut once it has begun before the
			// reclaim time, from a minute after its start.
			cutFrom = append(cutFrom, to.Add(c), maxTime(to, iv.Start.Add(time.Minute)).Add(c))
			from := iv.Start.Add(req.Duration + 2*c)
			if !iv.Start.After(now) || stays {
				from = iv.Start // begun, or slots: cut, never moved
			}
			if stays {
				// Slots are cut only at a reclaim time after their start.
				to = maxTime(to, iv.Start.Add(time.Minute))
			}
			if from.Before(to) {
				kept = append(kept, allocator.Interval{Start: from, End: to})
			}
		}
		busy[h] = kept
	}
	return busy, cutFrom, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// farFuture bounds the bookings a search without a latest start reads.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// searchEnd is the end of the last window req may offer (cleaning
// included).
func searchEnd(req allocator.EarliestRequest) time.Time {
	if req.NotAfter.IsZero() {
		return farFuture
	}
	return req.NotAfter.Add(req.Duration + req.Cleaning)
}

// LoanEnds is loanEnds for the instance plugins' earliest search, whose
// slots borrowed count against the same lending limits.
func LoanEnds(ctx context.Context, g *gorm.DB, lo, hi time.Time) ([]time.Time, error) {
	return loanEnds(ctx, g, lo, hi)
}

// loanEnds reads the ends in (lo, hi) of the bookings of lent hosts: when
// a lender's lending limit may have more left.
func loanEnds(ctx context.Context, g *gorm.DB, lo, hi time.Time) ([]time.Time, error) {
	var ends []time.Time
	err := g.WithContext(ctx).Table("ownership_pools o").
		Joins("JOIN computehost_allocations a ON a.reservation_id = o.reservation_id AND a.compute_host_id = o.compute_host_id").
		Where("o.lent_by <> '' AND a.end_date > ? AND a.end_date < ?", lo, hi).
		Distinct().Pluck("a.end_date", &ends).Error
	if err != nil {
		return nil, fmt.Errorf("read the ends of loans: %w", err)
	}
	return ends, nil
}

// chooseOwned is the hosts a new lease of ps's project would get over
// [start, end), leaving out taken: the create's own choice (Prepare:
// pools, lending limits, reclaim), with nothing booked.
func (p *Plugin) chooseOwned(ctx context.Context, ps params, start, end time.Time, taken []string) ([]string, error) {
	lease := plugins.Lease{ProjectID: ps.project, Start: start, End: end, Status: leasePending}
	var earlier []any
	if len(taken) > 0 {
		earlier = []any{&choice{chosen: taken}}
	}
	c, err := p.Prepare(ctx, lease, ps, true, earlier)
	if err != nil {
		return nil, err
	}
	return c.(*choice).chosen, nil
}

// ChooseAt returns the hosts reservation r would get over [start, end)
// (the choice a lease created for that window makes, from the view; with
// ownership on, the create's own choice), leaving out the hosts in
// taken; nothing is booked.
func (p *Plugin) ChooseAt(ctx context.Context, r plugins.Request, start, end time.Time, taken []string) ([]string, error) {
	ps, ok := r.(params)
	if !ok {
		return nil, fmt.Errorf("physical:host: request of type %T", r)
	}
	if err := p.ensureView(ctx, false); err != nil {
		return nil, err
	}
	if p.ownershipOrder(ps.project) != nil {
		return p.chooseOwned(ctx, ps, start, end, taken)
	}
	req := allocator.HostRequest{Window: allocator.Interval{Start: start, End: end}, Cleaning: p.cfg.Cleaning,
		Min: ps.min, Max: ps.max, UsedDomains: p.idx.domainsOf(taken), ReservePercent: p.cfg.ReservePercent}
	dec, err := p.idx.choose(p.cfg.Rules, req, ps.matchExcept(taken))
	if err != nil {
		return nil, notEnough(err)
	}
	return dec.Chosen, nil
}

// matchExcept is the property check that also leaves out the hosts in
// taken.
func (ps params) matchExcept(taken []string) func(info func(string) *Host) func(*allocator.Host) (bool, string) {
	return func(info func(string) *Host) func(*allocator.Host) (bool, string) {
		m := ps.match(info)
		if len(taken) == 0 {
			return m
		}
		set := make(map[string]bool, len(taken))
		for _, id := range taken {
			set[id] = true
		}
		return func(h *allocator.Host) (bool, string) {
			if set[h.ID] {
				return false, "taken by another reservation of the lease"
			}
			if m == nil {
				return true, ""
			}
			return m(h)
		}
	}
}
