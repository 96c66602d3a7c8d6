package dbtest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement/standard"
)

func TestOpenIsMigrated(t *testing.T) {
	for _, dialect := range Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := OpenDialect(t, dialect)
			if d.Dialect != dialect {
				t.Fatalf("Dialect = %q, want %q", d.Dialect, dialect)
			}
			var classes []string
			if err := d.Model(&models.ResourceClass{}).Order("id").Pluck("name", &classes).Error; err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(standard.ResourceClasses(), classes); diff != "" {
				t.Errorf("resource classes (-want +got):\n%s", diff)
			}
			var traits int64
			if err := d.Model(&models.Trait{}).Count(&traits).Error; err != nil {
				t.Fatal(err)
			}
			if want := int64(len(standard.Traits())); traits != want {
				t.Errorf("%d traits, want %d", traits, want)
			}
			var ids []string
			if err := d.Table("leasehold_migrations").Order("id").Pluck("id", &ids).Error; err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 || ids[0] != "0001_placement" {
				t.Errorf("applied migrations = %v, want 0001_placement first", ids)
			}
		})
	}
}

func TestOpenGivesSeparateDatabases(t *testing.T) {
	for _, dialect := range Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			a, b := OpenDialect(t, dialect), OpenDialect(t, dialect)
			now := time.Now().UTC().Truncate(time.Second)
			rp := models.ResourceProvider{UUID: "9a1d4b5e-3c1f-4b56-8d8e-0f6a3f1c2b01", Name: "only-in-a", CreatedAt: now, UpdatedAt: now}
			if err := a.Create(&rp).Error; err != nil {
				t.Fatal(err)
			}
			var inA, inB int64
			if err := a.Model(&models.ResourceProvider{}).Count(&inA).Error; err != nil {
				t.Fatal(err)
			}
			if err := b.Model(&models.ResourceProvider{}).Count(&inB).Error; err != nil {
				t.Fatal(err)
			}
			if inA != 1 || inB != 0 {
				t.Errorf("providers: %d in a, %d in b; want 1 and 0", inA, inB)
			}
		})
	}
}

func TestOpenFollowsEnv(t *testing.T) {
	want := db.SQLite
	if os.Getenv(EnvMySQLDSN) != "" {
		want = db.MySQL
	}
	if got := Open(t).Dialect; got != want {
		t.Errorf("Open with %s=%q gave %q, want %q", EnvMySQLDSN, os.Getenv(EnvMySQLDSN), got, want)
	}
	if got := DefaultDialect(); got != want {
		t.Errorf("DefaultDialect() = %q, want %q", got, want)
	}
	if got := Dialects(); got[0] != db.SQLite || got[len(got)-1] != want {
		t.Errorf("Dialects() = %v, want SQLite first and %q last", got, want)
	}
}

// TestCleanupRemovesDatabase checks the database a finished test used is
// gone: the SQLite file, or the MySQL schema.
func TestCleanupRemovesDatabase(t *testing.T) {
	for _, dialect := range Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			var u string
			t.Run("inner", func(t *testing.T) {
				u = URLDialect(t, dialect)
				d, err := db.Open(t.Context(), u)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			})
			target, err := db.ParseURL(u)
			if err != nil {
				t.Fatal(err)
			}
			switch dialect {
			case db.SQLite:
				if _, err := os.Stat(target.Path); !os.IsNotExist(err) {
					t.Errorf("SQLite file %s still there after the test (stat: %v)", target.Path, err)
				}
			case db.MySQL:
				name := u[strings.LastIndexByte(u, '/')+1:]
				if !strings.HasPrefix(name, NamePrefix) {
					t.Fatalf("database name %q lacks prefix %q", name, NamePrefix)
				}
				admin := OpenDialect(t, db.MySQL)
				var n int64
				if err := admin.Raw("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n).Error; err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("database %s still exists after the test", name)
				}
			}
		})
	}
}

func TestURLIsUnique(t *testing.T) {
	for _, dialect := range Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			seen := map[string]bool{}
			for range 3 {
				u := URLDialect(t, dialect)
				if seen[u] {
					t.Fatalf("URL %s handed out twice", u)
				}
				seen[u] = true
			}
		})
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		server, want, wantErr string
	}{
		{server: "mysql+pymysql://root@127.0.0.1:3307/", want: "mysql+pymysql://root@127.0.0.1:3307/lh_test_x"},
		{server: "mysql+pymysql://root@127.0.0.1:3307", want: "mysql+pymysql://root@127.0.0.1:3307/lh_test_x"},
		{server: "mysql+pymysql://lh:s3cret@127.0.0.1:3307/placement?charset=utf8", want: "mysql+pymysql://lh:s3cret@127.0.0.1:3307/lh_test_x?charset=utf8"},
		{server: "mysql://lh:p%40ss@db.example:3306/x", want: "mysql://lh:p%40ss@db.example:3306/lh_test_x"},
		{server: "mariadb://lh@localhost/", want: "mariadb://lh@localhost/lh_test_x"},
		{server: "sqlite:////tmp/x.db", wantErr: "not MySQL"},
		{server: "127.0.0.1:3307", wantErr: "not a URL"},
		{server: "mysql+pymysql:///x", wantErr: "no host"},
	}
	for _, tc := range tests {
		t.Run(tc.server, func(t *testing.T) {
			got, err := WithDatabase(tc.server, "lh_test_x")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("WithDatabase(%q) = %q, %v; want error containing %q", tc.server, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("WithDatabase(%q) = %q, want %q", tc.server, got, tc.want)
			}
		})
	}
}

func TestAdminDSNDropsDatabaseKeepsCredentials(t *testing.T) {
	got, err := adminDSN("mysql+pymysql://lh:s3cret@127.0.0.1:3307/lh_test_x")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "lh:s3cret@tcp(127.0.0.1:3307)/?") {
		t.Errorf("adminDSN = %q, want it to start with lh:s3cret@tcp(127.0.0.1:3307)/?", got)
	}
}
