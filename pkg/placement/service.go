// Package placement is the domain logic of the Placement API: resource
// providers and their trees, inventories, traits, aggregates, resource
// classes, consumers and allocations.
//
// Concurrency: Placement's own model, optimistic generations. Every write
// that changes a provider bumps its generation with
// "UPDATE … SET generation = generation + 1 WHERE id = ? AND generation = ?"
// inside the write's transaction; zero rows affected means another writer
// got there first and the request fails with 409
// placement.concurrent_update, rolling everything back. This holds across
// processes sharing one database (MySQL row locks serialise the UPDATEs;
// SQLite serialises whole write transactions).
package placement

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
)

// Config holds the settings the domain needs.
type Config struct {
	IncompleteConsumerProjectID string
	IncompleteConsumerUserID    string
	// ObserveCandidates, when set, is told the cost of every allocation
	// candidates search that ran (candidates generated, merge steps),
	// for metrics. It must not block.
	ObserveCandidates func(generated, steps int)
}

// Service implements the Placement domain on a database. It owns the
// caches kept for that database: build one Service per database and share
// it (a second Service on the same database is correct, with caches of
// its own).
type Service struct {
	db  *db.DB
	cfg Config
	// snapshots is the allocation-candidates snapshot, rebuilt when the
	// database's marker changes.
	snapshots *snapshotCache
	// consumerTypes maps consumer type names to ids.
	consumerTypes *consumerTypeCache
	// provRows is every provider's row for GET /resource_providers, as
	// of one SQLite data_version.
	provRows *providerRowCache
}

// NewService returns a Service on d.
func NewService(d *db.DB, cfg Config) *Service {
	return &Service{
		db: d, cfg: cfg,
		snapshots:     &snapshotCache{},
		consumerTypes: &consumerTypeCache{ids: map[string]int64{}},
		provRows:      &providerRowCache{},
	}
}

// DB exposes the database for services layered on Placement (the Blazar
// host plugin creates providers in the same transaction as its hosts).
func (s *Service) DB() *db.DB { return s.db }

// tx runs fn in a transaction.
func (s *Service) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.db.WithContext(ctx).Transaction(fn)
}

// wtx runs fn as a generation-checked write (inventories, traits,
// aggregates, classes, providers) through db.Write: on SQLite the
// group-commit writer (fn shares a transaction and a commit with the
// writes queued beside it, in its own savepoint), on MySQL a READ
// COMMITTED transaction (correctness comes from the optimistic generation
// updates, and that level takes no gap locks) run again on deadlocks and
// lock wait timeouts. A write that still loses to lock conflicts changed
// nothing and is a 409 placement.concurrent_update.
func (s *Service) wtx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var opts []*sql.TxOptions
	if s.db.Dialect == db.MySQL {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	err := s.db.Write(ctx, fn, opts...)
	if err != nil && lockConflict(err) && ctx.Err() == nil {
		return errConcurrent("Another thread concurrently updated the data. Please retry your update")
	}
	return err
}

// lockConflict reports a MySQL deadlock (1213) or lock wait timeout
// (1205), or SQLITE_BUSY/SQLITE_LOCKED past the busy timeout.
func lockConflict(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}

// conn returns a non-transactional session for reads.
func (s *Service) conn(ctx context.Context) *gorm.DB { return s.db.WithContext(ctx) }

// bumpGeneration increments a provider's generation if it still is gen.
func bumpGeneration(tx *gorm.DB, providerID, gen int64, now time.Time) error {
	res, err := db.SQLOf(tx).ExecContext(tx.Statement.Context,
		"UPDATE resource_providers SET generation = generation + 1, updated_at = ? WHERE id = ? AND generation = ?", now, providerID, gen)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errConcurrent("resource provider generation conflict")
	}
	return nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// isNotFound reports a missing row.
func isNotFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }
