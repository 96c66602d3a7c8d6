package nova

import (
	"context"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"

	"github.com/leasehold/leasehold/pkg/compute"
)

// ComputeHosts lists, in one call, every hypervisor Nova reports up and
// enabled with its size (ServiceName is the host servers are filed
// under): the hosts a BEST-EFFORT lease's plan may move servers to,
// registered with Leasehold or not.
func (d *Driver) ComputeHosts(ctx context.Context) ([]compute.HostDetails, error) {
	pages, err := hypervisors.List(d.client, hypervisors.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list hypervisors", err)
	}
	all, err := hypervisors.ExtractHypervisors(pages)
	if err != nil {
		return nil, d.fail(ctx, "list hypervisors", err)
	}
	out := make([]compute.HostDetails, 0, len(all))
	for _, h := range all {
		if hostStatus(h.State, h.Status) != compute.StatusUp {
			continue
		}
		out = append(out, compute.HostDetails{HypervisorHostname: h.HypervisorHostname, ServiceName: h.Service.Host,
			HypervisorType: h.HypervisorType, VCPUs: int64(h.VCPUs), MemoryMB: int64(h.MemoryMB), LocalGB: int64(h.LocalGB)})
	}
	return out, nil
}
