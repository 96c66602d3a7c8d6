package host

import (
	"context"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/plugins"
)

// The host plugin's reclaim, for an owner's instance request (the
// instance plugins): the candidates are found, the borrowers cut and the
// notes written by the code a host request uses; only the choice of
// slots is the instance plugin's.

// Cut is one borrower booking a reclaim shortens to At (a reclaim for
// slots never moves one: To is empty).
type Cut = cut

// SlotCandidates returns the hosts o's consumer owns that other projects
// hold (lent, or booked before they became its own) and that a reclaim
// for an instance request of project over [start, end), read in g, may
// take back, best first (ownership.ReclaimableSlots: the owner's own
// bookings stay, loans are cut, never moved); with eager only the hosts
// of the groups whose plan entry reclaims before less preferred pools
// (Order.Lendable). note says from when a reclaim refused only for the
// lending grace period would serve ("" when none was).
func (p *Plugin) SlotCandidates(ctx context.Context, g *gorm.DB, project string, o *ownership.Order, eager bool, start, end time.Time) (cands []ownership.Candidate, note string, err error) {
	grace, bookings, err := p.slotBookings(ctx, g, project, o, eager, start.Add(-p.cfg.Cleaning), end.Add(p.cfg.Cleaning))
	if err != nil || len(grace) == 0 {
		return nil, "", err
	}
	cands, later := ownership.ReclaimableSlots(p.now().UTC(), start, end, p.cfg.Cleaning, grace, bookings, o.RankOf)
	return cands, reclaimNote(later), nil
}

// slotBookings reads what a reclaim for an instance request of project
// may take back over [lo, hi): the hosts o's consumer owns (Lendable) and
// the partly owned hosts where it owns a part (LendableParts), with
// their lending grace periods, and the bookings of those hosts; on a
// partly owned host only the other projects' bookings on the consumer's
// part (Order.PartHeldOutside: lent from it, or drawn from no part the
// host still has), since the other parts' bookings share the host
// whatever it does.
func (p *Plugin) slotBookings(ctx context.Context, g *gorm.DB, project string, o *ownership.Order, eager bool, lo, hi time.Time) (map[string]time.Duration, []ownership.Booking, error) {
	if o == nil {
		return nil, nil, nil
	}
	grace := o.Lendable(eager)
	parts := o.LendableParts(eager)
	for h, pg := range parts {
		grace[h] = pg.Grace
	}
	if len(grace) == 0 {
		return nil, nil, nil
	}
	bookings, err := p.reclaimBookings(ctx, g, slices.Sorted(maps.Keys(grace)), lo, hi, project, o)
	if err != nil {
		return nil, nil, err
	}
	out := bookings[:0]
	for _, b := range bookings {
		if pg, ok := parts[b.Host]; ok {
			if !o.PartHeldOutside(b, pg.Owner) {
				continue
			}
			b.Borrowed, b.Claim = b.Project != project, pg.Owner
		}
		out = append(out, b)
	}
	return grace, out, nil
}

// CutsOf are the cuts of candidate cd.
func CutsOf(cd ownership.Candidate) []Cut {
	out := make([]Cut, 0, len(cd.Cuts))
	for _, b := range cd.Cuts {
		out = append(out, Cut{Booking: b, At: cd.At, Grace: cd.Grace})
	}
	return out
}

// ApplyCuts shortens the borrower leases of cuts in tx as a host
// request's reclaim does (applyCuts: under the cut hosts' physical:host
// locks, each booking checked to be there still as planned, otherwise
// plugins.ErrRetry), and returns the cut of each reclaimed host.
func (p *Plugin) ApplyCuts(ctx context.Context, tx *plugins.Tx, ownerLease string, cuts []Cut) (map[string]Cut, error) {
	return p.applyCuts(ctx, tx, ownerLease, cuts)
}

// NoteReclaimed records on reservation resID's ownership entries which
// borrower lease each host of byHost was taken back from.
func NoteReclaimed(ctx context.Context, tx *plugins.Tx, resID string, byHost map[string]Cut) error {
	return noteReclaimed(ctx, tx, resID, byHost)
}

// WithReclaimNote adds note (SlotCandidates) to a refusal for lack of
// resources.
func WithReclaimNote(err error, note string) error { return withNote(err, note) }

// SlotLoans returns the bookings of the hosts o's consumer owns that
// other projects hold over [lo, hi), read in g, which a reclaim for an
// instance request of project may cut: (reservation, host) → the first
// reclaim time at which it can, the lending grace period after now and
// a minute after the booking's start (slots are cut only once begun
// before the reclaim time, never moved). The instance plugins' earliest
// search sees such a booking end there.
func (p *Plugin) SlotLoans(ctx context.Context, g *gorm.DB, project string, o *ownership.Order, lo, hi time.Time) (map[[2]string]time.Time, error) {
	grace, bookings, err := p.slotBookings(ctx, g, project, o, false, lo, hi)
	if err != nil || len(grace) == 0 {
		return nil, err
	}
	now := p.now().UTC()
	out := map[[2]string]time.Time{}
	for _, b := range bookings {
		if !b.Borrowed || b.Fixed {
			continue
		}
		from := maxTime(reclaimAfter(now, grace[b.Host]), b.Start.Add(time.Minute))
		k := [2]string{b.Reservation, b.Host}
		if t, ok := out[k]; !ok || from.After(t) {
			out[k] = from
		}
	}
	return out, nil
}
