package host

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/plugins"
)

// PoolFree is one pool of a project's order as a request sees it: how
// many of its hosts match the request and are free over its window.
type PoolFree struct {
	Kind  string `json:"kind"`
	Owner string `json:"owner,omitempty"`
	Level string `json:"level,omitempty"`
	Group string `json:"group,omitempty"`
	Hosts int    `json:"hosts"`
	Free  int    `json:"free"`
	Why   string `json:"why"`
}

// RequestExplanation says how a physical:host request of a project would
// be served: its pools in order with their free matching hosts, and the
// pool whose prefix serves it (the lease create's staged choice).
type RequestExplanation struct {
	Min   int        `json:"min"`
	Max   int        `json:"max"`
	Start time.Time  `json:"start_date"`
	End   time.Time  `json:"end_date"`
	Pools []PoolFree `json:"pools"`
	// ServedBy is the 1-based index of the last pool of the smallest
	// prefix that serves the request (0: none does, see Reason).
	ServedBy int      `json:"served_by"`
	Chosen   []string `json:"chosen"`
	Reason   string   `json:"reason,omitempty"`
}

// ExplainRequest runs a physical:host request (min, max,
// hypervisor_properties, resource_properties in v) of lease's project
// over lease's window through the choice a lease create makes, without
// booking anything: the same parsing and privacy check, the same pools
// with the same lending limits left, the same allocator. It does not try
// a reclaim.
func (p *Plugin) ExplainRequest(ctx context.Context, lease plugins.Lease, v plugins.Values) (*RequestExplanation, error) {
	ps, err := p.params(v, &models.ComputeHostReservation{BeforeEnd: "default"})
	if err != nil {
		return nil, err
	}
	if err := p.checkPrivacy(ps.resource, lease, false); err != nil {
		return nil, err
	}
	if !lease.End.After(lease.Start) {
		return nil, plugins.BadRequest("end_date must be after start_date.")
	}
	if err := p.ensureView(ctx, true); err != nil {
		return nil, err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	o := p.ownershipOrder(lease.ProjectID)
	b, err := budgets(ctx, p.db, o, win, "")
	if err != nil {
		return nil, err
	}
	req := allocator.HostRequest{Window: win, Cleaning: p.cfg.Cleaning, Min: ps.min, Max: ps.max, ReservePercent: p.cfg.ReservePercent}
	ex := &RequestExplanation{Min: ps.min, Max: ps.max, Start: lease.Start, End: lease.End, Pools: []PoolFree{}, Chosen: []string{}}
	if o != nil {
		for _, pl := range o.Pools {
			// The allocator counts what it could take of the pool.
			in := map[string]bool{}
			for _, h := range pl.Hosts {
				in[h] = true
			}
			count := allocator.HostRequest{Window: win, Cleaning: p.cfg.Cleaning, Min: 1, Max: max(1, len(pl.Hosts))}
			dec, _ := p.idx.choose(p.cfg.Rules, count, func(info func(string) *Host) func(*allocator.Host) (bool, string) {
				m := ps.match(info)
				return func(h *allocator.Host) (bool, string) {
					if !in[h.ID] {
						return false, "not in the pool"
					}
					if m == nil {
						return true, ""
					}
					return m(h)
				}
			})
			ex.Pools = append(ex.Pools, PoolFree{Kind: pl.Kind, Owner: pl.Owner, Level: pl.Level, Group: pl.Group,
				Hosts: len(pl.Hosts), Free: len(dec.Chosen), Why: pl.Why})
		}
	}
	dec, err := p.chooseByPoolTraced(o, b, req, ps.match, func(k int, err error) {
		if err == nil {
			ex.ServedBy = k
		}
	})
	if err != nil {
		ex.Reason = notEnough(err).Error()
		return ex, nil
	}
	ex.Chosen = append(ex.Chosen, dec.Chosen...)
	return ex, nil
}
