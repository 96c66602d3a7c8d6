package db

import (
	"context"
	"slices"

	"gorm.io/gorm"
)

// Placeholders appends n groups of "(?,…,?)" with cols placeholders each,
// separated by commas, to a statement's text.
func Placeholders(b []byte, n, cols int) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '(')
		for c := range cols {
			if c > 0 {
				b = append(b, ',')
			}
			b = append(b, '?')
		}
		b = append(b, ')')
	}
	return b
}

// LockResources serialises every write transaction that books or frees
// one of ids: it upserts a row per resource in blazar_resource_locks
// (bumping its version), in sorted order so two transactions never
// deadlock on each other's locks. On MySQL the row locks are held until
// commit; a SQLite write transaction already holds the database write
// lock, so the rows only record the versions there.
func LockResources(ctx context.Context, tx *gorm.DB, dialect Dialect, resourceType string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	q := append(make([]byte, 0, 128+8*len(ids)), "INSERT INTO blazar_resource_locks (resource_type, resource_id, version) VALUES "...)
	q = Placeholders(q, len(ids), 3)
	if dialect == MySQL {
		q = append(q, " ON DUPLICATE KEY UPDATE version = version + 1"...)
	} else {
		q = append(q, " ON CONFLICT (resource_type, resource_id) DO UPDATE SET version = version + 1"...)
	}
	args := make([]any, 0, 3*len(ids))
	for _, id := range ids {
		args = append(args, resourceType, id, 1)
	}
	return tx.WithContext(ctx).Exec(string(q), args...).Error
}
