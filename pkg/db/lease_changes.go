package db

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"gorm.io/gorm"
)

// Compaction of lease_changes (0013). The triggers add a row per write,
// so the log grows with every change; CompactLeaseChanges folds each
// lease's rows into one row holding their sum, which keeps every
// lease's version (SUM(n)) exactly what it was, and folds the rows of
// leases that are gone into one row under the lease id "" so the sum of
// the whole table, which the listings read as the cheap "nothing
// changed" check, never goes down either.
//
// The rows are read without locks; then, a batch of leases at a time in
// one transaction, exactly the row ids read are deleted and one row per
// lease with their sum inserted (a few multi-row statements). Only a compaction deletes log rows, so
// a delete that finds fewer rows than it read lost a race with another
// compaction (another process, another node): the batch is undone and
// left to the next run. A row a writer adds meanwhile is not among the
// ids read and stays. A lock conflict (deadlock, Galera certification)
// is retried by Write like any write.

// errCompactRace undoes a compaction batch whose rows another
// compaction deleted first.
var errCompactRace = errors.New("db: lease_changes rows compacted by another run")

// compactBatch is how many leases one compaction transaction folds: a
// few statements each, so the transaction stays short.
const compactBatch = 1000

// CompactLeaseChanges folds the rows of lease_changes as described
// above and returns how many rows it removed.
func (d *DB) CompactLeaseChanges(ctx context.Context) (int, error) {
	sqlDB, err := d.DB.DB()
	if err != nil {
		return 0, err
	}
	type group struct {
		lease string
		ids   []int64
		sum   int64
	}
	byLease := map[string]*group{}
	// One statement: every row with whether its lease is still there.
	err = EachRow(ctx, sqlDB, "SELECT c.id, c.lease_id, c.n, l.id IS NULL FROM "+LeaseChangesTable+" c LEFT JOIN leases l ON l.id = c.lease_id", nil,
		func(rows *sql.Rows) error {
			var id, n int64
			var lease string
			var gone bool
			if err := rows.Scan(&id, &lease, &n, &gone); err != nil {
				return err
			}
			if gone {
				lease = ""
			}
			g := byLease[lease]
			if g == nil {
				g = &group{lease: lease}
				byLease[lease] = g
			}
			g.ids = append(g.ids, id)
			g.sum += n
			return nil
		})
	if err != nil {
		return 0, err
	}
	var todo []*group
	for _, g := range byLease {
		if len(g.ids) > 1 {
			todo = append(todo, g)
		}
	}
	var opts []*sql.TxOptions
	if d.Dialect == MySQL {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	removed := 0
	for from := 0; from < len(todo); from += compactBatch {
		batch := todo[from:min(from+compactBatch, len(todo))]
		var ids []any
		var values []any
		for _, g := range batch {
			for _, id := range g.ids {
				ids = append(ids, id)
			}
			values = append(values, g.lease, g.sum)
		}
		err := d.Write(ctx, func(tx *gorm.DB) error {
			// Chunks of 500 stay far from the dialects' limits on bound
			// parameters.
			for i := 0; i < len(ids); i += 500 {
				chunk := ids[i:min(i+500, len(ids))]
				res := tx.Exec("DELETE FROM "+LeaseChangesTable+" WHERE id IN ("+strings.Repeat(",?", len(chunk))[1:]+")", chunk...)
				if res.Error != nil {
					return res.Error
				}
				if res.RowsAffected != int64(len(chunk)) {
					return errCompactRace
				}
			}
			for i := 0; i < len(values); i += 500 {
				chunk := values[i:min(i+500, len(values))]
				if err := tx.Exec("INSERT INTO "+LeaseChangesTable+" (lease_id, n) VALUES "+strings.Repeat(",(?, ?)", len(chunk)/2)[1:], chunk...).Error; err != nil {
					return err
				}
			}
			return nil
		}, opts...)
		if errors.Is(err, errCompactRace) {
			continue
		}
		if err != nil {
			return removed, err
		}
		removed += len(ids) - len(batch)
	}
	return removed, nil
}
