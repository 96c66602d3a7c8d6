package external

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceclasses"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"

	"github.com/leasehold/leasehold/pkg/placement"
)

// ReservationProviderName is the name of host's child provider holding
// the inventories of its instance reservations (blazar_<hostname>, as
// upstream Blazar names it).
func ReservationProviderName(host string) string { return "blazar_" + host }

// ErrNoHostProvider is returned when Placement has no provider named
// after a host (its compute service has not registered it, or the name
// differs): the outbox tries again later.
var ErrNoHostProvider = errors.New("no resource provider of that name in Placement")

// ErrInUse is returned when an inventory or a class to remove is still
// allocated (Nova removes a deleted server's allocations shortly after
// the server is gone): the outbox tries again later.
var ErrInUse = errors.New("still in use in Placement")

// provider is the provider named name, nil when there is none.
func (c *Client) provider(ctx context.Context, name string) (*resourceproviders.ResourceProvider, error) {
	pages, err := resourceproviders.List(c.sc, resourceproviders.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("placement: providers named %s: %w", name, err)
	}
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	if err != nil {
		return nil, err
	}
	for i := range rps {
		if rps[i].Name == name {
			return &rps[i], nil
		}
	}
	return nil, nil
}

// EnsureReservationProvider returns the uuid of host's child provider
// blazar_<host>, creating it under the provider named host when it is
// missing (a concurrent creation is found by a second read).
func (c *Client) EnsureReservationProvider(ctx context.Context, host string) (string, error) {
	name := ReservationProviderName(host)
	if rp, err := c.provider(ctx, name); err != nil || rp != nil {
		if rp == nil {
			return "", err
		}
		return rp.UUID, nil
	}
	parent, err := c.provider(ctx, host)
	if err != nil {
		return "", err
	}
	if parent == nil {
		return "", fmt.Errorf("placement: host %s: %w", host, ErrNoHostProvider)
	}
	rp, err := resourceproviders.Create(ctx, c.sc, resourceproviders.CreateOpts{Name: name, ParentProviderUUID: parent.UUID}).Extract()
	if err == nil {
		return rp.UUID, nil
	}
	if status(err) != http.StatusConflict {
		return "", fmt.Errorf("placement: creating provider %s under %s: %w", name, parent.UUID, err)
	}
	// Made meanwhile by another run: take it.
	again, rerr := c.provider(ctx, name)
	if rerr != nil || again == nil {
		return "", fmt.Errorf("placement: creating provider %s: %w", name, err)
	}
	return again.UUID, nil
}

// EnsureClass creates the custom resource class name unless it exists.
func (c *Client) EnsureClass(ctx context.Context, name string) error {
	if err := resourceclasses.Update(ctx, c.sc, name).ExtractErr(); err != nil {
		return fmt.Errorf("placement: ensuring resource class %s: %w", name, err)
	}
	return nil
}

// DeleteClass deletes the custom resource class name; a missing class
// counts as deleted, one still used by an inventory or an allocation is
// ErrInUse.
func (c *Client) DeleteClass(ctx context.Context, name string) error {
	err := resourceclasses.Delete(ctx, c.sc, name).ExtractErr()
	switch status(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("placement: deleting resource class %s: %w", name, err)
		}
		return nil
	case http.StatusNotFound:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("placement: resource class %s: %w (an inventory or allocation refers to it)", name, ErrInUse)
	}
	return fmt.Errorf("placement: deleting resource class %s: %w", name, err)
}

// inventory is one inventory as Placement shows it (allocation_ratio as
// a float64: capacities are computed as Placement computes them).
type inventory struct {
	Total           int64   `json:"total"`
	Reserved        int64   `json:"reserved"`
	MinUnit         int64   `json:"min_unit"`
	MaxUnit         int64   `json:"max_unit"`
	StepSize        int64   `json:"step_size"`
	AllocationRatio float64 `json:"allocation_ratio"`
}

type inventories struct {
	Generation  int64                `json:"resource_provider_generation"`
	Inventories map[string]inventory `json:"inventories"`
}

func (c *Client) inventories(ctx context.Context, uuid string) (*inventories, error) {
	var out inventories
	_, err := c.sc.Get(ctx, c.sc.ServiceURL("resource_providers", uuid, "inventories"), &out, nil)
	if err != nil {
		return nil, fmt.Errorf("placement: inventories of %s: %w", uuid, err)
	}
	return &out, nil
}

func (c *Client) usages(ctx context.Context, uuid string) (map[string]int64, error) {
	var out struct {
		Usages map[string]int64 `json:"usages"`
	}
	_, err := c.sc.Get(ctx, c.sc.ServiceURL("resource_providers", uuid, "usages"), &out, nil)
	if err != nil {
		return nil, fmt.Errorf("placement: usages of %s: %w", uuid, err)
	}
	return out.Usages, nil
}

// putInventories replaces provider uuid's inventories at generation gen.
func (c *Client) putInventories(ctx context.Context, uuid string, gen int64, invs map[string]inventory) error {
	body := map[string]any{"resource_provider_generation": gen, "inventories": invs}
	_, err := c.sc.Put(ctx, c.sc.ServiceURL("resource_providers", uuid, "inventories"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
	return err
}

// SetReservationInventory sets the inventory of class on host's child
// provider to total slots (reserved 0, min_unit, max_unit and step_size
// 1, allocation_ratio 1; the child and the class are made when missing),
// or removes it when total is 0. The write names the generation it read;
// a conflict (another writer changed the provider) reads again and
// tries again, a few times. A total below what servers already use
// keeps the inventory at that use with all of it reserved, as the
// built-in Placement does; removing an inventory still in use is
// ErrInUse.
func (c *Client) SetReservationInventory(ctx context.Context, host, class string, total int64) error {
	var uuid string
	if total > 0 {
		u, err := c.EnsureReservationProvider(ctx, host)
		if err != nil {
			return err
		}
		if err := c.EnsureClass(ctx, class); err != nil {
			return err
		}
		uuid = u
	} else {
		rp, err := c.provider(ctx, ReservationProviderName(host))
		if err != nil {
			return err
		}
		if rp == nil {
			return nil // no child: nothing to remove
		}
		uuid = rp.UUID
	}
	var err error
	for range c.conflictRetries {
		var invs *inventories
		if invs, err = c.inventories(ctx, uuid); err != nil {
			return err
		}
		var used map[string]int64
		if used, err = c.usages(ctx, uuid); err != nil {
			return err
		}
		cur, has := invs.Inventories[class]
		want := inventory{Total: total, MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}
		next := make(map[string]inventory, len(invs.Inventories)+1)
		for k, v := range invs.Inventories {
			next[k] = v
		}
		switch {
		case total == 0 && !has:
			return nil
		case total == 0 && used[class] > 0:
			return fmt.Errorf("placement: %d of %s are allocated on %s: %w", used[class], class, ReservationProviderName(host), ErrInUse)
		case total == 0:
			delete(next, class)
		default:
			if u := used[class]; u > want.Total {
				want.Total, want.Reserved = u, u
			}
			if has && cur == want {
				return nil
			}
			next[class] = want
		}
		err = c.putInventories(ctx, uuid, invs.Generation, next)
		if err == nil {
			return nil
		}
		if status(err) != http.StatusConflict {
			return fmt.Errorf("placement: inventory of %s on %s: %w", class, ReservationProviderName(host), err)
		}
	}
	return fmt.Errorf("placement: inventory of %s on %s: still conflicting after %d tries: %w", class, ReservationProviderName(host), c.conflictRetries, err)
}

// HostCapacities returns, for the hosts named (their compute node
// providers carry the host's name, as Nova registers them), what each
// offers instance reservations of VCPU, MEMORY_MB and DISK_GB:
// int((total − reserved) × allocation_ratio), less what servers outside
// any reservation use there now (the host provider's usage by consumers
// holding nothing of the host's blazar_<host> child; the reserved
// servers' use is their reservations' slots, which Leasehold books
// itself). Hosts Placement has no provider of are missing from the map.
// The providers are listed once, then each host's inventories and
// allocations (and its child's) are read, a few hosts at a time.
func (c *Client) HostCapacities(ctx context.Context, names []string) (map[string]placement.ComputeCapacity, error) {
	out := map[string]placement.ComputeCapacity{}
	if len(names) == 0 {
		return out, nil
	}
	pages, err := resourceproviders.List(c.sc, nil).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("placement: listing providers: %w", err)
	}
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]string, len(rps))
	for _, rp := range rps {
		byName[rp.Name] = rp.UUID
	}
	hostCap := func(name, uuid string) (placement.ComputeCapacity, error) {
		invs, err := c.inventories(ctx, uuid)
		if err != nil {
			return placement.ComputeCapacity{}, err
		}
		used, err := c.allocations(ctx, uuid)
		if err != nil {
			return placement.ComputeCapacity{}, err
		}
		if child, ok := byName[ReservationProviderName(name)]; ok {
			reserved, err := c.allocations(ctx, child)
			if err != nil {
				return placement.ComputeCapacity{}, err
			}
			for consumer := range reserved {
				delete(used, consumer)
			}
		}
		return capacity(invs.Inventories, used), nil
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		sem   = make(chan struct{}, 4)
	)
	for _, name := range names {
		uuid, ok := byName[name]
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cc, err := hostCap(name, uuid)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			out[name] = cc
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// allocations are provider uuid's allocations: consumer → class → used.
func (c *Client) allocations(ctx context.Context, uuid string) (map[string]map[string]int64, error) {
	var out struct {
		Allocations map[string]struct {
			Resources map[string]int64 `json:"resources"`
		} `json:"allocations"`
	}
	_, err := c.sc.Get(ctx, c.sc.ServiceURL("resource_providers", uuid, "allocations"), &out, nil)
	if err != nil {
		return nil, fmt.Errorf("placement: allocations of %s: %w", uuid, err)
	}
	m := make(map[string]map[string]int64, len(out.Allocations))
	for consumer, a := range out.Allocations {
		m[consumer] = a.Resources
	}
	return m, nil
}

// capacity is what inventories offer of the three compute classes, less
// the consumers' use in used.
func capacity(invs map[string]inventory, used map[string]map[string]int64) placement.ComputeCapacity {
	var c placement.ComputeCapacity
	for i, rc := range []string{"VCPU", "MEMORY_MB", "DISK_GB"} {
		inv, ok := invs[rc]
		if !ok {
			continue
		}
		pi := placement.Inventory{Total: inv.Total, Reserved: inv.Reserved, AllocationRatio: inv.AllocationRatio}
		n := pi.Capacity()
		for _, res := range used {
			n -= res[rc]
		}
		n = max(n, 0)
		switch i {
		case 0:
			c.VCPUs = n
		case 1:
			c.MemoryMB = n
		case 2:
			c.DiskGB = n
		}
		c.Has[i] = true
	}
	return c
}
