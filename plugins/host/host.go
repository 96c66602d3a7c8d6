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
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
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

// Actions are the compute side effects of a host reservation (Nova
// aggregates and the freepool, or the standalone driver), on hosts named
// by their service_name. nil means the reservation only books hosts in
// the database.
type Actions interface {
	Start(ctx context.Context, reservationID, projectID string, hostnames []string) error
	End(ctx context.Context, reservationID string, hostnames []string) error
	Snapshot(ctx context.Context, reservationID string, hostnames []string) error
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
	// Rules are the allocator's tag rules (failure domains); may be nil.
	Rules *allocator.TagRules
	// CheckHosts, when set, tells inside the transaction (after the hosts
	// are locked) which of them still exist and are reservable
	// (hosts.ReservableTx); a host deleted or disabled since the view was
	// taken is then not booked.
	CheckHosts func(tx *gorm.DB, ids []string) (map[string]bool, error)
}

// Plugin implements plugins.Plugin for physical:host.
type Plugin struct {
	src     Source
	db      *gorm.DB
	actions Actions
	cfg     Config
	now     func() time.Time

	idx       index
	loadMu    sync.Mutex
	reloading atomic.Bool

	privMu  sync.Mutex
	private map[string]bool
}

// New returns the plugin. g is the database handle used for view reloads
// (outside the request transaction).
func New(src Source, g *gorm.DB, actions Actions, cfg Config, now func() time.Time) *Plugin {
	if cfg.AllocTTL <= 0 {
		cfg.AllocTTL = 30 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Plugin{src: src, db: g, actions: actions, cfg: cfg, now: now}
}

// ResourceType implements plugins.Plugin.
func (p *Plugin) ResourceType() string { return ResourceType }

// params are a reservation's parsed parameters.
type params struct {
	min, max          int
	hyper, resource   string
	beforeEnd         string
	hyperQ, resourceQ *hostquery.Query
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

// choose runs the allocator on the view (never the database: it runs
// inside the write transaction). exclude leaves out one reservation's
// bookings; keep restricts the candidates. A refusal from a view that a
// forced refresh might change is plugins.ErrStale.
func (p *Plugin) choose(tx *plugins.Tx, ps params, win allocator.Interval, min, max int, exclude string, keep func(string) bool) (allocator.HostDecision, error) {
	var dec allocator.HostDecision
	var err error
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	p.idx.view(lo, hi, exclude, keep, func(hosts []allocator.Host, info func(string) *Host) {
		dec, err = allocator.ChooseHosts(p.cfg.Rules, hosts, allocator.HostRequest{
			Window: win, Cleaning: p.cfg.Cleaning, Min: min, Max: max, Match: ps.match(info),
		})
	})
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) && !tx.Fresh {
		return dec, fmt.Errorf("%w: %w", plugins.ErrStale, err)
	}
	return dec, err
}

// hostnames maps host ids to the names the compute driver knows
// (service_name), from the view.
func (p *Plugin) hostnames(ids []string) []string {
	p.idx.mu.RLock()
	defer p.idx.mu.RUnlock()
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		name := id
		if i, ok := p.idx.pos[id]; ok {
			h := &p.idx.infos[i]
			name = h.HypervisorHostname
			if h.ServiceName != "" {
				name = h.ServiceName
			}
		}
		out = append(out, name)
	}
	return out
}

// notEnough maps the allocator's refusal to Blazar's error (409 here;
// upstream gives 500), keeping the explanation.
func notEnough(err error) error {
	if errors.Is(err, plugins.ErrStale) {
		return err
	}
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) {
		return plugins.NotEnough("%s", ne.Error())
	}
	if errors.Is(err, allocator.ErrInvalidRequest) {
		return plugins.BadRequest("%s", err.Error())
	}
	return err
}

// lockAndCheck locks hostIDs and re-checks them for bookings overlapping
// the window (cleaning included), ignoring reservation exclude.
func (p *Plugin) lockAndCheck(ctx context.Context, tx *plugins.Tx, hostIDs []string, win allocator.Interval, exclude string) error {
	if err := plugins.LockResources(tx, ResourceType, hostIDs); err != nil {
		return err
	}
	if p.cfg.CheckHosts != nil && len(hostIDs) > 0 {
		ok, err := p.cfg.CheckHosts(tx.WithContext(ctx), hostIDs)
		if err != nil {
			return err
		}
		for _, id := range hostIDs {
			if !ok[id] {
				return plugins.ErrRetry // the view is refreshed before the retry
			}
		}
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	var clash []string
	q := tx.WithContext(ctx).Table("computehost_allocations").
		Where("compute_host_id IN ? AND end_date > ? AND start_date < ?", hostIDs, lo, hi)
	if exclude != "" {
		q = q.Where("reservation_id <> ?", exclude)
	}
	if err := q.Distinct().Pluck("compute_host_id", &clash).Error; err != nil {
		return err
	}
	if len(clash) == 0 {
		return nil
	}
	// The view was stale for these hosts: refresh them and retry.
	rows, err := loadAllocs(ctx, tx.DB, clash)
	if err != nil {
		return err
	}
	p.idx.replaceHosts(clash, rows)
	return plugins.ErrRetry
}

func allocRows(resID string, hostIDs []string, win allocator.Interval) []allocRow {
	rows := make([]allocRow, len(hostIDs))
	for i, h := range hostIDs {
		rows[i] = allocRow{ComputeHostID: h, ReservationID: resID, StartDate: win.Start, EndDate: win.End}
	}
	return rows
}

func (p *Plugin) insertAllocs(ctx context.Context, tx *plugins.Tx, resID string, hostIDs []string, win allocator.Interval) error {
	if len(hostIDs) == 0 {
		return nil
	}
	rows := make([]models.ComputeHostAllocation, len(hostIDs))
	for i, h := range hostIDs {
		rows[i] = models.ComputeHostAllocation{
			ID: uuid.NewString(), ReservationID: resID, ComputeHostID: h,
			StartDate: win.Start, EndDate: win.End, CreatedAt: tx.Now,
		}
	}
	return tx.WithContext(ctx).Create(&rows).Error
}

// choice is a new reservation's hosts chosen by Prepare.
type choice struct {
	ps     params
	chosen []string
}

// Prepare implements plugins.Preparer: the hosts of a new reservation,
// chosen from the view (allocator.ChoosePrepared; no database access).
func (p *Plugin) Prepare(ctx context.Context, lease plugins.Lease, r plugins.Request, fresh bool, earlier []any) (any, error) {
	ps, ok := r.(params)
	if !ok {
		return nil, fmt.Errorf("physical:host: request of type %T", r)
	}
	req := allocator.HostRequest{
		Window:   allocator.Interval{Start: lease.Start, End: lease.End},
		Cleaning: p.cfg.Cleaning, Min: ps.min, Max: ps.max,
	}
	match := ps.match
	if taken := takenBy(earlier); len(taken) > 0 {
		// Hosts of the request's earlier reservations are busy over the
		// window too (booked in the same transaction).
		match = func(info func(string) *Host) func(*allocator.Host) (bool, string) {
			m := ps.match(info)
			return func(h *allocator.Host) (bool, string) {
				if taken[h.ID] {
					return false, "taken by another reservation of the lease"
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}
		}
	}
	dec, err := p.idx.choose(p.cfg.Rules, req, match)
	var ne *allocator.NotEnoughHostsError
	if errors.As(err, &ne) && !fresh {
		err = fmt.Errorf("%w: %w", plugins.ErrStale, err)
	}
	if err != nil {
		return nil, notEnough(err)
	}
	return &choice{ps: ps, chosen: dec.Chosen}, nil
}

// takenBy is the set of hosts of earlier choices.
func takenBy(earlier []any) map[string]bool {
	var taken map[string]bool
	for _, e := range earlier {
		if c, ok := e.(*choice); ok {
			for _, id := range c.chosen {
				if taken == nil {
					taken = map[string]bool{}
				}
				taken[id] = true
			}
		}
	}
	return taken
}

// Reserve implements plugins.Plugin.
func (p *Plugin) Reserve(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, r plugins.Request) (string, error) {
	c, err := p.Prepare(ctx, lease, r, tx.Fresh, nil)
	if err != nil {
		return "", err
	}
	return p.ReservePrepared(ctx, tx, lease, res, r, c)
}

// ReservePrepared implements plugins.Preparer: lock and re-check the
// chosen hosts, then book them.
func (p *Plugin) ReservePrepared(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, _ plugins.Request, prepared any) (string, error) {
	c, ok := prepared.(*choice)
	if !ok {
		return "", fmt.Errorf("physical:host: prepared choice of type %T", prepared)
	}
	ps := c.ps
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	id := uuid.NewString()
	if _, err := tx.ExecSQL(`INSERT INTO computehost_reservations
		(id, reservation_id, aggregate_id, count_range, hypervisor_properties, resource_properties, before_end, created_at, updated_at)
		VALUES (?,?,NULL,?,?,?,?,?,NULL)`,
		id, res.ID, strconv.Itoa(ps.min)+"-"+strconv.Itoa(ps.max), ps.hyper, ps.resource, ps.beforeEnd, tx.Now); err != nil {
		return "", err
	}
	// Last: the host locks are held from here to the commit.
	if err := p.lockAndBook(ctx, tx, res.ID, c.chosen, win); err != nil {
		return "", err
	}
	rows := allocRows(res.ID, c.chosen, win)
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, nil, rows) })
	return id, nil
}

// lockAndBook is lockAndCheck and insertAllocs for a new reservation, the
// re-check and the insert in one statement: the allocations are inserted
// only when none of the (locked) hosts has a booking overlapping the
// window, cleaning included; when nothing was inserted, the clash is
// handled as lockAndCheck does (refresh those hosts, ErrRetry).
func (p *Plugin) lockAndBook(ctx context.Context, tx *plugins.Tx, resID string, hostIDs []string, win allocator.Interval) error {
	if len(hostIDs) == 0 {
		return nil
	}
	// On SQLite the write transaction (db.Write's writer, BEGIN
	// IMMEDIATE) already excludes every other writer until it ends: the
	// lock rows would serialise nothing more.
	if tx.Dialect != db.SQLite {
		if err := plugins.LockResources(tx, ResourceType, hostIDs); err != nil {
			return err
		}
	}
	if p.cfg.CheckHosts != nil {
		ok, err := p.cfg.CheckHosts(tx.WithContext(ctx), hostIDs)
		if err != nil {
			return err
		}
		for _, id := range hostIDs {
			if !ok[id] {
				return plugins.ErrRetry // the view is refreshed before the retry
			}
		}
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	// The overlap condition on exactly hostIDs, with its arguments.
	cond := make([]byte, 0, 96+2*len(hostIDs))
	cond = append(cond, "SELECT 1 FROM computehost_allocations WHERE compute_host_id IN ("...)
	condArgs := make([]any, 0, len(hostIDs)+2)
	for i, h := range hostIDs {
		if i > 0 {
			cond = append(cond, ',')
		}
		cond = append(cond, '?')
		condArgs = append(condArgs, h)
	}
	cond = append(cond, ") AND end_date > ? AND start_date < ?"...)
	condArgs = append(condArgs, lo, hi)
	args := make([]any, 0, 6*len(hostIDs)+len(condArgs))
	for _, h := range hostIDs {
		args = append(args, uuid.NewString(), resID, h, win.Start, win.End, tx.Now)
	}
	q := make([]byte, 0, 256+len(cond)+40*len(hostIDs))
	q = append(q, "INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at) "...)
	var clashed bool
	if tx.Dialect == db.SQLite {
		// No round trips to save: check, then insert (an INSERT that
		// reads its own table goes through a temporary table in SQLite).
		rows, err := tx.QuerySQL(string(append(cond, " LIMIT 1"...)), condArgs...)
		if err != nil {
			return err
		}
		clashed = rows.Next()
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if !clashed {
			q = append(q, "VALUES "...)
			q = db.Placeholders(q, len(hostIDs), 6)
			if _, err := tx.ExecSQL(string(q), args...); err != nil {
				return err
			}
		}
	} else {
		// One round trip: insert only when nothing overlaps.
		q = append(q, "SELECT * FROM ("...)
		for i := range hostIDs {
			if i == 0 {
				q = append(q, "SELECT ? AS c1, ? AS c2, ? AS c3, ? AS c4, ? AS c5, ? AS c6"...)
			} else {
				q = append(q, " UNION ALL SELECT ?, ?, ?, ?, ?, ?"...)
			}
		}
		q = append(q, ") AS v WHERE NOT EXISTS ("...)
		q = append(q, cond...)
		q = append(q, ')')
		n, err := tx.ExecSQL(string(q), append(args, condArgs...)...)
		if err != nil {
			return err
		}
		if n != 0 && n != int64(len(hostIDs)) {
			return fmt.Errorf("physical:host: %d of %d allocations inserted", n, len(hostIDs))
		}
		clashed = n == 0
	}
	if !clashed {
		return nil
	}
	var clash []string
	if err := tx.WithContext(ctx).Table("computehost_allocations").
		Where("compute_host_id IN ? AND end_date > ? AND start_date < ?", hostIDs, lo, hi).
		Distinct().Pluck("compute_host_id", &clash).Error; err != nil {
		return err
	}
	// The view was stale for these hosts: refresh them and retry.
	rows, err := loadAllocs(ctx, tx.DB, clash)
	if err != nil {
		return err
	}
	p.idx.replaceHosts(clash, rows)
	return plugins.ErrRetry
}

func (p *Plugin) load(ctx context.Context, tx *plugins.Tx, resID string) (*models.ComputeHostReservation, []string, error) {
	var hr models.ComputeHostReservation
	if err := tx.WithContext(ctx).Where("reservation_id = ?", resID).Take(&hr).Error; err != nil {
		return nil, nil, fmt.Errorf("physical:host reservation %s: %w", resID, err)
	}
	var hostIDs []string
	if err := tx.WithContext(ctx).Model(&models.ComputeHostAllocation{}).
		Where("reservation_id = ?", resID).Order("compute_host_id").Pluck("compute_host_id", &hostIDs).Error; err != nil {
		return nil, nil, err
	}
	return &hr, hostIDs, nil
}

// Update implements plugins.Plugin, with upstream's rules: a pure
// shortening keeps every host; otherwise a host is kept while it still
// matches and is free over the new window, extra hosts are searched up to
// max, and an active reservation may not lose a host.
func (p *Plugin) Update(ctx context.Context, tx *plugins.Tx, old, lease plugins.Lease, res *models.Reservation, v plugins.Values) error {
	hr, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	ps, err := p.params(v, hr)
	if err != nil {
		return err
	}
	if err := p.checkPrivacy(ps.resource, lease, true); err != nil {
		return err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	active := res.Status == "active"
	paramsChanged := len(v) > 0
	shrinking := !lease.Start.Before(old.Start) && !lease.End.After(old.End)
	keep := held
	var added []string
	if paramsChanged || !shrinking {
		if !win.Start.Before(win.End) {
			return plugins.BadRequest("End date must be later than current and start date")
		}
		heldSet := map[string]bool{}
		for _, h := range held {
			heldSet[h] = true
		}
		keep = nil
		if len(held) > 0 {
			dec, err := p.choose(tx, ps, win, 0, min(ps.max, len(held)), res.ID, func(id string) bool { return heldSet[id] })
			if err != nil {
				return notEnough(err)
			}
			keep = dec.Chosen
		}
		if active && len(keep) < len(held) && !tx.Fresh {
			return plugins.ErrStale
		}
		if active && len(keep) < len(held) {
			return plugins.NotEnough("Not enough hosts available: %d of the %d hosts of active reservation %s cannot be kept (busy in the new window, no longer matching, or above max %d)",
				len(held)-len(keep), len(held), res.ID, ps.max)
		}
		if len(keep) < ps.max {
			need := max(ps.min-len(keep), 0)
			dec, err := p.choose(tx, ps, win, need, ps.max-len(keep), res.ID, func(id string) bool { return !heldSet[id] })
			if err != nil {
				var ne *allocator.NotEnoughHostsError
				if errors.Is(err, plugins.ErrStale) {
					return err
				}
				if errors.As(err, &ne) {
					return plugins.NotEnough("Not enough hosts available: %d kept, %s", len(keep), strings.TrimPrefix(ne.Error(), "Not enough hosts available: "))
				}
				return notEnough(err)
			}
			added = dec.Chosen
		}
		all := append(slices.Clone(keep), added...)
		if err := p.lockAndCheck(ctx, tx, all, win, res.ID); err != nil {
			return err
		}
	}
	updates := map[string]any{
		"count_range":           fmt.Sprintf("%d-%d", ps.min, ps.max),
		"hypervisor_properties": ps.hyper,
		"resource_properties":   ps.resource,
		"updated_at":            tx.Now,
	}
	if err := tx.WithContext(ctx).Model(&models.ComputeHostReservation{}).Where("id = ?", hr.ID).Updates(updates).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	final := append(slices.Clone(keep), added...)
	if err := p.insertAllocs(ctx, tx, res.ID, final, win); err != nil {
		return err
	}
	if active && len(added) > 0 && p.actions != nil {
		if err := p.actions.Start(ctx, res.ID, lease.ProjectID, p.hostnames(added)); err != nil {
			return err
		}
	}
	rows := allocRows(res.ID, final, win)
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, rows) })
	return nil
}

// OnStart implements plugins.Plugin.
func (p *Plugin) OnStart(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	_, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if p.actions != nil {
		return p.actions.Start(ctx, res.ID, lease.ProjectID, p.hostnames(held))
	}
	return nil
}

// OnEnd implements plugins.Plugin: the hosts go back, the allocations
// are deleted (as upstream does at the end of a lease).
func (p *Plugin) OnEnd(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	_, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	if p.actions != nil && res.Status == "active" {
		if err := p.actions.End(ctx, res.ID, p.hostnames(held)); err != nil {
			return err
		}
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, nil) })
	return nil
}

// BeforeEnd implements plugins.Plugin.
func (p *Plugin) BeforeEnd(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) error {
	hr, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return err
	}
	action := hr.BeforeEnd
	if action == "default" {
		action = p.cfg.DefaultBeforeEnd
	}
	if action == "snapshot" && p.actions != nil {
		return p.actions.Snapshot(ctx, res.ID, p.hostnames(held))
	}
	return nil
}

// Delete implements plugins.Plugin.
func (p *Plugin) Delete(ctx context.Context, tx *plugins.Tx, res *models.Reservation) error {
	var held []string
	if err := tx.WithContext(ctx).Model(&models.ComputeHostAllocation{}).
		Where("reservation_id = ?", res.ID).Pluck("compute_host_id", &held).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostAllocation{}).Error; err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.ComputeHostReservation{}).Error; err != nil {
		return err
	}
	tx.AfterCommit(func() { p.idx.setReservation(res.ID, held, nil) })
	return nil
}

// Describe implements plugins.Plugin.
func (p *Plugin) Describe(ctx context.Context, g *gorm.DB, res []*models.Reservation) (map[string]map[string]any, error) {
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	var rows []models.ComputeHostReservation
	if err := g.WithContext(ctx).Where("reservation_id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(rows))
	for _, hr := range rows {
		lo, hi, _ := strings.Cut(hr.CountRange, "-")
		mn, _ := strconv.Atoi(lo)
		mx, _ := strconv.Atoi(hi)
		out[hr.ReservationID] = map[string]any{
			"min": mn, "max": mx,
			"hypervisor_properties": hr.HypervisorProperties,
			"resource_properties":   hr.ResourceProperties,
			"before_end":            hr.BeforeEnd,
		}
	}
	return out, nil
}

var (
	_ plugins.Plugin   = (*Plugin)(nil)
	_ plugins.Preparer = (*Plugin)(nil)
)
