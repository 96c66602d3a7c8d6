package host

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// Ownership is the ownership policy's hook (pkg/blazar/ownership): the
// pools a lease of a project draws from, in order, answered from memory.
// A nil Ownership, or a nil Order, means ownership is off: every host.
type Ownership interface {
	HostOrder(project string) *ownership.Order
}

// chooseByPool runs the allocator over the first pool of the project's
// order, then the first two, …: the smallest prefix that satisfies the
// request serves it, so owned hosts (most preferred group first) are used
// before the private pools up the tree, before the public pool. budgets
// are the lenders' lending limits left over the window (Order.Budgets).
func (p *Plugin) chooseByPool(o *ownership.Order, budgets map[string]int, req allocator.HostRequest, match func(func(string) *Host) func(*allocator.Host) (bool, string)) (allocator.HostDecision, error) {
	return p.chooseByPoolTraced(o, budgets, req, match, nil)
}

// chooseByPoolTraced is chooseByPool telling trace (when not nil) the
// outcome of each prefix it tried (1-based).
func (p *Plugin) chooseByPoolTraced(o *ownership.Order, budgets map[string]int, req allocator.HostRequest, match func(func(string) *Host) func(*allocator.Host) (bool, string), trace func(k int, err error)) (allocator.HostDecision, error) {
	if o == nil {
		return p.idx.choose(p.cfg.Rules, req, match)
	}
	return staged(o, budgets, trace, func(allow func(string) (bool, string)) (allocator.HostDecision, error) {
		return p.idx.choose(p.cfg.Rules, req, func(info func(string) *Host) func(*allocator.Host) (bool, string) {
			var m func(*allocator.Host) (bool, string)
			if match != nil {
				m = match(info)
			}
			return func(h *allocator.Host) (bool, string) {
				if ok, why := allow(h.ID); !ok {
					return false, why
				}
				if m == nil {
					return true, ""
				}
				return m(h)
			}
		})
	})
}

// staged runs choose over growing prefixes of o's pools (allow tells
// which hosts the current prefix admits, and why not) until one serves
// the request. A choice that borrows more hosts from a lender than its
// lending limit has left (budgets) is made again with that lender's other
// hosts left out, so a lender's hosts are never taken beyond its limit; a
// refusal then names the limits that left hosts out.
func staged(o *ownership.Order, budgets map[string]int, trace func(k int, err error), choose func(allow func(string) (bool, string)) (allocator.HostDecision, error)) (allocator.HostDecision, error) {
	var dec allocator.HostDecision
	var err error
	// capped[x] are the only hosts charging lender x a choice may still
	// take (x's budget ran out within one choice).
	capped := map[string]map[string]bool{}
	limited := map[string]bool{} // lenders whose limits left hosts out
	for k := 1; k <= o.Stages(); k++ {
		for {
			dec, err = choose(func(h string) (bool, string) {
				if !o.Allows(k, h) {
					return false, "not in the project's ownership pools"
				}
				for _, x := range o.Charges(h) {
					b, ok := budgets[x]
					if ok && b <= 0 {
						limited[x] = true
						return false, fmt.Sprintf("lending limit of consumer %q reached", x)
					}
					if allowed, ok := capped[x]; ok && !allowed[h] {
						limited[x] = true
						return false, fmt.Sprintf("lending limit of consumer %q reached", x)
					}
				}
				return true, ""
			})
			if err != nil {
				break
			}
			x, keep := overBudget(o, budgets, capped, dec.Chosen)
			if x == "" {
				if trace != nil {
					trace(k, nil)
				}
				return dec, nil
			}
			capped[x] = keep
		}
		if trace != nil {
			trace(k, err)
		}
		var ne *allocator.NotEnoughHostsError
		if !errors.As(err, &ne) {
			return dec, err
		}
	}
	if len(limited) > 0 {
		err = &lendingLimitError{err: err, note: limitNote(o, budgets, limited)}
	}
	return dec, err
}

// overBudget returns a lender whose budget chosen exceeds, with the
// chosen hosts charging it that fit its budget ("" when none does).
func overBudget(o *ownership.Order, budgets map[string]int, capped map[string]map[string]bool, chosen []string) (string, map[string]bool) {
	count := map[string][]string{}
	for _, h := range chosen {
		for _, x := range o.Charges(h) {
			if _, ok := budgets[x]; ok {
				count[x] = append(count[x], h)
			}
		}
	}
	for _, x := range slices.Sorted(maps.Keys(count)) {
		if hs := count[x]; len(hs) > budgets[x] {
			if _, done := capped[x]; done {
				continue // cannot happen: capped hosts are within the budget
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

// limitNote explains the lending limits that left hosts out.
func limitNote(o *ownership.Order, budgets map[string]int, limited map[string]bool) string {
	var parts []string
	for _, x := range slices.Sorted(maps.Keys(limited)) {
		lim := o.Limit(x)
		parts = append(parts, fmt.Sprintf("consumer %q lends at most %d hosts at once and has %d left to lend over the window", x, lim, max(0, budgets[x])))
	}
	return "lending limits: " + strings.Join(parts, "; ")
}

// lendingLimitError is a refusal for lack of hosts in which lending limits
// left borrowed hosts out; it unwraps to the allocator's refusal.
type lendingLimitError struct {
	err  error
	note string
}

func (e *lendingLimitError) Error() string { return e.err.Error() + " (" + e.note + ")" }
func (e *lendingLimitError) Unwrap() error { return e.err }

// LenderLock is the resource type of the lenders' lock rows, for other
// plugins that borrow (plugins.LockResources).
const LenderLock = lenderLock

// LenderBudgets is what o's lenders with a lending limit have left to
// lend over win, from the loans of every reservation but exclude's
// (nil: o borrows from no limited lender). Read it under the lenders'
// locks (LenderLock) for a final answer.
func LenderBudgets(ctx context.Context, g *gorm.DB, o *ownership.Order, win allocator.Interval, exclude string) (map[string]int, error) {
	return budgets(ctx, g, o, win, exclude)
}

// lenderLock is the resource type of the lock rows that serialise the
// borrowing from one lender with a lending limit.
const lenderLock = "ownership:lender"

// budgets reads the loans overlapping win (other than reservation
// exclude's) and returns o's lenders' budgets over it (nil when o borrows
// from no lender with a limit: no query).
func budgets(ctx context.Context, g *gorm.DB, o *ownership.Order, win allocator.Interval, exclude string) (map[string]int, error) {
	if o == nil || len(o.Budgets(nil, win.Start, win.End)) == 0 {
		return nil, nil
	}
	var rows []struct {
		ComputeHostID, LentBy, Pool, Consumer string
		StartDate, EndDate                    time.Time
	}
	q := g.WithContext(ctx).Table("ownership_pools o").
		Select("o.compute_host_id, o.lent_by, o.pool, o.consumer, a.start_date, a.end_date").
		Joins("JOIN computehost_allocations a ON a.reservation_id = o.reservation_id AND a.compute_host_id = o.compute_host_id").
		Where("o.lent_by <> '' AND a.end_date > ? AND a.start_date < ?", win.Start, win.End)
	if exclude != "" {
		q = q.Where("o.reservation_id <> ?", exclude)
	}
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the loans of lenders with a lending limit: %w", err)
	}
	loans := make([]ownership.Loan, len(rows))
	for i, r := range rows {
		l := ownership.Loan{Host: r.ComputeHostID, LentBy: r.LentBy, Start: r.StartDate, End: r.EndDate}
		if r.Pool == ownership.KindPrivate {
			l.Level = r.Consumer
		}
		loans[i] = l
	}
	return o.Budgets(loans, win.Start, win.End), nil
}

// checkLimits re-checks in tx, under the lenders' locks, that hostIDs
// borrowed by a lease of order o over win stay within the lending limits
// (a concurrent request may have borrowed since the choice): if not, the
// write runs again (plugins.ErrRetry) and chooses from what is left, or,
// when final (the choice was made from loans read under the locks), the
// request is refused naming the limits.
func checkLimits(ctx context.Context, tx *plugins.Tx, o *ownership.Order, win allocator.Interval, exclude string, hostIDs []string, final bool) error {
	if o == nil {
		return nil
	}
	need := map[string]int{}
	for _, h := range hostIDs {
		for _, x := range o.Charges(h) {
			if o.Limit(x) >= 0 {
				need[x]++
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	if err := plugins.LockResources(tx, lenderLock, slices.Sorted(maps.Keys(need))); err != nil {
		return err
	}
	left, err := budgets(ctx, tx.DB, o, win, exclude)
	if err != nil {
		return err
	}
	over := map[string]bool{}
	for x, n := range need {
		if b, ok := left[x]; ok && n > b {
			over[x] = true
		}
	}
	switch {
	case len(over) == 0:
		return nil
	case !final:
		return plugins.ErrRetry
	}
	return plugins.NotEnough("Not enough hosts available: the lease would borrow beyond %s", limitNote(o, left, over))
}

// PoolEntry is one host of a reservation with the ownership pool it came
// from: the reservation body's "ownership" list (a Leasehold extension,
// present only for reservations made while ownership was on).
type PoolEntry struct {
	HostID string `json:"host_id"`
	// Pool is "owned", "private" or "public".
	Pool string `json:"pool"`
	// Consumer is the consumer whose ownership or private pool it is
	// (absent for the public pool).
	Consumer string `json:"consumer,omitempty"`
	// LentBy is the consumer that lent the host (borrowed hosts only).
	LentBy string `json:"lent_by,omitempty"`
	// Reclaim says what a reclaim did to this booking, if anything.
	Reclaim *Reclaim `json:"reclaim,omitempty"`
}

// Reclaim is what an owner's reclaim of a lent host did, as both leases
// show it: the borrower's entry names the owner's lease (ByLease), the
// owner's entry the borrower's (FromLease).
type Reclaim struct {
	// Action is "shortened" (the borrower's lease ends at At) or "moved"
	// (the borrower's booking moved to MovedTo).
	Action string `json:"action"`
	// At is when the owner gets the host (the borrower's end, at least the
	// lender's grace period after the reclaim was asked for).
	At          string `json:"at"`
	ByLease     string `json:"by_lease,omitempty"`
	FromLease   string `json:"from_lease,omitempty"`
	OriginalEnd string `json:"original_end_date,omitempty"`
	MovedTo     string `json:"moved_to,omitempty"`
	// GraceSeconds is the lender's grace period the borrower was given.
	GraceSeconds int64 `json:"grace_seconds"`
}

// recordPools records, in tx, the pools hostIDs of reservation resID came
// from by order o (nil: ownership off, nothing is recorded). A host
// already recorded for the reservation keeps its record; isNew says the
// reservation has none yet (its creation: no read).
func recordPools(ctx context.Context, tx *plugins.Tx, leaseID, resID string, o *ownership.Order, hostIDs []string, isNew bool) error {
	if o == nil || len(hostIDs) == 0 {
		return nil
	}
	var have []string
	if !isNew {
		if err := tx.WithContext(ctx).Model(&models.OwnershipPool{}).Where("reservation_id = ? AND compute_host_id IN ?", resID, hostIDs).
			Pluck("compute_host_id", &have).Error; err != nil {
			return err
		}
	}
	args := make([]any, 0, 7*len(hostIDs))
	n := 0
	for _, h := range hostIDs {
		if slices.Contains(have, h) {
			continue
		}
		s := o.SourceOf(h)
		if s.Pool == "" {
			// Chosen outside the pools (a path that does not filter by
			// them): say so rather than guess.
			s.Pool = ownership.KindPublic
		}
		args = append(args, resID, h, leaseID, s.Pool, s.Consumer, s.LentBy, tx.Now)
		n++
	}
	if n == 0 {
		return nil
	}
	// One plain statement (the lease-create path).
	q := db.Placeholders([]byte("INSERT INTO ownership_pools (reservation_id, compute_host_id, lease_id, pool, consumer, lent_by, created_at) VALUES "), n, 7)
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

// dropPools forgets the records of reservation resID's hosts other than
// keep (all of them when keep is nil).
func dropPools(ctx context.Context, tx *plugins.Tx, resID string, keep []string) error {
	q := tx.WithContext(ctx).Where("reservation_id = ?", resID)
	if len(keep) > 0 {
		q = q.Where("compute_host_id NOT IN ?", keep)
	}
	return q.Delete(&models.OwnershipPool{}).Error
}

// PoolEntryOf is a stored ownership_pools row as the API shows it (reclaim
// is its note, when a reclaim wrote one).
func PoolEntryOf(host, pool, consumer, lentBy string, reclaim *string) PoolEntry {
	e := PoolEntry{HostID: host, Pool: pool, Consumer: consumer, LentBy: lentBy}
	if reclaim != nil && *reclaim != "" {
		var r Reclaim
		if json.Unmarshal([]byte(*reclaim), &r) == nil {
			e.Reclaim = &r
		}
	}
	return e
}

// DescribePools adds the "ownership" list to the fields of the
// reservations of out (keyed by reservation id) that have pool records:
// those made while a plan was defined; the others keep upstream's body.
// The instance plugins describe theirs with it too.
func DescribePools(ctx context.Context, g *gorm.DB, ids []string, out map[string]map[string]any) error {
	if len(ids) == 0 {
		return nil
	}
	var rows []models.OwnershipPool
	if err := g.WithContext(ctx).Where("reservation_id IN ?", ids).Order("reservation_id, compute_host_id").Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		addPool(out, r.ReservationID, PoolEntryOf(r.ComputeHostID, r.Pool, r.Consumer, r.LentBy, r.Reclaim))
	}
	return nil
}

// DescribePoolsListed is DescribePools for a whole listing (every lease
// of project, of every project when nil), in one query; records of
// reservations not in out are skipped.
func DescribePoolsListed(ctx context.Context, d *sql.DB, project *string, out map[string]map[string]any) error {
	q := "SELECT o.reservation_id, o.compute_host_id, o.pool, o.consumer, o.lent_by, o.reclaim FROM ownership_pools o"
	var args []any
	if project != nil {
		q += " JOIN leases l ON l.id = o.lease_id WHERE l.project_id = ?"
		args = append(args, *project)
	}
	q += " ORDER BY o.reservation_id, o.compute_host_id"
	rows, err := d.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var res, host, pool, consumer, lentBy string
		var reclaim sql.NullString
		if err := rows.Scan(&res, &host, &pool, &consumer, &lentBy, &reclaim); err != nil {
			return err
		}
		var rc *string
		if reclaim.Valid {
			rc = &reclaim.String
		}
		addPool(out, res, PoolEntryOf(host, pool, consumer, lentBy, rc))
	}
	return rows.Err()
}

func addPool(out map[string]map[string]any, resID string, e PoolEntry) {
	m := out[resID]
	if m == nil {
		return // not a reservation described here
	}
	l, _ := m["ownership"].([]PoolEntry)
	m["ownership"] = append(l, e)
}

// withinLimits makes c's choice keep its lenders' lending limits: when
// it borrows from a lender with a limit, the loans over the window are
// read (only then: most choices borrow nothing) and, if the choice takes
// more than a limit leaves, it is made again within the budgets (less
// what the lease's earlier reservations borrow).
func (p *Plugin) withinLimits(ctx context.Context, c *choice, lease plugins.Lease, earlier []any, fresh bool) error {
	o := c.order
	if o == nil {
		return nil
	}
	limited := false
	for _, h := range c.chosen {
		for _, x := range o.Charges(h) {
			limited = limited || o.Limit(x) >= 0
		}
	}
	if !limited {
		return nil
	}
	b, err := budgets(ctx, p.db, o, allocator.Interval{Start: lease.Start, End: lease.End}, "")
	if err != nil {
		return err
	}
	for _, e := range earlier {
		if ec, ok := e.(*choice); ok {
			for _, h := range ec.chosen {
				for _, x := range o.Charges(h) {
					if _, ok := b[x]; ok {
						b[x]--
					}
				}
			}
		}
	}
	c.budgets = b
	if x, _ := overBudget(o, b, nil, c.chosen); x == "" {
		return nil
	}
	return p.chooseNew(c, nil, fresh)
}

// chooseAdded is staged for the hosts a lease update adds to reservation
// resID (its kept hosts count in the lenders' budgets through their
// stored records, so only the other reservations' loans are read);
// o == nil chooses from every host.
func (p *Plugin) chooseAdded(tx *plugins.Tx, o *ownership.Order, win allocator.Interval, resID string, kept []string,
	choose func(allowed func(string) bool) (allocator.HostDecision, error)) (allocator.HostDecision, error) {
	if o == nil {
		return choose(func(string) bool { return true })
	}
	b, err := budgets(tx.Statement.Context, tx.DB, o, win, resID)
	if err != nil {
		return allocator.HostDecision{}, err
	}
	for _, h := range kept {
		for _, x := range o.Charges(h) {
			if _, ok := b[x]; ok {
				b[x]--
			}
		}
	}
	return staged(o, b, nil, func(allow func(string) (bool, string)) (allocator.HostDecision, error) {
		return choose(func(id string) bool { ok, _ := allow(id); return ok })
	})
}

// updatePools keeps reservation resID's pool records in step with a
// lease update: hosts it no longer holds are forgotten, added ones
// recorded from o, and, when the window or the hosts grew, the borrowed
// ones re-checked against the lending limits over the new window.
func (p *Plugin) updatePools(ctx context.Context, tx *plugins.Tx, leaseID, resID string, o *ownership.Order, win allocator.Interval, final, added []string, grew bool) error {
	if err := dropPools(ctx, tx, resID, final); err != nil {
		return err
	}
	if grew {
		// Every borrowed host counts, kept ones too: the window may have
		// moved or grown.
		if err := checkLimits(ctx, tx, o, win, resID, final, true); err != nil {
			return err
		}
	}
	return recordPools(ctx, tx, leaseID, resID, o, added, false)
}

// scavengeByPool plans a BEST-EFFORT lease's clearing over the first pool
// of o, then the first two, … as a new reservation's choice does: the
// hosts outside the prefix (hostOf names each planning host's Blazar
// host), and the hosts of lenders whose lending limit is used up over the
// window, are not eligible. A plan that borrows beyond a limit is refused
// at the write (checkLimits). o == nil plans over every host.
func scavengeByPool(in allocator.ScavengeInput, hostOf map[string]string, o *ownership.Order, left map[string]int) (allocator.ScavengePlan, error) {
	if o == nil {
		return allocator.PlanScavenge(in)
	}
	var plan allocator.ScavengePlan
	var err error
	for k := 1; k <= o.Stages(); k++ {
		st := in
		st.Hosts = slices.Clone(in.Hosts)
		for i := range st.Hosts {
			h := &st.Hosts[i]
			id, ok := hostOf[h.ID]
			if !h.Eligible || !ok {
				continue
			}
			if allow, _ := staticAllow(o, left, k, id); !allow {
				h.Eligible = false
			}
		}
		plan, err = allocator.PlanScavenge(st)
		var se *allocator.ScavengeError
		if !errors.As(err, &se) {
			return plan, err
		}
	}
	return plan, err
}

// staticAllow is whether host h may be used at stage k of o with the
// lenders' budgets left (a used-up lender's hosts may not).
func staticAllow(o *ownership.Order, left map[string]int, k int, h string) (bool, string) {
	if !o.Allows(k, h) {
		return false, "not in the project's ownership pools"
	}
	for _, x := range o.Charges(h) {
		if b, ok := left[x]; ok && b <= 0 {
			return false, fmt.Sprintf("lending limit of consumer %q reached", x)
		}
	}
	return true, ""
}

// ownershipOrder is the project's ownership pools (nil: ownership off).
func (p *Plugin) ownershipOrder(project string) *ownership.Order {
	if p.cfg.Ownership == nil {
		return nil
	}
	return p.cfg.Ownership.HostOrder(project)
}

// healPools moves reservation resID's pool record from the failed host
// to its replacement (to; "" when none: the record goes with the
// booking). A reservation made while ownership was off has no record to
// move.
func (p *Plugin) healPools(ctx context.Context, tx *plugins.Tx, lease plugins.Lease, resID, from, to string) error {
	r := tx.WithContext(ctx).Where("reservation_id = ? AND compute_host_id = ?", resID, from).Delete(&models.OwnershipPool{})
	if r.Error != nil || r.RowsAffected == 0 || to == "" {
		return r.Error
	}
	return recordPools(ctx, tx, lease.ID, resID, p.ownershipOrder(lease.ProjectID), []string{to}, false)
}
