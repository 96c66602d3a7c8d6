package host

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/plugins"
)

// Earliest finds the earliest start in [after, notAfter] (notAfter zero:
// no limit) of a window of length d in which reservation r's min hosts
// are free (cleaning time included), leaving out the hosts in taken. It
// reads the view (allocator.EarliestWindow over its sorted bounds):
// nothing is booked.
func (p *Plugin) Earliest(ctx context.Context, r plugins.Request, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error) {
	ps, ok := r.(params)
	if !ok {
		return time.Time{}, false, fmt.Errorf("physical:host: request of type %T", r)
	}
	if err := p.ensureView(ctx, false); err != nil {
		return time.Time{}, false, err
	}
	res, err := p.idx.earliest(allocator.EarliestRequest{
		After: after, NotAfter: notAfter, Duration: d, Cleaning: p.cfg.Cleaning, Min: ps.min,
		ReservePercent: p.cfg.ReservePercent,
	}, ps.matchExcept(taken))
	if err != nil {
		return time.Time{}, false, notEnough(err)
	}
	return res.Window.Start, res.Found, nil
}

// ChooseAt returns the hosts reservation r would get over [start, end)
// (the choice a lease created for that window makes, from the view),
// leaving out the hosts in taken; nothing is booked.
func (p *Plugin) ChooseAt(ctx context.Context, r plugins.Request, start, end time.Time, taken []string) ([]string, error) {
	ps, ok := r.(params)
	if !ok {
		return nil, fmt.Errorf("physical:host: request of type %T", r)
	}
	if err := p.ensureView(ctx, false); err != nil {
		return nil, err
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
