// Package dbtest gives each test a fresh, migrated database.
//
// By default the database is a SQLite file in t.TempDir(). When the
// environment variable LEASEHOLD_TEST_MYSQL_DSN holds an oslo-style URL of
// a MySQL/MariaDB server (for example mysql+pymysql://lh:pw@127.0.0.1:3307/,
// as printed by scripts/mariadb-throwaway.sh dsn), every call creates a
// uniquely named throw-away database lh_test_<random> on that server and
// drops it when the test ends. `make test` runs the storage and API
// packages both ways.
//
//	func TestThing(t *testing.T) {
//		d := dbtest.Open(t) // SQLite, or MariaDB when the env var is set
//		...
//	}
//
// A test that wants to see both dialects in one run loops over Dialects:
//
//	for _, dialect := range dbtest.Dialects() {
//		t.Run(string(dialect), func(t *testing.T) { d := dbtest.OpenDialect(t, dialect); ... })
//	}
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/pkg/db"
)

// EnvMySQLDSN names the environment variable holding the MySQL/MariaDB
// server URL; the database name in it, if any, is ignored.
const EnvMySQLDSN = "LEASEHOLD_TEST_MYSQL_DSN"

// NamePrefix starts the name of every throw-away MySQL database.
const NamePrefix = "lh_test_"

// Open returns a fresh migrated database for t: MySQL/MariaDB when
// LEASEHOLD_TEST_MYSQL_DSN is set, SQLite otherwise. It is closed (and on
// MySQL dropped) by t.Cleanup. Any failure is fatal to t.
func Open(t testing.TB) *db.DB {
	t.Helper()
	return OpenDialect(t, DefaultDialect())
}

// DefaultDialect is the dialect Open uses.
func DefaultDialect() db.Dialect {
	if MySQLServer() != "" {
		return db.MySQL
	}
	return db.SQLite
}

// MySQLServer is the server URL from LEASEHOLD_TEST_MYSQL_DSN ("" when
// unset).
func MySQLServer() string { return strings.TrimSpace(os.Getenv(EnvMySQLDSN)) }

// Dialects lists the dialects available to this test run: SQLite always,
// and MySQL too when LEASEHOLD_TEST_MYSQL_DSN is set.
func Dialects() []db.Dialect {
	if MySQLServer() != "" {
		return []db.Dialect{db.SQLite, db.MySQL}
	}
	return []db.Dialect{db.SQLite}
}

// OpenDialect is Open for a given dialect. Asking for MySQL when
// LEASEHOLD_TEST_MYSQL_DSN is unset fails the test (use Dialects to ask
// only for what is there).
func OpenDialect(t testing.TB, dialect db.Dialect) *db.DB {
	t.Helper()
	u := URLDialect(t, dialect)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := db.Open(ctx, u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("dbtest: close %s: %v", db.Redact(u), err)
		}
	})
	if err := d.Migrate(ctx); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", db.Redact(u), err)
	}
	return d
}

// URL returns the URL of a fresh, empty (not migrated) database for t in
// the default dialect, for tests that start a server or the binary with
// --database. The database is removed by t.Cleanup; on MySQL close every
// connection to it before the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return URLDialect(t, DefaultDialect())
}

// URLDialect is URL for a given dialect.
func URLDialect(t testing.TB, dialect db.Dialect) string {
	t.Helper()
	switch dialect {
	case db.SQLite:
		return "sqlite:///" + filepath.ToSlash(filepath.Join(t.TempDir(), "leasehold.db"))
	case db.MySQL:
		server := MySQLServer()
		if server == "" {
			t.Fatalf("dbtest: MySQL database asked for but %s is not set", EnvMySQLDSN)
		}
		name := NamePrefix + randomSuffix(t)
		u, err := WithDatabase(server, name)
		if err != nil {
			t.Fatalf("dbtest: %s: %v", EnvMySQLDSN, err)
		}
		admin, err := adminDSN(u)
		if err != nil {
			t.Fatalf("dbtest: %s: %v", EnvMySQLDSN, err)
		}
		if err := exec(admin, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
			t.Fatalf("dbtest: create database %s on %s: %v", name, db.Redact(server), err)
		}
		t.Cleanup(func() {
			if err := exec(admin, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
				t.Errorf("dbtest: drop database %s on %s: %v", name, db.Redact(server), err)
			}
		})
		return u
	default:
		t.Fatalf("dbtest: unknown dialect %q", dialect)
		return ""
	}
}

// WithDatabase returns the MySQL server URL with its database name
// replaced by name; user, password, host and query are kept.
func WithDatabase(server, name string) (string, error) {
	scheme, _, ok := strings.Cut(server, "://")
	if !ok {
		return "", fmt.Errorf("%q is not a URL (want mysql+pymysql://user:pw@host:port/)", db.Redact(server))
	}
	base, _, _ := strings.Cut(scheme, "+")
	if base != "mysql" && base != "mariadb" {
		return "", fmt.Errorf("%q: scheme %q is not MySQL (want mysql+pymysql://user:pw@host:port/)", db.Redact(server), scheme)
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	if u.Host == "" && u.Query().Get("unix_socket") == "" {
		return "", fmt.Errorf("%q has no host", db.Redact(server))
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// adminDSN is the driver DSN of the database URL u without its database,
// for CREATE/DROP DATABASE.
func adminDSN(u string) (string, error) {
	target, err := db.ParseURL(u)
	if err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(target.DSN)
	if err != nil {
		return "", err
	}
	cfg.DBName = ""
	cfg.Timeout = 10 * time.Second
	return cfg.FormatDSN(), nil
}

func exec(dsn, stmt string) error {
	conn, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = conn.ExecContext(ctx, stmt)
	return err
}

func randomSuffix(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("dbtest: random name: %v", err)
	}
	return hex.EncodeToString(b[:])
}
