package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/db"
)

// TestSQLiteDurabilityPragmas: every connection of a SQLite file database
// runs in WAL mode with synchronous=FULL (a commit is on disk when it
// returns), enforces foreign keys, and writes times in the format the
// existing databases hold.
func TestSQLiteDurabilityPragmas(t *testing.T) {
	d, err := db.Open(context.Background(), "sqlite:///"+t.TempDir()+"/p.db")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"synchronous", "2"},
		{"foreign_keys", "1"},
		{"temp_store", "2"},
		{"busy_timeout", "10000"},
	} {
		var got string
		if err := d.Raw("PRAGMA " + tc.pragma).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
	if err := d.Exec("CREATE TABLE tt (at DATETIME)").Error; err != nil {
		t.Fatal(err)
	}
	if err := d.Exec("INSERT INTO tt (at) VALUES (?)", mustTime(t, "2026-11-21T08:00:00.5Z")).Error; err != nil {
		t.Fatal(err)
	}
	var text string
	if err := d.Raw("SELECT CAST(at AS TEXT) FROM tt").Scan(&text).Error; err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-21 08:00:00.5+00:00"; text != want {
		t.Errorf("stored time %q, want %q", text, want)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
