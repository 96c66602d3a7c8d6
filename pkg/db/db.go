// Package db opens the database named by an oslo-style URL (embedded
// SQLite or MySQL/MariaDB), runs the versioned migrations and keeps the
// standard Placement data in sync.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	gormsqlite "github.com/libtnb/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	_ "modernc.org/sqlite" // the "sqlite" driver whose DSN parameters ParseURL writes
)

// SQLite runs on modernc.org/sqlite (pure Go, so the binary stays
// CGO_ENABLED=0) under github.com/libtnb/sqlite, a GORM dialector written
// for that driver: it links no cgo driver (gorm.io/driver/sqlite imports
// mattn/go-sqlite3) and translates modernc's constraint errors to GORM's
// (unique and primary key → gorm.ErrDuplicatedKey, foreign key →
// gorm.ErrForeignKeyViolated).

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
	// rc is MySQL's READ COMMITTED pool (see openReadCommitted).
	rc *gorm.DB
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
		// No prepared statements on MySQL: interpolateParams sends each
		// statement in one round trip where a prepared one costs a
		// PREPARE per connection and SQL text (IN lists and multi-row
		// INSERTs make many) and server memory. SQLite: below.
		PrepareStmt: false,
		Logger:      logger.Discard,
		NowFunc:     func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	var g *gorm.DB
	switch t.Dialect {
	case SQLite:
		// modernc.org/sqlite keeps a prepared statement's compiled
		// program: SQLite parses and plans each distinct statement once
		// per connection instead of on every run (a fifth of a simple
		// read's CPU). The bound keeps IN lists of every length from
		// piling up.
		cfg.PrepareStmt = true
		cfg.PrepareStmtMaxSize = 512
		g, err = openSQLite(t.DSN, cfg)
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
	d := &DB{DB: g, Dialect: t.Dialect, memory: t.Dialect == SQLite && t.Path == ":memory:"}
	if t.Dialect == MySQL {
		if d.rc, err = openReadCommitted(t.DSN, cfg); err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("open database %s: %w", redact(rawURL), err)
		}
	}
	return d, nil
}

// openReadCommitted opens a second MySQL pool whose sessions run READ
// COMMITTED by default. The writes that ask for that level (all of
// Placement's and the lease engine's) run on it and begin with a single
// START TRANSACTION round trip; through the main pool the driver first
// sends SET TRANSACTION ISOLATION LEVEL for each transaction.
func openReadCommitted(dsn string, cfg *gorm.Config) (*gorm.DB, error) {
	mc, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	inner, err := mysqldrv.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	pool := sql.OpenDB(rcConnector{inner})
	pool.SetMaxOpenConns(64)
	pool.SetMaxIdleConns(64)
	pool.SetConnMaxLifetime(time.Hour)
	rcCfg := *cfg
	g, err := gorm.Open(mysql.New(mysql.Config{Conn: pool}), &rcCfg)
	if err != nil {
		_ = pool.Close()
		return nil, err
	}
	return g, nil
}

// rcConnector makes every new connection READ COMMITTED.
type rcConnector struct{ driver.Connector }

func (c rcConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("db: MySQL driver connection cannot execute statements")
	}
	if _, err := ex.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// SQLOf is the database/sql handle under a GORM session: the pool, or
// the transaction inside Transaction/Write. Hot paths run their raw SQL
// on it (ExecContext, QueryContext, QueryRowContext with
// tx.Statement.Context) and skip GORM's statement building and
// reflection.
func SQLOf(tx *gorm.DB) gorm.ConnPool { return tx.Statement.ConnPool }

// Close stops the group-commit writer (after the writes it holds) and
// closes the underlying pools.
func (d *DB) Close() error {
	d.stopWriter()
	if d.rc != nil {
		if rcDB, err := d.rc.DB(); err == nil {
			_ = rcDB.Close()
		}
	}
	sqlDB, err := d.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks the database is reachable and serves queries (for
// /healthcheck). On MySQL it reads a table: a Galera node outside the
// primary component (or told to reject queries) still answers the
// protocol's ping and statements that read no table, but refuses the
// others with error 1047.
func (d *DB) Ping(ctx context.Context) error {
	sqlDB, err := d.DB.DB()
	if err != nil {
		return err
	}
	if d.Dialect != MySQL {
		return sqlDB.PingContext(ctx)
	}
	var one int
	err = sqlDB.QueryRowContext(ctx, "SELECT 1 FROM "+migrationsTable+" LIMIT 1").Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

// IsDuplicate reports whether err is a unique-constraint violation.
func IsDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

// openSQLite opens the pool itself and hands it to the dialector: the
// dialector would otherwise add its own driver parameters to the DSN
// (_texttotime, _inttotime), which change what raw queries scan into.
// The DSN from ParseURL already carries the pragmas, the time format and
// the transaction lock mode.
func openSQLite(dsn string, cfg *gorm.Config) (*gorm.DB, error) {
	pool, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	g, err := gorm.Open(gormsqlite.New(gormsqlite.Config{Conn: pool}), cfg)
	if err != nil {
		_ = pool.Close()
		return nil, err
	}
	return g, nil
}
