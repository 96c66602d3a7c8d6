package db_test

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestNoCgoSQLiteDriver: the server binary links no cgo SQLite driver
// (mattn/go-sqlite3 comes in through gorm.io/driver/sqlite), so it builds
// with CGO_ENABLED=0 and -race builds compile no C for it.
func TestNoCgoSQLiteDriver(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "list", "-deps", "github.com/leasehold/leasehold/cmd/leasehold").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "modernc.org/sqlite") {
		t.Fatalf("modernc.org/sqlite is not among the %d dependencies of cmd/leasehold: is this list right?", len(deps))
	}
	for _, p := range deps {
		if strings.Contains(p, "mattn/go-sqlite3") {
			t.Errorf("cmd/leasehold depends on %s (a cgo SQLite driver)", p)
		}
	}
}

// TestConstraintErrors: both dialects report unique and foreign-key
// violations as GORM's errors, which the services map to 409s.
func TestConstraintErrors(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			for _, stmt := range []string{
				"CREATE TABLE ce_parent (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL UNIQUE)",
				"CREATE TABLE ce_child (id BIGINT NOT NULL PRIMARY KEY, parent_id BIGINT NOT NULL, FOREIGN KEY (parent_id) REFERENCES ce_parent (id))",
				"INSERT INTO ce_parent (id, name) VALUES (1, 'a')",
			} {
				if err := d.Exec(stmt).Error; err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				name string
				stmt string
				want error
			}{
				{"primary key", "INSERT INTO ce_parent (id, name) VALUES (1, 'b')", gorm.ErrDuplicatedKey},
				{"unique", "INSERT INTO ce_parent (id, name) VALUES (2, 'a')", gorm.ErrDuplicatedKey},
				{"foreign key", "INSERT INTO ce_child (id, parent_id) VALUES (1, 42)", gorm.ErrForeignKeyViolated},
			} {
				err := d.Exec(tc.stmt).Error
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
				}
				if got, want := db.IsDuplicate(err), tc.want == gorm.ErrDuplicatedKey; got != want {
					t.Errorf("%s: IsDuplicate = %v, want %v", tc.name, got, want)
				}
			}
		})
	}
}

// TestSQLiteStatementCache: SQLite statements are prepared once per
// connection and kept (without the cache SQLite parses and plans each
// statement on every call; BenchmarkPointSelect shows the cost).
func TestSQLiteStatementCache(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	ps, ok := d.ConnPool.(*gorm.PreparedStmtDB)
	if !ok {
		t.Fatalf("connection pool is %T, want *gorm.PreparedStmtDB", d.ConnPool)
	}
	const q = "SELECT COUNT(*) FROM resource_classes WHERE id > ?"
	for range 2 {
		var n int64
		if err := d.Raw(q, 0).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(ps.Stmts.Keys(), q) {
		t.Errorf("statement %q not in the cache (%d statements cached)", q, len(ps.Stmts.Keys()))
	}
}

// TestSQLiteRawTimeScan: a value computed from a DATETIME column (no
// declared type) scans as the text SQLite holds, as it always has; the
// driver's _texttotime option, which the dialector would add to a DSN it
// opened itself, would turn it into a time.Time and change that text.
func TestSQLiteRawTimeScan(t *testing.T) {
	d := dbtest.OpenDialect(t, db.SQLite)
	if err := d.Exec("CREATE TABLE rt (at DATETIME)").Error; err != nil {
		t.Fatal(err)
	}
	if err := d.Exec("INSERT INTO rt (at) VALUES (?)", mustTime(t, "2026-11-21T08:00:00.5Z")).Error; err != nil {
		t.Fatal(err)
	}
	var got string
	if err := d.Raw("SELECT MAX(at) FROM rt").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-21 08:00:00.5+00:00"; got != want {
		t.Errorf("MAX(at) scanned as %q, want %q", got, want)
	}
}

// TestSQLiteMigrateFromEmpty migrates an empty SQLite file, then opens it
// again and migrates once more (a no-op), and asks the dialector's
// migrator about what the migrations made: the questions gormigrate and
// later migrations ask of it.
func TestSQLiteMigrateFromEmpty(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:///" + t.TempDir() + "/m.db"
	var tables []string
	for run := range 2 {
		d, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx); err != nil {
			d.Close()
			t.Fatalf("run %d: %v", run, err)
		}
		got, err := d.Migrator().GetTables()
		if err != nil {
			d.Close()
			t.Fatal(err)
		}
		slices.Sort(got)
		if run == 1 && !slices.Equal(got, tables) {
			t.Errorf("tables after the second migration %v, want %v", got, tables)
		}
		tables = got
		m := d.Migrator()
		for _, tc := range []struct {
			what string
			got  bool
			want bool
		}{
			{"table leasehold_migrations", m.HasTable("leasehold_migrations"), true},
			{"table events", m.HasTable("events"), true},
			{"table no_such_table", m.HasTable("no_such_table"), false},
			{"column events.claimed_by", m.HasColumn("events", "claimed_by"), true},
			{"column events.no_such_column", m.HasColumn("events", "no_such_column"), false},
			{"index idx_events_status_time", m.HasIndex("events", "idx_events_status_time"), true},
			{"index no_such_index", m.HasIndex("events", "no_such_index"), false},
		} {
			if tc.got != tc.want {
				t.Errorf("run %d: %s: %v, want %v", run, tc.what, tc.got, tc.want)
			}
		}
		var applied int64
		if err := d.Table("leasehold_migrations").Count(&applied).Error; err != nil {
			t.Fatal(err)
		}
		if applied < 4 {
			t.Errorf("run %d: %d migrations recorded, want at least 4", run, applied)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(tables, "resource_providers") || !slices.Contains(tables, "leases") {
		t.Errorf("tables %v lack resource_providers or leases", tables)
	}
}
