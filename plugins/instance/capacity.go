package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
)

// booking is one reservation's slots on one host.
type booking struct {
	Host     string    `gorm:"column:compute_host_id"`
	Res      string    `gorm:"column:reservation_id"`
	Start    time.Time `gorm:"column:start_date"`
	End      time.Time `gorm:"column:end_date"`
	Slots    int64     `gorm:"column:slots"`
	VCPUs    int64     `gorm:"column:vcpus"`
	MemoryMB int64     `gorm:"column:memory_mb"`
	DiskGB   int64     `gorm:"column:disk_gb"`
	// Source is the flavor a flavor:instance reservation copies (its
	// extra specs may change the classes it uses).
	Source string `gorm:"column:source_flavor"`
	// amt is the booking's size per slot on the choice's dimensions.
	amt allocator.SlotSize `gorm:"-"`
}

func (b *booking) size() allocator.SlotSize { return b.amt }

// project sets the bookings' sizes on the dimensions m (a flavor's
// demand read once per distinct flavor).
func project(bs []booking, m dims) {
	bySource := map[string]allocator.SlotSize{}
	for i := range bs {
		b := &bs[i]
		if b.Source == "" {
			b.amt = allocator.SlotSize{VCPUs: b.VCPUs, MemoryMB: b.MemoryMB, DiskGB: b.DiskGB}
			continue
		}
		amt, ok := bySource[b.Source]
		if !ok {
			d := storedDemand(allocator.SlotSize{VCPUs: b.VCPUs, MemoryMB: b.MemoryMB, DiskGB: b.DiskGB}, b.Source)
			amt = m.size(&d)
			bySource[b.Source] = amt
		}
		b.amt = amt
	}
}

// inClause appends " AND col IN (?,…)" for ids to q and args.
func inClause(q string, args []any, col string, ids []string) (string, []any) {
	if ids == nil {
		return q, args
	}
	var b strings.Builder
	b.WriteString(q)
	b.WriteString(" AND ")
	b.WriteString(col)
	b.WriteString(" IN (")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args = append(args, id)
	}
	b.WriteByte(')')
	return b.String(), args
}

// cutSet are the bookings, (reservation, host), that an owner's reclaim
// cuts to end by the window's start (cleaning included): the choice for
// the owner sees their hosts without them (reclaim.go).
type cutSet map[[2]string]bool

// loadBookings reads, for hostIDs (every host when nil), the instance
// slots overlapping [lo, hi) other than reservation exclude's and those
// of ignore, and the hosts with a whole-host booking overlapping it (not
// in ignore).
func loadBookings(ctx context.Context, tx *plugins.Tx, lo, hi time.Time, hostIDs []string, exclude string, m dims, ignore cutSet) ([]booking, map[string]bool, error) {
	if hostIDs != nil && len(hostIDs) == 0 {
		return nil, map[string]bool{}, nil
	}
	// A booking overlapping [lo, hi) starts in [lo - longest, hi): the
	// longest booking (an index seek) bounds the start dates scanned.
	var longest int64
	if err := tx.WithContext(ctx).Raw("SELECT COALESCE(MAX(span_s), 0) FROM instance_allocations").Scan(&longest).Error; err != nil {
		return nil, nil, fmt.Errorf("longest instance booking: %w", err)
	}
	q := `SELECT a.compute_host_id, a.reservation_id, a.start_date, a.end_date, a.slots, r.vcpus, r.memory_mb, r.disk_gb, r.source_flavor
 FROM instance_allocations a JOIN instance_reservations r ON r.reservation_id = a.reservation_id
 WHERE a.start_date < ? AND a.start_date >= ? AND a.end_date > ? AND a.reservation_id <> ?`
	q, args := inClause(q, []any{hi, lo.Add(-time.Duration(longest) * time.Second), lo, exclude}, "a.compute_host_id", hostIDs)
	var bs []booking
	if err := tx.WithContext(ctx).Raw(q, args...).Scan(&bs).Error; err != nil {
		return nil, nil, fmt.Errorf("instance bookings: %w", err)
	}
	if len(ignore) > 0 {
		bs = slices.DeleteFunc(bs, func(b booking) bool { return ignore[[2]string{b.Res, b.Host}] })
	}
	project(bs, m)
	// Whole-host bookings are the allocations of physical:host
	// reservations (there are few of those: drive the join from them;
	// CROSS JOIN keeps SQLite to that order).
	q = `SELECT DISTINCT c.compute_host_id, c.reservation_id FROM computehost_reservations h
 CROSS JOIN computehost_allocations c ON c.reservation_id = h.reservation_id
 WHERE c.end_date > ? AND c.start_date < ?`
	q, args = inClause(q, []any{lo, hi}, "c.compute_host_id", hostIDs)
	var whole []struct{ ComputeHostID, ReservationID string }
	if err := tx.WithContext(ctx).Raw(q, args...).Scan(&whole).Error; err != nil {
		return nil, nil, fmt.Errorf("host bookings: %w", err)
	}
	busy := make(map[string]bool, len(whole))
	for _, w := range whole {
		if !ignore[[2]string{w.ReservationID, w.ComputeHostID}] {
			busy[w.ComputeHostID] = true
		}
	}
	return bs, busy, nil
}

// usage is the use of bookings bs over [lo, hi): its per-resource peak
// and, as allocator.SlotSegments of capacity capa minus the use, the
// free capacity piece by piece (durations in seconds).
func usage(bs []*booking, lo, hi time.Time, capa allocator.SlotSize) (allocator.SlotSize, []allocator.SlotSegment) {
	type ev struct {
		t    time.Time
		sign int64
		b    *booking
	}
	evs := make([]ev, 0, 2*len(bs))
	for _, b := range bs {
		s, e := b.Start, b.End
		if s.Before(lo) {
			s = lo
		}
		if e.After(hi) {
			e = hi
		}
		if !s.Before(e) {
			continue
		}
		evs = append(evs, ev{s, 1, b}, ev{e, -1, b})
	}
	// Half-open windows: at one instant, ends go before starts.
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return int(a.sign - b.sign)
	})
	var cur, top allocator.SlotSize
	segs := make([]allocator.SlotSegment, 0, len(evs)+1)
	at := lo
	for _, e := range evs {
		if e.t.After(at) {
			segs = append(segs, allocator.SlotSegment{Dur: int64(e.t.Sub(at) / time.Second), Free: capa.Sub(cur, 1)})
			at = e.t
		}
		cur = cur.Sub(e.b.size(), -e.sign*e.b.Slots)
		top = top.Max(cur)
	}
	if hi.After(at) {
		segs = append(segs, allocator.SlotSegment{Dur: int64(hi.Sub(at) / time.Second), Free: capa.Sub(cur, 1)})
	}
	return top, segs
}

// capacityOf is a host's usable capacity on w's dimensions: its compute
// node provider's inventory, or the host's own numbers for VCPU,
// MEMORY_MB and DISK_GB when it has none of them (PCPU and custom
// classes count only as inventory). A class of which one instance asks
// for more than the inventory's max_unit has no room at all (Placement
// would refuse the allocation).
func capacityOf(h *hosts.Host, caps map[string]placement.ComputeCapacity, w *want) allocator.SlotSize {
	out := allocator.SlotSize{VCPUs: h.VCPUs, MemoryMB: h.MemoryMB, DiskGB: h.LocalGB}
	c, ok := caps[h.ComputeProviderUUID]
	if !ok {
		return out
	}
	if c.Has[0] {
		out.VCPUs = c.VCPUs
	}
	if c.Has[1] {
		out.MemoryMB = c.MemoryMB
	}
	if c.Has[2] {
		out.DiskGB = c.DiskGB
	}
	out.PCPUs = c.Other["PCPU"]
	for i, class := range w.m.custom {
		out.Custom[i] = c.Other[class]
	}
	if c.MaxUnit != nil {
		for _, a := range w.units {
			if mu, ok := c.MaxUnit[a.class]; ok && a.n > mu {
				return allocator.SlotSize{}
			}
		}
	}
	return out
}

// domainOf is a host's failure domain from the configured keys.
func (p *Plugin) domainOf(h *hosts.Host) string {
	var parts []string
	for _, k := range p.cfg.DomainKeys {
		if v, ok := h.Lookup(k); ok && v != "" {
			parts = append(parts, k+":"+v)
		}
	}
	if p.cfg.Rules != nil && len(p.cfg.Rules.LocationPrefixes) > 0 {
		tags := make([]string, 0, len(h.ExtraCapabilities))
		for k, v := range h.ExtraCapabilities {
			tags = append(tags, k+":"+v)
		}
		parts = append(parts, p.cfg.Rules.LocationTags(tags)...)
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), ",")
}

// choose picks the slots of a reservation with parameters ps over win,
// leaving out reservation resID's own bookings; held are the slots an
// active reservation keeps. It reads everything in tx and, on MySQL,
// locks the chosen hosts and checks them again (see the package
// documentation).
//
// With an ownership order o (nil: ownership off) the slots come from the
// project's pools (stagedSlots) and the returned byPool says where each
// host's new slots came from.
//
// The bookings of ignore are left out of the use read (before and under
// the locks): an owner's reclaim cuts them in the same transaction.
// stages bounds the prefixes of o's pools tried (0: all).
func (p *Plugin) choose(ctx context.Context, tx *plugins.Tx, ps params, win allocator.Interval, resID string, held map[string]int, o *ownership.Order, ignore cutSet, stages int) (allocator.SlotDecision, *byPool, error) {
	all, err := p.hostList(ctx)
	if err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	if err := p.checkExternal(&ps); err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	var bp *byPool
	if o != nil {
		b, err := lenderBudgets(ctx, tx, o, win, resID)
		if err != nil {
			return allocator.SlotDecision{}, nil, err
		}
		bp = &byPool{order: o, budgets: b, stages: stages}
	}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	excluded := map[string]bool{}
	for attempt := 0; ; attempt++ {
		dec, tops, err := p.chooseOnce(ctx, tx, all, ps, lo, hi, resID, held, excluded, bp, ignore)
		if err != nil {
			var ne *allocator.NotEnoughSlotsError
			if errors.As(err, &ne) {
				if !tx.Fresh {
					return dec, nil, fmt.Errorf("%w: %w", plugins.ErrStale, err)
				}
				return dec, nil, plugins.NotEnough("%s", err.Error()) // with the lending limits that left hosts out
			}
			if errors.Is(err, allocator.ErrInvalidRequest) {
				return dec, nil, plugins.BadRequest("%s", err.Error())
			}
			var ue *unservedError
			if errors.As(err, &ue) {
				if !tx.Fresh {
					return dec, nil, fmt.Errorf("%w: %w", plugins.ErrStale, err)
				}
				return dec, nil, plugins.BadRequest("%s", ue.Error())
			}
			return dec, nil, err
		}
		lost, err := p.lockAndCheck(ctx, tx, all, ps, lo, hi, resID, dec, held, tops, ignore)
		if err != nil {
			return dec, nil, err
		}
		if len(lost) == 0 && bp != nil && tx.Dialect != db.SQLite {
			if lost, err = partsLost(ctx, tx, bp, dec, held, lo, hi, resID, wantOf(&ps).m, wantOf(&ps).size, ignore); err != nil {
				return dec, nil, err
			}
		}
		if len(lost) == 0 {
			if bp != nil {
				if err := checkLenders(ctx, tx, bp, dec, win, resID); err != nil {
					return dec, nil, err
				}
			}
			return dec, bp, nil
		}
		if attempt >= p.cfg.MaxReplans {
			return dec, nil, plugins.ErrRetry
		}
		for _, h := range lost {
			if held[h] == 0 {
				excluded[h] = true
			}
		}
		p.caps.invalidate()
	}
}

// chooseOnce reads the use of the matching hosts and runs the allocator.
func (p *Plugin) chooseOnce(ctx context.Context, tx *plugins.Tx, all []hosts.Host, ps params, lo, hi time.Time, resID string, held map[string]int, excluded map[string]bool, bp *byPool, ignore cutSet) (allocator.SlotDecision, map[string]allocator.SlotSize, error) {
	w := wantOf(&ps)
	caps, err := p.caps.get(ctx, tx, all, tx.Fresh, p.computeCapacities)
	if err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	var matching []*hosts.Host
	seen := map[string]bool{}
	nExcluded := 0 // excluded hosts still match: the reserve counts them
	for i := range all {
		h := &all[i]
		if excluded[h.ID] {
			if ok, _ := ps.query.Match(h.Lookup); ok && w.d.hostOK(caps[h.ComputeProviderUUID].Traits) {
				nExcluded++
			}
			continue
		}
		if held[h.ID] == 0 {
			if ok, _ := ps.query.Match(h.Lookup); !ok {
				continue
			}
			if !w.d.hostOK(caps[h.ComputeProviderUUID].Traits) {
				continue
			}
		}
		matching = append(matching, h)
		seen[h.ID] = true
	}
	// Held slots on hosts no longer reservable stay there, checked
	// against the new window like the others, and take nothing more.
	var unlisted []string
	for _, id := range sortedKeys(held) {
		if !seen[id] && held[id] > 0 {
			unlisted = append(unlisted, id)
		}
	}
	closed, err := hostRows(ctx, tx, unlisted)
	if err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	var ids []string
	for _, h := range matching {
		ids = append(ids, h.ID)
	}
	ids = append(ids, unlisted...)
	// Many hosts: one range scan over the window beats a long IN list.
	scan := ids
	if len(ids) > 200 {
		scan = nil
	}
	bs, busy, err := loadBookings(ctx, tx, lo, hi, scan, resID, w.m, ignore)
	if err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	byHost := map[string][]*booking{}
	sizes := slices.Clone(p.cfg.Sizes)
	for i := range bs {
		b := &bs[i]
		byHost[b.Host] = append(byHost[b.Host], b)
		if len(p.cfg.Sizes) == 0 && !slices.Contains(sizes, b.size()) {
			sizes = append(sizes, b.size())
		}
	}
	var offered allocator.SlotSize // what the matching hosts have at all, per dimension
	capas := make([]allocator.SlotSize, len(matching))
	for i, h := range matching {
		capas[i] = capacityOf(h, caps, w)
		offered = offered.Max(capas[i])
	}
	if err := w.served(offered, len(matching)); err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	slotHosts := make([]allocator.SlotHost, 0, len(matching)+len(closed))
	tops := make(map[string]allocator.SlotSize, len(matching))
	for i, h := range matching {
		if busy[h.ID] && held[h.ID] == 0 {
			continue
		}
		capa := capas[i]
		top, segs := usage(byHost[h.ID], lo, hi, capa)
		tops[h.ID] = top
		sh := allocator.SlotHost{ID: h.ID, Domain: p.domainOf(h), Capacity: capa,
			Free: capa.Sub(top, 1), Profile: segs, Held: held[h.ID]}
		if busy[h.ID] {
			// A whole-host booking in the window: held slots do not fit.
			sh.Free, sh.Profile = allocator.SlotSize{}, nil
		}
		slotHosts = append(slotHosts, sh)
	}
	if len(closed) > 0 {
		var uuids []string
		for i := range closed {
			uuids = append(uuids, closed[i].ComputeProviderUUID)
		}
		ccaps, err := p.computeCapacities(ctx, tx, uuids)
		if err != nil {
			return allocator.SlotDecision{}, nil, err
		}
		for i := range closed {
			h := &closed[i]
			capa := capacityOf(h, ccaps, w)
			top, _ := usage(byHost[h.ID], lo, hi, capa)
			free := capa.Sub(top, 1)
			if busy[h.ID] {
				free = allocator.SlotSize{}
			}
			// At most the held slots: nothing new on a closed host.
			room := allocator.SlotSize{}.Sub(w.size, -int64(held[h.ID]))
			free = free.Min(room)
			slotHosts = append(slotHosts, allocator.SlotHost{ID: h.ID, Free: free, Capacity: capa, Held: held[h.ID]})
		}
	}
	req := w.request(&ps)
	req.Sizes, req.WholeReservePercent, req.MatchingHosts = sizes, p.cfg.WholeReservePercent, len(matching)+nExcluded
	if bp == nil {
		dec, err := allocator.ChooseSlots(slotHosts, req)
		return dec, tops, err
	}
	var split []string
	for _, sh := range slotHosts {
		if bp.order.Split(sh.ID) {
			split = append(split, sh.ID)
		}
	}
	owners, err := partOwners(ctx, tx, split)
	if err != nil {
		return allocator.SlotDecision{}, nil, err
	}
	heldPart := func(h string) (string, bool) {
		o, ok := owners[[2]string{resID, h}]
		return o, ok
	}
	dec, picks, err := stagedSlots(bp.order, bp.budgets, bp.stages, slotHosts, w.size, partPeaks(byHost, owners, lo, hi), heldPart,
		func(hs []allocator.SlotHost, freeOutside int) (allocator.SlotDecision, error) {
			r := req
			r.FreeOutside = freeOutside
			return allocator.ChooseSlots(hs, r)
		})
	bp.picks = picks
	return dec, tops, err
}

// hostRows reads the hosts with ids (API ids) from the database: the
// fields the capacity needs, for hosts the reservable list lacks.
func hostRows(ctx context.Context, tx *plugins.Tx, ids []string) ([]hosts.Host, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	nums := make([]int64, 0, len(ids))
	for _, id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			nums = append(nums, n)
		}
	}
	var rows []struct {
		ID                  int64
		ComputeProviderUUID string
		VCPUs               int64 `gorm:"column:vcpus"`
		MemoryMB            int64
		LocalGB             int64
	}
	if err := tx.WithContext(ctx).Raw("SELECT id, compute_provider_uuid, vcpus, memory_mb, local_gb FROM computehosts WHERE id IN ?", nums).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]hosts.Host, len(rows))
	for i, r := range rows {
		out[i] = hosts.Host{ID: strconv.FormatInt(r.ID, 10), ComputeProviderUUID: r.ComputeProviderUUID, VCPUs: r.VCPUs, MemoryMB: r.MemoryMB, LocalGB: r.LocalGB}
	}
	return out, nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lockAndCheck locks the chosen hosts and returns those that can no
// longer take their slots: deleted or made non-reservable (hosts getting
// new slots), with less capacity than the (cached) capacity the choice
// used, or, on MySQL, filled by a booking committed since they were read.
// tops are the peak uses the choice saw.
func (p *Plugin) lockAndCheck(ctx context.Context, tx *plugins.Tx, all []hosts.Host, ps params, lo, hi time.Time, resID string, dec allocator.SlotDecision, held map[string]int, tops map[string]allocator.SlotSize, ignore cutSet) ([]string, error) {
	ids := dec.Order
	if len(ids) == 0 {
		return nil, nil
	}
	if tx.Dialect != db.SQLite {
		if err := plugins.LockResources(tx, hostLockType, ids); err != nil {
			return nil, err
		}
	}
	w := wantOf(&ps)
	var lost []string
	var fresh []string // hosts getting new slots
	for _, id := range ids {
		if dec.Slots[id] > held[id] {
			fresh = append(fresh, id)
		}
	}
	if p.cfg.CheckHosts != nil && len(fresh) > 0 {
		ok, err := p.cfg.CheckHosts(tx.WithContext(ctx), fresh)
		if err != nil {
			return nil, err
		}
		for _, id := range fresh {
			if !ok[id] {
				lost = append(lost, id)
			}
		}
		if len(lost) > 0 {
			return lost, nil
		}
	}
	byID := map[string]*hosts.Host{}
	for i := range all {
		if dec.Slots[all[i].ID] > 0 {
			byID[all[i].ID] = &all[i]
		}
	}
	var unlisted []string
	for _, id := range ids {
		if byID[id] == nil {
			unlisted = append(unlisted, id)
		}
	}
	closed, err := hostRows(ctx, tx, unlisted)
	if err != nil {
		return nil, err
	}
	for i := range closed {
		byID[closed[i].ID] = &closed[i]
	}
	var uuids []string
	for _, h := range byID {
		if h.ComputeProviderUUID != "" {
			uuids = append(uuids, h.ComputeProviderUUID)
		}
	}
	slices.Sort(uuids)
	// The capacities the choice used may be cached: read those of the
	// chosen hosts again.
	caps, err := p.computeCapacities(ctx, tx, uuids)
	if err != nil {
		return nil, err
	}
	var busy map[string]bool
	if tx.Dialect != db.SQLite || len(closed) > 0 {
		// MySQL: bookings committed by others since the choice read them
		// (the locks now keep new ones out). SQLite: the transaction is
		// the only writer and what it read holds, but hosts outside the
		// reservable list had no peak computed.
		bs, b, err := loadBookings(ctx, tx, lo, hi, ids, resID, w.m, ignore)
		if err != nil {
			return nil, err
		}
		busy = b
		byHost := map[string][]*booking{}
		for i := range bs {
			byHost[bs[i].Host] = append(byHost[bs[i].Host], &bs[i])
		}
		tops = map[string]allocator.SlotSize{}
		for _, id := range ids {
			if h := byID[id]; h != nil {
				tops[id], _ = usage(byHost[id], lo, hi, capacityOf(h, caps, w))
			}
		}
	}
	for _, id := range ids {
		h := byID[id]
		if h == nil || busy[id] {
			lost = append(lost, id)
			continue
		}
		if capacityOf(h, caps, w).Sub(tops[id], 1).Fits(w.size) < dec.Slots[id] {
			lost = append(lost, id)
			continue
		}
		// Traits read again: a host getting new slots must still have
		// those the flavor requires (and none it forbids).
		if dec.Slots[id] > held[id] && !w.d.hostOK(caps[h.ComputeProviderUUID].Traits) {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// capCache keeps the compute capacities of the reservable hosts for a
// while (they change when an operator edits inventories): the choice
// uses it, and lockAndCheck reads the chosen hosts' capacities again.
type capCache struct {
	mu    sync.Mutex
	hosts []hosts.Host
	at    time.Time
	caps  map[string]placement.ComputeCapacity
}

// capTTL is how long cached capacities are used for choosing.
const capTTL = 10 * time.Second

func (c *capCache) invalidate() {
	c.mu.Lock()
	c.caps = nil
	c.mu.Unlock()
}

// get returns the capacities of all's compute providers, read by read
// when the cache is missing, older than capTTL, for another host list,
// or force is set.
func (c *capCache) get(ctx context.Context, tx *plugins.Tx, all []hosts.Host, force bool,
	read func(context.Context, *plugins.Tx, []string) (map[string]placement.ComputeCapacity, error)) (map[string]placement.ComputeCapacity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	same := len(all) == len(c.hosts) && (len(all) == 0 || &all[0] == &c.hosts[0])
	if c.caps != nil && same && !force && now.Sub(c.at) < capTTL {
		return c.caps, nil
	}
	uuids := make([]string, 0, len(all))
	for i := range all {
		if u := all[i].ComputeProviderUUID; u != "" {
			uuids = append(uuids, u)
		}
	}
	caps, err := read(ctx, tx, uuids)
	if err != nil {
		return nil, err
	}
	c.hosts, c.at, c.caps = all, now, caps
	return caps, nil
}
