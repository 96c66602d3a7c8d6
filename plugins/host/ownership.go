package host

import (
	"errors"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
)

// Ownership is the ownership policy's hook (pkg/blazar/ownership): the
// pools a lease of a project draws from, in order, answered from memory.
// A nil Ownership, or a nil Order, means ownership is off: every host.
type Ownership interface {
	HostOrder(project string) *ownership.Order
}

// chooseByPool runs the allocator over the first pool of the project's
// order, then the first two, …: the smallest prefix that satisfies the
// request serves it, so owned hosts (most preferred group first) are used
// before the private pools up the tree, before the public pool.
func (p *Plugin) chooseByPool(o *ownership.Order, req allocator.HostRequest, match func(func(string) *Host) func(*allocator.Host) (bool, string)) (allocator.HostDecision, error) {
	if o == nil {
		return p.idx.choose(p.cfg.Rules, req, match)
	}
	var dec allocator.HostDecision
	var err error
	for k := 1; k <= o.Stages(); k++ {
		dec, err = p.idx.choose(p.cfg.Rules, req, func(info func(string) *Host) func(*allocator.Host) (bool, string) {
			var m func(*allocator.Host) (bool, string)
			if match != nil {
				m = match(info)
			}
			return func(h *allocator.Host) (bool, string) {
				if !o.Allows(k, h.ID) {
					return false, "not in the project's ownership pools"
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}
		})
		var ne *allocator.NotEnoughHostsError
		if !errors.As(err, &ne) {
			return dec, err
		}
	}
	return dec, err
}
