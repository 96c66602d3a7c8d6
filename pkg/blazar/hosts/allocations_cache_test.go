package hosts

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestAllocationsCache: on SQLite the unfiltered allocation listing is
// kept while neither the database nor the clock moves it. The clock
// reaching the earliest end among the shown leases reloads it (that
// lease drops out with no write at all), a clock set back reloads it, and
// a write through another pool on the same file (another process)
// reloads it. Each answer is what an uncached read answers.
func TestAllocationsCache(t *testing.T) {
	ctx := context.Background()
	url := dbtest.URLDialect(t, db.SQLite)
	var pools [2]*db.DB
	for i := range pools {
		d, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		pools[i] = d
	}
	if err := pools[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := fixed
	s := New(pools[0], standalone.New(nil))
	s.now = func() time.Time { return now }
	for _, name := range []string{"h1", "h2"} {
		if _, err := s.Create(ctx, body("name", name)); err != nil {
			t.Fatal(err)
		}
	}
	other := pools[1]
	lease := func(id string, end time.Duration, host string) {
		t.Helper()
		l := models.Lease{ID: id, Name: id, ProjectID: "p", StartDate: fixed, EndDate: fixed.Add(end), Status: "PENDING", CreatedAt: fixed}
		r := models.Reservation{ID: "r-" + id, LeaseID: id, ResourceType: "physical:host", Status: "pending", CreatedAt: fixed}
		a := models.ComputeHostAllocation{ID: "a-" + id, ReservationID: r.ID, ComputeHostID: host, StartDate: l.StartDate, EndDate: l.EndDate, CreatedAt: fixed}
		for _, row := range []any{&l, &r, &a} {
			if err := other.Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	lease("short", time.Hour, "1")
	lease("long", 3*time.Hour, "2")
	var wantLoads int64
	check := func(step string, reload bool, leases ...string) {
		t.Helper()
		if reload {
			wantLoads++
		}
		got, err := s.AllocationsJSON(ctx, AllocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ids, byHost, err := s.allAllocations(ctx, AllocationFilter{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(renderAllocations(ids, byHost)), string(got)); diff != "" {
			t.Errorf("%s: cached listing differs from a fresh read (-want +got):\n%s", step, diff)
		}
		var shown []string
		for _, rs := range byHost {
			for _, r := range rs {
				shown = append(shown, r.LeaseID)
			}
		}
		if len(shown) != len(leases) {
			t.Errorf("%s: leases shown %v, want %v", step, shown, leases)
		}
		if n := s.allocCache.loads.Load(); n != wantLoads {
			t.Errorf("%s: %d listings loaded, want %d", step, n, wantLoads)
		}
	}
	check("first", true, "short", "long")
	check("nothing moved", false, "short", "long")
	now = fixed.Add(59 * time.Minute)
	check("before the first end", false, "short", "long")
	now = fixed.Add(time.Hour)
	check("at the first end", true, "short", "long")
	now = fixed.Add(time.Hour + time.Microsecond)
	check("after the first end", true, "long")
	check("nothing moved", false, "long")
	now = fixed.Add(30 * time.Minute)
	check("clock set back", true, "short", "long")
	lease("new", 2*time.Hour, "1")
	check("another process wrote", true, "short", "long", "new")
	now = fixed.Add(4 * time.Hour)
	check("every lease ended", true)
	now = fixed.Add(400 * time.Hour)
	check("nothing to end", false)
}
