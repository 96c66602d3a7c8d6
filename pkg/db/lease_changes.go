package db

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// Compaction of lease_changes (0013). The triggers add a row per write,
// so the log grows with every change; CompactLeaseChanges folds each
// bucket's rows into one row holding their sum, which keeps every
// bucket's version (SUM(n)) exactly what it was, and so the sum of the
// whole table, which the listings read as the cheap "nothing changed"
// check. A compacted log holds one row per bucket ever written (a few
// hundred with UUID lease ids), whatever the number of leases.
//
// The rows are read without locks; then, in one transaction per batch
// of buckets, exactly the row ids read are deleted and one row per
// bucket with their sum inserted (a few multi-row statements). Only a
// compaction deletes log rows, so a delete that finds fewer rows than it
// read lost a race with another compaction (another process, another
// node): the batch is undone and left to the next run. A row a writer
// adds meanwhile is not among the ids read and stays. A lock conflict
// (deadlock, Galera certification) is retried by Write like any write.

// errCompactRace undoes a compaction batch whose rows another
// compaction deleted first.
var errCompactRace = errors.New("db: lease_changes rows compacted by another run")

// compactBatch is how many buckets one compaction transaction folds: a
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
		bucket string
		ids    []int64
		sum    int64
	}
	byBucket := map[string]*group{}
	err = EachRow(ctx, sqlDB, "SELECT id, bucket, n FROM "+LeaseChangesTable, nil,
		func(rows *sql.Rows) error {
			var id, n int64
			var bucket string
			if err := rows.Scan(&id, &bucket, &n); err != nil {
				return err
			}
			g := byBucket[bucket]
			if g == nil {
				g = &group{bucket: bucket}
				byBucket[bucket] = g
			}
			g.ids = append(g.ids, id)
			g.sum += n
			return nil
		})
	if err != nil {
		return 0, err
	}
	var todo []*group
	for _, g := range byBucket {
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
			values = append(values, g.bucket, g.sum)
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
				if err := tx.Exec("INSERT INTO "+LeaseChangesTable+" (bucket, n) VALUES "+strings.Repeat(",(?, ?)", len(chunk)/2)[1:], chunk...).Error; err != nil {
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

// LeaseBucket is the bucket of lease id in lease_changes: its first two
// characters (the whole id when shorter), as the triggers' LEFT(id, 2)
// (MySQL) and substr(id, 1, 2) (SQLite) count them.
func LeaseBucket(id string) string {
	i := 0
	for range 2 {
		if i >= len(id) {
			break
		}
		_, size := utf8.DecodeRuneInString(id[i:])
		i += size
	}
	return id[:i]
}

// BucketRange is a range of ids [lo, hi) that holds every id of bucket
// b (hi "": no upper bound) in the binary order of the lease ids
// (SQLite's BINARY, MySQL's utf8mb4_bin: code point order). It holds
// ids of other buckets too (b's one-character prefix is a bucket of its
// own), and MariaDB's utf8mb4_bin pads with spaces when it compares, so
// "ab\x01" sorts before "ab": lo is just below every id starting with
// b, the last character lowered by one and followed by the greatest
// one. A reader keeps the ids whose LeaseBucket is b.
func BucketRange(b string) (lo, hi string) {
	r, size := utf8.DecodeLastRuneInString(b)
	if size == 0 {
		return "", "" // the bucket of the empty id: read everything
	}
	head := b[:len(b)-size]
	switch {
	case r == 0:
		lo = head
	case r == 0xE000: // the code points skip the surrogates
		lo = head + string(rune(0xD7FF)) + string(utf8.MaxRune)
	default:
		lo = head + string(r-1) + string(utf8.MaxRune)
	}
	switch {
	case r == utf8.MaxRune:
		return lo, ""
	case r == 0xD7FF:
		r = 0xE000
	default:
		r++
	}
	return lo, head + string(r)
}
