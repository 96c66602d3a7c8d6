package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/host"
)

// The earliest-window search (POST /v1/leases/earliest and leases with
// "start_date": "earliest") for virtual:instance: the bookings of the
// matching hosts from the earliest start on are read (outside any
// transaction: nothing is booked, and the create that follows checks
// again), and allocator.EarliestSlots sweeps them. Hosts taken by the
// lease's earlier reservations are left out whole.

// noEnd bounds the bookings read when the search has no latest start.
var noEnd = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)

// readTx is a plugins.Tx over Config.DB outside any transaction, for the
// searches that book nothing.
func (p *Plugin) readTx(ctx context.Context, now time.Time) (*plugins.Tx, error) {
	if p.cfg.DB == nil {
		return nil, errors.New("virtual:instance: the earliest-window search needs Config.DB")
	}
	return plugins.NewTx(p.cfg.DB.DB.WithContext(ctx), p.cfg.DB.Dialect, now), nil
}

// searchParams are r's parameters for the searches, and r.
func searchParams(r plugins.Request) (params, *request, error) {
	req, ok := r.(*request)
	if !ok {
		return params{}, nil, fmt.Errorf("virtual:instance: request of type %T", r)
	}
	return req.params, req, nil
}

// foundChoice is the choice the ownership earliest search accepted for a
// window (taken: the hosts it left out, joined): the leases service asks
// ChooseAt for that same window next, and the answer of a moment ago
// spares a second choice (nothing is booked either way; the create
// checks again).
type foundChoice struct {
	start, end time.Time
	taken      string
	order      []string
}

// takenKey is taken as foundChoice keeps it.
func takenKey(taken []string) string { return strings.Join(taken, "\x00") }

// Earliest implements leases.EarliestFinder: the earliest start in
// [after, notAfter] (notAfter zero: no limit) of a window of length d in
// which the slots of r fit on the matching hosts other than taken. With
// ownership on, a start the create's own choice would refuse is never
// offered (earliestOwned).
func (p *Plugin) Earliest(ctx context.Context, r plugins.Request, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error) {
	ps, req, err := searchParams(r)
	if err != nil {
		return time.Time{}, false, err
	}
	if err := p.checkExternal(&ps); err != nil {
		return time.Time{}, false, err
	}
	tx, err := p.readTx(ctx, after)
	if err != nil {
		return time.Time{}, false, err
	}
	all, err := p.hostList(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	if p.cfg.External != nil {
		p.refreshExternal(ctx, all, false) // no transaction is open here
	}
	if o := p.ownershipOrder(req.project); o != nil {
		return p.earliestOwned(ctx, tx, all, req, o, after, notAfter, d, taken)
	}
	caps, err := p.caps.get(ctx, tx, all, false, p.computeCapacities)
	if err != nil {
		return time.Time{}, false, err
	}
	w := wantOf(&ps)
	out := map[string]bool{}
	for _, id := range taken {
		out[id] = true
	}
	var matching []*hosts.Host
	var ids []string
	nMatch := 0 // taken hosts included, as the create counts them for the reserve
	for i := range all {
		h := &all[i]
		if ok, _ := ps.query.Match(h.Lookup); ok && w.d.hostOK(caps[h.ComputeProviderUUID].Traits) {
			nMatch++
			if !out[h.ID] {
				matching = append(matching, h)
				ids = append(ids, h.ID)
			}
		}
	}
	if len(ids) == 0 {
		return time.Time{}, false, nil
	}
	scan := ids
	if len(ids) > 200 {
		scan = nil // one range scan beats a long IN list
	}
	lo, hi := after.Add(-p.cfg.Cleaning), noEnd
	if !notAfter.IsZero() {
		hi = notAfter.Add(d + p.cfg.Cleaning)
	}
	// Most requests fit at once: the bookings of the first window decide
	// that (a search with the latest start at after checks only it); the
	// rest of the timeline is read only when they do not.
	if t, found, err := p.sweep(ctx, tx, matching, nMatch, scan, caps, ps, lo, after.Add(d+p.cfg.Cleaning), after, after, d); err != nil || found {
		return t, found, err
	}
	if !notAfter.IsZero() && !notAfter.After(after) {
		return time.Time{}, false, nil
	}
	return p.sweep(ctx, tx, matching, nMatch, scan, caps, ps, lo, hi, after, notAfter, d)
}

// sweep reads the bookings of matching (scan: those ids, nil: all)
// overlapping [lo, hi) and runs allocator.EarliestSlots over them;
// nMatch hosts match in all (the whole-host reserve's base).
func (p *Plugin) sweep(ctx context.Context, tx *plugins.Tx, matching []*hosts.Host, nMatch int, scan []string, caps map[string]placement.ComputeCapacity, ps params, lo, hi, after, notAfter time.Time, d time.Duration) (time.Time, bool, error) {
	w := wantOf(&ps)
	bs, _, err := loadBookings(ctx, tx, lo, hi, scan, "", w.m, nil)
	if err != nil {
		return time.Time{}, false, err
	}
	wholes, err := loadWholeBookings(ctx, tx, lo, hi, scan)
	if err != nil {
		return time.Time{}, false, err
	}
	byHost := map[string][]allocator.SlotBooking{}
	for _, b := range bs {
		byHost[b.Host] = append(byHost[b.Host], allocator.SlotBooking{Start: b.Start, End: b.End, Size: b.size(), Slots: b.Slots})
	}
	for _, w := range wholes {
		byHost[w.Host] = append(byHost[w.Host], allocator.SlotBooking{Start: w.Start, End: w.End, Whole: true})
	}
	tls := make([]allocator.SlotTimeline, len(matching))
	for i, h := range matching {
		tls[i] = allocator.SlotTimeline{ID: h.ID, Capacity: capacityOf(h, caps, w), Bookings: byHost[h.ID]}
	}
	req := w.request(&ps)
	req.WholeReservePercent, req.MatchingHosts = p.cfg.WholeReservePercent, nMatch
	t, found, err := allocator.EarliestSlots(tls, req,
		allocator.SlotWindow{After: after, NotAfter: notAfter, Duration: d, Cleaning: p.cfg.Cleaning})
	if errors.Is(err, allocator.ErrInvalidRequest) {
		return time.Time{}, false, plugins.BadRequest("%s", err.Error())
	}
	return t, found, err
}

// ChooseAt implements leases.EarliestFinder: the hosts the slots of r
// would get over [start, end) (the choice a create makes, from the
// project's pools with ownership on), leaving out the hosts in taken;
// nothing is booked.
func (p *Plugin) ChooseAt(ctx context.Context, r plugins.Request, start, end time.Time, taken []string) ([]string, error) {
	ps, req, err := searchParams(r)
	if err != nil {
		return nil, err
	}
	if f := req.found; f != nil && f.start.Equal(start) && f.end.Equal(end) && f.taken == takenKey(taken) {
		req.found = nil
		return f.order, nil
	}
	if err := p.checkExternal(&ps); err != nil {
		return nil, err
	}
	tx, err := p.readTx(ctx, start)
	if err != nil {
		return nil, err
	}
	all, err := p.hostList(ctx)
	if err != nil {
		return nil, err
	}
	excluded := map[string]bool{}
	for _, id := range taken {
		excluded[id] = true
	}
	dec, err := p.chooseAt(ctx, tx, all, ps, req.project, p.ownershipOrder(req.project), start, end, excluded, true)
	if err != nil {
		var ne *allocator.NotEnoughSlotsError
		if errors.As(err, &ne) {
			return nil, plugins.NotEnough("%s", ne.Error())
		}
		var ue *unservedError
		if errors.Is(err, allocator.ErrInvalidRequest) || errors.As(err, &ue) {
			return nil, plugins.BadRequest("%s", err.Error())
		}
		return nil, err
	}
	return dec.Order, nil
}

// chooseAt is the choice a new reservation with ps of a project with
// ownership order o (nil: ownership off) would get over [start, end),
// the excluded hosts left out: the create's own choice (chooseOnce, from
// the pools within the lenders' budgets, and when they cannot serve with
// the reclaim the create would make, reclaimOr), with nothing locked,
// booked or cut. Without mayReclaim (the caller knows no booking a
// reclaim could cut) no reclaim is tried.
func (p *Plugin) chooseAt(ctx context.Context, tx *plugins.Tx, all []hosts.Host, ps params, project string, o *ownership.Order, start, end time.Time, excluded map[string]bool, mayReclaim bool) (allocator.SlotDecision, error) {
	var bp *byPool
	if o != nil {
		b, err := lenderBudgets(ctx, tx, o, allocator.Interval{Start: start, End: end}, "")
		if err != nil {
			return allocator.SlotDecision{}, err
		}
		bp = &byPool{order: o, budgets: b}
	}
	lo, hi := start.Add(-p.cfg.Cleaning), end.Add(p.cfg.Cleaning)
	dec, _, err := p.chooseOnce(ctx, tx, all, ps, lo, hi, "", nil, excluded, bp, nil)
	var ne *allocator.NotEnoughSlotsError
	if err == nil || !mayReclaim || o == nil || p.reclaimer == nil || !errors.As(err, &ne) {
		return dec, err
	}
	cands, _, rerr := p.reclaimer.SlotCandidates(ctx, tx.DB, project, o, false, start, end)
	if rerr != nil {
		return dec, rerr
	}
	for r := 1; r <= len(cands); r++ {
		d, _, cerr := p.chooseOnce(ctx, tx, all, ps, lo, hi, "", nil, excluded, bp, cutsOf(cands[:r]))
		if errors.As(cerr, &ne) {
			continue
		}
		return d, cerr
	}
	return dec, err
}

// maxOwnedChecks bounds the starts earliestOwned checks against the
// create's choice before it gives up.
const maxOwnedChecks = 256

// earliestOwned is Earliest for a project with ownership order o. A
// start is offered only once the create's own choice (chooseAt: the
// pools' stages, the parts of partly owned hosts, the lending limits)
// serves it. Most requests fit at after; otherwise the bookings of the
// matching hosts the pools offer are read once and swept
// (allocator.EarliestSlots, whole hosts' capacity and no reserve: a bound
// the choice can only be later than), and each start found is checked by
// the choice; when it refuses, the search goes on from the next time its
// answer can change: a booking of those hosts ends (plus cleaning) or a
// loan ends (a lender's lending limit has more left). In between only
// bookings enter the window, which never makes room.
func (p *Plugin) earliestOwned(ctx context.Context, tx *plugins.Tx, all []hosts.Host, req *request, o *ownership.Order, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error) {
	ps, c := req.params, p.cfg.Cleaning
	req.found = nil
	excluded := map[string]bool{}
	for _, id := range taken {
		excluded[id] = true
	}
	lo, hi := after.Add(-c), noEnd
	if !notAfter.IsZero() {
		hi = notAfter.Add(d + c)
	}
	// fits reports whether the choice serves a window starting at t
	// (trying a reclaim when mayReclaim).
	fits := func(t time.Time, mayReclaim bool) (bool, error) {
		dec, err := p.chooseAt(ctx, tx, all, ps, req.project, o, t, t.Add(d), excluded, mayReclaim)
		var ne *allocator.NotEnoughSlotsError
		var ue *unservedError
		switch {
		case err == nil:
			req.found = &foundChoice{start: t, end: t.Add(d), taken: takenKey(taken), order: dec.Order}
			return true, nil
		case errors.As(err, &ne):
			return false, nil
		case errors.Is(err, allocator.ErrInvalidRequest) || errors.As(err, &ue):
			return false, plugins.BadRequest("%s", err.Error())
		}
		return false, err
	}
	if ok, err := fits(after, true); err != nil || ok {
		return after, ok, err
	}
	// Other projects' bookings of the hosts the project owns, which a
	// reclaim may cut (read once: without any, no start tries a reclaim).
	var loans map[[2]string]time.Time
	if p.reclaimer != nil {
		var err error
		if loans, err = p.reclaimer.SlotLoans(ctx, tx.DB, req.project, o, lo, hi); err != nil {
			return time.Time{}, false, err
		}
	}
	if !notAfter.IsZero() && !notAfter.After(after) {
		return time.Time{}, false, nil
	}
	caps, err := p.caps.get(ctx, tx, all, false, p.computeCapacities)
	if err != nil {
		return time.Time{}, false, err
	}
	w := wantOf(&ps)
	var pooled []*hosts.Host
	var ids []string
	for i := range all {
		h := &all[i]
		if excluded[h.ID] {
			continue
		}
		if whole, parts := o.Offer(o.Stages(), h.ID); !whole && len(parts) == 0 {
			continue
		}
		if ok, _ := ps.query.Match(h.Lookup); ok && w.d.hostOK(caps[h.ComputeProviderUUID].Traits) {
			pooled = append(pooled, h)
			ids = append(ids, h.ID)
		}
	}
	if len(ids) == 0 {
		return time.Time{}, false, nil
	}
	scan := ids
	if len(ids) > 200 {
		scan = nil // one range scan beats a long IN list
	}
	bs, _, err := loadBookings(ctx, tx, lo, hi, scan, "", w.m, nil)
	if err != nil {
		return time.Time{}, false, err
	}
	wholes, err := loadWholeBookings(ctx, tx, lo, hi, scan)
	if err != nil {
		return time.Time{}, false, err
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	// The loans end, for the sweep, where a reclaim can cut them (its
	// choice is checked by fits).
	cutEnd := func(res, h string, end time.Time) time.Time {
		if from, ok := loans[[2]string{res, h}]; ok && from.Before(end) {
			return from
		}
		return end
	}
	byHost := map[string][]allocator.SlotBooking{}
	var changes []time.Time
	for _, b := range bs {
		if in[b.Host] {
			end := cutEnd(b.Res, b.Host, b.End)
			if end.After(b.Start) {
				byHost[b.Host] = append(byHost[b.Host], allocator.SlotBooking{Start: b.Start, End: end, Size: b.size(), Slots: b.Slots})
			}
			changes = append(changes, end.Add(c))
		}
	}
	for _, wb := range wholes {
		if in[wb.Host] {
			end := cutEnd(wb.Res, wb.Host, wb.End)
			if end.After(wb.Start) {
				byHost[wb.Host] = append(byHost[wb.Host], allocator.SlotBooking{Start: wb.Start, End: end, Whole: true})
			}
			changes = append(changes, end.Add(c))
		}
	}
	if len(o.Budgets(nil, after, after)) > 0 {
		ends, err := host.LoanEnds(ctx, tx.DB, after, hi)
		if err != nil {
			return time.Time{}, false, err
		}
		changes = append(changes, ends...)
	}
	slices.SortFunc(changes, time.Time.Compare)
	tls := make([]allocator.SlotTimeline, len(pooled))
	for i, h := range pooled {
		tls[i] = allocator.SlotTimeline{ID: h.ID, Capacity: capacityOf(h, caps, w), Bookings: byHost[h.ID]}
	}
	bound := w.request(&ps) // no whole-host reserve: a bound
	t := after
	for range maxOwnedChecks - 1 {
		// The next change after the refused start t.
		i, _ := slices.BinarySearchFunc(changes, t, func(e, t time.Time) int {
			if e.After(t) {
				return 1
			}
			return -1
		})
		if i == len(changes) {
			return time.Time{}, false, nil
		}
		next, found, err := allocator.EarliestSlots(tls, bound,
			allocator.SlotWindow{After: changes[i], NotAfter: notAfter, Duration: d, Cleaning: c})
		if errors.Is(err, allocator.ErrInvalidRequest) {
			return time.Time{}, false, plugins.BadRequest("%s", err.Error())
		}
		if err != nil || !found {
			return time.Time{}, false, err
		}
		t = next
		ok, err := fits(t, len(loans) > 0)
		if err != nil || ok {
			return t, ok, err
		}
	}
	return time.Time{}, false, plugins.NotEnough("No window found within %d starts checked against the project's ownership pools; ask for a later start.", maxOwnedChecks)
}

// wholeBooking is a whole-host reservation's allocation of a host.
type wholeBooking struct {
	Host  string    `gorm:"column:compute_host_id"`
	Res   string    `gorm:"column:reservation_id"`
	Start time.Time `gorm:"column:start_date"`
	End   time.Time `gorm:"column:end_date"`
}

// loadWholeBookings reads the whole-host (physical:host) allocations of
// hostIDs (every host when nil) overlapping [lo, hi).
func loadWholeBookings(ctx context.Context, tx *plugins.Tx, lo, hi time.Time, hostIDs []string) ([]wholeBooking, error) {
	q := `SELECT c.compute_host_id, c.reservation_id, c.start_date, c.end_date FROM computehost_reservations h
 CROSS JOIN computehost_allocations c ON c.reservation_id = h.reservation_id
 WHERE c.end_date > ? AND c.start_date < ?`
	q, args := inClause(q, []any{lo, hi}, "c.compute_host_id", hostIDs)
	var out []wholeBooking
	if err := tx.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("host bookings: %w", err)
	}
	return out, nil
}
