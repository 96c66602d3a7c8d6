package host

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/plugins"
)

// Hosts in use by other projects, and the scavenger hunt of BEST-EFFORT
// leases (pkg/blazar/leases, kinds.go).
//
// A host whose compute provider holds Placement allocations of another
// project's consumers (instances running there) is not free for a window
// that starts now: whole-host reservations are dedicated to their
// project. A BEST-EFFORT lease may clear such hosts: PrepareClearing asks
// allocator.PlanScavenge which hosts to clear and where each instance
// (a consumer of type INSTANCE) goes, and ReservePrepared records the
// moves in the outbox (KindMoveInstance, carried out by Mover). With the
// nova driver the same questions are asked of Nova instead (nova.go).

// KindMoveInstance moves one instance's allocations from a host's compute
// provider to another's (standalone mode: the allocation is the
// instance).
const KindMoveInstance = "placement.move_instance"

// instanceType is the consumer type of a movable instance (Placement
// 1.38); consumers of other types (MIGRATION, none) stay where they are.
const instanceType = "INSTANCE"

// nowSlack is how far ahead a window's start still counts as "now".
const nowSlack = time.Minute

// startsNow reports whether lease's window starts now (other projects'
// instances then make a host busy).
func (p *Plugin) startsNow(lease plugins.Lease) bool {
	return !lease.Start.Add(-p.cfg.Cleaning).After(p.now().Add(nowSlack))
}

// busyNow maps the hosts of the view whose compute provider holds
// allocations of another project than project's to the reason. It reads
// g outside any transaction (Prepare): one probe per host's provider,
// which stops at its first such allocation (the index on allocations'
// provider, then consumers by uuid), however many instances run.
//
// With a compute service it asks the compute service; when that cannot
// answer (Nova down or frozen) the lease is still taken, as with any
// other Nova call, and the check falls back to Leasehold's Placement,
// which is the truth when Nova uses it, with a warning naming the
// failure.
func (p *Plugin) busyNow(ctx context.Context, g *gorm.DB, project string) (map[string]string, error) {
	if p.cfg.Compute != nil {
		busy, err := p.busyNowCompute(ctx, project)
		if err == nil {
			return busy, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		slog.WarnContext(ctx, "the compute service could not say which hosts other projects use now; checking Leasehold's Placement instead", "error", err)
	}
	p.idx.mu.RLock()
	hostOf := make(map[string]string, len(p.idx.infos))
	provs := make([]string, 0, len(p.idx.infos))
	for i := range p.idx.infos {
		if u := p.idx.infos[i].ComputeProviderUUID; u != "" {
			hostOf[u] = p.idx.infos[i].ID
			provs = append(provs, u)
		}
	}
	p.idx.mu.RUnlock()
	var out map[string]string
	for from := 0; from < len(provs); from += 500 {
		var rows []struct {
			UUID     string
			Consumer *string
		}
		err := g.WithContext(ctx).Raw(`SELECT rp.uuid, (SELECT c.uuid FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id
 WHERE a.resource_provider_id = rp.id AND c.project_id <> ? LIMIT 1) AS consumer
 FROM resource_providers rp WHERE rp.uuid IN ?`, project, provs[from:min(from+500, len(provs))]).Scan(&rows).Error
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.Consumer == nil {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[hostOf[r.UUID]] = "in use by another project now (consumer " + *r.Consumer + " on its compute provider)"
		}
	}
	return out, nil
}

// Cleared reports, in tx, whether no other project than the lease's holds
// allocations on the compute providers of the reservation's hosts.
func (p *Plugin) Cleared(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation) (bool, error) {
	if p.cfg.Compute != nil {
		return clearedCompute(ctx, tx, lease)
	}
	_, held, err := p.load(ctx, tx, res.ID)
	if err != nil {
		return false, err
	}
	var provs []string
	for _, h := range p.hostInfos(held) {
		if h.ComputeProviderUUID != "" {
			provs = append(provs, h.ComputeProviderUUID)
		}
	}
	if len(provs) == 0 {
		return true, nil
	}
	var n int64
	err = tx.WithContext(ctx).Raw(`SELECT COUNT(*) FROM allocations a
 JOIN resource_providers rp ON rp.id = a.resource_provider_id
 JOIN consumers c ON c.uuid = a.consumer_id
 WHERE rp.uuid IN ? AND c.project_id <> ?`, provs, lease.ProjectID).Scan(&n).Error
	return n == 0, err
}

// hostInfos returns the view's hosts of ids (unknown ones left out).
func (p *Plugin) hostInfos(ids []string) []Host {
	p.idx.mu.RLock()
	defer p.idx.mu.RUnlock()
	var out []Host
	for _, id := range ids {
		if i, ok := p.idx.pos[id]; ok {
			out = append(out, p.idx.infos[i])
		}
	}
	return out
}

// move is one planned instance move (the outbox payload).
type move struct {
	LeaseID  string `json:"lease_id"`
	Consumer string `json:"consumer"`
	// From and To are compute provider uuids; FromHost and ToHost their
	// names (logs, and Nova's live migration target).
	From     string `json:"from"`
	To       string `json:"to"`
	FromHost string `json:"from_host"`
	ToHost   string `json:"to_host"`
}

// enqueueMoves records c's moves for lease in tx.
func (p *Plugin) enqueueMoves(tx *plugins.Tx, lease plugins.Lease, c *choice) error {
	if len(c.moves) == 0 {
		return nil
	}
	as := make([]outbox.Action, len(c.moves))
	for i, m := range c.moves {
		m.LeaseID = lease.ID
		as[i] = outbox.Action{Kind: KindMoveInstance, Key: "instance:" + m.Consumer, LeaseID: lease.ID, Payload: m}
	}
	if err := tx.Enqueue(as...); err != nil {
		return err
	}
	tx.AfterCommit(func() {
		slog.Info("BEST-EFFORT lease clears hosts", "lease", lease.ID, "hosts", c.chosen, "moves", describeMoves(c.moves))
	})
	return nil
}

// provider is a root resource provider as the scavenger hunt sees it.
type provider struct {
	uuid, name string
	capacity   map[string]int64
	used       map[string]int64
	consumers  map[string]*consumerUse
}

type consumerUse struct {
	project, typ string
	usage        map[string]int64
}

// loadProviders reads every root provider with its capacity, usage and
// consumers (outside any transaction), with plain row scans: this is
// most of a plan's time (10,000 instances are 20,000 allocation rows).
func loadProviders(ctx context.Context, g *gorm.DB) (map[string]*provider, error) {
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	out := map[string]*provider{}
	err = db.EachRow(ctx, sqlDB, `SELECT rp.uuid, rp.name, rc.name, i.total, i.reserved, i.allocation_ratio
 FROM inventories i JOIN resource_providers rp ON rp.id = i.resource_provider_id
 JOIN resource_classes rc ON rc.id = i.resource_class_id
 WHERE rp.parent_provider_id IS NULL`, nil, func(rows *sql.Rows) error {
		var u, name, class string
		var total, reserved int64
		var ratio float64
		if err := rows.Scan(&u, &name, &class, &total, &reserved, &ratio); err != nil {
			return err
		}
		pr := out[u]
		if pr == nil {
			pr = &provider{uuid: u, name: name, capacity: map[string]int64{}, used: map[string]int64{}, consumers: map[string]*consumerUse{}}
			out[u] = pr
		}
		pr.capacity[class] = int64(float64(total-reserved) * ratio)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = db.EachRow(ctx, sqlDB, `SELECT rp.uuid, rc.name, c.uuid, c.project_id, ct.name, a.used
 FROM allocations a JOIN resource_providers rp ON rp.id = a.resource_provider_id
 JOIN resource_classes rc ON rc.id = a.resource_class_id
 JOIN consumers c ON c.uuid = a.consumer_id
 LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
 WHERE rp.parent_provider_id IS NULL`, nil, func(rows *sql.Rows) error {
		var u, class, consumer, project string
		var typ sql.NullString
		var used int64
		if err := rows.Scan(&u, &class, &consumer, &project, &typ, &used); err != nil {
			return err
		}
		pr := out[u]
		if pr == nil {
			return nil // allocations without inventory: nothing to plan with
		}
		pr.used[class] += used
		cu := pr.consumers[consumer]
		if cu == nil {
			cu = &consumerUse{project: project, typ: typ.String, usage: make(map[string]int64, 2)}
			pr.consumers[consumer] = cu
		}
		cu.usage[class] += used
		return nil
	})
	return out, err
}

// hostTags are a host's tags for the allocator's tag rules: each extra
// capability as "key:value" (e.g. a capability migration=a is the tag
// migration:a that htools:migration:migration makes a migration class).
func hostTags(h *Host) []string {
	tags := make([]string, 0, len(h.ExtraCapabilities))
	for k, v := range h.ExtraCapabilities {
		tags = append(tags, k+":"+v)
	}
	sort.Strings(tags)
	return tags
}

// PrepareClearing implements leases.Clearer: the hosts of a BEST-EFFORT
// reservation, clearing busy ones by moving other projects' instances
// (allocator.PlanScavenge), from the view and Placement's current
// allocations.
func (p *Plugin) PrepareClearing(ctx context.Context, lease plugins.Lease, r plugins.Request, fresh bool, earlier []any) (any, error) {
	ps, ok := r.(params)
	if !ok {
		return nil, fmt.Errorf("physical:host: request of type %T", r)
	}
	if !p.cfg.ClearHosts {
		return nil, plugins.Conflict("Not enough hosts are free now, and clearing hosts for a BEST-EFFORT lease is not supported with compute driver %s yet", p.cfg.Driver)
	}
	taken := takenBy(earlier)
	var in allocator.ScavengeInput
	var hostOf, nameOf map[string]string
	var err error
	if p.cfg.Compute != nil {
		// Planning hosts are named by their service host.
		in, hostOf, err = p.scavengeInputCompute(ctx, lease, ps, taken)
	} else {
		in, hostOf, nameOf, err = p.scavengeInputPlacement(ctx, lease, ps, taken)
	}
	if err != nil {
		return nil, err
	}
	var order *ownership.Order
	var left map[string]int
	if p.cfg.Ownership != nil {
		order = p.cfg.Ownership.HostOrder(lease.ProjectID)
		if left, err = budgets(ctx, p.db, order, allocator.Interval{Start: lease.Start, End: lease.End}, ""); err != nil {
			return nil, err
		}
	}
	plan, err := scavengeByPool(in, hostOf, order, left)
	var se *allocator.ScavengeError
	if errors.As(err, &se) {
		err = plugins.NotEnough("%s", se.Reason)
		if !fresh {
			err = fmt.Errorf("%w: %w", plugins.ErrStale, err)
		}
		return nil, err
	}
	if err != nil {
		return nil, notEnough(err)
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	c := &choice{ps: ps, taken: taken, req: allocator.HostRequest{Window: win, Cleaning: p.cfg.Cleaning, Min: ps.min, Max: ps.max},
		order: order, budgets: left}
	for _, u := range plan.Hosts {
		c.chosen = append(c.chosen, hostOf[u])
	}
	name := func(u string) string {
		if n, ok := nameOf[u]; ok {
			return n
		}
		return u
	}
	for _, m := range plan.Moves {
		c.moves = append(c.moves, move{Consumer: m.Instance, From: m.From, To: m.To, FromHost: name(m.From), ToHost: name(m.To)})
	}
	return c, nil
}

// scavengeInputPlacement builds the scavenger hunt's input from
// Leasehold's Placement (standalone mode: an instance is a consumer of
// type INSTANCE; planning hosts are root providers, named by uuid). It
// returns the input, the Blazar host id of each provider of a view's
// host, and the name the compute service knows each provider by.
func (p *Plugin) scavengeInputPlacement(ctx context.Context, lease plugins.Lease, ps params, taken map[string]bool) (allocator.ScavengeInput, map[string]string, map[string]string, error) {
	provs, err := loadProviders(ctx, p.db)
	if err != nil {
		return allocator.ScavengeInput{}, nil, nil, err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	now := p.now()
	in := allocator.ScavengeInput{Min: ps.min, Max: ps.max, Rules: p.cfg.Rules}
	classIdx := map[string]int{}
	vec := func(m map[string]int64) []int64 {
		v := make([]int64, len(in.Classes))
		for c, n := range m {
			v[classIdx[c]] = n
		}
		return v
	}
	// The classes first (vectors are built after).
	for _, pr := range provs {
		for c := range pr.capacity {
			if _, ok := classIdx[c]; !ok {
				classIdx[c] = len(in.Classes)
				in.Classes = append(in.Classes, c)
			}
		}
		for c := range pr.used {
			if _, ok := classIdx[c]; !ok {
				classIdx[c] = len(in.Classes)
				in.Classes = append(in.Classes, c)
			}
		}
	}
	hostOf := map[string]string{} // provider uuid → Blazar host id
	nameOf := map[string]string{}
	p.idx.mu.RLock()
	match := ps.match(p.idx.info)
	byProvider := map[string]int{}
	for i := range p.idx.infos {
		if u := p.idx.infos[i].ComputeProviderUUID; u != "" {
			byProvider[u] = i
		}
	}
	uuids := make([]string, 0, len(provs))
	for u := range provs {
		uuids = append(uuids, u)
	}
	sort.Strings(uuids)
	for _, u := range uuids {
		pr := provs[u]
		sh := allocator.ScavengeHost{ID: u, Capacity: vec(pr.capacity), Used: vec(pr.used), Target: true}
		nameOf[u] = pr.name
		if i, ok := byProvider[u]; ok {
			info, h := &p.idx.infos[i], &p.idx.hosts[i]
			hostOf[u] = info.ID
			// The name the compute service knows (as hostnames; the view
			// is locked here already).
			nameOf[u] = info.HypervisorHostname
			if info.ServiceName != "" {
				nameOf[u] = info.ServiceName
			}
			sh.Tags = hostTags(info)
			// No instance moves onto a host a lease holds now or later.
			sh.Target = !heldLater(h, now)
			eligible, held := p.eligibility(i, match, taken, lo, hi)
			sh.Eligible = eligible
			if held {
				in.NotEligible++
			}
		}
		cons := make([]string, 0, len(pr.consumers))
		for c := range pr.consumers {
			cons = append(cons, c)
		}
		sort.Strings(cons)
		for _, c := range cons {
			cu := pr.consumers[c]
			switch {
			case cu.project == lease.ProjectID:
			case cu.typ == instanceType:
				sh.Instances = append(sh.Instances, allocator.ScavengeInstance{ID: c, Usage: vec(cu.usage)})
			case sh.Pinned == "":
				typ := cu.typ
				if typ == "" {
					typ = "no type"
				}
				sh.Pinned = fmt.Sprintf("consumer %s (%s) of another project cannot be moved", c, typ)
			}
		}
		in.Hosts = append(in.Hosts, sh)
	}
	p.idx.mu.RUnlock()
	return in, hostOf, nameOf, nil
}

// describeMoves is a one-line account of moves (logs).
func describeMoves(ms []move) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Consumer + ": " + m.FromHost + " -> " + m.ToHost
	}
	return strings.Join(parts, ", ")
}

// heldLater reports whether a lease holds h now or later.
func heldLater(h *allocator.Host, now time.Time) bool {
	for _, b := range h.Busy {
		if b.End.After(now) {
			return true
		}
	}
	return false
}

// eligibility tells whether the view's host i may take the lease (it
// matches, is not taken by an earlier reservation of the request, and no
// lease holds it over [lo, hi)), and whether it matches but a lease holds
// it (for the refusal's count). The view is read-locked by the caller.
func (p *Plugin) eligibility(i int, match func(*allocator.Host) (bool, string), taken map[string]bool, lo, hi time.Time) (eligible, held bool) {
	info, h := &p.idx.infos[i], &p.idx.hosts[i]
	if taken[info.ID] {
		return false, false
	}
	if match != nil {
		if ok, _ := match(h); !ok {
			return false, false
		}
	}
	for _, b := range h.Busy {
		if b.End.After(b.Start) && b.End.After(lo) && b.Start.Before(hi) {
			return false, true
		}
	}
	return true, false
}

// withBusyNote adds to a refusal for lack of hosts which hosts other
// projects use now (they count as not matching): the user then knows a
// BEST-EFFORT lease could clear them.
func withBusyNote(err error, busy map[string]string) error {
	if len(busy) == 0 || !errs.Is(err, errs.NotEnoughResources) || errors.Is(err, plugins.ErrStale) {
		return err
	}
	ids := make([]string, 0, len(busy))
	for id := range busy {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	notes := make([]string, 0, len(ids))
	for _, id := range firstNStrings(ids, 3) {
		notes = append(notes, "host "+id+" "+busy[id])
	}
	if len(ids) > 3 {
		notes = append(notes, fmt.Sprintf("and %d more", len(ids)-3))
	}
	return plugins.NotEnough("%s; not counted: %s", err.Error(), strings.Join(notes, ", "))
}

func firstNStrings(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
