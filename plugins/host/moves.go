package host

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
)

// LiveMigrator is the part of a compute driver that live-migrates a
// server to a host and waits until it runs there (the nova driver);
// migrating a server to where it runs already succeeds.
type LiveMigrator interface {
	LiveMigrate(ctx context.Context, serverID, targetHost string) error
}

// Mover carries out the instance moves of BEST-EFFORT leases. In
// standalone mode an instance is a Placement consumer: a move rewrites
// the consumer's allocations from the source compute provider to the
// target's in one Placement write (capacity checked, provider and
// consumer generations bumped), as Nova's live migration leaves them.
// With a Migrator (the nova driver: the plan was made from Nova's servers,
// nova.go) the move is a live migration of the server to the target
// host, waited for; Nova updates the allocations in its Placement itself.
type Mover struct {
	// Placement is the built-in Placement.
	Placement *placement.Service
	// Wanted reports whether the lease still wants its moves (it is
	// still IN-PROGRESS): a lease that timed out or was deleted drops the
	// moves not made yet.
	Wanted func(ctx context.Context, leaseID string) (bool, error)
	// Migrator, when set, makes each move a live migration.
	Migrator LiveMigrator

	before atomic.Pointer[func(ctx context.Context, consumer string) error]
}

// SetBeforeMove installs a hook run before each move (tests: a move
// that blocks or fails); nil removes it.
func (m *Mover) SetBeforeMove(f func(ctx context.Context, consumer string) error) {
	if f == nil {
		m.before.Store(nil)
		return
	}
	m.before.Store(&f)
}

// Handlers are the outbox handlers of the moves.
func (m *Mover) Handlers() map[string]outbox.Handler {
	return map[string]outbox.Handler{KindMoveInstance: m.handle}
}

func (m *Mover) handle(ctx context.Context, payload json.RawMessage) error {
	var a move
	if err := json.Unmarshal(payload, &a); err != nil {
		return outbox.Permanent(err)
	}
	if f := m.before.Load(); f != nil {
		if err := (*f)(ctx, a.Consumer); err != nil {
			return err
		}
	}
	// Checked right before the move: a lease that timed out meanwhile
	// drops it.
	if m.Wanted != nil {
		ok, err := m.Wanted(ctx, a.LeaseID)
		if err != nil {
			return err
		}
		if !ok {
			slog.InfoContext(ctx, "instance move dropped: its lease no longer clears hosts", "lease", a.LeaseID, "consumer", a.Consumer)
			return nil
		}
	}
	if m.Migrator != nil {
		if err := m.Migrator.LiveMigrate(ctx, a.Consumer, a.ToHost); err != nil {
			return err
		}
		slog.InfoContext(ctx, "instance live-migrated", "server", a.Consumer, "from", a.FromHost, "to", a.ToHost)
		return nil
	}
	return m.Move(ctx, a.Consumer, a.From, a.To)
}

// Move moves what consumer holds on provider from to provider to, in one
// Placement write that checks the consumer's generation: a consumer
// changed meanwhile is re-read on the next attempt. Idempotent: nothing
// left on from (moved already, or the instance is gone) is done.
func (m *Mover) Move(ctx context.Context, consumer, from, to string) error {
	ca, err := m.Placement.GetConsumerAllocations(ctx, consumer)
	if err != nil {
		return err
	}
	if ca.Consumer == nil || ca.Providers[from] == nil {
		return nil
	}
	allocs := make(map[string]map[string]int64, len(ca.Providers))
	for u, pr := range ca.Providers {
		dst := u
		if u == from {
			dst = to
		}
		if allocs[dst] == nil {
			allocs[dst] = map[string]int64{}
		}
		for c, n := range pr.Resources {
			allocs[dst][c] += n
		}
	}
	gen := ca.Consumer.Generation
	err = m.Placement.WriteAllocations(ctx, []placement.ConsumerWrite{{
		UUID: consumer, ProjectID: ca.Consumer.ProjectID, UserID: ca.Consumer.UserID,
		CheckGeneration: true, Generation: &gen, Allocations: allocs,
	}}, false)
	if err != nil {
		return errs.Wrap(errs.KindOf(err), err, "move instance %s to provider %s: %s", consumer, to, err.Error())
	}
	slog.InfoContext(ctx, "instance moved", "consumer", consumer, "from", from, "to", to)
	return nil
}
