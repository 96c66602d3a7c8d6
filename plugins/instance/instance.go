// Package instance is the virtual:instance plugin: a reservation of
// `amount` instance slots of one size (vcpus, memory_mb, disk_gb) over
// the lease window, on the hosts matching resource_properties, all on one
// host (affinity true), at most one per host (false) or split in any way
// (null), more instances than hosts allowed.
//
// # Capacity over time
//
// A host's capacity is its compute node provider's inventory of VCPU,
// MEMORY_MB and DISK_GB, int((total − reserved) × allocation_ratio) (the
// host's own vcpus, memory_mb and local_gb when the provider has no such
// inventory), and of PCPU and the custom classes a flavor:instance
// reservation's extra specs ask for (specs.go: what Nova's scheduler
// would request; its traits filter the hosts). A host with a whole-host reservation overlapping the window
// (cleaning time included) is out; from the others' capacity the peak, per
// resource, of the instance slots of other reservations overlapping the
// window is taken away (a per-resource peak: never less than the true
// simultaneous use, so never an overbooking). pkg/allocator.ChooseSlots
// then splits the amount over the hosts with the lost-allocations metric,
// counted over time from each host's free capacity piece by piece.
//
// # Earliest window
//
// POST /v1/leases/earliest and leases created at "earliest" find the
// first window in which the slots fit (earliest.go over
// allocator.EarliestSlots), reading the bookings outside any
// transaction through Config.DB; the create that follows checks again.
// With ownership on, a start is offered only once the create's own
// choice from the project's pools serves it.
//
// # Ownership
//
// With an ownership plan (Config.Ownership), the slots come from the
// project's pools in order, the smallest prefix that serves (ownership.go):
// whole hosts as the host plugin takes them, and of a partly owned host
// one part, at most its share of the host less that part's bookings.
// Each host's source is recorded in ownership_pools and shown as the
// reservation's "ownership" entries. An active reservation that grows
// grows on a held host only within the part its record names, and its
// held loans count against the lending limits again (heldPicks). An owner's physical:host request
// that reclaims a host holding such slots shortens their lease through
// this plugin's Update (the host plugin's Config.Shorteners), as a lease
// update of its end date would; the slots are never moved. An owner's
// instance request that its pools cannot serve reclaims too (reclaim.go,
// through the host plugin's reclaim, Reclaimer): the slots are chosen
// with other projects' bookings of the best candidate hosts cut, then
// those of the chosen hosts are cut in the same transaction; the
// earliest-window search sees such bookings end where a reclaim can cut
// them.
//
// # Storage
//
// instance_reservations holds the parameters; instance_allocations the
// slots per host, with the window; and each (reservation, host) has one
// computehost_allocations row, so whole-host reservations, host deletion
// (409 while reserved) and the allocations API see instance slots.
//
// # No double booking
//
// Bookings are read in the write transaction; compute capacities may
// come from a cache of a few seconds for the choice, and are read again
// in the transaction for the chosen hosts. On SQLite that transaction is
// the only writer. On MySQL/MariaDB the chosen hosts are
// locked (db.LockResources under physical:host, the lock the host plugin
// takes, so host and instance bookings of one host serialise), their use
// is read again (READ COMMITTED sees every booking committed before the
// lock was granted) and, when a concurrent booking took the room, the
// slots are chosen again, a bounded number of times, then plugins.ErrRetry.
//
// # Placement and Nova
//
// In the same transaction, the built-in Placement gets the class
// CUSTOM_RESERVATION_<ID> at create, the inventory of that class on each
// reserved host's blazar_<hostname> child provider at start (one unit per
// slot) and its removal, with the class, at end. With Config.Flavors (a
// real compute service), the compute driver (FlavorDriver) is asked
// through the outbox for the private flavor (id = reservation id) at
// create, the project's access at start and, at end, the deletion of the
// flavor's servers and of the flavor; then, servers gone, whatever
// inventory and class their allocations kept is released (an action on
// the built-in Placement, tried again while Nova still removes the
// allocations). In standalone mode nothing is called, and flavor_id is
// still the reservation id.
//
// With an external Placement (Config.External, [placement] keystoneauth
// options) the same class, child providers and inventories are written
// there instead, by outbox actions recorded in the lease's transaction
// (external.go): the class and each host's child at create, the child's
// inventory at start and on an active update, its removal and the class's
// deletion at end; those of one host provider share a key, so they run in
// the order decided. The compute capacities then come from that
// Placement's inventories less the use of servers outside any
// reservation, read in Refresh, before the transaction.
//
// A reservation whose affinity is true or false also gets, in nova mode,
// the Nova server group "reservation:<id>" (policy affinity or
// anti-affinity; ServerGroupDriver), made through the outbox once (a
// second run finds it by name) and shown as server_group_id when made;
// a pending change of affinity replaces it, and the end deletes it. It
// is made logged in with the lease's Keystone trust
// (TrustServerGroupDriver), so it belongs to the lease's project, as
// upstream makes it with the owner's identity, and the project's members
// boot into it with the group hint; a lease without a trust (noauth)
// gets it in the service user's project. A null affinity, and
// standalone mode, have no group: server_group_id is null. aggregate_id
// stays null: no aggregate is made for instance reservations (seed
// blazar-placement-instance-reservation: the flavor's
// resources:CUSTOM_RESERVATION_<ID>=1 alone keeps its servers on the
// reserved hosts' slots), so the flavor carries no affinity_id spec.
package instance

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/hostquery"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/host"
)

// ResourceType is the Blazar resource type of this plugin.
const ResourceType = "virtual:instance"

// hostLockType is the resource type under which hosts are locked: the
// host plugin's, so both plugins' bookings of a host serialise.
const hostLockType = "physical:host"

// Source lists the reservable hosts (pkg/blazar/hosts.Service).
type Source interface {
	Reservable(ctx context.Context) ([]hosts.Host, error)
}

// Config tunes the plugin.
type Config struct {
	// Cleaning is kept free around whole-host reservations and slots.
	Cleaning time.Duration
	// Sizes are the policy sizes of the lost-allocations metric; when
	// empty, the sizes of the instance reservations overlapping the
	// window are used.
	Sizes []allocator.SlotSize
	// WholeReservePercent keeps that share of the matching hosts whole
	// for whole-host requests (allocator.SlotRequest.WholeReservePercent;
	// the server's default is allocator.DefaultWholeReservePercent, 0
	// here).
	WholeReservePercent int
	// DomainKeys name the host fields or extra capabilities whose values
	// are failure domains (anti-affinity spreads over them first).
	DomainKeys []string
	// Rules are the cluster tag rules: a location prefix x
	// (htools:nlocation:x) makes a host's extra capability x a failure
	// domain (a host's tags are its capabilities as "key:value").
	Rules *allocator.TagRules
	// CheckHosts tells, inside the transaction, which of the chosen hosts
	// still exist and are reservable (hosts.ReservableTx): a host made
	// non-reservable keeps its reservations and takes no new ones.
	CheckHosts func(tx *gorm.DB, ids []string) (map[string]bool, error)
	// Flavors records the Nova flavor actions in the outbox (a compute
	// driver implementing FlavorDriver is configured).
	Flavors bool
	// MaxReplans bounds the re-choices after lost races (default 5).
	MaxReplans int
	// DB is read by the earliest-window search (earliest.go), which runs
	// outside any transaction; without it the search is refused.
	DB *db.DB
	// External, when set, is the external Placement the reservations'
	// classes, child providers and inventories are written to (through
	// the outbox) and the hosts' capacities read from (see external.go);
	// nil uses the built-in Placement in the lease's transaction.
	External ExternalPlacement
	// Ownership, when set, is the ownership policy: with a plan, a
	// reservation's slots come from its project's pools in order
	// (ownership.go) and each host's source is recorded.
	Ownership Ownership
}

// Plugin implements plugins.Plugin for virtual:instance.
type Plugin struct {
	src Source
	cfg Config

	mu    sync.Mutex
	hosts []hosts.Host // last Refresh
	caps  capCache
	ext   extCaps
	// reclaimer is the host plugin's reclaim (nil: owners' instance
	// requests do not reclaim).
	reclaimer Reclaimer
}

// New returns the plugin.
func New(src Source, cfg Config) *Plugin {
	if cfg.MaxReplans <= 0 {
		cfg.MaxReplans = 5
	}
	return &Plugin{src: src, cfg: cfg}
}

// ResourceType implements plugins.Plugin.
func (p *Plugin) ResourceType() string { return ResourceType }

// Refresh implements plugins.Refresher: the host list is read before the
// transaction (never a second connection inside it).
func (p *Plugin) Refresh(ctx context.Context, force bool) error {
	hs, err := p.src.Reservable(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.hosts = hs
	p.mu.Unlock()
	if p.cfg.External != nil {
		p.refreshExternal(ctx, hs, force)
	}
	return nil
}

func (p *Plugin) hostList(ctx context.Context) ([]hosts.Host, error) {
	p.mu.Lock()
	hs := p.hosts
	p.mu.Unlock()
	if hs != nil {
		return hs, nil
	}
	if err := p.Refresh(ctx, false); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts, nil
}

// params are a reservation's parameters.
type params struct {
	amount             int
	size               allocator.SlotSize
	affinity           *bool
	resourceProperties string
	query              *hostquery.Query
	// flavor is the demand of a flavor:instance reservation (nil: the
	// size alone, as for virtual:instance).
	flavor *demand
}

// request is a new reservation's parsed request; resID is set by Reserve
// (flavor_id is the reservation id).
type request struct {
	params
	resID string
	// source is the JSON of the flavor a flavor:instance reservation
	// copies (shown as its resource_properties, as upstream does).
	source string
	// project is the lease's project, whose ownership pools the
	// earliest-window search follows.
	project string
	// found is the choice the ownership earliest search last checked
	// and accepted (earliest.go), which ChooseAt answers again.
	found *foundChoice
}

// Fields implements plugins.Request.
func (r *request) Fields() map[string]any {
	m := fields(r.params, r.resID, nil, nil)
	if r.source != "" {
		m["resource_properties"] = r.source
	}
	return m
}

// fields are the plugin fields the API shows.
func fields(ps params, resID string, serverGroup *string, aggregate *int64) map[string]any {
	m := map[string]any{
		"amount": ps.amount, "vcpus": ps.size.VCPUs, "memory_mb": ps.size.MemoryMB, "disk_gb": ps.size.DiskGB,
		"affinity": nil, "resource_properties": ps.resourceProperties, "flavor_id": resID,
		"server_group_id": nil, "aggregate_id": nil,
	}
	if ps.affinity != nil {
		m["affinity"] = *ps.affinity
	}
	if serverGroup != nil {
		m["server_group_id"] = *serverGroup
	}
	if aggregate != nil {
		m["aggregate_id"] = *aggregate
	}
	return m
}

// requiredKeys are the keys a new reservation must carry (upstream's
// list; the CLI always sends all of them).
var requiredKeys = []string{"vcpus", "memory_mb", "disk_gb", "amount", "affinity", "resource_properties"}

// Parse implements plugins.Plugin.
func (p *Plugin) Parse(v plugins.Values, lease plugins.Lease) (plugins.Request, error) {
	for _, k := range requiredKeys {
		if _, ok := v[k]; !ok {
			return nil, plugins.MissingParameter(k)
		}
	}
	ps, _, err := parseParams(v, nil)
	if err != nil {
		return nil, err
	}
	return &request{params: ps, project: lease.ProjectID}, nil
}

// parseParams reads v over the stored parameters cur (nil: a new
// reservation) and reports which groups changed.
func parseParams(v plugins.Values, cur *params) (params, changes, error) {
	var ps params
	var ch changes
	if cur != nil {
		ps = *cur
	}
	ints := []struct {
		key string
		dst *int64
		min int64
	}{{"vcpus", &ps.size.VCPUs, 1}, {"memory_mb", &ps.size.MemoryMB, 1}, {"disk_gb", &ps.size.DiskGB, 0}}
	for _, f := range ints {
		n, ok, err := v.Int(f.key)
		if err != nil {
			return ps, ch, err
		}
		if !ok {
			if cur == nil {
				return ps, ch, plugins.MissingParameter(f.key)
			}
			continue
		}
		if int64(n) < f.min {
			return ps, ch, plugins.BadRequest("Malformed parameter %s: %d is below the minimum of %d", f.key, n, f.min)
		}
		if *f.dst != int64(n) {
			ch.size = true
		}
		*f.dst = int64(n)
	}
	if n, ok, err := v.Int("amount"); err != nil {
		return ps, ch, err
	} else if ok {
		if n < 1 {
			return ps, ch, plugins.BadRequest("Malformed parameter amount: %d is not between 1 and 2147483647", n)
		}
		if n != ps.amount {
			ch.amount = true
		}
		ps.amount = n
	} else if cur == nil {
		return ps, ch, plugins.MissingParameter("amount")
	}
	if raw, ok := v["affinity"]; ok {
		a, err := parseAffinity(raw)
		if err != nil {
			return ps, ch, err
		}
		if (a == nil) != (ps.affinity == nil) || (a != nil && *a != *ps.affinity) {
			ch.other = true
		}
		ps.affinity = a
	}
	if s, ok, err := v.String("resource_properties"); err != nil {
		return ps, ch, err
	} else if ok {
		if s != ps.resourceProperties {
			ch.other = true
		}
		ps.resourceProperties = s
	}
	q, err := hostquery.Parse(ps.resourceProperties)
	if err != nil {
		return ps, ch, plugins.BadRequest("%s", err.Error())
	}
	ps.query = q
	for k := range v {
		switch k {
		case "vcpus", "memory_mb", "disk_gb", "amount", "affinity", "resource_properties":
		default:
			if cur != nil {
				return ps, ch, plugins.BadRequest("Invalid parameter %s for a %s reservation", k, ResourceType)
			}
		}
	}
	return ps, ch, nil
}

// changes tells which parameters an update changes.
type changes struct{ amount, size, other bool }

func (c changes) any() bool { return c.amount || c.size || c.other }

// errAffinity is upstream's error for an affinity it cannot read.
var errAffinity = plugins.MalformedParameter("affinity (only true, false and None are allowed)")

// parseAffinity reads affinity: null, a JSON boolean, "None"/"none",
// or an oslo boolean string ("True", "false", "yes", "0", …).
func parseAffinity(raw any) (*bool, error) {
	t, f := true, false
	switch x := raw.(type) {
	case nil:
		return nil, nil
	case bool:
		return &x, nil
	case json.Number:
		switch x.String() {
		case "1":
			return &t, nil
		case "0":
			return &f, nil
		}
		return nil, errAffinity
	case float64:
		switch x {
		case 1:
			return &t, nil
		case 0:
			return &f, nil
		}
		return nil, errAffinity
	case int:
		switch x {
		case 1:
			return &t, nil
		case 0:
			return &f, nil
		}
		return nil, errAffinity
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "none", "null":
			return nil, nil
		case "1", "t", "true", "on", "y", "yes":
			return &t, nil
		case "0", "f", "false", "off", "n", "no":
			return &f, nil
		}
	}
	return nil, errAffinity
}

// row is an instance_reservations row.
type row struct {
	ID                 string  `gorm:"primaryKey"`
	ReservationID      string  `gorm:"column:reservation_id"`
	VCPUs              int64   `gorm:"column:vcpus"`
	MemoryMB           int64   `gorm:"column:memory_mb"`
	DiskGB             int64   `gorm:"column:disk_gb"`
	Amount             int     `gorm:"column:amount"`
	Affinity           *bool   `gorm:"column:affinity"`
	ResourceProperties string  `gorm:"column:resource_properties"`
	FlavorID           string  `gorm:"column:flavor_id"`
	ServerGroupID      *string `gorm:"column:server_group_id"`
	AggregateID        *int64  `gorm:"column:aggregate_id"`
	SourceFlavor       string  `gorm:"column:source_flavor"`
	CreatedAt          time.Time
	UpdatedAt          *time.Time
}

func (row) TableName() string { return "instance_reservations" }

func (r *row) params() params {
	q, _ := hostquery.Parse(r.ResourceProperties)
	ps := params{amount: r.Amount, size: allocator.SlotSize{VCPUs: r.VCPUs, MemoryMB: r.MemoryMB, DiskGB: r.DiskGB},
		affinity: r.Affinity, resourceProperties: r.ResourceProperties, query: q}
	if r.SourceFlavor != "" {
		d := storedDemand(ps.size, r.SourceFlavor)
		ps.flavor = &d
	}
	return ps
}

// Describe implements plugins.Plugin.
func (p *Plugin) Describe(ctx context.Context, g *gorm.DB, res []*models.Reservation) (map[string]map[string]any, error) {
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	var rows []row
	if err := g.WithContext(ctx).Where("reservation_id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(rows))
	for i := range rows {
		r := &rows[i]
		m := fields(r.params(), r.FlavorID, r.ServerGroupID, r.AggregateID)
		if r.SourceFlavor != "" {
			m["resource_properties"] = r.SourceFlavor
		}
		out[r.ReservationID] = m
	}
	if err := host.DescribePools(ctx, g, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

var (
	_ plugins.Plugin    = (*Plugin)(nil)
	_ plugins.Refresher = (*Plugin)(nil)
)
