package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
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

// searchParams are r's parameters for the searches.
func searchParams(r plugins.Request) (params, error) {
	req, ok := r.(*request)
	if !ok {
		return params{}, fmt.Errorf("virtual:instance: request of type %T", r)
	}
	return req.params, nil
}

// Earliest implements leases.EarliestFinder: the earliest start in
// [after, notAfter] (notAfter zero: no limit) of a window of length d in
// which the slots of r fit on the matching hosts other than taken.
func (p *Plugin) Earliest(ctx context.Context, r plugins.Request, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error) {
	ps, err := searchParams(r)
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
	bs, _, err := loadBookings(ctx, tx, lo, hi, scan, "", w.m)
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
// would get over [start, end) (the choice a create makes), leaving out
// the hosts in taken; nothing is booked.
func (p *Plugin) ChooseAt(ctx context.Context, r plugins.Request, start, end time.Time, taken []string) ([]string, error) {
	ps, err := searchParams(r)
	if err != nil {
		return nil, err
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
	dec, _, err := p.chooseOnce(ctx, tx, all, ps, start.Add(-p.cfg.Cleaning), end.Add(p.cfg.Cleaning), "", nil, excluded, nil)
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

// wholeBooking is a whole-host reservation's allocation of a host.
type wholeBooking struct {
	Host  string    `gorm:"column:compute_host_id"`
	Start time.Time `gorm:"column:start_date"`
	End   time.Time `gorm:"column:end_date"`
}

// loadWholeBookings reads the whole-host (physical:host) allocations of
// hostIDs (every host when nil) overlapping [lo, hi).
func loadWholeBookings(ctx context.Context, tx *plugins.Tx, lo, hi time.Time, hostIDs []string) ([]wholeBooking, error) {
	q := `SELECT c.compute_host_id, c.start_date, c.end_date FROM computehost_reservations h
 CROSS JOIN computehost_allocations c ON c.reservation_id = h.reservation_id
 WHERE c.end_date > ? AND c.start_date < ?`
	q, args := inClause(q, []any{lo, hi}, "c.compute_host_id", hostIDs)
	var out []wholeBooking
	if err := tx.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("host bookings: %w", err)
	}
	return out, nil
}
