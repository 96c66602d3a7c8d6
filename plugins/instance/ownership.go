package instance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/host"
)

// Ownership is the ownership policy's hook (pkg/blazar/ownership), the
// one the host plugin uses: the pools a lease of a project draws from, in
// order. A nil Ownership, or a nil Order, means ownership is off.
type Ownership interface {
	HostOrder(project string) *ownership.Order
}

// ownershipOrder is the project's ownership pools (nil: ownership off).
func (p *Plugin) ownershipOrder(project string) *ownership.Order {
	if p.cfg.Ownership == nil {
		return nil
	}
	return p.cfg.Ownership.HostOrder(project)
}

// pick is where a host's new slots come from: its source, the lenders
// whose limits it counts against, and the part of a partly owned host.
type pick struct {
	src     ownership.Source
	charges []string
	part    *ownership.PartUse
	// capa is the part's capacity (a part only).
	capa allocator.SlotSize
	// held marks a host the reservation holds already: its source is
	// recorded, and it counts against its lenders' limits again.
	held bool
}

// byPool is a choice's ownership: the order, the lenders' budgets left
// over the window, and what each chosen host's slots came from.
type byPool struct {
	order   *ownership.Order
	budgets map[string]int
	picks   map[string]pick
	// stages bounds the pools' prefixes tried (0: all of them): an
	// eager reclaim tries the project's own pools alone.
	stages int
}

// stagedSlots runs choose over the first pool of o, then the first two,
// …: the smallest prefix that serves the request serves it, so owned
// capacity (most preferred group first) goes before the private pools up
// the tree, before the public pool. A whole host in the prefix offers its
// free capacity; a partly owned host offers one of its parts in the
// prefix (the one with the most room for the size), that fraction of its
// capacity less the part's own bookings (partPeak), and never more than
// the host has free. Held slots stay where they are, and a held host
// grows within what it was taken from (heldPick). Hosts of lenders whose
// lending limit is used up (budgets, less what the held hosts borrow)
// are left out; a choice taking more of a lender's hosts than its budget
// is made again within it.
func stagedSlots(o *ownership.Order, budgets map[string]int, stages int, base []allocator.SlotHost, size allocator.SlotSize,
	partPeak func(h, owner string, capa allocator.SlotSize) allocator.SlotSize, heldPart func(h string) (string, bool),
	choose func(hs []allocator.SlotHost, freeOutside int) (allocator.SlotDecision, error)) (allocator.SlotDecision, map[string]pick, error) {
	var dec allocator.SlotDecision
	var err error
	base, holds, budgets, err := heldPicks(o, budgets, base, size, partPeak, heldPart)
	if err != nil {
		return dec, nil, err
	}
	capped := map[string]map[string]bool{}
	limited := map[string]bool{}
	last := o.Stages()
	if stages > 0 {
		last = min(last, stages)
	}
	for k := 1; k <= last; k++ {
		for {
			hs := make([]allocator.SlotHost, 0, len(base))
			picks := map[string]pick{}
			// The whole-host reserve is kept over every matching host:
			// those entirely free outside the stage count as kept.
			outside := 0
			for _, sh := range base {
				if sh.Held > 0 {
					hs = append(hs, sh)
					continue
				}
				if allocator.WholeFree(&sh) {
					outside++
				}
				whole, parts := o.Offer(k, sh.ID)
				var pk pick
				switch {
				case whole:
					pk = pick{src: o.SourceOf(sh.ID), charges: o.Charges(sh.ID)}
				case len(parts) > 0:
					best, bestN := -1, -1
					var bestFree, bestCapa allocator.SlotSize
					for i, pt := range parts {
						capa := sh.Capacity.Scale(int64(pt.Slots), int64(pt.Of))
						free := sh.Free.Min(capa.Sub(partPeak(sh.ID, pt.Owner, capa), 1)).Max(allocator.SlotSize{})
						if n := free.Fits(size); n > bestN {
							best, bestN, bestFree, bestCapa = i, n, free, capa
						}
					}
					pt := parts[best]
					sh.Free, sh.Capacity, sh.Profile = bestFree, bestCapa, nil
					pk = pick{src: o.PartSource(pt), charges: o.PartCharges(pt), part: &pt, capa: bestCapa}
				default:
					continue
				}
				out := false
				for _, x := range pk.charges {
					b, ok := budgets[x]
					if !ok {
						continue
					}
					if allowed, c := capped[x]; b <= 0 || c && !allowed[sh.ID] {
						limited[x], out = true, true
					}
				}
				if out {
					continue
				}
				if allocator.WholeFree(&sh) {
					outside--
				}
				hs = append(hs, sh)
				picks[sh.ID] = pk
			}
			dec, err = choose(hs, outside)
			if err != nil {
				break
			}
			x, keep := overBudget(budgets, capped, picks, dec.Order)
			if x == "" {
				maps.Copy(picks, holds)
				return dec, picks, nil
			}
			capped[x] = keep
		}
		var ne *allocator.NotEnoughSlotsError
		if !errors.As(err, &ne) {
			return dec, nil, err
		}
	}
	if len(limited) > 0 {
		var parts []string
		for _, x := range slices.Sorted(maps.Keys(limited)) {
			parts = append(parts, fmt.Sprintf("consumer %q lends at most %d hosts at once and has %d left to lend over the window", x, o.Limit(x), max(0, budgets[x])))
		}
		err = fmt.Errorf("%w (lending limits: %s)", err, strings.Join(parts, "; "))
	}
	return dec, nil, err
}

// heldPicks is what the hosts an active reservation holds already were
// taken from, as a growing update must keep to: a whole host's source,
// or, on a partly owned host, the part its pool record names (heldPart:
// the part's owner, false when the booking has none), whose room (its
// share of the host less its other bookings) bounds the host's free
// capacity as it bounds a new booking's. A held part no longer in the
// project's pools takes no more slots. It returns base with those
// bounds, the picks (held set), and the budgets less what the held hosts
// borrow: a held loan counts against its lenders' limits over the new
// window as a new one would, and held loans that alone exceed a limit
// refuse the update, naming it.
func heldPicks(o *ownership.Order, budgets map[string]int, base []allocator.SlotHost, size allocator.SlotSize,
	partPeak func(h, owner string, capa allocator.SlotSize) allocator.SlotSize, heldPart func(h string) (string, bool)) ([]allocator.SlotHost, map[string]pick, map[string]int, error) {
	out := map[string]pick{}
	cloned := false
	left := maps.Clone(budgets)
	for i := range base {
		sh := base[i]
		if sh.Held == 0 {
			continue
		}
		pk := pick{held: true}
		if !o.Split(sh.ID) {
			pk.src, pk.charges = o.SourceOf(sh.ID), o.Charges(sh.ID)
		} else if owner, ok := heldPart(sh.ID); ok {
			_, parts := o.Offer(o.Stages(), sh.ID)
			k := slices.IndexFunc(parts, func(pt ownership.PartUse) bool { return pt.Owner == owner })
			if k >= 0 {
				pt := parts[k]
				capa := sh.Capacity.Scale(int64(pt.Slots), int64(pt.Of))
				sh.Free = sh.Free.Min(capa.Sub(partPeak(sh.ID, pt.Owner, capa), 1)).Max(allocator.SlotSize{})
				pk.src, pk.charges, pk.part, pk.capa = o.PartSource(pt), o.PartCharges(pt), &pt, capa
			} else {
				// The part left the project's pools: the held slots stay,
				// nothing more is taken there.
				sh.Free = sh.Free.Min(allocator.SlotSize{}.Sub(size, -int64(sh.Held)))
			}
			sh.Profile = nil
		}
		if !cloned {
			base, cloned = slices.Clone(base), true
		}
		base[i] = sh
		out[sh.ID] = pk
		for _, x := range pk.charges {
			if _, ok := left[x]; ok {
				left[x]--
			}
		}
	}
	var over []string
	for _, x := range slices.Sorted(maps.Keys(left)) {
		if left[x] < 0 {
			over = append(over, fmt.Sprintf("consumer %q lends at most %d hosts at once and has %d left to lend over the window, fewer than the %d the reservation holds borrow", x, o.Limit(x), budgets[x], budgets[x]-left[x]))
		}
	}
	if len(over) > 0 {
		return nil, nil, nil, plugins.NotEnough("Not enough resources available with the hosts the reservation holds (lending limits: %s)", strings.Join(over, "; "))
	}
	return base, out, left, nil
}

// overBudget returns a lender whose budget the chosen hosts exceed, with
// the chosen hosts charging it that fit ("" when none does).
func overBudget(budgets map[string]int, capped map[string]map[string]bool, picks map[string]pick, chosen []string) (string, map[string]bool) {
	count := map[string][]string{}
	for _, h := range chosen {
		for _, x := range picks[h].charges {
			if _, ok := budgets[x]; ok {
				count[x] = append(count[x], h)
			}
		}
	}
	for _, x := range slices.Sorted(maps.Keys(count)) {
		if hs := count[x]; len(hs) > budgets[x] {
			if _, done := capped[x]; done {
				continue
			}
			keep := map[string]bool{}
			for _, h := range hs[:max(0, budgets[x])] {
				keep[h] = true
			}
			return x, keep
		}
	}
	return "", nil
}

// lenderBudgets reads what o's lenders with a lending limit have left to
// lend over win (nil when o borrows from none), for the choice; the
// write checks the chosen loans again under the lenders' locks
// (checkLenders).
func lenderBudgets(ctx context.Context, tx *plugins.Tx, o *ownership.Order, win allocator.Interval, exclude string) (map[string]int, error) {
	if o == nil {
		return nil, nil
	}
	return host.LenderBudgets(ctx, tx.DB, o, win, exclude)
}

// checkLenders re-checks, with the chosen hosts locked, that the hosts
// and parts dec borrows keep their lenders' lending limits: it locks
// those lenders (after the hosts, the order the host plugin takes them
// in) and reads their loans again; a concurrent loan that used the room
// makes the write run again (plugins.ErrRetry), to choose from what is
// left.
func checkLenders(ctx context.Context, tx *plugins.Tx, bp *byPool, dec allocator.SlotDecision, win allocator.Interval, exclude string) error {
	need := map[string]int{}
	for _, h := range dec.Order {
		// Held hosts count too: the window may have grown, and the loans
		// read leave the reservation's own out.
		for _, x := range bp.picks[h].charges {
			if bp.order.Limit(x) >= 0 {
				need[x]++
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	if err := plugins.LockResources(tx, host.LenderLock, slices.Sorted(maps.Keys(need))); err != nil {
		return err
	}
	left, err := host.LenderBudgets(ctx, tx.DB, bp.order, win, exclude)
	if err != nil {
		return err
	}
	for x, n := range need {
		if b, ok := left[x]; ok && n > b {
			return plugins.ErrRetry
		}
	}
	return nil
}

// partOwners returns, for the bookings on the partly owned hosts ids,
// the part each one draws from ((reservation, host) → part owner, from
// its pool record; a booking without one draws from no part and counts
// against the host's capacity only).
func partOwners(ctx context.Context, tx *plugins.Tx, ids []string) (map[[2]string]string, error) {
	out := map[[2]string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ReservationID, ComputeHostID, Pool, Consumer, LentBy string
	}
	if err := tx.WithContext(ctx).Raw("SELECT reservation_id, compute_host_id, pool, consumer, lent_by FROM ownership_pools WHERE compute_host_id IN ?", ids).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the parts of partly owned hosts: %w", err)
	}
	for _, r := range rows {
		out[[2]string{r.ReservationID, r.ComputeHostID}] = ownership.PartOwner(r.Pool, r.Consumer, r.LentBy)
	}
	return out, nil
}

// partPeaks returns partPeak for stagedSlots over the bookings byHost
// (owners from partOwners), computed once per host and part.
func partPeaks(byHost map[string][]*booking, owners map[[2]string]string, lo, hi time.Time) func(h, owner string, capa allocator.SlotSize) allocator.SlotSize {
	memo := map[[2]string]allocator.SlotSize{}
	return func(h, owner string, capa allocator.SlotSize) allocator.SlotSize {
		k := [2]string{h, owner}
		if top, ok := memo[k]; ok {
			return top
		}
		var bs []*booking
		for _, b := range byHost[h] {
			if o, ok := owners[[2]string{b.Res, h}]; ok && o == owner {
				bs = append(bs, b)
			}
		}
		top, _ := usage(bs, lo, hi, capa)
		memo[k] = top
		return top
	}
}

// recordPools records where the new slots of reservation resID came from
// (hosts of dec without a record yet; nil pools: ownership off).
func recordPools(ctx context.Context, tx *plugins.Tx, leaseID, resID string, bp *byPool, hostIDs []string) error {
	if bp == nil || len(hostIDs) == 0 {
		return nil
	}
	var have []string
	if err := tx.WithContext(ctx).Raw("SELECT compute_host_id FROM ownership_pools WHERE reservation_id = ?", resID).Scan(&have).Error; err != nil {
		return err
	}
	args := make([]any, 0, 7*len(hostIDs))
	n := 0
	for _, h := range hostIDs {
		pk, ok := bp.picks[h]
		if !ok || pk.held || slices.Contains(have, h) {
			continue
		}
		s := pk.src
		if s.Pool == "" {
			s.Pool = ownership.KindPublic
		}
		args = append(args, resID, h, leaseID, s.Pool, s.Consumer, s.LentBy, tx.Now)
		n++
	}
	if n == 0 {
		return nil
	}
	q := db.Placeholders([]byte("INSERT INTO ownership_pools (reservation_id, compute_host_id, lease_id, pool, consumer, lent_by, created_at) VALUES "), n, 7)
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

// dropPools forgets reservation resID's records of hosts other than
// keep (all when keep is empty).
func dropPools(tx *plugins.Tx, resID string, keep []string) error {
	q := "DELETE FROM ownership_pools WHERE reservation_id = ?"
	args := []any{resID}
	if len(keep) > 0 {
		q, args = inClause(q, args, "compute_host_id", keep)
		q = strings.Replace(q, " AND compute_host_id IN", " AND compute_host_id NOT IN", 1)
	}
	_, err := tx.ExecSQL(q, args...)
	return err
}

// partsLost re-checks, with the chosen hosts locked, that the parts the
// new slots of dec draw from still hold them (MySQL: a concurrent booking
// of the same part may have committed since the choice read them); it
// returns the hosts whose part no longer does.
func partsLost(ctx context.Context, tx *plugins.Tx, bp *byPool, dec allocator.SlotDecision, held map[string]int, lo, hi time.Time, exclude string, m dims, size allocator.SlotSize, ignore cutSet) ([]string, error) {
	var ids []string
	for _, h := range dec.Order {
		// A held part is checked again too: the update's window may reach
		// a booking of the part committed since.
		if pk, ok := bp.picks[h]; ok && pk.part != nil && (dec.Slots[h] > held[h] || pk.held) {
			ids = append(ids, h)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	bs, _, err := loadBookings(ctx, tx, lo, hi, ids, exclude, m, ignore)
	if err != nil {
		return nil, err
	}
	owners, err := partOwners(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	byHost := map[string][]*booking{}
	for i := range bs {
		byHost[bs[i].Host] = append(byHost[bs[i].Host], &bs[i])
	}
	peak := partPeaks(byHost, owners, lo, hi)
	var lost []string
	for _, h := range ids {
		pk := bp.picks[h]
		// The reservation's own bookings are left out: the part must
		// hold all its slots there, held ones too.
		if pk.capa.Sub(peak(h, pk.part.Owner, pk.capa), 1).Fits(size) < dec.Slots[h] {
			lost = append(lost, h)
		}
	}
	return lost, nil
}
