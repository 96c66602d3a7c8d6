package instance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/plugins"
)

// FlavorResourceType is the Blazar resource type of reservations derived
// from an existing flavor.
const FlavorResourceType = "flavor:instance"

// Flavor is an existing Nova flavor as a flavor:instance reservation
// reads it.
type Flavor = compute.Flavor

// FlavorLookup finds a flavor visible to a project (the compute driver;
// an unknown or invisible flavor is an errs.NotFound).
type FlavorLookup interface {
	GetFlavor(ctx context.Context, flavorID, projectID string) (Flavor, error)
}

// FlavorPlugin is the flavor:instance plugin: a virtual:instance
// reservation whose size is an existing flavor's (vcpus, ram, and disk
// plus ephemeral disk), with resource_properties showing the flavor's
// JSON as upstream does. The private flavor copies the source flavor's
// extra specs, so the slots count what Nova will ask Placement for with
// them (PCPU for hw:cpu_policy=dedicated, resources:<CLASS>) and go only
// to hosts whose compute node provider has the trait:<NAME> the flavor
// requires and none it forbids; specs that cannot be counted are
// refused (specs.go). It lifts two of upstream's restrictions, both
// safe because the slots are the instance plugin's: affinity may be true
// or false (upstream: 409 NotImplemented), and amount may be updated
// with the instance rules (upstream refuses any update). Its size cannot
// change (it is the flavor's).
type FlavorPlugin struct {
	*Plugin
	flavors FlavorLookup
}

// NewFlavor returns the flavor:instance plugin over the instance plugin
// p (they share the slots and the host list).
func NewFlavor(p *Plugin, flavors FlavorLookup) *FlavorPlugin {
	return &FlavorPlugin{Plugin: p, flavors: flavors}
}

// ResourceType implements plugins.Plugin.
func (f *FlavorPlugin) ResourceType() string { return FlavorResourceType }

// Parse implements plugins.Plugin: amount, flavor_id and affinity are
// required; the flavor must be visible to the lease's project.
func (f *FlavorPlugin) Parse(v plugins.Values, lease plugins.Lease) (plugins.Request, error) {
	for _, k := range []string{"amount", "flavor_id", "affinity"} {
		if _, ok := v[k]; !ok {
			return nil, plugins.MissingParameter(k)
		}
	}
	id, _, err := v.String("flavor_id")
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, plugins.MalformedParameter("flavor_id")
	}
	fl, err := f.flavors.GetFlavor(context.Background(), id, lease.ProjectID)
	if err != nil {
		return nil, err
	}
	if fl.VCPUs < 1 || fl.RAM < 1 {
		return nil, plugins.BadRequest("Flavor %s has no VCPUs or no RAM: it cannot size an instance reservation.", id)
	}
	dump, err := json.Marshal(fl)
	if err != nil {
		return nil, err
	}
	vals := plugins.Values{"amount": v["amount"], "affinity": v["affinity"], "resource_properties": "",
		"vcpus": int(fl.VCPUs), "memory_mb": int(fl.RAM), "disk_gb": int(fl.Disk + fl.Ephemeral)}
	d, err := flavorDemand(fl)
	if err != nil {
		return nil, err
	}
	ps, _, err := parseParams(vals, nil)
	if err != nil {
		return nil, err
	}
	ps.flavor = &d
	return &request{params: ps, source: string(dump), project: lease.ProjectID}, nil
}

// Update implements plugins.Plugin: only amount and affinity may be
// given (the size is the flavor's).
func (f *FlavorPlugin) Update(ctx context.Context, tx *plugins.Tx, old, lease plugins.Lease, res *models.Reservation, v plugins.Values) error {
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if k != "amount" && k != "affinity" {
			return plugins.Conflict("Cannot update parameter %s of a %s reservation: only amount and affinity can change.", k, FlavorResourceType)
		}
	}
	return f.Plugin.Update(ctx, tx, old, lease, res, v)
}

var _ plugins.Plugin = (*FlavorPlugin)(nil)

// String names the plugin in logs.
func (f *FlavorPlugin) String() string {
	return fmt.Sprintf("%s over %s", FlavorResourceType, ResourceType)
}
