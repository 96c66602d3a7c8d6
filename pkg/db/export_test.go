package db

import "context"

// QueuedWrites is how many writes wait for d's group writer.
func QueuedWrites(d *DB) int {
	w := d.writer()
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q)
}

// WriteBatches is how many transactions d's group writer has run.
func WriteBatches(d *DB) int64 { return d.writer().batches.Load() }

// MigrationIDs lists the migrations' ids in the order they run.
func MigrationIDs() []string {
	ids := make([]string, len(migrations))
	for i, m := range migrations {
		ids[i] = m.ID
	}
	return ids
}

// MigrateFirst brings d's schema to what a binary whose migration list
// ended after the first n migrations left behind: those migrations, then
// the standard classes and traits (their tables date from the first
// migration), as its Migrate did.
func MigrateFirst(ctx context.Context, d *DB, n int) error {
	if err := d.migrator(ctx, migrations[:n]).Migrate(); err != nil {
		return err
	}
	return d.SyncStandard(ctx)
}
