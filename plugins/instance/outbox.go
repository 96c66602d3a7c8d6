package instance

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
)

// FlavorSpec is a private flavor to create.
type FlavorSpec = compute.FlavorSpec

// FlavorDriver is what this plugin needs of a compute driver: a private
// flavor per reservation, access for the lease's project, deletion. Each
// method must succeed when its change is already done (the outbox may
// run an action again).
type FlavorDriver interface {
	CreateReservationFlavor(ctx context.Context, spec FlavorSpec) error
	AddFlavorAccess(ctx context.Context, flavorID, projectID string) error
	DeleteReservationFlavor(ctx context.Context, flavorID string) error
}

// The outbox actions of an instance reservation, keyed "flavor:<id>" so
// that they run in the order they were decided.
const (
	KindCreateFlavor = "compute.create_reservation_flavor"
	KindFlavorAccess = "compute.add_flavor_access"
	KindDeleteFlavor = "compute.delete_reservation_flavor"
)

// flavorAction is the payload of the flavor actions.
type flavorAction struct {
	ReservationID string      `json:"reservation_id"`
	ProjectID     string      `json:"project_id,omitempty"`
	Spec          *FlavorSpec `json:"spec,omitempty"`
}

// Spec is the private flavor of reservation resID with parameters ps:
// id = reservation id, name reservation:<id>, the slot size, and the
// extra specs that send its servers to the reserved hosts (upstream's
// aggregate spec for AggregateInstanceExtraSpecsFilter and the class).
func spec(resID string, ps params, source string) *FlavorSpec {
	extra := map[string]string{}
	if source != "" {
		// flavor:instance: the source flavor's extra specs come along.
		var fl Flavor
		if json.Unmarshal([]byte(source), &fl) == nil {
			maps.Copy(extra, fl.ExtraSpecs)
		}
	}
	extra["resources:"+placement.ReservationClass(resID)] = "1"
	extra["aggregate_instance_extra_specs:reservation"] = resID
	return &FlavorSpec{
		ID: resID, Name: "reservation:" + resID,
		VCPUs: ps.size.VCPUs, MemoryMB: ps.size.MemoryMB, DiskGB: ps.size.DiskGB,
		ExtraSpecs: extra,
	}
}

func (p *Plugin) enqueue(tx *plugins.Tx, lease plugins.Lease, kind string, a flavorAction) error {
	if !p.cfg.Flavors {
		return nil
	}
	return tx.Enqueue(outbox.Action{Kind: kind, Key: "flavor:" + a.ReservationID, LeaseID: lease.ID, Payload: a})
}

func (p *Plugin) enqueueFlavor(tx *plugins.Tx, lease plugins.Lease, resID string, ps params, source string) error {
	return p.enqueue(tx, lease, KindCreateFlavor, flavorAction{ReservationID: resID, Spec: spec(resID, ps, source)})
}

// enqueueFlavorResize replaces a pending reservation's flavor (Nova
// flavors are immutable: delete, then create with the new size).
func (p *Plugin) enqueueFlavorResize(tx *plugins.Tx, lease plugins.Lease, resID string, ps params) error {
	if err := p.enqueue(tx, lease, KindDeleteFlavor, flavorAction{ReservationID: resID}); err != nil {
		return err
	}
	return p.enqueueFlavor(tx, lease, resID, ps, "")
}

func (p *Plugin) enqueueAccess(tx *plugins.Tx, lease plugins.Lease, resID string) error {
	return p.enqueue(tx, lease, KindFlavorAccess, flavorAction{ReservationID: resID, ProjectID: lease.ProjectID})
}

func (p *Plugin) enqueueDelete(tx *plugins.Tx, lease plugins.Lease, resID string) error {
	return p.enqueue(tx, lease, KindDeleteFlavor, flavorAction{ReservationID: resID})
}

// OutboxHandlers are the handlers of the flavor actions over drv.
func OutboxHandlers(drv FlavorDriver) map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindCreateFlavor: handle(func(ctx context.Context, a flavorAction) error {
			if a.Spec == nil {
				return outbox.Permanent(errNoSpec)
			}
			return drv.CreateReservationFlavor(ctx, *a.Spec)
		}),
		KindFlavorAccess: handle(func(ctx context.Context, a flavorAction) error {
			return drv.AddFlavorAccess(ctx, a.ReservationID, a.ProjectID)
		}),
		KindDeleteFlavor: handle(func(ctx context.Context, a flavorAction) error {
			return drv.DeleteReservationFlavor(ctx, a.ReservationID)
		}),
	}
}

var errNoSpec = errors.New("flavor action without a spec")

// handle decodes a flavor action's payload for fn; a payload that does
// not decode can never succeed.
func handle(fn func(ctx context.Context, a flavorAction) error) outbox.Handler {
	return func(ctx context.Context, payload json.RawMessage) error {
		var a flavorAction
		if err := json.Unmarshal(payload, &a); err != nil {
			return outbox.Permanent(err)
		}
		return fn(ctx, a)
	}
}
