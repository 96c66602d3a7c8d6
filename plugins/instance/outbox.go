package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/identity"
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

// ServerGroupDriver is what this plugin needs of a compute driver for
// the server group of a reservation with an affinity: creation (returning
// the existing group of that name when there is one, so that a second run
// makes no second group) and deletion of every group of the name.
type ServerGroupDriver interface {
	CreateServerGroup(ctx context.Context, name, policy string) (string, error)
	DeleteServerGroups(ctx context.Context, name string) error
}

// TrustServerGroupDriver makes a server group logged in with a lease's
// Keystone trust, so that it belongs to the lease's project (upstream
// makes it with the lease owner's identity): the project's members can
// then boot into it (the group=<id> scheduler hint).
type TrustServerGroupDriver interface {
	CreateServerGroupWithTrust(ctx context.Context, trustID, name, policy string) (string, error)
}

// The outbox actions of an instance reservation, keyed "flavor:<id>" so
// that they run in the order they were decided.
const (
	KindCreateFlavor = "compute.create_reservation_flavor"
	KindFlavorAccess = "compute.add_flavor_access"
	KindDeleteFlavor = "compute.delete_reservation_flavor"
	// KindReleasePlacement removes what the servers of the flavor kept
	// in Placement at the lease's end (their allocations pin the
	// reservation's inventory, and so its class), once Nova deleted them.
	KindReleasePlacement = "placement.release_reservation"
	// KindCreateServerGroup and KindDeleteServerGroup make and remove
	// the server group "reservation:<id>" of a reservation whose affinity
	// is true (policy affinity) or false (anti-affinity); the group's id
	// is recorded as the reservation's server_group_id once made.
	KindCreateServerGroup = "compute.create_server_group"
	KindDeleteServerGroup = "compute.delete_server_group"
)

// serverGroupName is the name of reservation resID's server group.
func serverGroupName(resID string) string { return "reservation:" + resID }

// groupPolicy is Nova's server group policy for an affinity.
func groupPolicy(affinity bool) string {
	if affinity {
		return "affinity"
	}
	return "anti-affinity"
}

// flavorAction is the payload of the flavor actions.
type flavorAction struct {
	ReservationID string      `json:"reservation_id"`
	ProjectID     string      `json:"project_id,omitempty"`
	Spec          *FlavorSpec `json:"spec,omitempty"`
	// Policy is the server group policy of KindCreateServerGroup.
	Policy string `json:"policy,omitempty"`
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

// enqueueDelete records the flavor's deletion (its servers first), then
// the release of the Placement inventory and class they kept.
func (p *Plugin) enqueueDelete(tx *plugins.Tx, lease plugins.Lease, resID string) error {
	if err := p.enqueue(tx, lease, KindDeleteFlavor, flavorAction{ReservationID: resID}); err != nil {
		return err
	}
	return p.enqueue(tx, lease, KindReleasePlacement, flavorAction{ReservationID: resID})
}

// enqueueGroup records the creation of the server group of a reservation
// with an affinity (none for a null affinity).
func (p *Plugin) enqueueGroup(tx *plugins.Tx, lease plugins.Lease, resID string, affinity *bool) error {
	if affinity == nil {
		return nil
	}
	return p.enqueue(tx, lease, KindCreateServerGroup, flavorAction{ReservationID: resID, Policy: groupPolicy(*affinity)})
}

// enqueueGroupDelete records the deletion of a reservation's server group
// (none for a null affinity).
func (p *Plugin) enqueueGroupDelete(tx *plugins.Tx, lease plugins.Lease, resID string, affinity *bool) error {
	if affinity == nil {
		return nil
	}
	return p.enqueue(tx, lease, KindDeleteServerGroup, flavorAction{ReservationID: resID})
}

// OutboxHandlers are the handlers of the flavor and server group actions
// over drv (server groups when drv is a ServerGroupDriver), and of the
// Placement release, in database g (the built-in Placement; the server
// group ids are recorded there too).
func OutboxHandlers(drv FlavorDriver, g *gorm.DB) map[string]outbox.Handler {
	groups, _ := drv.(ServerGroupDriver)
	noGroups := outbox.Permanent(errors.New("the compute driver has no server groups"))
	return map[string]outbox.Handler{
		KindCreateServerGroup: handle(func(ctx context.Context, a flavorAction) error {
			if groups == nil {
				return noGroups
			}
			trust, found, err := leaseTrust(ctx, g, a.ReservationID)
			if err != nil {
				return err
			}
			if !found {
				return nil // the lease was deleted meanwhile: no group to make
			}
			var id string
			if tg, ok := drv.(TrustServerGroupDriver); ok && trust != "" {
				id, err = tg.CreateServerGroupWithTrust(ctx, trust, serverGroupName(a.ReservationID), a.Policy)
			} else {
				// No trust (noauth, or a lease made before trusts): the
				// service's own project.
				id, err = groups.CreateServerGroup(ctx, serverGroupName(a.ReservationID), a.Policy)
			}
			if errors.Is(err, identity.ErrTrustGone) {
				// The lease ended and its trust was revoked before Nova
				// could be reached: the group is no longer wanted.
				return outbox.Permanent(err)
			}
			if err != nil {
				return err
			}
			// The row is gone when the lease was deleted meanwhile; the
			// deletion that followed removes the group.
			return g.WithContext(ctx).Exec("UPDATE instance_reservations SET server_group_id = ? WHERE reservation_id = ?", id, a.ReservationID).Error
		}),
		KindDeleteServerGroup: handle(func(ctx context.Context, a flavorAction) error {
			if groups == nil {
				return noGroups
			}
			return groups.DeleteServerGroups(ctx, serverGroupName(a.ReservationID))
		}),
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
		KindReleasePlacement: handle(func(ctx context.Context, a flavorAction) error {
			return g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				return releasePlacementTx(tx, a.ReservationID)
			})
		}),
	}
}

// releasePlacementTx removes the inventory of reservation resID's class
// from every provider that still has it, then the class. Allocations of
// the class left (Nova removes a deleted server's allocations just after
// the server is gone) make it an error: the outbox tries again later.
func releasePlacementTx(tx *gorm.DB, resID string) error {
	class := placement.ReservationClass(resID)
	var used int64
	if err := tx.Raw(`SELECT COUNT(*) FROM allocations a JOIN resource_classes c ON c.id = a.resource_class_id WHERE c.name = ?`, class).Scan(&used).Error; err != nil {
		return err
	}
	if used > 0 {
		return fmt.Errorf("%d allocations of %s are left in Placement; trying again", used, class)
	}
	var uuids []string
	if err := tx.Raw(`SELECT p.uuid FROM inventories i JOIN resource_providers p ON p.id = i.resource_provider_id
 JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ? ORDER BY p.uuid`, class).Scan(&uuids).Error; err != nil {
		return err
	}
	totals := make(map[string]int64, len(uuids))
	for _, u := range uuids {
		totals[u] = 0
	}
	if err := placement.SetReservationInventoriesTx(tx, class, totals); err != nil {
		return err
	}
	_, err := placement.DeleteClassIfUnusedTx(tx, class)
	return err
}

var errNoSpec = errors.New("flavor action without a spec")

// leaseTrust is the Keystone trust id of reservation resID's lease (""
// when it has none); found is false when the reservation is gone.
func leaseTrust(ctx context.Context, g *gorm.DB, resID string) (trust string, found bool, err error) {
	var ids []*string
	err = g.WithContext(ctx).Raw(`SELECT l.trust_id FROM leases l JOIN reservations r ON r.lease_id = l.id WHERE r.id = ?`, resID).Scan(&ids).Error
	if err != nil || len(ids) == 0 {
		return "", false, err
	}
	if ids[0] != nil {
		trust = *ids[0]
	}
	return trust, true, nil
}

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
