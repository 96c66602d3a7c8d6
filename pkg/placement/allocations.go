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
	typeIDs := map[string]int64{}
	for _, w := range ws {
		if w.Type == "" {
			continue
		}
		if _, ok := typeIDs[w.Type]; ok {
			continue
		}
		id, err := s.consumerTypeID(ctx, w.Type)
		if err != nil {
			return err
		}
		typeIDs[w.Type] = id
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
	for _, w := range ws {
		if !w.CheckGeneration {
			continue
		}
		c := existing[w.UUID]
		switch {
		case c == nil && w.Generation != nil:
			return nil, Conflict(CodeConcurrentUpdate, "consumer generation conflict - expected null but got %d", *w.Generation)
		case c != nil && (w.Generation == nil || *w.Generation != c.generation):
			return nil, Conflict(CodeConcurrentUpdate, "consumer generation conflict - expected %d but got %s", c.generation, pyOptInt(w.Generation))
		}
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

// readProvidersByUUID returns the providers among uuids, by uuid.
func readProvidersByUUID(tx *gorm.DB, uuids []string) (map[string]*allocProviderRow, error) {
	out := make(map[string]*allocProviderRow, len(uuids))
	if len(uuids) == 0 {
		return out, nil
	}
	rows, err := tx.Raw("SELECT id, uuid, generation FROM resource_providers WHERE uuid IN ?", uuids).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		p := &allocProviderRow{}
		if err := rows.Scan(&p.id, &p.uuid, &p.generation); err != nil {
			return nil, err
		}
		out[p.uuid] = p
	}
	return out, rows.Err()
}

// usageKey names one (provider id, resource class id) pair.
type usageKey struct{ rp, rc int64 }

// writeState is what an allocation write reads before it checks anything.
type writeState struct {
	// consumers are the existing consumers among those written, by uuid.
	consumers map[string]*consumerRow
	// own is what those consumers hold now, by (provider, class).
	own map[usageKey]int64
	// heldProviders are the providers each consumer holds allocations
	// on: provider id → generation.
	heldProviders map[string]map[int64]int64
	// providers are the providers named by the new allocations that
	// exist, by uuid; inv their inventories of the classes asked for,
	// with the current usage.
	providers map[string]*allocProviderRow
	inv       map[capKey]*capRow
	// usageRows are the (provider, class) pairs of those providers'
	// inventories that have an allocation_usages row.
	usageRows map[usageKey]bool
}

// readWriteState reads, in one statement (one round trip on MySQL), the
// consumers among consumerUUIDs with their allocations (and the
// generation of each provider they are on), and the providers among
// rpUUIDs with their inventories of the classes in classSet and the
// current usage of each (from allocation_usages). The two halves are a
// UNION ALL whose first column tells them apart.
//
// The read takes no locks on MySQL: everything it returns is guarded by
// an optimistic update at the end of the write. A provider's generation
// guards its inventory and usage; a consumer's generation guards what it
// holds (every allocation write bumps the generation of, or deletes,
// every existing consumer it rewrites, so if the consumer's allocations
// changed after this read, its generation moved and the write is rolled
// back and retried).
func readWriteState(tx *gorm.DB, consumerUUIDs, rpUUIDs []string, classSet map[string]bool) (*writeState, error) {
	st := &writeState{
		consumers:     make(map[string]*consumerRow, len(consumerUUIDs)),
		own:           map[usageKey]int64{},
		heldProviders: map[string]map[int64]int64{},
		providers:     make(map[string]*allocProviderRow, len(rpUUIDs)),
		inv:           map[capKey]*capRow{},
		usageRows:     map[usageKey]bool{},
	}
	const consumerPart = `SELECT 0, c.id, c.uuid, c.generation, c.project_id, c.user_id, c.consumer_type_id,
 a.resource_provider_id, a.resource_class_id, a.used, arp.generation, NULL, NULL, NULL
 FROM consumers c
 LEFT JOIN allocations a ON a.consumer_id = c.uuid
 LEFT JOIN resource_providers arp ON arp.id = a.resource_provider_id
 WHERE c.uuid IN ?`
	// Every inventory of the providers, filtered here: a provider has few,
	// and a class filter would cost SQLite more than the extra rows.
	const providerPart = `SELECT 1, rp.id, rp.uuid, rp.generation, rc.name, NULL, i.resource_class_id,
 i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio, u.used
 FROM resource_providers rp
 LEFT JOIN inventories i ON i.resource_provider_id = rp.id
 LEFT JOIN resource_classes rc ON rc.id = i.resource_class_id
 LEFT JOIN allocation_usages u ON u.resource_provider_id = i.resource_provider_id AND u.resource_class_id = i.resource_class_id
 WHERE rp.uuid IN ?`
	var q string
	var args []any
	switch {
	case len(consumerUUIDs) > 0 && len(rpUUIDs) > 0:
		q, args = consumerPart+"\nUNION ALL\n"+providerPart, []any{consumerUUIDs, rpUUIDs}
	case len(consumerUUIDs) > 0:
		q, args = consumerPart, []any{consumerUUIDs}
	case len(rpUUIDs) > 0:
		q, args = providerPart, []any{rpUUIDs}
	default:
		return st, nil
	}
	rows, err := tx.Raw(q, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, id, gen int64
		var uuid string
		var s5, s6 sql.NullString
		var n7, n8, n9, n10, n11, n12, n14 sql.NullInt64
		var f13 sql.NullFloat64
		if err := rows.Scan(&kind, &id, &uuid, &gen, &s5, &s6, &n7, &n8, &n9, &n10, &n11, &n12, &f13, &n14); err != nil {
			return nil, err
		}
		if kind == 0 {
			// A consumer (project, user, type) and one of its allocations
			// (provider, class, used, provider generation), if any.
			c := st.consumers[uuid]
			if c == nil {
				c = &consumerRow{id: id, uuid: uuid, projectID: s5.String, userID: s6.String, generation: gen}
				if n7.Valid {
					t := n7.Int64
					c.typeID = &t
				}
				st.consumers[uuid] = c
			}
			if !n8.Valid {
				continue // holds nothing
			}
			st.own[usageKey{n8.Int64, n9.Int64}] += n10.Int64
			hp := st.heldProviders[uuid]
			if hp == nil {
				hp = map[int64]int64{}
				st.heldProviders[uuid] = hp
			}
			hp[n8.Int64] = n11.Int64
			continue
		}
		// A provider and one of its inventories (class name, class id,
		// total, reserved, min, max, step, ratio, used), if any.
		if st.providers[uuid] == nil {
			st.providers[uuid] = &allocProviderRow{id: id, uuid: uuid, generation: gen}
		}
		if n14.Valid {
			st.usageRows[usageKey{id, n7.Int64}] = true
		}
		if !s5.Valid || !classSet[s5.String] {
			continue
		}
		st.inv[capKey{id, s5.String}] = &capRow{rp: id, classID: n7.Int64, total: n8.Int64, reserved: n9.Int64,
			minUnit: n10.Int64, maxUnit: n11.Int64, stepSize: n12.Int64, ratio: f13.Float64, usedAll: n14.Int64}
	}
	return st, rows.Err()
}

// bumpGenerations bumps the generation of every provider in bump
// (provider id → generation read) in one optimistic UPDATE; a provider
// whose generation moved is not matched and the write is a lost race.
// The UPDATE finds the rows by primary key in id order, so concurrent
// MySQL writers lock them in the same order.
func bumpGenerations(tx *gorm.DB, bump map[int64]int64, t time.Time) error {
	if len(bump) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(bump))
	for id := range bump {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var sb strings.Builder
	sb.WriteString("UPDATE resource_providers SET generation = generation + 1, updated_at = ? WHERE ")
	args := make([]any, 0, 1+2*len(ids))
	args = append(args, t)
	for i, id := range ids {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		if len(ids) > 1 {
			sb.WriteString("(id = ? AND generation = ?)")
		} else {
			sb.WriteString("id = ? AND generation = ?")
		}
		args = append(args, id, bump[id])
	}
	res, err := db.SQLOf(tx).ExecContext(tx.Statement.Context, sb.String(), args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(ids)) {
		return &errRetry{msgProviderRace}
	}
	return nil
}

// usageRowsExist reports whether every usage change in delta is on a
// provider being bumped and has an allocation_usages row to change.
func usageRowsExist(delta map[usageKey]int64, bump map[int64]int64, rows map[usageKey]bool) bool {
	for k, n := range delta {
		if n == 0 {
			continue
		}
		if _, ok := bump[k.rp]; !ok || !rows[k] {
			return false
		}
	}
	return true
}

// bumpWithUsage is bumpGenerations and addUsage in one MySQL multi-table
// UPDATE, for when every usage change is on a bumped provider and its
// allocation_usages row exists (usageRowsExist). The providers are the
// outer side of a LEFT JOIN, so InnoDB locks each provider row (by
// primary key, in id order) before its usage rows. MySQL updates each
// matched row once and counts the rows it changed: one per provider plus
// one per usage change. Fewer means a provider's generation moved (its
// row and its usage rows are not matched) or a usage row went away, and
// the attempt is a lost race (rolled back and run again).
func bumpWithUsage(tx *gorm.DB, bump map[int64]int64, delta map[usageKey]int64, t time.Time) error {
	keys := make([]usageKey, 0, len(delta))
	for k, n := range delta {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return bumpGenerations(tx, bump, t)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].rp != keys[j].rp {
			return keys[i].rp < keys[j].rp
		}
		return keys[i].rc < keys[j].rc
	})
	ids := make([]int64, 0, len(bump))
	for id := range bump {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	var sb strings.Builder
	args := make([]any, 0, 5*len(keys)+2*len(ids)+1)
	sb.WriteString("UPDATE resource_providers rp LEFT JOIN allocation_usages u ON u.resource_provider_id = rp.id AND (")
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		sb.WriteString("(u.resource_provider_id = ? AND u.resource_class_id = ?)")
		args = append(args, k.rp, k.rc)
	}
	sb.WriteString(")\n SET rp.generation = rp.generation + 1, rp.updated_at = ?, u.used = u.used + CASE")
	args = append(args, t)
	for _, k := range keys {
		sb.WriteString(" WHEN u.resource_provider_id = ? AND u.resource_class_id = ? THEN ?")
		args = append(args, k.rp, k.rc, delta[k])
	}
	sb.WriteString(" ELSE 0 END\n WHERE ")
	for i, id := range ids {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		sb.WriteString("(rp.id = ? AND rp.generation = ?)")
		args = append(args, id, bump[id])
	}
	res, err := db.SQLOf(tx).ExecContext(tx.Statement.Context, sb.String(), args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(ids)+len(keys)) {
		return &errRetry{msgProviderRace}
	}
	return nil
}

// addUsage applies usage changes to allocation_usages in one statement,
// in (provider, class) order so concurrent MySQL writers lock rows in
// the same order.
func (s *Service) addUsage(tx *gorm.DB, delta map[usageKey]int64) error {
	keys := make([]usageKey, 0, len(delta))
	for k, n := range delta {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].rp != keys[j].rp {
			return keys[i].rp < keys[j].rp
		}
		return keys[i].rc < keys[j].rc
	})
	var sb strings.Builder
	sb.WriteString(s.insertVerb() + " allocation_usages (resource_provider_id, resource_class_id, used) VALUES ")
	args := make([]any, 0, 3*len(keys))
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?)")
		args = append(args, k.rp, k.rc, delta[k])
	}
	if s.db.Dialect == db.MySQL {
		sb.WriteString(" ON DUPLICATE KEY UPDATE used = used + VALUES(used)")
	} else {
		sb.WriteString(" ON CONFLICT (resource_provider_id, resource_class_id) DO UPDATE SET used = allocation_usages.used + excluded.used")
	}
	return tx.Exec(sb.String(), args...).Error
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

// DeleteAllocations removes every allocation of a consumer and the
// consumer itself. Provider generations are not bumped (as upstream).
func (s *Service) DeleteAllocations(ctx context.Context, consumerUUID string) error {
	plan := func(tx *gorm.DB) (func(tx *gorm.DB) error, error) {
		return s.planDeleteAllocations(tx, consumerUUID)
	}
	var err error
	for attempt := 0; attempt < allocationRetries; attempt++ {
		err = s.runWrite(ctx, plan)
		var r *errRetry
		if err == nil || !(isLockConflict(err) || errors.As(err, &r)) {
			return wrap("delete allocations", err)
		}
	}
	return Conflict(CodeConcurrentUpdate, "Allocations of consumer %s changed while attempting to delete them. Please retry.", consumerUUID)
}

// planDeleteAllocations is the reading half of DeleteAllocations inside
// tx; it returns the writing half.
func (s *Service) planDeleteAllocations(tx *gorm.DB, consumerUUID string) (func(tx *gorm.DB) error, error) {
	held, nRows, c, err := s.readDeleteState(tx, consumerUUID)
	if err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return nil, NotFound("No allocations for consumer '%s'", consumerUUID)
	}
	return func(tx *gorm.DB) error {
		delta := make(map[usageKey]int64, len(held))
		for k, n := range held {
			delta[k] = -n
		}
		if c != nil && s.db.Dialect == db.MySQL {
			// The allocations and the consumer in one statement. The
			// locking read holds every row it matches, so it deletes
			// exactly the rows read plus the consumer, unless the
			// consumer's generation moved: then nothing matches.
			res := tx.Exec(`DELETE a, c FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id
 WHERE a.consumer_id = ? AND c.id = ? AND c.generation = ?`, consumerUUID, c.id, c.generation)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != nRows+1 {
				return &errRetry{msgConsumerRace}
			}
			return s.addUsage(tx, delta)
		}
		if err := tx.Exec("DELETE FROM allocations WHERE consumer_id = ?", consumerUUID).Error; err != nil {
			return err
		}
		if err := s.addUsage(tx, delta); err != nil {
			return err
		}
		if c == nil {
			// Allocations without a consumer row (left by an old
			// writer); drop a row that appeared meanwhile too.
			return tx.Exec("DELETE FROM consumers WHERE uuid = ?", consumerUUID).Error
		}
		// The consumer's generation guards the usage arithmetic: had
		// another write changed its allocations since they were read,
		// the generation moved and this attempt is rolled back.
		res := tx.Exec("DELETE FROM consumers WHERE id = ? AND generation = ?", c.id, c.generation)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return &errRetry{msgConsumerRace}
		}
		return nil
	}, nil
}

// readDeleteState reads, in one statement, what consumerUUID holds, by
// (provider, class), in how many allocation rows, and its consumer row
// (nil if it has none). On MySQL
// it is a locking read: the allocation rows (and the consumer row) stay
// as read until the transaction ends, so the usage summary can be
// corrected by exactly what the delete removes.
func (s *Service) readDeleteState(tx *gorm.DB, consumerUUID string) (held map[usageKey]int64, nRows int64, c *consumerRow, err error) {
	q := `SELECT a.resource_provider_id, a.resource_class_id, a.used, c.id, c.generation
 FROM allocations a LEFT JOIN consumers c ON c.uuid = a.consumer_id WHERE a.consumer_id = ?`
	if s.db.Dialect == db.MySQL {
		q += " FOR UPDATE"
	}
	held = map[usageKey]int64{}
	rows, err := tx.Raw(q, consumerUUID).Rows()
	if err != nil {
		return nil, 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k usageKey
		var n int64
		var id, gen sql.NullInt64
		if err := rows.Scan(&k.rp, &k.rc, &n, &id, &gen); err != nil {
			return nil, 0, nil, err
		}
		held[k] += n
		nRows++
		if id.Valid && c == nil {
			c = &consumerRow{id: id.Int64, uuid: consumerUUID, generation: gen.Int64}
		}
	}
	return held, nRows, c, rows.Err()
}

// ProviderResources is what a consumer holds on one provider.
type ProviderResources struct {
	ProviderUUID       string
	ProviderGeneration int64
	Resources          map[string]int64
}

// ConsumerAllocations is a consumer's allocations, by provider uuid.
type ConsumerAllocations struct {
	// Consumer is nil when the consumer holds nothing.
	Consumer  *Consumer
	Providers map[string]*ProviderResources
	// LastModified is the newest allocation's timestamp (zero if none).
	LastModified time.Time
}

// GetConsumerAllocations returns what consumerUUID holds; an unknown
// consumer simply holds nothing.
func (s *Service) GetConsumerAllocations(ctx context.Context, consumerUUID string) (*ConsumerAllocations, error) {
	rows, err := s.conn(ctx).Raw(`SELECT rp.uuid, rp.generation, rc.name, a.used, a.created_at, a.updated_at,
 c.project_id, c.user_id, c.generation, ct.name
 FROM allocations a
 JOIN consumers c ON c.uuid = a.consumer_id
 JOIN resource_providers rp ON rp.id = a.resource_provider_id
 JOIN resource_classes rc ON rc.id = a.resource_class_id
 LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
 WHERE a.consumer_id = ?`, consumerUUID).Rows()
	if err != nil {
		return nil, wrap("get allocations", err)
	}
	defer rows.Close()
	out := &ConsumerAllocations{Providers: map[string]*ProviderResources{}}
	for rows.Next() {
		var rpUUID, class, project, user string
		var rpGen, used, cGen int64
		var created, updated time.Time
		var typeName sql.NullString
		if err := rows.Scan(&rpUUID, &rpGen, &class, &used, &created, &updated, &project, &user, &cGen, &typeName); err != nil {
			return nil, wrap("get allocations", err)
		}
		if out.Consumer == nil {
			out.Consumer = &Consumer{UUID: consumerUUID, ProjectID: project, UserID: user, Generation: cGen, Type: typeName.String}
		}
		p := out.Providers[rpUUID]
		if p == nil {
			p = &ProviderResources{ProviderUUID: rpUUID, ProviderGeneration: rpGen, Resources: map[string]int64{}}
			out.Providers[rpUUID] = p
		}
		p.Resources[class] = used
		out.LastModified = allocLatest(out.LastModified, created, updated)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("get allocations", err)
	}
	return out, nil
}

// ConsumerResources is what one consumer holds on a provider.
type ConsumerResources struct {
	Generation int64
	Resources  map[string]int64
}

// ProviderAllocations is every allocation against one provider.
type ProviderAllocations struct {
	ProviderGeneration int64
	Consumers          map[string]*ConsumerResources
	LastModified       time.Time
}

// GetProviderAllocations returns the allocations against provider
// rpUUID, read together with its generation in one statement.
func (s *Service) GetProviderAllocations(ctx context.Context, rpUUID string) (*ProviderAllocations, error) {
	rows, err := s.conn(ctx).Raw(`SELECT rp.generation, a.consumer_id, rc.name, a.used, a.created_at, a.updated_at, c.generation
 FROM resource_providers rp
 LEFT JOIN allocations a ON a.resource_provider_id = rp.id
 LEFT JOIN consumers c ON c.uuid = a.consumer_id
 LEFT JOIN resource_classes rc ON rc.id = a.resource_class_id
 WHERE rp.uuid = ?`, rpUUID).Rows()
	if err != nil {
		return nil, wrap("get provider allocations", err)
	}
	defer rows.Close()
	var out *ProviderAllocations
	for rows.Next() {
		var gen int64
		var consumer, class sql.NullString
		var used, cGen sql.NullInt64
		var created, updated sql.NullTime
		if err := rows.Scan(&gen, &consumer, &class, &used, &created, &updated, &cGen); err != nil {
			return nil, wrap("get provider allocations", err)
		}
		if out == nil {
			out = &ProviderAllocations{ProviderGeneration: gen, Consumers: map[string]*ConsumerResources{}}
		}
		if !consumer.Valid || !cGen.Valid || !class.Valid {
			continue // no allocations, or a row without its consumer
		}
		c := out.Consumers[consumer.String]
		if c == nil {
			c = &ConsumerResources{Generation: cGen.Int64, Resources: map[string]int64{}}
			out.Consumers[consumer.String] = c
		}
		c.Resources[class.String] = used.Int64
		out.LastModified = allocLatest(out.LastModified, created.Time, updated.Time)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("get provider allocations", err)
	}
	if out == nil {
		return nil, NotFound("Resource provider '%s' not found: No resource provider with uuid %s found", rpUUID, rpUUID)
	}
	return out, nil
}

func allocLatest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
