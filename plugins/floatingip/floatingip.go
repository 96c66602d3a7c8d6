// Package floatingip is the virtual:floatingip plugin in standalone mode:
// a reservation books `amount` addresses of one network's pool over the
// lease window, including every address of `required_floatingips`.
// Booking follows plugins/host's rule: choose from a (non-locking) read,
// lock the chosen addresses (blazar_resource_locks), re-check them with an
// indexed query and return plugins.ErrRetry on a conflict.
package floatingip

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// ResourceType is the Blazar resource type of this plugin.
const ResourceType = "virtual:floatingip"

// FIP is an address of the reservable pool.
type FIP struct {
	ID, NetworkID, Address string
	Reservable             bool
}

// Source lists the pool (pkg/blazar/hosts.Service).
type Source interface {
	ListFloatingIPs(ctx context.Context) ([]hosts.FloatingIP, error)
}

// Plugin implements plugins.Plugin for virtual:floatingip.
type Plugin struct {
	src Source
	now func() time.Time

	mu       sync.Mutex
	pool     []FIP
	loadedAt time.Time
	loaded   bool
}

// New returns the plugin.
func New(src Source) *Plugin { return &Plugin{src: src, now: time.Now} }

// poolTTL is how long the cached pool is used before a reload.
const poolTTL = 2 * time.Second

// Refresh implements plugins.Refresher: the pool is read outside the
// write transaction and cached briefly; force (after a refusal) reloads.
func (p *Plugin) Refresh(ctx context.Context, force bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loaded && !force && p.now().Sub(p.loadedAt) < poolTTL {
		return nil
	}
	fs, err := p.src.ListFloatingIPs(ctx)
	if err != nil {
		return err
	}
	pool := make([]FIP, len(fs))
	for i, f := range fs {
		pool[i] = FIP{ID: f.ID, NetworkID: f.FloatingNetworkID, Address: f.FloatingIPAddress, Reservable: f.Reservable}
	}
	p.pool, p.loadedAt, p.loaded = pool, p.now(), true
	return nil
}

func (p *Plugin) cachedPool() []FIP {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pool
}

// ResourceType implements plugins.Plugin.
func (p *Plugin) ResourceType() string { return ResourceType }

type params struct {
	network  string
	amount   int
	required []string
}

func parse(v plugins.Values, cur *params) (params, error) {
	var ps params
	if cur != nil {
		ps = *cur
	}
	if s, ok, err := v.String("network_id"); err != nil {
		return ps, err
	} else if ok {
		if cur != nil && s != cur.network {
			return ps, plugins.BadRequest("The network_id of a floating IP reservation cannot be changed")
		}
		ps.network = s
	} else if cur == nil {
		return ps, plugins.MissingParameter("network_id")
	}
	if ps.network == "" {
		return ps, plugins.MissingParameter("network_id")
	}
	if n, ok, err := v.Int("amount"); err != nil {
		return ps, err
	} else if ok {
		ps.amount = n
	} else if cur == nil {
		return ps, plugins.MissingParameter("amount")
	}
	if ps.amount < 1 {
		return ps, plugins.BadRequest("Invalid amount %d: at least 1 floating IP must be reserved", ps.amount)
	}
	if l, ok, err := v.StringList("required_floatingips"); err != nil {
		return ps, err
	} else if ok {
		if cur != nil && len(l) > 0 && !slices.Equal(l, cur.required) {
			return ps, plugins.BadRequest("required_floatingips of an existing reservation can only be changed to []")
		}
		ps.required = l
	}
	for _, a := range ps.required {
		if _, err := netip.ParseAddr(a); err != nil {
			return ps, plugins.BadRequest("IP address %s is invalid", a)
		}
	}
	if len(ps.required) > ps.amount {
		return ps, plugins.BadRequest("The number of required floating IPs (%d) exceeds the amount (%d)", len(ps.required), ps.amount)
	}
	return ps, nil
}

// Parse implements plugins.Plugin.
func (p *Plugin) Parse(v plugins.Values, _ plugins.Lease) (plugins.Request, error) {
	ps, err := parse(v, nil)
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// Fields implements plugins.Request.
func (ps params) Fields() map[string]any {
	req := []string{}
	if ps.required != nil {
		req = ps.required
	}
	return map[string]any{"network_id": ps.network, "amount": ps.amount, "required_floatingips": req}
}

// choose picks amount free addresses of the network (required ones
// first) over the window, keeping `keep` when still free.
func (p *Plugin) choose(ctx context.Context, tx *plugins.Tx, ps params, start, end time.Time, exclude string, keep []string) ([]string, error) {
	pool := p.cachedPool()
	var busy []string
	q := tx.WithContext(ctx).Model(&models.FloatingIPAllocation{}).Where("end_date > ? AND start_date < ?", start, end)
	if exclude != "" {
		q = q.Where("reservation_id <> ?", exclude)
	}
	if err := q.Pluck("floating_ip_id", &busy).Error; err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	for _, b := range busy {
		taken[b] = true
	}
	byAddr := map[string]FIP{}
	var free []FIP
	for _, f := range pool {
		if f.NetworkID != ps.network || !f.Reservable {
			continue
		}
		byAddr[f.Address] = f
		if !taken[f.ID] {
			free = append(free, f)
		}
	}
	var chosen []string
	has := map[string]bool{}
	add := func(id string) {
		if !has[id] && len(chosen) < ps.amount {
			has[id] = true
			chosen = append(chosen, id)
		}
	}
	for _, a := range ps.required {
		f, ok := byAddr[a]
		if !ok && !tx.Fresh {
			return nil, plugins.ErrStale
		}
		if !ok {
			return nil, plugins.BadRequest("Floating IP %s is not in the reservable pool of network %s", a, ps.network)
		}
		if taken[f.ID] {
			return nil, plugins.BadRequest("Not enough floating IPs available: %s is already reserved in this window", a)
		}
		add(f.ID)
	}
	for _, id := range keep {
		if !taken[id] {
			add(id)
		}
	}
	sort.Slice(free, func(i, j int) bool { return free[i].Address < free[j].Address })
	for _, f := range free {
		add(f.ID)
	}
	if len(chosen) < ps.amount && !tx.Fresh {
		return nil, plugins.ErrStale
	}
	if len(chosen) < ps.amount {
		return nil, plugins.BadRequest("Not enough floating IPs available: %d free in network %s for the window, %d needed", len(free), ps.network, ps.amount)
	}
	return chosen, nil
}

func lockAndCheck(ctx context.Context, tx *plugins.Tx, ids []string, start, end time.Time, exclude string) error {
	if err := plugins.LockResources(tx, ResourceType, ids); err != nil {
		return err
	}
	var n int64
	q := tx.WithContext(ctx).Model(&models.FloatingIPAllocation{}).
		Where("floating_ip_id IN ? AND end_date > ? AND start_date < ?", ids, start, end)
	if exclude != "" {
		q = q.Where("reservation_id <> ?", exclude)
	}
	if err := q.Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return plugins.ErrRetry
	}
	return nil
}

func insertAllocs(ctx context.Context, tx *plugins.Tx, resID string, ids []string, start, end time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	rows := make([]models.FloatingIPAllocation, len(ids))
	for i, id := range ids {
		rows[i] = models.FloatingIPAllocation{ID: uuid.NewString(), ReservationID: resID, FloatingIPID: id, StartDate: start, EndDate: end, CreatedAt: tx.Now}
	}
	return tx.WithContext(ctx).Create(&rows).Error
}

// Reserve implements plugins.Plugin.
func (p *Plugin) Reserve(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, res *models.Reservation, r plugins.Request) (string, error) {
	ps, ok := r.(params)
	if !ok {
		return "", fmt.Errorf("virtual:floatingip: request of type %T", r)
	}
	chosen, err := p.choose(ctx, tx, ps, lease.Start, lease.End, "", nil)
	if err != nil {
		return "", err
	}
	if err := lockAndCheck(ctx, tx, chosen, lease.Start, lease.End, ""); err != nil {
		return "", err
	}
	fr := models.FloatingIPReservation{ID: uuid.NewString(), ReservationID: res.ID, NetworkID: ps.network, Amount: ps.amount, CreatedAt: tx.Now}
	if err := tx.WithContext(ctx).Create(&fr).Error; err != nil {
		return "", err
	}
	for _, a := range ps.required {
		if err := tx.WithContext(ctx).Create(&models.RequiredFloatingIP{ID: uuid.NewString(), FloatingIPReservationID: fr.ID, Address: a}).Error; err != nil {
			return "", err
		}
	}
	if err := insertAllocs(ctx, tx, res.ID, chosen, lease.Start, lease.End); err != nil {
		return "", err
	}
	return fr.ID, nil
}

func load(ctx context.Context, g *gorm.DB, resID string) (*models.FloatingIPReservation, params, []string, error) {
	var fr models.FloatingIPReservation
	if err := g.WithContext(ctx).Where("reservation_id = ?", resID).Take(&fr).Error; err != nil {
		return nil, params{}, nil, fmt.Errorf("virtual:floatingip reservation %s: %w", resID, err)
	}
	ps := params{network: fr.NetworkID, amount: fr.Amount}
	if err := g.WithContext(ctx).Model(&models.RequiredFloatingIP{}).Where("floating_ip_reservation_id = ?", fr.ID).
		Order("address").Pluck("address", &ps.required).Error; err != nil {
		return nil, ps, nil, err
	}
	var held []string
	if err := g.WithContext(ctx).Model(&models.FloatingIPAllocation{}).Where("reservation_id = ?", resID).
		Pluck("floating_ip_id", &held).Error; err != nil {
		return nil, ps, nil, err
	}
	return &fr, ps, held, nil
}

// Update implements plugins.Plugin: amount may change, required addresses
// may only be cleared, and an active reservation keeps every address.
func (p *Plugin) Update(ctx context.Context, tx *plugins.Tx, old, lease plugins.Lease, res *models.Reservation, v plugins.Values) error {
	fr, cur, held, err := load(ctx, tx.DB, res.ID)
	if err != nil {
		return err
	}
	ps, err := parse(v, &cur)
	if err != nil {
		return err
	}
	shrinking := !lease.Start.Before(old.Start) && !lease.End.After(old.End)
	final := held
	if len(v) > 0 || !shrinking {
		if len(held) > ps.amount {
			if res.Status == "active" {
				return plugins.BadRequest("Cannot remove floating IPs from an active reservation")
			}
			held = held[:ps.amount]
		}
		final, err = p.choose(ctx, tx, ps, lease.Start, lease.End, res.ID, held)
		if err != nil {
			return err
		}
		if res.Status == "active" {
			for _, h := range held {
				if !slices.Contains(final, h) {
					return plugins.BadRequest("Not enough floating IPs available: a floating IP of active reservation %s is reserved by another lease in the new window", res.ID)
				}
			}
		}
		if err := lockAndCheck(ctx, tx, final, lease.Start, lease.End, res.ID); err != nil {
			return err
		}
	}
	if err := tx.WithContext(ctx).Model(&models.FloatingIPReservation{}).Where("id = ?", fr.ID).
		Updates(map[string]any{"amount": ps.amount, "updated_at": tx.Now}).Error; err != nil {
		return err
	}
	if len(ps.required) == 0 && len(cur.required) > 0 {
		if err := tx.WithContext(ctx).Where("floating_ip_reservation_id = ?", fr.ID).Delete(&models.RequiredFloatingIP{}).Error; err != nil {
			return err
		}
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.FloatingIPAllocation{}).Error; err != nil {
		return err
	}
	return insertAllocs(ctx, tx, res.ID, final, lease.Start, lease.End)
}

// OnStart implements plugins.Plugin (standalone: nothing to create).
func (p *Plugin) OnStart(context.Context, *plugins.Tx, plugins.Lease, *models.Reservation) error {
	return nil
}

// OnEnd implements plugins.Plugin: the addresses are released.
func (p *Plugin) OnEnd(ctx context.Context, tx *plugins.Tx, _ plugins.Lease, res *models.Reservation) error {
	return tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.FloatingIPAllocation{}).Error
}

// BeforeEnd implements plugins.Plugin.
func (p *Plugin) BeforeEnd(context.Context, *plugins.Tx, plugins.Lease, *models.Reservation) error {
	return nil
}

// Delete implements plugins.Plugin.
func (p *Plugin) Delete(ctx context.Context, tx *plugins.Tx, res *models.Reservation) error {
	var ids []string
	if err := tx.WithContext(ctx).Model(&models.FloatingIPReservation{}).Where("reservation_id = ?", res.ID).Pluck("id", &ids).Error; err != nil {
		return err
	}
	if len(ids) > 0 {
		if err := tx.WithContext(ctx).Where("floating_ip_reservation_id IN ?", ids).Delete(&models.RequiredFloatingIP{}).Error; err != nil {
			return err
		}
	}
	if err := tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.FloatingIPAllocation{}).Error; err != nil {
		return err
	}
	return tx.WithContext(ctx).Where("reservation_id = ?", res.ID).Delete(&models.FloatingIPReservation{}).Error
}

// Describe implements plugins.Plugin.
func (p *Plugin) Describe(ctx context.Context, g *gorm.DB, res []*models.Reservation) (map[string]map[string]any, error) {
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	var frs []models.FloatingIPReservation
	if err := g.WithContext(ctx).Where("reservation_id IN ?", ids).Find(&frs).Error; err != nil {
		return nil, err
	}
	frIDs := make([]string, len(frs))
	for i, f := range frs {
		frIDs[i] = f.ID
	}
	var reqs []models.RequiredFloatingIP
	if len(frIDs) > 0 {
		if err := g.WithContext(ctx).Where("floating_ip_reservation_id IN ?", frIDs).Order("address").Find(&reqs).Error; err != nil {
			return nil, err
		}
	}
	byFR := map[string][]string{}
	for _, r := range reqs {
		byFR[r.FloatingIPReservationID] = append(byFR[r.FloatingIPReservationID], r.Address)
	}
	out := map[string]map[string]any{}
	for _, f := range frs {
		req := byFR[f.ID]
		if req == nil {
			req = []string{}
		}
		out[f.ReservationID] = map[string]any{"network_id": f.NetworkID, "amount": f.Amount, "required_floatingips": req}
	}
	return out, nil
}

// DescribeListed is Describe for the reservations of every lease of
// project (of every project when project is nil), in two queries joined
// on the leases rather than IN lists of ids: the lease listing's read
// path.
func (p *Plugin) DescribeListed(ctx context.Context, d *sql.DB, project *string) (map[string]map[string]any, error) {
	join, where := "", ""
	var args []any
	if project != nil {
		join = " JOIN reservations r ON r.id = f.reservation_id JOIN leases l ON l.id = r.lease_id"
		where = " WHERE l.project_id = ?"
		args = append(args, *project)
	}
	byFR := map[string][]string{}
	err := db.EachRow(ctx, d, "SELECT q.floating_ip_reservation_id, q.address FROM required_floatingips q"+
		" JOIN floatingip_reservations f ON f.id = q.floating_ip_reservation_id"+join+where+" ORDER BY q.address", args,
		func(rows *sql.Rows) error {
			var fr, addr string
			if err := rows.Scan(&fr, &addr); err != nil {
				return err
			}
			byFR[fr] = append(byFR[fr], addr)
			return nil
		})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	err = db.EachRow(ctx, d, "SELECT f.id, f.reservation_id, f.network_id, f.amount FROM floatingip_reservations f"+join+where, args,
		func(rows *sql.Rows) error {
			var id, resID, network string
			var amount int
			if err := rows.Scan(&id, &resID, &network, &amount); err != nil {
				return err
			}
			req := byFR[id]
			if req == nil {
				req = []string{}
			}
			out[resID] = map[string]any{"network_id": network, "amount": amount, "required_floatingips": req}
			return nil
		})
	return out, err
}

var _ plugins.Plugin = (*Plugin)(nil)
