package db_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

// galeraConflict is what MariaDB Galera answers to a transaction that
// failed certification against a write set from another node.
var galeraConflict = &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
	Message: "WSREP detected deadlock/conflict and aborted the transaction. Try restarting the transaction"}

func TestErrorClasses(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	cases := []struct {
		name                  string
		err                   error
		unavailable, conflict bool
	}{
		{"nil", nil, false, false},
		{"galera certification failure", galeraConflict, false, true},
		{"wrapped galera certification failure", fmt.Errorf("commit: %w", galeraConflict), false, true},
		{"innodb deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}, false, true},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205}, false, true},
		{"galera node not ready", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, true, false},
		{"server shutdown", &mysql.MySQLError{Number: 1053}, true, false},
		{"connection killed", &mysql.MySQLError{Number: 1927}, true, false},
		{"duplicate key", &mysql.MySQLError{Number: 1062}, false, false},
		{"syntax error", &mysql.MySQLError{Number: 1064}, false, false},
		{"bad conn", driver.ErrBadConn, true, false},
		{"invalid conn", fmt.Errorf("query: %w", mysql.ErrInvalidConn), true, false},
		{"dial refused", refused, true, false},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true, false},
		{"record not found", gorm.ErrRecordNotFound, false, false},
		{"plain", errors.New("boom"), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := db.IsUnavailable(c.err); got != c.unavailable {
				t.Errorf("IsUnavailable = %v, want %v", got, c.unavailable)
			}
			if got := db.IsLockConflict(c.err); got != c.conflict {
				t.Errorf("IsLockConflict = %v, want %v", got, c.conflict)
			}
			e := db.AsUnavailable(c.err)
			if (e != nil) != c.unavailable {
				t.Fatalf("AsUnavailable = %v, want one: %v", e, c.unavailable)
			}
			if e != nil && (e.Kind != errs.Unavailable || !errors.Is(e, c.err)) {
				t.Errorf("AsUnavailable = kind %v around %v", e.Kind, e.Err)
			}
		})
	}
}

// TestWriteRetriesCertificationFailures: a write that fails Galera
// certification runs again; one that keeps failing it ends, after
// MaxWriteAttempts runs, as a Conflict (a 409) that still says it was a
// lock conflict, never as an internal error.
func TestWriteRetriesCertificationFailures(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			balances(t, d, 1)
			ctx := context.Background()
			runs := 0
			err := d.Write(ctx, func(tx *gorm.DB) error {
				runs++
				if err := move(tx, 0, 1); err != nil {
					return err
				}
				if runs < 3 {
					return fmt.Errorf("commit: %w", galeraConflict)
				}
				return nil
			})
			if err != nil || runs != 3 {
				t.Fatalf("Write = %v after %d runs; want success on the third", err, runs)
			}
			if got := readBalances(t, d)[0]; got != 1 {
				t.Fatalf("balance %d after two failed runs and one success, want 1", got)
			}
			runs = 0
			err = d.Write(ctx, func(tx *gorm.DB) error {
				runs++
				if err := move(tx, 0, 1); err != nil {
					return err
				}
				return galeraConflict
			})
			if runs != db.MaxWriteAttempts {
				t.Errorf("ran %d times, want %d", runs, db.MaxWriteAttempts)
			}
			if errs.KindOf(err) != errs.Conflict || !db.IsLockConflict(err) {
				t.Fatalf("after every attempt failed: %v (kind %v, lock conflict %v); want a Conflict around the lock conflict", err, errs.KindOf(err), db.IsLockConflict(err))
			}
			if got := readBalances(t, d)[0]; got != 1 {
				t.Fatalf("balance %d, want 1: a failed run left its write", got)
			}
		})
	}
}

// TestUnreachableServerIsUnavailable: the error of a query to a MySQL
// server that stopped answering (here, a closed pool's port) is one the
// API renders as 503.
func TestUnreachableServerIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx := context.Background()
	_, err = db.Open(ctx, "mysql+pymysql://u:p@"+addr+"/lh_none")
	if err == nil {
		t.Fatal("opened a database on a closed port")
	}
	if !db.IsUnavailable(err) {
		t.Fatalf("IsUnavailable(%v) = false", err)
	}
}

// TestPingServesQueries: Ping succeeds on a working database and, on
// MySQL, reads a table (a Galera node that refuses statements on tables
// still answers the protocol's ping and SELECT 1).
func TestPingServesQueries(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			ctx := context.Background()
			if err := d.Ping(ctx); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			if dialect != db.MySQL {
				return
			}
			if err := d.Exec("DROP TABLE leasehold_migrations").Error; err != nil {
				t.Fatal(err)
			}
			if err := d.Ping(ctx); err == nil {
				t.Fatal("Ping succeeded without reading a table")
			}
		})
	}
}
