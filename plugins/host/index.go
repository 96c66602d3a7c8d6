package host

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// index is the in-memory view the allocator chooses from: the reservable
// hosts with, per host, the windows already booked. It is only a view:
// every booking is re-checked under a lock in the write transaction (see
// the package documentation), so a stale index costs a retry, never a
// double booking.
type index struct {
	mu    sync.RWMutex
	hosts []allocator.Host // Busy filled from the allocations, sorted by start
	resOf [][]string       // resOf[i][k] is the reservation of hosts[i].Busy[k]
	// disjoint[i] is true when hosts[i].Busy do not overlap (then their
	// ends are sorted too, and view can pass the allocator only the
	// bookings around the window).
	disjoint []bool
	// sorted[i] is disjoint[i] with no empty booking: hosts[i] then meets
	// allocator.PreparedHosts' contract with bounds[i].
	sorted []bool
	// bounds[i] holds the start and end of hosts[i].Busy[k] in Unix
	// nanoseconds at [2k] and [2k+1] (for around's binary searches).
	bounds [][]int64
	infos  []Host
	pos    map[string]int
	// ranks are the hosts' size ranks (allocator.SizeRanks over the whole
	// view; zeros when every host has the same size).
	ranks []int32
	// tagKeys are the host fields or extra capabilities that name failure
	// domains (Config.Rules' location prefixes): a host whose key k has
	// the value v carries the allocator tag "k:v".
	tagKeys []string
	// withTags is set when the rules name exclusion tags: the view then
	// keeps each booked reservation's lease tags (tagsOf, by reservation
	// id) for exclusionBookings.
	withTags bool
	tagsOf   map[string]leaseTags
	loaded   bool
	// hostsAt and allocsAt are when hosts and allocations were last
	// loaded in full.
	hostsAt, allocsAt time.Time
}

type allocRow struct {
	ComputeHostID string
	ReservationID string
	StartDate     time.Time
	EndDate       time.Time
	// LeaseID and LeaseTags are the reservation's lease and its stored
	// tags (loaded only withTags; nil: none).
	LeaseID   string
	LeaseTags *string
}

// loadAllocs reads the bookings of hostIDs (nil: all); withTags joins
// each one's lease tags in.
func loadAllocs(ctx context.Context, g *gorm.DB, hostIDs []string, withTags bool) ([]allocRow, error) {
	var rows []allocRow
	q := g.WithContext(ctx).Table("computehost_allocations a").
		Select("a.compute_host_id, a.reservation_id, a.start_date, a.end_date")
	if withTags {
		q = q.Select("a.compute_host_id, a.reservation_id, a.start_date, a.end_date, r.lease_id, l.tags AS lease_tags").
			Joins("LEFT JOIN reservations r ON r.id = a.reservation_id").
			Joins("LEFT JOIN leases l ON l.id = r.lease_id")
	}
	if hostIDs != nil {
		q = q.Where("a.compute_host_id IN ?", hostIDs)
	}
	err := q.Scan(&rows).Error
	return rows, err
}

// reload replaces the whole view: hosts from src, allocations from g. The
// new view is built without holding the lock, then swapped in: bookings
// committed meanwhile may be missing from it, which the in-transaction
// re-check catches (a retry), never a double booking.
func (x *index) reload(ctx context.Context, src Source, g *gorm.DB, now time.Time) error {
	infos, err := src.Reservable(ctx)
	if err != nil {
		return err
	}
	rows, err := loadAllocs(ctx, g, nil, x.withTags)
	if err != nil {
		return err
	}
	nx := index{tagKeys: x.tagKeys, withTags: x.withTags}
	nx.setHostsLocked(infos)
	nx.addRowsLocked(rows)
	nx.packBoundsLocked()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.hosts, x.resOf, x.infos, x.pos = nx.hosts, nx.resOf, nx.infos, nx.pos
	x.disjoint, x.bounds, x.sorted = nx.disjoint, nx.bounds, nx.sorted
	x.ranks = nx.ranks
	x.tagsOf = nx.tagsOf
	x.loaded = true
	x.hostsAt, x.allocsAt = now, now
	return nil
}

// reloadHosts refreshes the host list, keeping the known bookings and
// loading those of hosts new to the view.
func (x *index) reloadHosts(ctx context.Context, src Source, g *gorm.DB, now time.Time) error {
	infos, err := src.Reservable(ctx)
	if err != nil {
		return err
	}
	x.mu.RLock()
	same := len(infos) == len(x.infos) && (len(infos) == 0 || &infos[0] == &x.infos[0])
	x.mu.RUnlock()
	if same {
		// The source returned its cached list: nothing changed.
		return nil
	}
	x.mu.RLock()
	var fresh []string
	for _, h := range infos {
		if _, ok := x.pos[h.ID]; !ok {
			fresh = append(fresh, h.ID)
		}
	}
	x.mu.RUnlock()
	var rows []allocRow
	if len(fresh) > 0 {
		if rows, err = loadAllocs(ctx, g, fresh, x.withTags); err != nil {
			return err
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	oldHosts, oldRes, oldPos := x.hosts, x.resOf, x.pos
	x.setHostsLocked(infos)
	for i := range x.hosts {
		if j, ok := oldPos[x.hosts[i].ID]; ok {
			x.hosts[i].Busy, x.resOf[i] = oldHosts[j].Busy, oldRes[j]
			x.sortHostLocked(i)
		}
	}
	x.addRowsLocked(rows)
	x.packBoundsLocked()
	x.hostsAt = now
	return nil
}

// boundsSlack is the room left after each host's bounds by
// packBoundsLocked, so a few new bookings are recorded in place.
const boundsSlack = 8

// packBoundsLocked moves every host's bounds into one array, in host
// order (the allocator then reads them sequentially), each followed by
// some room; a host without bookings gets empty bounds and is sorted.
func (x *index) packBoundsLocked() {
	total := 0
	for _, b := range x.bounds {
		total += len(b) + boundsSlack
	}
	arena := make([]int64, total)
	off := 0
	for i, b := range x.bounds {
		if b == nil && len(x.hosts[i].Busy) > 0 {
			continue // not sorted yet
		}
		n := copy(arena[off:], b)
		x.bounds[i] = arena[off : off+n : off+n+boundsSlack]
		if len(x.hosts[i].Busy) == 0 {
			x.disjoint[i], x.sorted[i] = true, true
		}
		off += n + boundsSlack
	}
}

func (x *index) setHostsLocked(infos []Host) {
	x.infos = infos
	x.hosts = make([]allocator.Host, len(infos))
	x.resOf = make([][]string, len(infos))
	x.disjoint = make([]bool, len(infos))
	x.sorted = make([]bool, len(infos))
	x.bounds = make([][]int64, len(infos))
	x.pos = make(map[string]int, len(infos))
	for i := range infos {
		h := &infos[i]
		x.hosts[i] = allocator.Host{ID: h.ID, Name: h.HypervisorHostname,
			VCPUs: h.VCPUs, MemoryMB: h.MemoryMB, DiskGB: h.LocalGB, Tags: domainTags(h, x.tagKeys)}
		x.pos[h.ID] = i
	}
	x.ranks = allocator.SizeRanks(x.hosts)
	if x.ranks == nil {
		// All one size: zeros, so the allocator need not find that out
		// again on every choice.
		x.ranks = make([]int32, len(x.hosts))
	}
}

// domainTags are host h's failure-domain tags: "k:v" for every key k of
// keys that h has (a field or an extra capability) with a value v.
func domainTags(h *Host, keys []string) []string {
	var tags []string
	for _, k := range keys {
		if v, ok := h.Lookup(k); ok && v != "" {
			tags = append(tags, k+":"+v)
		}
	}
	return tags
}

// domainsOf are the failure-domain tags of the hosts ids (one entry per
// host and tag), for allocator.HostRequest.UsedDomains.
func (x *index) domainsOf(ids []string) []string {
	if len(x.tagKeys) == 0 || len(ids) == 0 {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []string
	for _, id := range ids {
		if i, ok := x.pos[id]; ok {
			out = append(out, x.hosts[i].Tags...)
		}
	}
	return out
}

func (x *index) addRowsLocked(rows []allocRow) {
	touched := map[int]bool{}
	for _, r := range rows {
		i, ok := x.pos[r.ComputeHostID]
		if !ok {
			continue
		}
		x.hosts[i].Busy = append(x.hosts[i].Busy, allocator.Interval{Start: r.StartDate.UTC(), End: r.EndDate.UTC()})
		x.resOf[i] = append(x.resOf[i], r.ReservationID)
		touched[i] = true
		if x.withTags && r.LeaseTags != nil {
			x.setTagsLocked(r.ReservationID, r.LeaseID, decodeLeaseTags(*r.LeaseTags))
		}
	}
	for i := range touched {
		x.sortHostLocked(i)
	}
}

// sortHostLocked sorts host i's bookings by start and records whether
// they are disjoint.
func (x *index) sortHostLocked(i int) {
	busy, res := x.hosts[i].Busy, x.resOf[i]
	if !sort.IsSorted(byStart{busy, res}) {
		sort.Sort(byStart{busy, res})
	}
	ok, nonEmpty := true, true
	for k := range busy {
		if k > 0 && busy[k].Start.Before(busy[k-1].End) {
			ok = false
		}
		if !busy[k].End.After(busy[k].Start) {
			nonEmpty = false
		}
	}
	x.disjoint[i] = ok
	x.sorted[i] = ok && nonEmpty
	b := x.bounds[i][:0]
	for _, iv := range busy {
		b = append(b, iv.Start.UnixNano(), iv.End.UnixNano())
	}
	x.bounds[i] = b
}

type byStart struct {
	iv  []allocator.Interval
	res []string
}

func (b byStart) Len() int           { return len(b.iv) }
func (b byStart) Less(i, j int) bool { return b.iv[i].Start.Before(b.iv[j].Start) }
func (b byStart) Swap(i, j int) {
	b.iv[i], b.iv[j] = b.iv[j], b.iv[i]
	b.res[i], b.res[j] = b.res[j], b.res[i]
}

// around returns the part of sorted, disjoint bookings the allocator needs
// for the window [lo, hi): the ones overlapping it plus the nearest one on
// each side (for its fit score). The allocator then finds the same
// conflicts and the same fit as with all of them (TestAroundSameDecision),
// zero-length bookings aside (they are ignored for conflicts and may hide
// a neighbour from the fit score).
func around(busy []allocator.Interval, bounds []int64, lo, hi int64) []allocator.Interval {
	n := len(busy)
	if n <= 3 {
		return busy
	}
	// k: first booking ending after lo; j: first starting at or after hi.
	k := sort.Search(n, func(i int) bool { return bounds[2*i+1] > lo })
	j := k + sort.Search(n-k, func(i int) bool { return bounds[2*(k+i)] >= hi })
	return busy[max(k-1, 0):min(j+1, n)]
}

func boundsOf(busy []allocator.Interval) []int64 {
	b := make([]int64, 0, 2*len(busy))
	for _, iv := range busy {
		b = append(b, iv.Start.UnixNano(), iv.End.UnixNano())
	}
	return b
}

// replaceHosts sets the bookings of hostIDs to rows (after a conflict
// showed the view was stale for them).
func (x *index) replaceHosts(hostIDs []string, rows []allocRow) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range hostIDs {
		if i, ok := x.pos[id]; ok {
			x.hosts[i].Busy, x.resOf[i] = nil, nil
			x.sortHostLocked(i)
		}
	}
	x.addRowsLocked(rows)
}

// setReservation makes the view hold exactly the bookings rows of
// reservation resID (after a commit); oldHostIDs are the hosts that held
// its previous bookings. rows may be empty (deleted).
func (x *index) setReservation(resID string, oldHostIDs []string, rows []allocRow) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range oldHostIDs {
		i, ok := x.pos[id]
		if !ok || !slices.Contains(x.resOf[i], resID) {
			continue
		}
		busy := make([]allocator.Interval, 0, len(x.resOf[i]))
		res := make([]string, 0, len(x.resOf[i]))
		for k, r := range x.resOf[i] {
			if r != resID {
				busy = append(busy, x.hosts[i].Busy[k])
				res = append(res, r)
			}
		}
		x.hosts[i].Busy, x.resOf[i] = busy, res
		x.sortHostLocked(i)
	}
	x.addRowsLocked(rows)
}

// hostBufs recycles the per-request host slices given to the allocator.
var hostBufs sync.Pool

// view runs fn with the hosts under the read lock, each with only the
// bookings that matter for the window [lo, hi) (see around). When exclude
// is not empty, the bookings of that reservation are left out, and only
// hosts whose id keep allows are passed (nil keeps all).
func (x *index) view(loT, hiT time.Time, exclude string, keep func(id string) bool, fn func(hosts []allocator.Host, ranks []int32, info func(id string) *Host)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	lo, hi := loT.UnixNano(), hiT.UnixNano()
	var hosts []allocator.Host
	if b, ok := hostBufs.Get().(*[]allocator.Host); ok && cap(*b) >= len(x.hosts) {
		hosts = (*b)[:0]
	} else {
		hosts = make([]allocator.Host, 0, len(x.hosts))
	}
	// The ranks of the whole view, not of the hosts kept: a host's rank
	// must not depend on which others the caller looks at.
	ranks := make([]int32, 0, len(x.hosts))
	for i, h := range x.hosts {
		if keep != nil && !keep(h.ID) {
			continue
		}
		ranks = append(ranks, x.ranks[i])
		bounds := x.bounds[i]
		if exclude != "" && slices.Contains(x.resOf[i], exclude) {
			busy := make([]allocator.Interval, 0, len(h.Busy))
			for k, r := range x.resOf[i] {
				if r != exclude {
					busy = append(busy, h.Busy[k])
				}
			}
			h.Busy, bounds = busy, boundsOf(busy)
		}
		if x.disjoint[i] {
			h.Busy = around(h.Busy, bounds, lo, hi)
		}
		hosts = append(hosts, h)
	}
	fn(hosts, ranks, x.info)
	clear(hosts)
	hostBufs.Put(&hosts)
}

// info returns the host with id, or nil; the caller holds the lock.
func (x *index) info(id string) *Host {
	if i, ok := x.pos[id]; ok {
		return &x.infos[i]
	}
	return nil
}

// choose runs allocator.ChoosePrepared on the whole view under the read
// lock (the hot path of a new reservation: no per-request copy of the
// hosts, one binary search per host).
func (x *index) choose(rules *allocator.TagRules, req allocator.HostRequest, match func(info func(id string) *Host) func(*allocator.Host) (bool, string)) (allocator.HostDecision, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	req.Match = match(x.info)
	return allocator.ChoosePrepared(rules, allocator.PreparedHosts{Hosts: x.hosts, Bounds: x.bounds, Sorted: x.sorted, Ranks: x.ranks}, req, allocator.ChooseOptions{OmitRejected: true})
}

// earliest runs allocator.EarliestWindow on the whole view under the read
// lock.
func (x *index) earliest(req allocator.EarliestRequest, match func(info func(id string) *Host) func(*allocator.Host) (bool, string)) (allocator.EarliestResult, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	req.Match = match(x.info)
	return allocator.EarliestWindow(allocator.PreparedHosts{Hosts: x.hosts, Bounds: x.bounds, Sorted: x.sorted, Ranks: x.ranks}, req)
}

// leaseTags are a booked reservation's lease and its tags.
type leaseTags struct {
	lease string
	tags  []string
}

// setTagsLocked records reservation resID's lease and its tags (no entry
// for none).
func (x *index) setTagsLocked(resID, leaseID string, tags []string) {
	if len(tags) == 0 {
		return
	}
	if x.tagsOf == nil {
		x.tagsOf = map[string]leaseTags{}
	}
	x.tagsOf[resID] = leaseTags{lease: leaseID, tags: tags}
}

// exclusionBookings lists the bookings overlapping win whose lease has
// tags (withTags), for allocator.TagRules.WithExclusion; the bookings of
// lease exclude (its own, counted by the spread already) are left out.
func (x *index) exclusionBookings(win allocator.Interval, exclude string) []allocator.TaggedBooking {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.tagsOf) == 0 {
		return nil
	}
	var out []allocator.TaggedBooking
	for i := range x.hosts {
		for k, b := range x.hosts[i].Busy {
			if !b.Start.Before(win.End) || !win.Start.Before(b.End) {
				continue
			}
			if lt, ok := x.tagsOf[x.resOf[i][k]]; ok && (exclude == "" || lt.lease != exclude) {
				out = append(out, allocator.TaggedBooking{HostID: x.hosts[i].ID, Window: b, Tags: lt.tags})
			}
		}
	}
	return out
}

// decodeLeaseTags reads a lease's stored tags (a JSON array of strings;
// anything else is no tags).
func decodeLeaseTags(s string) []string {
	var tags []string
	if s == "" || json.Unmarshal([]byte(s), &tags) != nil {
		return nil
	}
	return tags
}

// encodeTags is a lease's tags in their stored form (as the lease service
// writes them): nil for none.
func encodeTags(tags []string) *string {
	if len(tags) == 0 {
		return nil
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// earliestWithBusy is earliest over the view in which the hosts in busy
// have those bookings instead of theirs (an owner's lent hosts as a
// reclaim would leave them).
func (x *index) earliestWithBusy(req allocator.EarliestRequest, match func(info func(id string) *Host) func(*allocator.Host) (bool, string), busy map[string][]allocator.Interval) (allocator.EarliestResult, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	req.Match = match(x.info)
	hosts := slices.Clone(x.hosts)
	sorted := slices.Clone(x.sorted)
	for id, b := range busy {
		if i, ok := x.pos[id]; ok {
			// Not sorted: the allocator merges these bookings itself.
			hosts[i].Busy, sorted[i] = b, false
		}
	}
	return allocator.EarliestWindow(allocator.PreparedHosts{Hosts: hosts, Bounds: x.bounds, Sorted: sorted, Ranks: x.ranks}, req)
}

// busyOf returns a copy of host id's bookings (nil for a host the view
// does not know).
func (x *index) busyOf(id string) []allocator.Interval {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if i, ok := x.pos[id]; ok {
		return slices.Clone(x.hosts[i].Busy)
	}
	return nil
}

// nextFree returns the first time after t at which a booking of a host
// keep admits ends plus cleaning (the host is free from then on): the
// next start at which a window that did not serve a request at t may
// (zero when none).
func (x *index) nextFree(t time.Time, cleaning time.Duration, keep func(id string) bool) time.Time {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var next time.Time
	for i := range x.hosts {
		if !keep(x.hosts[i].ID) {
			continue
		}
		for _, b := range x.hosts[i].Busy {
			if e := b.End.Add(cleaning); e.After(t) && (next.IsZero() || e.Before(next)) {
				next = e
			}
		}
	}
	return next
}
