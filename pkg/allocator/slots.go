package allocator

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Instance slots: where the N instances of a virtual:instance reservation
// go. The caller (plugins/instance) works out, per matching host, what is
// free over the whole window (capacity minus the peak of the other
// reservations overlapping it); ChooseSlots then splits the amount over
// those hosts under the affinity rule.
//
// The choice keeps large holes open, with the dedicated-allocation metric
// of "Allocation for Partitioned Ganeti": for a host, the allocation
// vector counts, per policy size from the largest down, how many more
// instances of that size still fit; placing a slot costs the difference
// of that vector before and after (the lost-allocations vector, compared
// lexicographically, so losing a large allocation dominates losing any
// number of small ones), then the capacity left on the host (less is
// better: fill fragmented hosts first). Over time (SlotHost.Profile) both
// are weighted by duration: a slot goes where the host is already busy
// for most of the window. Before the metric, a host with no use at all
// in the window ("fresh") ranks after every host in use that has room,
// whatever the policy sizes say (with sizes that do not divide the
// capacity the vector alone can prefer to open a fresh host).
// Anti-affinity additionally spreads over failure domains before
// anything else. Ties go to the host listed first, so the result is
// deterministic.

// MaxCustomClasses is how many resource classes besides VCPU, PCPU,
// MEMORY_MB and DISK_GB one choice can count (SlotSize.Custom).
const MaxCustomClasses = 4

// slotDims is the number of dimensions of a SlotSize.
const slotDims = 4 + MaxCustomClasses

// SlotSize is the size of one instance: VCPUs (shared CPUs), memory in
// MiB, disk in GiB, PCPUs (dedicated CPUs) and amounts of other resource
// classes. Custom is positional: the caller names its dimensions (the
// same names for every size of one choice; SlotRequest.CustomNames).
type SlotSize struct {
	VCPUs, MemoryMB, DiskGB int64
	PCPUs                   int64
	Custom                  [MaxCustomClasses]int64
}

// dims are s's dimensions in a fixed order.
func (s SlotSize) dims() [slotDims]int64 {
	var d [slotDims]int64
	d[0], d[1], d[2], d[3] = s.VCPUs, s.MemoryMB, s.DiskGB, s.PCPUs
	copy(d[4:], s.Custom[:])
	return d
}

func fromDims(d [slotDims]int64) SlotSize {
	s := SlotSize{VCPUs: d[0], MemoryMB: d[1], DiskGB: d[2], PCPUs: d[3]}
	copy(s.Custom[:], d[4:])
	return s
}

// Max is the per-dimension maximum of s and o.
func (s SlotSize) Max(o SlotSize) SlotSize {
	a, b := s.dims(), o.dims()
	for i := range a {
		a[i] = max(a[i], b[i])
	}
	return fromDims(a)
}

// Min is the per-dimension minimum of s and o.
func (s SlotSize) Min(o SlotSize) SlotSize {
	a, b := s.dims(), o.dims()
	for i := range a {
		a[i] = min(a[i], b[i])
	}
	return fromDims(a)
}

// Scale is s times num/den in every dimension, rounded down (a part of
// a host: num of its den slots). den <= 0 leaves s as it is.
func (s SlotSize) Scale(num, den int64) SlotSize {
	if den <= 0 {
		return s
	}
	d := s.dims()
	for i := range d {
		d[i] = d[i] * num / den
	}
	return fromDims(d)
}

// negative reports whether any dimension of s is below zero.
func (s SlotSize) negative() bool {
	for _, v := range s.dims() {
		if v < 0 {
			return true
		}
	}
	return false
}

// String formats the size as a person reads it: "2 VCPU/4 GiB/20 GB".
func (s SlotSize) String() string { return s.Format(nil) }

// Format is String with names for the Custom dimensions (missing names
// read "class #i").
func (s SlotSize) Format(names []string) string {
	var b strings.Builder
	if s.VCPUs > 0 || s.PCPUs == 0 {
		b.WriteString(strconv.FormatInt(s.VCPUs, 10))
		b.WriteString(" VCPU/")
	}
	if s.PCPUs > 0 {
		b.WriteString(strconv.FormatInt(s.PCPUs, 10))
		b.WriteString(" PCPU/")
	}
	if s.MemoryMB >= 1024 && s.MemoryMB%1024 == 0 {
		b.WriteString(strconv.FormatInt(s.MemoryMB/1024, 10))
		b.WriteString(" GiB")
	} else {
		b.WriteString(strconv.FormatInt(s.MemoryMB, 10))
		b.WriteString(" MiB")
	}
	if s.DiskGB > 0 {
		b.WriteString("/")
		b.WriteString(strconv.FormatInt(s.DiskGB, 10))
		b.WriteString(" GB disk")
	}
	for i, n := range s.Custom {
		if n == 0 {
			continue
		}
		b.WriteString("/")
		b.WriteString(strconv.FormatInt(n, 10))
		b.WriteString(" ")
		if i < len(names) && names[i] != "" {
			b.WriteString(names[i])
		} else {
			b.WriteString("class #" + strconv.Itoa(i))
		}
	}
	return b.String()
}

// Sub returns s minus k instances of o.
func (s SlotSize) Sub(o SlotSize, k int64) SlotSize {
	// Field by field: this is the allocator's innermost operation.
	s.VCPUs -= k * o.VCPUs
	s.MemoryMB -= k * o.MemoryMB
	s.DiskGB -= k * o.DiskGB
	s.PCPUs -= k * o.PCPUs
	for i := range s.Custom {
		s.Custom[i] -= k * o.Custom[i]
	}
	return s
}

// Fits is how many instances of size o fit in s (dimensions o does not
// use do not limit it; a size using nothing fits math.MaxInt32 times).
func (s SlotSize) Fits(o SlotSize) int {
	n := int64(math.MaxInt32)
	fit := func(have, per int64) bool {
		if per <= 0 {
			return true
		}
		if have < per {
			return false
		}
		n = min(n, have/per)
		return true
	}
	if !fit(s.VCPUs, o.VCPUs) || !fit(s.MemoryMB, o.MemoryMB) || !fit(s.DiskGB, o.DiskGB) || !fit(s.PCPUs, o.PCPUs) {
		return 0
	}
	for i := range s.Custom {
		if !fit(s.Custom[i], o.Custom[i]) {
			return 0
		}
	}
	return int(n)
}

// SlotHost is a matching host as ChooseSlots sees it.
type SlotHost struct {
	ID string
	// Domain is the host's failure domain ("" when it has none).
	Domain string
	// Free is what the host has free at every moment of the window,
	// leaving out the reservation being placed; Capacity is its whole
	// usable capacity (for the remaining-capacity score).
	Free, Capacity SlotSize
	// Held is how many slots the reservation holds on the host already
	// (an update of an active reservation keeps them).
	Held int
	// Profile, when set, is the free capacity over the window piece by
	// piece (Free is its minimum): the lost allocations are then counted
	// over time, each piece weighted by its duration, so a slot goes
	// where it takes the least room for large instances for the least
	// time, not merely where the peak is highest.
	Profile []SlotSegment
}

// SlotSegment is a stretch of the window (Dur in any unit, the same for
// every host) with Free capacity throughout.
type SlotSegment struct {
	Dur  int64
	Free SlotSize
}

// SlotRequest asks for Amount slots of Size.
type SlotRequest struct {
	Size   SlotSize
	Amount int
	// Affinity true puts every slot on one host, false at most one slot
	// per host, nil allows any split (several on one host included).
	Affinity *bool
	// Sizes are the policy sizes of the lost-allocations metric (the
	// instance sizes in use, or configured); Size is added when missing.
	Sizes []SlotSize
	// WholeReservePercent keeps whole hosts for whole-host requests
	// (trunk reservation, as HostRequest.ReservePercent does for bigger
	// hosts): that share of the matching hosts (rounded down) must stay
	// entirely free in the window, so a request smaller than a whole host
	// opens a host entirely free in the window only while more than that
	// many are. Not restricted: slots of which a host holds only one
	// (whole-host sized on it), and affinity true filling a host. 0 takes
	// every free host. See slots_reserve.go.
	WholeReservePercent int
	// CustomNames name the Custom dimensions of every size (for
	// messages).
	CustomNames []string
	// MatchingHosts is the number of hosts the reserve is a share of:
	// every host matching the request, those left out of the list (busy
	// with a whole-host reservation) included; 0 means len(hosts).
	MatchingHosts int
	// FreeOutside is how many hosts entirely free in the window match
	// the request but are left out of the list (a choice over part of
	// the matching hosts, as ownership's pool stages make): the reserve
	// counts them among the hosts kept whole.
	FreeOutside int
}

// SlotDecision is the outcome of ChooseSlots.
type SlotDecision struct {
	// Slots maps host id to its slots (held ones included); only hosts
	// with at least one slot are listed.
	Slots map[string]int
	// Order lists the hosts of Slots in input order.
	Order []string
	// Hosts is the number of matching hosts, FreeSlots how many slots of
	// the size they have free in the window (held ones included).
	Hosts, FreeSlots int
}

// NotEnoughSlotsError is ChooseSlots' refusal, with the numbers that
// explain it.
type NotEnoughSlotsError struct {
	Needed int
	Size   SlotSize
	// Names name Size's Custom dimensions (SlotRequest.CustomNames).
	Names    []string
	Affinity *bool
	// Free is the free slots over all matching hosts, MaxOnOne the most
	// on one host, WithSlot how many hosts have at least one; Hosts the
	// matching hosts.
	Free, MaxOnOne, WithSlot, Hosts int
	// HeldLost is set when slots the reservation already holds no
	// longer fit (the window grew into other reservations).
	HeldLost bool
	// Kept is the number of entirely free hosts the request could not
	// open, kept whole for whole-host requests
	// (SlotRequest.WholeReservePercent, given as ReservePercent).
	Kept, ReservePercent int
}

func (e *NotEnoughSlotsError) Error() string {
	hosts := "matching hosts"
	if e.Hosts == 1 {
		hosts = "matching host"
	}
	slots := "slots"
	if e.Needed == 1 {
		slots = "slot"
	}
	head := fmt.Sprintf("Not enough hosts available: %d %s of %s needed", e.Needed, slots, e.Size.Format(e.Names))
	var msg string
	switch {
	case e.HeldLost:
		return fmt.Sprintf("%s, but the slots already held no longer fit in the new window on %d %s", head, e.Hosts, hosts)
	case e.Affinity != nil && *e.Affinity:
		msg = fmt.Sprintf("%s on one host (affinity), at most %d free on one host in the window, %d %s", head, e.MaxOnOne, e.Hosts, hosts)
	case e.Affinity != nil:
		msg = fmt.Sprintf("%s on distinct hosts (anti-affinity), %d of the %d %s have a free slot in the window", head, e.WithSlot, e.Hosts, hosts)
	default:
		msg = fmt.Sprintf("%s, %d free in the window on %d %s", head, e.Free, e.Hosts, hosts)
	}
	switch e.Kept {
	case 0:
		return msg
	case 1:
		return fmt.Sprintf("%s, of which 1 host kept whole for whole-host requests (whole_host_reserve_percent=%d)", msg, e.ReservePercent)
	}
	return fmt.Sprintf("%s, of which %d hosts kept whole for whole-host requests (whole_host_reserve_percent=%d)", msg, e.Kept, e.ReservePercent)
}

// policySizes are the sizes of the metric, largest first (by disk, then
// memory, then VCPUs, as the seed orders policy intervals by disk), each
// once, with req's size among them.
func policySizes(req SlotRequest) []SlotSize {
	out := append(slices.Clone(req.Sizes), req.Size)
	slices.SortFunc(out, func(a, b SlotSize) int {
		return cmp.Or(cmp.Compare(b.DiskGB, a.DiskGB), cmp.Compare(b.MemoryMB, a.MemoryMB), cmp.Compare(b.VCPUs+b.PCPUs, a.VCPUs+a.PCPUs),
			cmp.Compare(b.PCPUs, a.PCPUs), slices.Compare(b.Custom[:], a.Custom[:]))
	})
	return slices.Compact(out)
}

// slotScore is the cost of placing k slots on a host: the domain load
// for anti-affinity, whether the host is fresh (unused in the window),
// the lost-allocations vector, then the capacity left (a fraction summed
// over the dimensions, averaged over the window), compared in that order.
type slotScore struct {
	domain int
	fresh  bool
	lost   []int
	left   float64
}

func (a *slotScore) less(b *slotScore) bool {
	if a.domain != b.domain {
		return a.domain < b.domain
	}
	if a.fresh != b.fresh {
		return b.fresh
	}
	if c := slices.Compare(a.lost, b.lost); c != 0 {
		return c < 0
	}
	return a.left < b.left
}

// leftOf is the capacity free left (after) as a fraction of capacity,
// summed over the dimensions capacity has.
func leftOf(after, capacity SlotSize) float64 {
	var left float64
	a, c := after.dims(), capacity.dims()
	for i := range a {
		if c[i] > 0 {
			left += float64(a[i]) / float64(c[i])
		}
	}
	return left
}

// score fills sc with the cost of taking k more slots of size from host
// h, which has p slots placed already and free capacity free.
func score(sc *slotScore, sizes []SlotSize, h *SlotHost, free, size SlotSize, k, p int) {
	capacity := h.Capacity
	after := free.Sub(size, int64(k))
	sc.lost = sc.lost[:0]
	sc.fresh = p == 0 && h.Free == capacity
	if h.Profile == nil {
		for _, s := range sizes {
			sc.lost = append(sc.lost, free.Fits(s)-after.Fits(s))
		}
		sc.left = leftOf(after, capacity)
		return
	}
	for _, s := range sizes {
		var lost int64
		for _, seg := range h.Profile {
			f := seg.Free.Sub(size, int64(p))
			lost += seg.Dur * int64(f.Fits(s)-f.Sub(size, int64(k)).Fits(s))
		}
		sc.lost = append(sc.lost, int(lost))
	}
	// Free is the minimum over the profile: the host can be fresh only
	// when every piece is free too. What is left is weighted by time,
	// so of two hosts with the same peak the one busier over the rest
	// of the window fits best.
	var left float64
	var total int64
	for _, seg := range h.Profile {
		if seg.Free != capacity {
			sc.fresh = false
		}
		left += float64(seg.Dur) * leftOf(seg.Free.Sub(size, int64(p+k)), capacity)
		total += seg.Dur
	}
	sc.left = leftOf(after, capacity)
	if total > 0 {
		sc.left = left / float64(total)
	}
}

// ChooseSlots splits req.Amount slots over hosts (see the top of this
// file). Held slots are kept and count towards the amount; a request for
// fewer slots than are held is the caller's to refuse. A refusal is a
// *NotEnoughSlotsError; a malformed request wraps ErrInvalidRequest.
func ChooseSlots(hosts []SlotHost, req SlotRequest) (SlotDecision, error) {
	dec := SlotDecision{Slots: map[string]int{}, Hosts: len(hosts)}
	if req.Amount < 1 {
		return dec, fmt.Errorf("%w: amount %d", ErrInvalidRequest, req.Amount)
	}
	if req.Size.negative() {
		return dec, fmt.Errorf("%w: negative size %s", ErrInvalidRequest, req.Size.Format(req.CustomNames))
	}
	sizes := policySizes(req)
	free := make([]SlotSize, len(hosts))
	placed := make([]int, len(hosts))
	ne := &NotEnoughSlotsError{Needed: req.Amount, Size: req.Size, Names: req.CustomNames, Affinity: req.Affinity, Hosts: len(hosts)}
	held, heldHosts := 0, 0
	for i, h := range hosts {
		free[i] = h.Free
		n := h.Free.Fits(req.Size)
		if h.Held > 0 {
			if n < h.Held {
				ne.HeldLost = true
			}
			free[i] = h.Free.Sub(req.Size, int64(h.Held))
			placed[i] = h.Held
			held += h.Held
			heldHosts++
		}
		ne.Free += n
		ne.MaxOnOne = max(ne.MaxOnOne, n)
		if n > 0 {
			ne.WithSlot++
		}
	}
	dec.FreeSlots = ne.Free
	if ne.HeldLost {
		return dec, ne
	}
	if req.WholeReservePercent < 0 || req.WholeReservePercent > 100 {
		return dec, fmt.Errorf("%w: whole-host reserve percent %d is not within 0..100", ErrInvalidRequest, req.WholeReservePercent)
	}
	res := newSlotReserve(hosts, req)
	if res != nil {
		ne.Kept, ne.ReservePercent = res.kept, req.WholeReservePercent
	}
	need := req.Amount - held
	switch {
	case req.Affinity != nil && *req.Affinity:
		if !chooseOne(hosts, free, placed, sizes, req.Size, need, heldHosts > 0, res) {
			return dec, ne
		}
	default:
		anti := req.Affinity != nil
		f, p := slices.Clone(free), slices.Clone(placed)
		ok := chooseEach(hosts, f, p, sizes, req.Size, need, anti, res)
		if !ok && !anti && res != nil && res.limit > 0 {
			// The metric may have opened closed hosts with little room
			// first; the most the reserve allows is the limit's roomiest
			// ones (what EarliestSlots counts).
			f, p = slices.Clone(free), slices.Clone(placed)
			ok = chooseEach(hosts, f, p, sizes, req.Size, need, anti, res.roomiest(free, req.Size))
		}
		if !ok {
			return dec, ne
		}
		placed = p
	}
	for i, h := range hosts {
		if placed[i] > 0 {
			dec.Slots[h.ID] = placed[i]
			dec.Order = append(dec.Order, h.ID)
		}
	}
	return dec, nil
}

// chooseOne puts need slots on one host: the one already holding slots
// when onHeld, else the cheapest that has room for all of them.
func chooseOne(hosts []SlotHost, free []SlotSize, placed []int, sizes []SlotSize, size SlotSize, need int, onHeld bool, res *slotReserve) bool {
	best := -1
	var bs, sc slotScore
	for i := range hosts {
		if onHeld && placed[i] == 0 || res.shut(i, placed) {
			continue
		}
		if need > 0 && free[i].Fits(size) < need {
			continue
		}
		score(&sc, sizes, &hosts[i], free[i], size, need, placed[i])
		if best < 0 || sc.less(&bs) {
			best = i
			bs, sc = sc, slotScore{lost: bs.lost[:0]}
		}
	}
	if best < 0 {
		return false
	}
	placed[best] += need
	free[best] = free[best].Sub(size, int64(need))
	return true
}

// chooseEach places need slots one at a time on the cheapest host; with
// anti, never two on one host (nor on a host holding one already), and
// spread over failure domains first; never on a host res keeps shut.
func chooseEach(hosts []SlotHost, free []SlotSize, placed []int, sizes []SlotSize, size SlotSize, need int, anti bool, res *slotReserve) bool {
	var domainLoad map[string]int
	if anti {
		domainLoad = map[string]int{}
		for i, h := range hosts {
			if placed[i] > 0 && h.Domain != "" {
				domainLoad[h.Domain] += placed[i]
			}
		}
	}
	// cost[i] is host i's cost of one more slot (valid[i] false: no
	// room, or excluded); only the host that took a slot changes.
	cost := make([]slotScore, len(hosts))
	valid := make([]bool, len(hosts))
	eval := func(i int) {
		valid[i] = free[i].Fits(size) >= 1 && (!anti || placed[i] == 0)
		if valid[i] {
			score(&cost[i], sizes, &hosts[i], free[i], size, 1, placed[i])
		}
	}
	for i := range hosts {
		eval(i)
	}
	for ; need > 0; need-- {
		best := -1
		for i := range hosts {
			if !valid[i] || res.shut(i, placed) {
				continue
			}
			if anti {
				cost[i].domain = 0
				if d := hosts[i].Domain; d != "" {
					cost[i].domain = domainLoad[d]
				}
			}
			if best < 0 || cost[i].less(&cost[best]) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		res.opening(best, placed)
		placed[best]++
		free[best] = free[best].Sub(size, 1)
		if anti && hosts[best].Domain != "" {
			domainLoad[hosts[best].Domain]++
		}
		eval(best)
	}
	return true
}
