// Package blazartest holds test helpers shared by the Blazar packages'
// tests (events and leases) that are not about leases themselves.
package blazartest

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// OpenTwice opens one fresh, migrated database through two connection
// pools, as two processes would, for the multi-process tests.
func OpenTwice(t testing.TB, dialect db.Dialect) (*db.DB, *db.DB) {
	t.Helper()
	u := dbtest.URLDialect(t, dialect)
	ctx := context.Background()
	var out [2]*db.DB
	for i := range out {
		d, err := db.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		out[i] = d
	}
	if err := out[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return out[0], out[1]
}
