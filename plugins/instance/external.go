package instance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
)

// ExternalPlacement is an external Placement service
// (pkg/placement/external.Client): with one configured, the Placement
// side of instance reservations is written there by outbox actions after
// the lease's transaction commits, instead of in the built-in Placement
// inside it, and the hosts' compute capacities are read from it outside
// any transaction. Hosts are found by name: the compute node provider is
// named after the host's hypervisor_hostname, as Nova registers it.
// Every write must succeed when its change is already made.
type ExternalPlacement interface {
	EnsureReservationProvider(ctx context.Context, host string) (string, error)
	EnsureClass(ctx context.Context, name string) error
	DeleteClass(ctx context.Context, name string) error
	SetReservationInventory(ctx context.Context, host, class string, total int64) error
	HostCapacities(ctx context.Context, hosts []string) (map[string]placement.ComputeCapacity, error)
}

// The outbox actions of instance reservations on an external Placement.
// Those of one host's provider share the key "placement:provider:<host>"
// (so a host's child provider and inventory writes serialise in the order
// they were decided) and those of one class "placement:class:<class>".
const (
	// KindExtEnsureProvider makes the host's blazar_<host> child provider
	// (at create, so the start finds it).
	KindExtEnsureProvider = "placement.ensure_reservation_provider"
	// KindExtEnsureClass makes the reservation's class (at create).
	KindExtEnsureClass = "placement.ensure_reservation_class"
	// KindExtSetInventory sets the class's inventory on the host's child
	// (at start and on an active update).
	KindExtSetInventory = "placement.set_reservation_inventory"
	// KindExtRemoveInventory removes it (at end), once no server holds
	// a unit of it.
	KindExtRemoveInventory = "placement.remove_reservation_inventory"
	// KindExtDeleteClass deletes the class once no inventory or
	// allocation refers to it (at end and on deletion).
	KindExtDeleteClass = "placement.delete_reservation_class"
)

// ExternalKeepRetrying tells the outbox which external Placement actions
// never use up their attempts: the clean-up at a lease's end waits while
// the reservation's servers still hold the class (Nova deletes them, and
// then their allocations, on the flavor's key, in its own time) and
// while Placement is unreachable, the lease showing degraded meanwhile;
// giving up would leave the class and inventories behind for good.
func ExternalKeepRetrying(kind string) bool {
	return kind == KindExtRemoveInventory || kind == KindExtDeleteClass
}

// extAction is the payload of the external Placement actions.
type extAction struct {
	Host  string `json:"host,omitempty"`
	Class string `json:"class"`
	Total int64  `json:"total"`
	// Hosts are, for the class deletion, the hosts whose inventory of
	// the class goes first (see KindExtDeleteClass's handler).
	Hosts []string `json:"hosts,omitempty"`
}

func providerKey(host string) string { return "placement:provider:" + host }
func classKey(class string) string   { return "placement:class:" + class }

// hostNames maps host ids to their hypervisor hostnames.
func hostNames(ctx context.Context, tx *plugins.Tx, ids []string) (map[string]string, error) {
	nums := make([]int64, 0, len(ids))
	for _, id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			nums = append(nums, n)
		}
	}
	out := map[string]string{}
	if len(nums) == 0 {
		return out, nil
	}
	var rows []struct {
		ID                 int64
		HypervisorHostname string
	}
	if err := tx.WithContext(ctx).Raw("SELECT id, hypervisor_hostname FROM computehosts WHERE id IN ?", nums).Scan(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[strconv.FormatInt(r.ID, 10)] = r.HypervisorHostname
	}
	return out, nil
}

// enqueueExtCreate records, for a new reservation on an external
// Placement, its class and the child providers of its hosts.
func (p *Plugin) enqueueExtCreate(ctx context.Context, tx *plugins.Tx, leaseID, resID string, hostIDs []string) error {
	class := placement.ReservationClass(resID)
	if err := tx.Enqueue(outbox.Action{Kind: KindExtEnsureClass, Key: classKey(class), LeaseID: leaseID, Payload: extAction{Class: class}}); err != nil {
		return err
	}
	names, err := hostNames(ctx, tx, hostIDs)
	if err != nil {
		return err
	}
	for _, id := range hostIDs {
		if h := names[id]; h != "" {
			if err := tx.Enqueue(outbox.Action{Kind: KindExtEnsureProvider, Key: providerKey(h), LeaseID: leaseID, Payload: extAction{Host: h, Class: class}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// enqueueExtInventories records the inventory writes that take the
// class's inventory on every host of before or after to its slots in
// after (0 removes it), one action per host, in host id order.
func (p *Plugin) enqueueExtInventories(ctx context.Context, tx *plugins.Tx, leaseID, resID string, before, after map[string]int) error {
	ids := map[string]int{}
	for h := range before {
		ids[h] = 0
	}
	for h, n := range after {
		ids[h] = n
	}
	if len(ids) == 0 {
		return nil
	}
	order := sortedKeys(ids)
	names, err := hostNames(ctx, tx, order)
	if err != nil {
		return err
	}
	class := placement.ReservationClass(resID)
	for _, id := range order {
		h := names[id]
		if h == "" {
			continue // a host deleted meanwhile has no provider to write
		}
		a := extAction{Host: h, Class: class, Total: int64(ids[id])}
		kind := KindExtSetInventory
		if a.Total == 0 {
			kind = KindExtRemoveInventory
		}
		if err := tx.Enqueue(outbox.Action{Kind: kind, Key: providerKey(h), LeaseID: leaseID, Payload: a}); err != nil {
			return err
		}
	}
	return nil
}

// enqueueExtDeleteClass records the deletion of the reservation's class,
// naming the hosts it still holds slots on.
func (p *Plugin) enqueueExtDeleteClass(ctx context.Context, tx *plugins.Tx, leaseID, resID string) error {
	held, err := slotsOf(ctx, tx, resID)
	if err != nil {
		return err
	}
	ids := sortedKeys(held)
	names, err := hostNames(ctx, tx, ids)
	if err != nil {
		return err
	}
	class := placement.ReservationClass(resID)
	a := extAction{Class: class}
	for _, id := range ids {
		if h := names[id]; h != "" {
			a.Hosts = append(a.Hosts, h)
		}
	}
	return tx.Enqueue(outbox.Action{Kind: KindExtDeleteClass, Key: classKey(class), LeaseID: leaseID, Payload: a})
}

// ExternalHandlers are the handlers of the external Placement actions
// over c.
func ExternalHandlers(c ExternalPlacement) map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindExtEnsureProvider: handleExt(func(ctx context.Context, a extAction) error {
			_, err := c.EnsureReservationProvider(ctx, a.Host)
			return err
		}),
		KindExtEnsureClass: handleExt(func(ctx context.Context, a extAction) error {
			return c.EnsureClass(ctx, a.Class)
		}),
		KindExtSetInventory: handleExt(func(ctx context.Context, a extAction) error {
			return c.SetReservationInventory(ctx, a.Host, a.Class, a.Total)
		}),
		KindExtRemoveInventory: handleExt(func(ctx context.Context, a extAction) error {
			return c.SetReservationInventory(ctx, a.Host, a.Class, 0)
		}),
		// The class deletion runs beside the hosts' inventory removals
		// (other keys): it removes what is left of them itself, so that
		// it fails only while servers still hold the class.
		KindExtDeleteClass: handleExt(func(ctx context.Context, a extAction) error {
			for _, h := range a.Hosts {
				if err := c.SetReservationInventory(ctx, h, a.Class, 0); err != nil {
					return err
				}
			}
			return c.DeleteClass(ctx, a.Class)
		}),
	}
}

// handleExt decodes an external Placement action's payload for fn; a
// payload that does not decode, or names no class, can never succeed.
func handleExt(fn func(ctx context.Context, a extAction) error) outbox.Handler {
	return func(ctx context.Context, payload json.RawMessage) error {
		var a extAction
		if err := json.Unmarshal(payload, &a); err != nil {
			return outbox.Permanent(err)
		}
		if a.Class == "" {
			return outbox.Permanent(fmt.Errorf("placement action without a class: %s", payload))
		}
		return fn(ctx, a)
	}
}

// extCaps are the compute capacities read from the external Placement,
// keyed by the hosts' ComputeProviderUUID (the key capacityOf looks up),
// refreshed outside any transaction at most every capTTL.
type extCaps struct {
	// read keeps the reads one at a time; it is held across the calls,
	// only ever outside a transaction.
	read sync.Mutex
	// mu guards the fields below, never across a call: a transaction
	// reading the capacities does not wait for Placement.
	mu   sync.Mutex
	at   time.Time
	ok   bool // the last read succeeded
	caps map[string]placement.ComputeCapacity
	// seen are the providers (ComputeProviderUUID) the last good read
	// covered: a host registered since is read at once.
	seen map[string]bool
}

// refreshExternal reads the reservable hosts' capacities from the
// external Placement when the last read is older than capTTL, when a
// host registered since a good read, or when force is set. A host the
// read finds no provider of gets no capacity. While one request reads,
// the others go on with the last capacities read (a slow Placement slows
// one request down, not all).
// A failed read keeps the last capacities (none at first: the hosts' own
// numbers are used) and is not tried again before capTTL, so an
// unreachable Placement slows no lease request down for long; the
// create's write is checked against bookings in the transaction anyway.
func (p *Plugin) refreshExternal(ctx context.Context, hs []hosts.Host, force bool) {
	c := &p.ext
	if !c.read.TryLock() {
		// Another request is reading: use what was read before, unless
		// nothing was (then wait for that read).
		c.mu.Lock()
		have := c.caps != nil
		c.mu.Unlock()
		if have {
			return
		}
		c.read.Lock()
	}
	defer c.read.Unlock()
	c.mu.Lock()
	now := time.Now()
	fresh := !c.at.IsZero() && now.Sub(c.at) < capTTL
	if fresh && c.ok {
		for i := range hs {
			if !c.seen[hs[i].ComputeProviderUUID] {
				fresh = false
				break
			}
		}
	}
	if fresh && !force {
		c.mu.Unlock()
		return
	}
	c.at, c.ok = now, false
	c.mu.Unlock()
	names := make([]string, 0, len(hs))
	for i := range hs {
		names = append(names, hs[i].HypervisorHostname)
	}
	byName, err := p.cfg.External.HostCapacities(ctx, names)
	if err != nil {
		slog.WarnContext(ctx, "instance reservations: reading the hosts' capacities from the external Placement; using the last ones read", "err", err)
		return
	}
	caps := make(map[string]placement.ComputeCapacity, len(byName))
	seen := make(map[string]bool, len(hs))
	for i := range hs {
		u := hs[i].ComputeProviderUUID
		seen[u] = true
		if u == "" {
			continue
		}
		// A host the external Placement has no provider of offers
		// nothing: its slots could never become inventory there.
		caps[u] = placement.ComputeCapacity{Has: [3]bool{true, true, true}}
		if cc, ok := byName[hs[i].HypervisorHostname]; ok {
			caps[u] = cc
		}
	}
	c.mu.Lock()
	c.caps, c.seen, c.ok = caps, seen, true
	c.mu.Unlock()
}

// computeCapacities are the capacities of the compute providers uuids:
// read in tx from the built-in Placement, or, with an external one, the
// last ones read from it before the transaction (never a call from
// inside it).
func (p *Plugin) computeCapacities(ctx context.Context, tx *plugins.Tx, uuids []string) (map[string]placement.ComputeCapacity, error) {
	if p.cfg.External == nil {
		return placement.ComputeCapacitiesTx(tx.WithContext(ctx), uuids)
	}
	p.ext.mu.Lock()
	defer p.ext.mu.Unlock()
	out := make(map[string]placement.ComputeCapacity, len(uuids))
	for _, u := range uuids {
		if c, ok := p.ext.caps[u]; ok {
			out[u] = c
		}
	}
	return out, nil
}
