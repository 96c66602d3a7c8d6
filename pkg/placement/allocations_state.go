package placement

import (
	"database/sql"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
)

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
	return execAll(tx, sb.String(), args, int64(len(ids)))
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
	return execAll(tx, sb.String(), args, int64(len(ids)+len(keys)))
}

// execAll runs an optimistic UPDATE that must change want rows: fewer
// means a provider's generation moved since it was read, a lost race.
func execAll(tx *gorm.DB, q string, args []any, want int64) error {
	res, err := db.SQLOf(tx).ExecContext(tx.Statement.Context, q, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != want {
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
