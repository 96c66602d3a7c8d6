// Package db opens the database named by an oslo-style URL (embedded
// SQLite or MySQL/MariaDB), runs the versioned migrations and keeps the
// standard Placement data in sync.
package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DB is an open database with its dialect.
type DB struct {
	*gorm.DB
	Dialect Dialect

	// memory is a private in-memory SQLite database (one connection).
	memory bool
	// wmu guards w and closed: the SQLite group-commit writer, started
	// by the first Write.
	wmu    sync.Mutex
	w      *groupWriter
	closed bool
}

// Open connects to the database at url. It does not migrate.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg := &gorm.Config{
		TranslateError:         true,
		SkipDefaultTransaction: true,
		// No prepared statements: the SQLite driver prepares every
		// statement on each run anyway, and on MySQL interpolateParams
		// sends each statement in one round trip where a prepared one
		// costs a PREPARE per connection and SQL text (IN lists and
		// multi-row INSERTs make many) and server memory.
		PrepareStmt: false,
		Logger:      logger.Discard,
		NowFunc:     func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	var g *gorm.DB
	switch t.Dialect {
	case SQLite:
		g, err = gorm.Open(sqlite.Open(t.DSN), cfg)
	case MySQL:
		g, err = gorm.Open(mysql.New(mysql.Config{DSN: t.DSN}), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redact(rawURL), err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	switch t.Dialect {
	case SQLite:
		if t.Path == ":memory:" {
			// Every connection to a private in-memory DB is a new DB.
			sqlDB.SetMaxOpenConns(1)
		} else {
			sqlDB.SetMaxOpenConns(8)
			sqlDB.SetMaxIdleConns(8)
		}
	case MySQL:
		sqlDB.SetMaxOpenConns(64)
		sqlDB.SetMaxIdleConns(64)
		sqlDB.SetConnMaxLifetime(time.Hour)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("connect to database %s: %w", redact(rawURL), err)
	}
	slog.DebugContext(ctx, "database open", "dialect", t.Dialect, "url", redact(rawURL))
	return &DB{DB: g, Dialect: t.Dialect, memory: t.Dialect == SQLite && t.Path == ":memory:"}, nil
}

// SQLOf is the database/sql handle under a GORM session: the pool, or
// the transaction inside Transaction/Write. Hot paths run their raw SQL
// on it (ExecContext, QueryContext, QueryRowContext with
// tx.Statement.Context) and skip GORM's statement building and
// reflection.
func SQLOf(tx *gorm.DB) gorm.ConnPool { return tx.Statement.ConnPool }

// Close stops the group-commit writer (after the writes it holds) and
// closes the underlying pool.
func (d *DB) Close() error {
	d.stopWriter()
	sqlDB, err := d.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks the database is reachable (for /healthcheck).
func (d *DB) Ping(ctx context.Context) error {
	sqlDB, err := d.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// IsDuplicate reports whether err is a unique-constraint violation.
func IsDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }
