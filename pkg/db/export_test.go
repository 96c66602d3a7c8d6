package db

// QueuedWrites is how many writes wait for d's group writer.
func QueuedWrites(d *DB) int {
	w := d.writer()
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q)
}

// WriteBatches is how many transactions d's group writer has run.
func WriteBatches(d *DB) int64 { return d.writer().batches.Load() }
