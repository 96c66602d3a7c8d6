package placement

import (
	"context"
	"database/sql"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
)

// ConsumerWrite is what one consumer should hold once an allocation write
// succeeds.
type ConsumerWrite struct {
	// UUID is the consumer (already normalised by the caller).
	UUID string
	// ProjectID and UserID own the consumer. Empty (requests before 1.8)
	// means the configured incomplete-consumer project and user.
	ProjectID string
	UserID    string
	// CheckGeneration (1.28+) makes Generation binding: nil means the
	// consumer must not exist yet, a number must equal its generation.
	CheckGeneration bool
	Generation      *int64
	// Type (1.38+) sets the consumer type; "" leaves it as it is.
	Type string
	// Allocations maps provider uuid → resource class → amount (≥ 1).
	// Empty removes every allocation of the consumer.
	Allocations map[string]map[string]int64
}

// allocationRetries bounds the server-side retries of an allocation
// write that lost an optimistic race (provider or consumer generation,
// MySQL deadlock), as upstream's allocation_conflict_retry_count.
const allocationRetries = 10

// errRetry marks an attempt that lost a race and may be run again.
type errRetry struct{ msg string }

func (e *errRetry) Error() string { return e.msg }

const (
	msgProviderRace = "Another thread concurrently updated the resource provider data. Please retry your update"
	msgConsumerRace = "Another thread concurrently updated the data. Please retry your update"
)

// WriteAllocations replaces the allocations of every consumer in ws, all
// or nothing, in one transaction that (1) reads, in one statement, the
// consumers with what they hold and the inventory and usage of the
// providers involved, (2) checks capacity and unit constraints, (3)
// replaces the consumers' allocation rows, (4) bumps every involved
// provider's generation with one optimistic "… WHERE generation = ?"
// update and corrects the usage summary (allocation_usages; on MySQL
// usually in the same statement) and (5) bumps every consumer's
// generation, optimistically too. A lost race is retried a few times and
// then reported as 409 placement.concurrent_update.
//
// On MySQL a write to one provider is thus six round trips (START
// TRANSACTION, the read, the allocation rows, generations and usage, the
// consumer row, COMMIT).
//
// multi selects the wording of POST /allocations (several consumers) for
// the unknown-resource-class error; PUT names its single consumer.
func (s *Service) WriteAllocations(ctx context.Context, ws []ConsumerWrite, multi bool) error {
	if err := checkWrites(ws); err != nil {
		return err
	}
	typeIDs, err := s.consumerTypeIDs(ctx, ws)
	if err != nil {
		return err
	}
	plan := func(tx *gorm.DB) (func(tx *gorm.DB) error, error) {
		return s.planAllocations(tx, ws, typeIDs, multi)
	}
	var last *errRetry
	for attempt := 0; attempt < allocationRetries; attempt++ {
		err := s.runWrite(ctx, plan)
		if err == nil {
			return nil
		}
		var r *errRetry
		if errors.As(err, &r) {
			last = r
			continue
		}
		if isLockConflict(err) {
			last = &errRetry{msgProviderRace}
			continue
		}
		return wrap("write allocations", err)
	}
	return Conflict(CodeConcurrentUpdate, "Inventory and/or allocations changed while attempting to allocate: %s", last.msg)
}

// writePlan is the reading half of a write: it checks the request inside
// tx and returns the writing half, or the request's error (then nothing
// was written).
type writePlan func(tx *gorm.DB) (apply func(tx *gorm.DB) error, err error)

// runWrite runs plan and its writes as one db.Write: on SQLite in the
// database's group-commit writer (the write shares a transaction and one
// fsync with the writes queued beside it, sees their effects, and is
// undone alone if it fails), on MySQL in a READ COMMITTED transaction of
// its own: correctness comes from the optimistic generation updates, and
// that level takes no gap locks, which would make concurrent allocation
// writes of unrelated consumers deadlock.
func (s *Service) runWrite(ctx context.Context, plan writePlan) error {
	return s.writeTx(ctx, func(tx *gorm.DB) error {
		apply, err := plan(tx)
		if err != nil {
			return err
		}
		return apply(tx)
	})
}

// checkWrites rejects input the HTTP schema should already have refused,
// so that no caller can write a non-positive amount or a nameless row.
func checkWrites(ws []ConsumerWrite) error {
	if len(ws) == 0 {
		return BadRequest("No consumers to allocate for.")
	}
	seen := map[string]bool{}
	for _, w := range ws {
		if w.UUID == "" {
			return BadRequest("Malformed consumer_uuid: %s", w.UUID)
		}
		if seen[w.UUID] {
			return BadRequest("Consumer %s appears more than once.", w.UUID)
		}
		seen[w.UUID] = true
		if (w.ProjectID == "") != (w.UserID == "") {
			return BadRequest("project_id and user_id must be given together.")
		}
		for rp, res := range w.Allocations {
			if len(res) == 0 {
				return BadRequest("Allocation for resource provider '%s' has no resources.", rp)
			}
			for rc, n := range res {
				if n < 1 {
					return BadRequest("Allocation of %s on resource provider '%s' must be at least 1, not %d.", rc, rp, n)
				}
			}
		}
	}
	return nil
}

// writeTx runs fn as one durable write (db.Write), READ COMMITTED on
// MySQL (see runWrite).
func (s *Service) writeTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.db.Dialect == db.MySQL {
		return s.db.Write(ctx, fn, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	return s.db.Write(ctx, fn)
}

// isLockConflict reports a transaction lost to a lock conflict (MySQL
// deadlock or lock wait timeout, SQLite still busy): it did not happen
// and can be run again.
func isLockConflict(err error) bool { return db.IsLockConflict(err) }

// allocProviderRow is a resource provider as the write path needs it.
type allocProviderRow struct {
	id         int64
	uuid       string
	generation int64
}

// capKey names one inventory: a provider and a resource class name.
type capKey struct {
	rp    int64
	class string
}

// capRow is one inventory with the usage against it.
type capRow struct {
	rp       int64
	classID  int64
	total    int64
	reserved int64
	minUnit  int64
	maxUnit  int64
	stepSize int64
	ratio    float64
	// usedAll is the current usage; usedOwn the part of it held by the
	// consumers being rewritten (which the write replaces).
	usedAll int64
	usedOwn int64
}

// allocInsert is one allocation row to insert.
type allocInsert struct {
	rp       int64
	consumer string
	classID  int64
	used     int64
}

func (s *Service) writeAllocations(tx *gorm.DB, ws []ConsumerWrite, typeIDs map[string]int64, multi bool) error {
	apply, err := s.planAllocations(tx, ws, typeIDs, multi)
	if err != nil {
		return err
	}
	return apply(tx)
}

// planAllocations does the reading half of an allocation write inside tx
// (consumer generations, providers, inventory, usage, capacity) and
// returns the writing half. Every request error comes from here, before
// anything is written; apply fails only on a lost race or a database
// error.
func (s *Service) planAllocations(tx *gorm.DB, ws []ConsumerWrite, typeIDs map[string]int64, multi bool) (func(tx *gorm.DB) error, error) {
	t := now()
	uuids := make([]string, len(ws))
	for i, w := range ws {
		uuids[i] = w.UUID
	}

	// Providers named in the new allocations, and the classes asked for.
	var rpUUIDs []string
	seenRP := map[string]bool{}
	classSet := map[string]bool{}
	for _, w := range ws {
		for _, rp := range allocKeys(w.Allocations) {
			if !seenRP[rp] {
				seenRP[rp] = true
				rpUUIDs = append(rpUUIDs, rp)
			}
			for rc := range w.Allocations[rp] {
				classSet[rc] = true
			}
		}
	}

	// One statement reads the consumers with what they hold now and the
	// providers with their inventory and usage (see readWriteState).
	st, err := readWriteState(tx, uuids, rpUUIDs, classSet)
	if err != nil {
		return nil, err
	}
	existing, providers, inv := st.consumers, st.providers, st.inv

	// Consumers: the generation each write expects comes first, as
	// upstream checks it before looking at providers.
	if err := checkConsumerGenerations(ws, existing); err != nil {
		return nil, err
	}

	// Providers named in the new allocations must exist.
	for _, rp := range rpUUIDs {
		if providers[rp] == nil {
			return nil, BadRequest("Allocation for resource provider '%s' that does not exist.", rp)
		}
	}

	// Providers whose allocations are being cleared are bumped too.
	bump := map[int64]int64{} // provider id → generation read
	for _, p := range providers {
		bump[p.id] = p.generation
	}
	for _, w := range ws {
		if len(w.Allocations) == 0 && existing[w.UUID] != nil {
			for id, gen := range st.heldProviders[w.UUID] {
				bump[id] = gen
			}
		}
	}

	// What the consumers hold now is replaced by this write: it does not
	// count against the capacity it asks for. Allocations only exist with
	// their consumer row (every writer goes through here), so only
	// existing consumers can hold anything.
	var held []string
	for _, u := range uuids {
		if existing[u] != nil {
			held = append(held, u)
		}
	}
	own := st.own
	for _, r := range inv {
		r.usedOwn = own[usageKey{r.rp, r.classID}]
	}
	if err := s.checkInventoryPresent(tx, ws, providers, inv, multi); err != nil {
		return nil, err
	}
	inserts, err := planInserts(ws, providers, inv)
	if err != nil {
		return nil, err
	}

	return func(tx *gorm.DB) error {
		// Replace the consumers' allocations.
		if len(held) > 0 {
			if err := tx.Exec("DELETE FROM allocations WHERE consumer_id IN ?", held).Error; err != nil {
				return err
			}
		}
		if err := s.insertAllocations(tx, inserts, t); err != nil {
			return err
		}
		delta := map[usageKey]int64{}
		for k, n := range own {
			delta[k] -= n
		}
		for _, a := range inserts {
			delta[usageKey{a.rp, a.classID}] += a.used
		}
		// Optimistic generation bumps first, then the usage rows: every
		// writer locks providers before usage rows, so concurrent MySQL
		// writers do not lock them in opposite orders.
		if s.db.Dialect == db.MySQL && usageRowsExist(delta, bump, st.usageRows) {
			// One statement for both (see bumpWithUsage).
			if err := bumpWithUsage(tx, bump, delta, t); err != nil {
				return err
			}
		} else {
			if err := bumpGenerations(tx, bump, t); err != nil {
				return err
			}
			if err := s.addUsage(tx, delta); err != nil {
				return err
			}
		}
		return s.writeConsumers(tx, ws, existing, typeIDs, t)
	}, nil
}

// checkConsumerGenerations compares the generation each write expects
// with the consumer's (existing: the consumers read, by uuid).
func checkConsumerGenerations(ws []ConsumerWrite, existing map[string]*consumerRow) error {
	for _, w := range ws {
		if !w.CheckGeneration {
			continue
		}
		c := existing[w.UUID]
		switch {
		case c == nil && w.Generation != nil:
			return Conflict(CodeConcurrentUpdate, "consumer generation conflict - expected null but got %d", *w.Generation)
		case c != nil && (w.Generation == nil || *w.Generation != c.generation):
			return Conflict(CodeConcurrentUpdate, "consumer generation conflict - expected %d but got %s", c.generation, pyOptInt(w.Generation))
		}
	}
	return nil
}

// planInserts checks every amount of the writes against its inventory
// (unit constraints, then capacity with what the consumers held before
// not counted) and returns the allocation rows to insert.
func planInserts(ws []ConsumerWrite, providers map[string]*allocProviderRow, inv map[capKey]*capRow) ([]allocInsert, error) {
	var inserts []allocInsert
	needed := map[capKey]int64{}
	for _, w := range ws {
		for _, rpUUID := range allocKeys(w.Allocations) {
			rp := providers[rpUUID]
			res := w.Allocations[rpUUID]
			for _, class := range allocKeys(res) {
				n := res[class]
				k := capKey{rp.id, class}
				in := inv[k]
				if n < in.minUnit || n > in.maxUnit || n%in.stepSize != 0 {
					return nil, Conflict("", "Unable to allocate inventory: Unable to create allocation for '%s' on resource provider '%s'. The requested amount would violate inventory constraints.", class, rpUUID)
				}
				needed[k] += n
				// Usage by everyone else plus what this request asks
				// for. Going over capacity is refused unless the write
				// leaves the provider no more over-committed than it was
				// (inventory may have shrunk below existing usage).
				after := in.usedAll - in.usedOwn + needed[k]
				capacity := float64(in.total-in.reserved) * in.ratio
				if capacity < float64(after) && after > in.usedAll {
					return nil, NotEnough("Unable to allocate inventory: Unable to create allocation for '%s' on resource provider '%s'. The requested amount would exceed the capacity.", class, rpUUID)
				}
				inserts = append(inserts, allocInsert{rp: rp.id, consumer: w.UUID, classID: in.classID, used: n})
			}
		}
	}
	return inserts, nil
}

// writeConsumers creates, updates (bumping the generation optimistically)
// or deletes the consumer rows of a write.
func (s *Service) writeConsumers(tx *gorm.DB, ws []ConsumerWrite, existing map[string]*consumerRow, typeIDs map[string]int64, t time.Time) error {
	var newRows []ConsumerWrite
	for _, w := range ws {
		project, user := w.ProjectID, w.UserID
		if project == "" {
			project, user = s.cfg.IncompleteConsumerProjectID, s.cfg.IncompleteConsumerUserID
		}
		c := existing[w.UUID]
		var typeID *int64
		if w.Type != "" {
			id := typeIDs[w.Type]
			typeID = &id
		} else if c != nil {
			typeID = c.typeID
		}
		switch {
		case c == nil && len(w.Allocations) == 0:
			// Nothing held, nothing asked: no consumer to keep.
		case c == nil:
			w.ProjectID, w.UserID = project, user
			newRows = append(newRows, w)
		case len(w.Allocations) == 0:
			res := tx.Exec("DELETE FROM consumers WHERE id = ? AND generation = ?", c.id, c.generation)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return &errRetry{msgConsumerRace}
			}
		default:
			res := tx.Exec(`UPDATE consumers SET generation = generation + 1, project_id = ?, user_id = ?, consumer_type_id = ?, updated_at = ?
 WHERE id = ? AND generation = ?`, project, user, typeID, t, c.id, c.generation)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return &errRetry{msgConsumerRace}
			}
		}
	}
	if len(newRows) == 0 {
		return nil
	}
	// New consumers start at generation 1 (created and bumped by this
	// write). The unique index on uuid is their optimistic guard: a
	// concurrent creator makes this insert fail, and the retry sees the
	// consumer.
	var sb strings.Builder
	sb.WriteString(s.insertVerb() + " consumers (uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at) VALUES ")
	args := make([]any, 0, 6*len(newRows))
	for i, w := range newRows {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, 1, ?, ?, ?)")
		var typeID *int64
		if w.Type != "" {
			id := typeIDs[w.Type]
			typeID = &id
		}
		args = append(args, w.UUID, w.ProjectID, w.UserID, typeID, t, t)
	}
	if err := tx.Exec(sb.String(), args...).Error; err != nil {
		if db.IsDuplicate(err) {
			return &errRetry{msgConsumerRace}
		}
		return err
	}
	return nil
}

// insertVerb starts the multi-row INSERTs of a write. On SQLite it is
// INSERT OR FAIL: any failure aborts the whole write anyway, so SQLite
// need not keep a statement journal to undo half a statement (which the
// pure-Go SQLite pays for with a memory map per statement).
func (s *Service) insertVerb() string {
	if s.db.Dialect == db.SQLite {
		return "INSERT OR FAIL INTO"
	}
	return "INSERT INTO"
}

// insertAllocations inserts rows in multi-row INSERTs.
func (s *Service) insertAllocations(tx *gorm.DB, rows []allocInsert, t time.Time) error {
	verb := s.insertVerb()
	const chunk = 500
	for len(rows) > 0 {
		n := min(len(rows), chunk)
		var sb strings.Builder
		sb.WriteString(verb + " allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at) VALUES ")
		args := make([]any, 0, 6*n)
		for i, a := range rows[:n] {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, a.rp, a.consumer, a.classID, a.used, t, t)
		}
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// checkInventoryPresent fails the write when a class asked for does not
// exist (400) or a provider has no inventory of it (409), in upstream's
// order: unknown classes, then providers with none of the classes, then
// the first missing (provider, class).
func (s *Service) checkInventoryPresent(tx *gorm.DB, ws []ConsumerWrite, providers map[string]*allocProviderRow, inv map[capKey]*capRow, multi bool) error {
	type miss struct{ rp, class string }
	var missing []miss
	var classes []string
	seenClass := map[string]bool{}
	for _, w := range ws {
		for _, rpUUID := range allocKeys(w.Allocations) {
			for _, class := range allocKeys(w.Allocations[rpUUID]) {
				if !seenClass[class] {
					seenClass[class] = true
					classes = append(classes, class)
				}
				if inv[capKey{providers[rpUUID].id, class}] == nil {
					missing = append(missing, miss{rpUUID, class})
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var known []string
	if err := tx.Raw("SELECT name FROM resource_classes WHERE name IN ?", classes).Scan(&known).Error; err != nil {
		return err
	}
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	for _, m := range missing {
		if isKnown[m.class] {
			continue
		}
		if multi {
			return BadRequest("Unable to allocate inventory No such resource class %s.", m.class)
		}
		return BadRequest("Unable to allocate inventory for consumer %s: No such resource class %s.", ws[0].UUID, m.class)
	}
	hasAny := map[int64]bool{}
	for k := range inv {
		hasAny[k.rp] = true
	}
	var bare []string
	for _, rpUUID := range allocKeys(providers) {
		if !hasAny[providers[rpUUID].id] {
			bare = append(bare, rpUUID)
		}
	}
	if len(bare) > 0 {
		return Conflict("", "Unable to allocate inventory: Inventory for '%s' on resource provider '%s' invalid.", strings.Join(classes, ", "), strings.Join(bare, ", "))
	}
	return Conflict("", "Unable to allocate inventory: Inventory for '%s' on resource provider '%s' invalid.", missing[0].class, missing[0].rp)
}

// pyOptInt renders an optional integer as Python's %s would (None for nil).
func pyOptInt(p *int64) string {
	if p == nil {
		return "None"
	}
	return strconv.FormatInt(*p, 10)
}

func allocKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
