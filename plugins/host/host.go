// Package host is the physical:host plugin: whole-host reservations with
// min/max counts, hypervisor_properties and resource_properties
// (pkg/hostquery), before_end actions and a cleaning-time margin. Every
// host choice goes through pkg/allocator.ChooseHosts.
//
// # No double booking
//
// Hosts are chosen from an in-memory view (the reservable hosts and their
// booked windows, see index.go), so the hot path runs no per-host query;
// a new reservation's hosts are chosen before the write transaction
// (plugins.Preparer: Prepare, then ReservePrepared inside it), with
// allocator.ChoosePrepared over the view's sorted booking bounds.
// The view may be stale (another process booked a host, or our own
// uncommitted transaction rolled back), so inside the write transaction
// the plugin then
//
//  1. locks the chosen hosts: it upserts their rows in
//     blazar_resource_locks in sorted order (an exclusive row lock held
//     until commit on MySQL/MariaDB; on SQLite writes are already
//     serialised: db.Write's single writer connection in a process, BEGIN
//     IMMEDIATE — our DSN's _txlock=immediate — between processes, so a
//     new reservation skips the lock rows there);
//  2. re-checks, with one indexed query on computehost_allocations
//     (compute_host_id, end_date, start_date), that none of exactly those
//     hosts has an overlapping booking (cleaning time included); for a new
//     reservation that query is the NOT EXISTS of the INSERT … SELECT that
//     books the hosts, which inserts nothing on a clash. The lease
//     service runs MySQL write transactions at READ COMMITTED, so this read
//     sees every booking committed by whoever held the lock before us;
//  3. on a conflict it refreshes the view for those hosts and returns
//     plugins.ErrRetry: the lease service rolls back and runs the whole
//     request again, a bounded number of times.
//
// Two transactions booking overlapping host sets serialise on the lock
// rows of the shared hosts; whoever commits second sees the first one's
// allocations in step 2. Freeing hosts (delete, shortening) takes no lock.
package host

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/hostquery"
	"github.com/leasehold/leasehold/plugins"
)

// ResourceType is the Blazar resource type of this plugin.
const ResourceType = "physical:host"

// Host is a reservable host as the plugin sees it (Lookup gives hostquery
// a field or extra capability by name).
type Host = hosts.Host

// Source lists the reservable hosts and the resource properties
// (pkg/blazar/hosts.Service). Reservable must return the very same slice
// while nothing changed: the view then skips its rebuild.
type Source interface {
	Reservable(ctx context.Context) ([]hosts.Host, error)
	// Properties lists the extra-capability properties; private ones
	// (blazar host property set --private) may only be used in the
	// requirements of an admin.
	Properties(ctx context.Context, includePrivate bool) ([]hosts.Property, error)
}

// Config tunes the plugin.
type Config struct {
	// Cleaning is kept free before and after every reservation.
	Cleaning time.Duration
	// DefaultBeforeEnd is the action of before_end "default" ("" or
	// "snapshot").
	DefaultBeforeEnd string
	// HostTTL is how long the host list of the view is trusted (0: ask
	// the Source on every choice; a Source returning the very same slice
	// when nothing changed makes that cheap); AllocTTL how long the
	// bookings are trusted before a full reload (default 30s). A refusal
	// for lack of hosts always reloads first.
	HostTTL, AllocTTL time.Duration
	// ReservePercent keeps a share of the bigger hosts free for the
	// requests only they can serve (allocator.HostRequest.ReservePercent;
	// the server's default is allocator.DefaultReservePercent, 0 here).
	// Healing and BEST-EFFORT clearing do not apply it.
	ReservePercent int
	// Rules are the allocator's tag rules (failure domains); may be nil.
	// A location prefix P names a host field or extra capability: a host
	// whose P is v is in failure domain "P:v" (as a Ganeti node tagged
	// P:v under the cluster tag htools:nlocation:P).
	Rules *allocator.TagRules
	// CheckHosts, when set, tells inside the transaction (after the hosts
	// are locked) which of them still exist and are reservable
	// (hosts.ReservableTx); a host deleted or disabled since the view was
	// taken is then not booked.
	CheckHosts func(tx *gorm.DB, ids []string) (map[string]bool, error)
	// ClearHosts allows BEST-EFFORT leases to clear hosts by moving other
	// projects' instances (a Mover carries the moves out); Driver names
	// the compute driver in the refusal when it is off.
	ClearHosts bool
	Driver     string
	// Compute, when set (the nova driver), is where the hosts' servers
	// are read: whether a host is busy now with another project's
	// servers, and the scavenger hunt's hosts and instances (nova.go).
	Compute ComputeView
	// Ownership, when set, restricts and orders a project's hosts by the
	// ownership policy's pools; nil: ownership is off.
	Ownership Ownership
	// Shorteners are the plugins of the other reservation types whose
	// reservations an owner's reclaim may shorten (virtual:instance,
	// flavor:instance): a borrower lease holding only hosts and such
	// reservations is cut to the reclaim time, each of these through its
	// own Update as a lease update of the end date would; a lease holding
	// any other type is left alone. Their bookings are cut, never moved.
	Shorteners []plugins.Plugin
}

// Plugin implements plugins.Plugin for physical:host.
type Plugin struct {
	src Source
	db  *gorm.DB
	cfg Config
	now func() time.Time

	idx       index
	loadMu    sync.Mutex
	reloading atomic.Bool

	privMu  sync.Mutex
	private map[string]bool
}

// New returns the plugin. g is the database handle used for view reloads
// (outside the request transaction).
func New(src Source, g *gorm.DB, cfg Config, now func() time.Time) *Plugin {
	if cfg.AllocTTL <= 0 {
		cfg.AllocTTL = 30 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	pl := &Plugin{src: src, db: g, cfg: cfg, now: now}
	if cfg.Rules != nil {
		pl.idx.tagKeys = cfg.Rules.LocationPrefixes
		pl.idx.withTags = len(cfg.Rules.ExclusionPrefixes) > 0
	}
	return pl
}

// ResourceType implements plugins.Plugin.
func (p *Plugin) ResourceType() string { return ResourceType }

// params are a reservation's parsed parameters.
type params struct {
	min, max          int
	hyper, resource   string
	beforeEnd         string
	hyperQ, resourceQ *hostquery.Query
	// project is the lease's project when parsed for a new lease (the
	// earliest-window search draws from its ownership pools).
	project string
}

func parseQuery(s string) (*hostquery.Query, error) {
	q, err := hostquery.Parse(s)
	if err != nil {
		return nil, plugins.BadRequest("%s", err.Error())
	}
	return q, nil
}

// Parse implements plugins.Plugin: min, max, hypervisor_properties and
// resource_properties are required; before_end defaults to "default".
func (p *Plugin) Parse(v plugins.Values, lease plugins.Lease) (plugins.Request, error) {
	for i, k := range []string{"min", "max", "hypervisor_properties", "resource_properties"} {
		var ok bool
		var err error
		if i < 2 {
			_, ok, err = v.Int(k)
		} else {
			_, ok, err = v.String(k)
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, plugins.MissingParameter(k)
		}
	}
	ps, err := p.params(v, &models.ComputeHostReservation{BeforeEnd: "default"})
	if err != nil {
		return nil, err
	}
	if err := p.checkPrivacy(ps.resource, lease, false); err != nil {
		return nil, err
	}
	ps.project = lease.ProjectID
	return ps, nil
}

// Fields implements plugins.Request.
func (ps params) Fields() map[string]any {
	return map[string]any{
		"min": ps.min, "max": ps.max,
		"hypervisor_properties": ps.hyper, "resource_properties": ps.resource,
		"before_end": ps.beforeEnd,
	}
}

// params parses v over the stored parameters cur (nil for a new
// reservation) and checks them.
func (p *Plugin) params(v plugins.Values, cur *models.ComputeHostReservation) (params, error) {
	var ps params
	if cur != nil {
		lo, hi, _ := strings.Cut(cur.CountRange, "-")
		ps.min, _ = strconv.Atoi(lo)
		ps.max, _ = strconv.Atoi(hi)
		ps.hyper, ps.resource, ps.beforeEnd = cur.HypervisorProperties, cur.ResourceProperties, cur.BeforeEnd
	}
	var err error
	if n, ok, e := v.Int("min"); e != nil {
		return ps, e
	} else if ok {
		ps.min = n
	}
	if n, ok, e := v.Int("max"); e != nil {
		return ps, e
	} else if ok {
		ps.max = n
	}
	if s, ok, e := v.String("hypervisor_properties"); e != nil {
		return ps, e
	} else if ok {
		ps.hyper = s
	}
	if s, ok, e := v.String("resource_properties"); e != nil {
		return ps, e
	} else if ok {
		ps.resource = s
	}
	if s, ok, e := v.String("before_end"); e != nil {
		return ps, e
	} else if ok {
		ps.beforeEnd = s
	}
	if ps.min < 1 || ps.max < 1 {
		return ps, plugins.BadRequest("Invalid values for min/max of hosts. min and max must be at least 1.")
	}
	if ps.max < ps.min {
		return ps, plugins.BadRequest("Invalid values for min/max of hosts. Max must be equal to or larger than min.")
	}
	switch ps.beforeEnd {
	case "", "default", "snapshot":
	default:
		return ps, plugins.BadRequest("Invalid before_end parameter %q: want \"\", \"default\" or \"snapshot\".", ps.beforeEnd)
	}
	if ps.hyperQ, err = parseQuery(ps.hyper); err != nil {
		return ps, err
	}
	if ps.resourceQ, err = parseQuery(ps.resource); err != nil {
		return ps, err
	}
	return ps, nil
}

// checkPrivacy refuses a non-admin's requirement on a private property.
// With cached set (inside a transaction) it uses the private names seen
// last instead of asking the source (no second connection in a
// transaction).
func (p *Plugin) checkPrivacy(resourceProperties string, lease plugins.Lease, cached bool) error {
	if lease.Admin {
		return nil
	}
	q, err := hostquery.Parse(resourceProperties)
	if err != nil || q.Empty() {
		return nil
	}
	p.privMu.Lock()
	private := p.private
	p.privMu.Unlock()
	if cached && private == nil {
		return nil // nothing known yet; Validate checks new reservations
	}
	if !cached {
		if private, err = p.privateProperties(); err != nil {
			return err
		}
		p.privMu.Lock()
		p.private = private
		p.privMu.Unlock()
	}
	for _, k := range q.Keys() {
		if private[k] {
			return plugins.Forbidden("Property %s is private; only an admin may reserve by it.", k)
		}
	}
	return nil
}

// privateProperties are the names of the private properties.
func (p *Plugin) privateProperties() (map[string]bool, error) {
	ps, err := p.src.Properties(context.Background(), true)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, pr := range ps {
		if pr.Private {
			out[pr.Name] = true
		}
	}
	return out, nil
}

// match builds the allocator's property check.
func (ps params) match(info func(id string) *Host) func(*allocator.Host) (bool, string) {
	if ps.hyperQ.Empty() && ps.resourceQ.Empty() {
		return nil
	}
	return func(h *allocator.Host) (bool, string) {
		hi := info(h.ID)
		if hi == nil {
			return false, "unknown host"
		}
		if ok, why := ps.hyperQ.Match(hi.Lookup); !ok {
			return false, why
		}
		return ps.resourceQ.Match(hi.Lookup)
	}
}

// ensureView loads the view when it is missing, or reloads it in full
// when forced (after a refusal); a view older than AllocTTL is reloaded in
// the background while requests go on with it (it is only a hint: every
// booking is re-checked in its transaction). The host list is refreshed
// every HostTTL.
func (p *Plugin) ensureView(ctx context.Context, force bool) error {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	now := p.now()
	p.idx.mu.RLock()
	loaded, hostsAt, allocsAt := p.idx.loaded, p.idx.hostsAt, p.idx.allocsAt
	p.idx.mu.RUnlock()
	switch {
	case !loaded || (force && now.Sub(allocsAt) > 100*time.Millisecond):
		return p.idx.reload(ctx, p.src, p.db, now)
	case now.Sub(allocsAt) > p.cfg.AllocTTL:
		if p.reloading.CompareAndSwap(false, true) {
			go func() {
				defer p.reloading.Store(false)
				p.loadMu.Lock()
				defer p.loadMu.Unlock()
				if err := p.idx.reload(context.WithoutCancel(ctx), p.src, p.db, p.now()); err != nil {
					slog.Warn("physical:host view reload failed", "err", err)
				}
			}()
		}
	}
	if now.Sub(hostsAt) >= p.cfg.HostTTL {
		return p.idx.reloadHosts(ctx, p.src, p.db, now)
	}
	return nil
}

// Refresh implements plugins.Refresher: the lease service calls it before
// every transaction attempt (outside the transaction); force reloads the
// whole view (hosts registered, deleted or freed elsewhere).
func (p *Plugin) Refresh(ctx context.Context, force bool) error { return p.ensureView(ctx, force) }
