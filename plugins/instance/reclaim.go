package instance

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/host"
)

// Reclaimer is the host plugin's reclaim (*host.Plugin), which an
// owner's instance request uses to take back what other projects hold of
// its hosts: the candidates, best first, and the cuts of the borrower
// leases with their notes, as a host request's reclaim makes them.
type Reclaimer interface {
	SlotCandidates(ctx context.Context, g *gorm.DB, project string, o *ownership.Order, eager bool, start, end time.Time) ([]ownership.Candidate, string, error)
	ApplyCuts(ctx context.Context, tx *plugins.Tx, ownerLease string, cuts []host.Cut) (map[string]host.Cut, error)
	SlotLoans(ctx context.Context, g *gorm.DB, project string, o *ownership.Order, lo, hi time.Time) (map[[2]string]time.Time, error)
}

// SetReclaimer lets the owners' instance requests reclaim through r (the
// host plugin, made after this one since it shortens borrowers through
// this plugin). Call it before the plugin serves requests.
func (p *Plugin) SetReclaimer(r Reclaimer) { p.reclaimer = r }

// reclaimOr answers a new reservation's refusal err (the project's pools
// cannot serve it, on a fresh read): when the project owns hosts other
// projects hold (lent, or booked before they became its own) and their
// lending grace period has passed, the slots are chosen with the
// borrowers' bookings of the best candidates cut (the best one, then the
// best two, …: as few borrowers as serve), and the borrowers' leases of
// the chosen hosts are shortened to the reclaim time in tx. Otherwise err,
// with a note saying from when a reclaim would serve.
//
// Locks: choose locks the chosen hosts (physical:host, sorted) and then
// the lenders it borrows from; the cut hosts are among the chosen ones,
// so ApplyCuts, which locks them again before it checks the bookings, takes
// no new host lock, and the borrowers' other bookings are only shortened.
// The order is the host plugin's: hosts, then lenders.
func (p *Plugin) reclaimOr(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, resID string, ps params, o *ownership.Order, err error) (allocator.SlotDecision, *byPool, map[string]host.Cut, error) {
	if o == nil || p.reclaimer == nil || !tx.Fresh || !notEnough(err) {
		return allocator.SlotDecision{}, nil, nil, err
	}
	dec, bp, byHost, ok, note, rerr := p.planReclaim(ctx, tx, lease, resID, ps, o, false, 0)
	if rerr != nil || ok {
		return dec, bp, byHost, rerr
	}
	return allocator.SlotDecision{}, nil, nil, host.WithReclaimNote(err, note)
}

// reclaimFirst serves an owner's request from its own pools, reclaiming
// the hosts of the groups whose plan entry says reclaim (Entry.Reclaim),
// before less preferred pools are tried, as the host plugin does: ok
// when its own pools served it, with or without a reclaim (byHost: what
// was cut). When they cannot, the ordinary choice goes on.
func (p *Plugin) reclaimFirst(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, resID string, ps params, o *ownership.Order) (dec allocator.SlotDecision, bp *byPool, byHost map[string]host.Cut, ok bool, err error) {
	if o == nil || p.reclaimer == nil {
		return dec, nil, nil, false, nil
	}
	stages := o.OwnedStages()
	if stages == 0 || len(o.Lendable(true)) == 0 {
		return dec, nil, nil, false, nil
	}
	// The own pools without a reclaim: the ordinary choice would make
	// this one (its smallest serving prefix).
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	dec, bp, err = p.choose(ctx, tx, ps, win, resID, nil, o, nil, stages)
	if err == nil || !notEnough(err) {
		// A refusal on a stale view (not fresh) runs the write again.
		return dec, bp, nil, err == nil, err
	}
	dec, bp, byHost, ok, _, err = p.planReclaim(ctx, tx, lease, resID, ps, o, true, stages)
	return dec, bp, byHost, ok, err
}

// planReclaim chooses the slots with the borrowers of the best candidate
// cut, then of the best two, …, from the first stages pools (0: all),
// and cuts those of the hosts chosen: ok when a choice served. eager
// takes only the hosts of the groups whose entry says reclaim. note says
// from when a reclaim refused for the grace period would serve.
func (p *Plugin) planReclaim(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, resID string, ps params, o *ownership.Order, eager bool, stages int) (allocator.SlotDecision, *byPool, map[string]host.Cut, bool, string, error) {
	cands, note, err := p.reclaimer.SlotCandidates(ctx, tx.DB, lease.ProjectID, o, eager, lease.Start, lease.End)
	if err != nil {
		return allocator.SlotDecision{}, nil, nil, false, "", err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	for r := 1; r <= len(cands); r++ {
		dec, bp, cerr := p.choose(ctx, tx, ps, win, resID, nil, o, cutsOf(cands[:r]), stages)
		if notEnough(cerr) {
			continue
		}
		if cerr != nil {
			return dec, nil, nil, false, "", cerr
		}
		// Only the chosen hosts' borrowers are cut: the choice saw the
		// others as they are.
		var cuts []host.Cut
		for _, cd := range cands[:r] {
			if dec.Slots[cd.Host] > 0 {
				cuts = append(cuts, host.CutsOf(cd)...)
			}
		}
		byHost, aerr := p.reclaimer.ApplyCuts(ctx, tx, lease.ID, cuts)
		if aerr != nil {
			return dec, nil, nil, false, "", aerr
		}
		return dec, bp, byHost, true, "", nil
	}
	// On MySQL a loan committed after the candidates were read may have
	// filled what they would free: read them again, and when they
	// changed run the write again rather than refuse.
	if len(cands) > 0 {
		again, _, rerr := p.reclaimer.SlotCandidates(ctx, tx.DB, lease.ProjectID, o, eager, lease.Start, lease.End)
		if rerr != nil {
			return allocator.SlotDecision{}, nil, nil, false, "", rerr
		}
		if !slices.Equal(cutKeys(cands), cutKeys(again)) {
			return allocator.SlotDecision{}, nil, nil, false, "", plugins.ErrRetry
		}
	}
	return allocator.SlotDecision{}, nil, nil, false, note, nil
}

// cutKeys lists the bookings candidates cut, in a fixed order.
func cutKeys(cands []ownership.Candidate) []string {
	var out []string
	for _, cd := range cands {
		for _, b := range cd.Cuts {
			out = append(out, b.Reservation+"\x00"+b.Host+"\x00"+b.Start.String()+"\x00"+b.End.String())
		}
	}
	slices.Sort(out)
	return out
}

// cutsOf is the bookings cands cut.
func cutsOf(cands []ownership.Candidate) cutSet {
	out := cutSet{}
	for _, cd := range cands {
		for _, b := range cd.Cuts {
			out[[2]string{b.Reservation, b.Host}] = true
		}
	}
	return out
}

// notEnough reports a refusal for lack of resources.
func notEnough(err error) bool {
	e := errs.As(err)
	return e != nil && e.Kind == errs.NotEnoughResources
}

// noteReclaimed records on the owner's reservation's entries which
// borrower lease each reclaimed host was taken back from.
func noteReclaimed(ctx context.Context, tx *plugins.Tx, res *models.Reservation, byHost map[string]host.Cut) error {
	if len(byHost) == 0 {
		return nil
	}
	return host.NoteReclaimed(ctx, tx, res.ID, byHost)
}
