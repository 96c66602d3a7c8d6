package host

import (
	"context"
	"encoding/json"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/plugins"
)

// The compute actions of a host reservation, recorded in the outbox by
// the transaction that decides them and carried out after its commit,
// one row per host. Their key is "host:<id>", the key of every compute
// action on that host (the hosts service's freepool moves too), so the
// actions on one host run in the order they were decided.
const (
	// KindReserveHost takes a host out of the freepool into the
	// reservation's aggregate (owned by the lease's project).
	KindReserveHost = "compute.reserve_host"
	// KindReleaseHost removes the servers left on a host, takes it out
	// of the reservation's aggregate and back into the freepool.
	KindReleaseHost = "compute.release_host"
	// KindSnapshotHost is the before_end "snapshot" action.
	KindSnapshotHost = "compute.snapshot_host"
	// KindCreateAggregate creates the reservation's aggregate, owned by
	// the lease's project, when the reservation is created (as upstream
	// does); KindDeleteAggregate deletes it when the reservation is
	// deleted or ends. Their key is "reservation:<id>", so they run in
	// that order.
	KindCreateAggregate = "compute.create_reservation_aggregate"
	KindDeleteAggregate = "compute.delete_reservation_aggregate"
)

// hostAction is the payload of the host actions.
type hostAction struct {
	ReservationID string `json:"reservation_id"`
	ProjectID     string `json:"project_id,omitempty"`
	// HostID is the Blazar host id; Host the name the compute service
	// knows it by (service_name).
	HostID string `json:"host_id"`
	Host   string `json:"host"`
}

// enqueue records action kind for each of hostIDs in tx.
func (p *Plugin) enqueue(tx *plugins.Tx, kind string, lease plugins.Lease, resID string, hostIDs []string) error {
	if len(hostIDs) == 0 {
		return nil
	}
	names := p.hostnames(hostIDs)
	as := make([]outbox.Action, len(hostIDs))
	for i, id := range hostIDs {
		as[i] = outbox.Action{Kind: kind, Key: "host:" + id, LeaseID: lease.ID,
			Payload: hostAction{ReservationID: resID, ProjectID: lease.ProjectID, HostID: id, Host: names[i]}}
	}
	return tx.Enqueue(as...)
}

// enqueueAggregate records aggregate action kind for reservation resID
// of lease in tx.
func enqueueAggregate(tx *plugins.Tx, kind string, lease plugins.Lease, resID string) error {
	return tx.Enqueue(outbox.Action{Kind: kind, Key: "reservation:" + resID, LeaseID: lease.ID,
		Payload: hostAction{ReservationID: resID, ProjectID: lease.ProjectID}})
}

// OutboxHandlers are the handlers of the host actions over compute
// driver drv. Each is idempotent as the outbox requires: the driver's
// aggregate operations succeed when the host is already where they put
// it, and a server clean-up of a host without servers does nothing.
func OutboxHandlers(drv compute.Driver) map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindReserveHost: handle(func(ctx context.Context, a hostAction) error {
			if err := drv.RemoveFromFreePool(ctx, []string{a.Host}); err != nil {
				return err
			}
			agg := compute.ReservationAggregate{ReservationID: a.ReservationID, ProjectID: a.ProjectID}
			return drv.AddToReservation(ctx, agg, []string{a.Host})
		}),
		KindReleaseHost: handle(func(ctx context.Context, a hostAction) error {
			if err := drv.CleanupServers(ctx, []string{a.Host}); err != nil {
				return err
			}
			if err := drv.RemoveFromReservation(ctx, compute.ReservationAggregate{ReservationID: a.ReservationID}, []string{a.Host}); err != nil {
				return err
			}
			return drv.AddToFreePool(ctx, []string{a.Host})
		}),
		KindSnapshotHost: handle(func(ctx context.Context, a hostAction) error {
			return drv.SnapshotServers(ctx, []string{a.Host})
		}),
		KindCreateAggregate: handle(func(ctx context.Context, a hostAction) error {
			return drv.CreateReservationAggregate(ctx, compute.ReservationAggregate{ReservationID: a.ReservationID, ProjectID: a.ProjectID})
		}),
		KindDeleteAggregate: handle(func(ctx context.Context, a hostAction) error {
			return drv.DeleteReservationAggregate(ctx, compute.ReservationAggregate{ReservationID: a.ReservationID, ProjectID: a.ProjectID})
		}),
	}
}

// handle decodes a host action's payload for fn; a payload that does not
// decode can never succeed.
func handle(fn func(ctx context.Context, a hostAction) error) outbox.Handler {
	return func(ctx context.Context, payload json.RawMessage) error {
		var a hostAction
		if err := json.Unmarshal(payload, &a); err != nil {
			return outbox.Permanent(err)
		}
		return fn(ctx, a)
	}
}
