package hosts

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// The outbox actions of the hosts service: the freepool change that
// follows a host's registration or removal, recorded in the same
// transaction as the host row and made by the outbox worker after the
// commit (see OutboxHandlers).
const (
	KindAddToFreePool      = "compute.add_to_freepool"
	KindRemoveFromFreePool = "compute.remove_from_freepool"
)

// PoolPayload is the payload of both actions.
type PoolPayload struct {
	Hosts []string
}

// enqueuePool records, in tx, the pool action kind for the host: its API
// id and the name the compute service knows it by (service_name, as the
// host plugin's aggregate moves). The key "host:<id>" is the key of every
// compute action on the host (the host plugin's too), so they run in the
// order they were recorded.
func enqueuePool(tx *gorm.DB, kind, hostID, hostname string) error {
	return outbox.Enqueue(tx, outbox.Action{Kind: kind, Key: "host:" + hostID, Payload: PoolPayload{Hosts: []string{hostname}}})
}

// OutboxHandlers returns the handlers of the hosts service's outbox
// actions, carried out by drv, for the composition root to register with
// the outbox worker. They may run more than once for one action (the
// drivers treat a host already in, or already out of, the freepool as
// done).
func OutboxHandlers(drv compute.Driver) map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindAddToFreePool:      poolHandler(drv.AddToFreePool),
		KindRemoveFromFreePool: poolHandler(drv.RemoveFromFreePool),
	}
}

func poolHandler(op func(ctx context.Context, hostnames []string) error) outbox.Handler {
	return func(ctx context.Context, payload json.RawMessage) error {
		var p PoolPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return outbox.Permanent(fmt.Errorf("hosts: freepool action payload %s: %w", payload, err))
		}
		return op(ctx, p.Hosts)
	}
}
