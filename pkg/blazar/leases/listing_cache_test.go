package leases_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// openTwice opens the same fresh database through two pools: two
// processes sharing one database.
func openTwice(t *testing.T, dialect db.Dialect) (*db.DB, *db.DB) {
	t.Helper()
	ctx := context.Background()
	url := dbtest.URLDialect(t, dialect)
	var out [2]*db.DB
	for i := range out {
		d, err := db.Open(ctx, url)
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

// TestListCacheSeesEveryWrite: process A keeps its rendered listing while
// nothing is written, and answers what an uncached read answers after
// every write, whoever made it: process B's service, a bare SQL update
// in B (the event manager of another process), A itself. Members' lists
// are cut from the cached admin one. On MySQL nothing is cached.
func TestListCacheSeesEveryWrite(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			da, dbB := openTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			a, _ := leasestest.New(da, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			b, _ := leasestest.New(dbB, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			other := leases.Caller{UserID: "u2", ProjectID: "p2"}
			everyone := []leases.Caller{admin, owner, other, admin}
			members := []leases.Caller{owner, other, owner}
			var wantLoads int64
			// check lists for each caller, expecting loads listings read
			// (on SQLite; none on MySQL).
			check := func(step string, callers []leases.Caller, loads int64) {
				t.Helper()
				if dialect == db.SQLite {
					wantLoads += loads
				}
				for _, c := range callers {
					views, err := a.List(ctx, c) // never cached
					if err != nil {
						t.Fatal(err)
					}
					want, _ := json.Marshal(views)
					got, err := a.ListJSON(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(string(want), string(got)); diff != "" {
						t.Errorf("%s, %s: cached listing differs from a fresh read (-want +got):\n%s", step, c.ProjectID, diff)
					}
				}
				if n := leases.ListLoads(a); n != wantLoads {
					t.Errorf("%s: %d listings loaded, want %d", step, n, wantLoads)
				}
			}
			check("empty", everyone, 1)
			check("nothing written", everyone, 0)
			l1 := create(t, b, owner, "one", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", ""))
			create(t, b, other, "two", "2030-01-04 12:00", "2030-01-05 12:00")
			check("B created two leases", everyone, 1)
			check("nothing written", everyone, 0)
			clock.Add(time.Minute)
			if _, err := b.Update(ctx, owner, l1.ID, leasestest.Upd(map[string]any{"name": "one-renamed"})); err != nil {
				t.Fatal(err)
			}
			// Members alone read their own projects, once each.
			check("B renamed a lease, members ask", members, 2)
			check("nothing written, members ask", members, 0)
			check("admin asks", everyone, 1)
			if err := dbB.Exec("UPDATE leases SET status = ? WHERE id = ?", leases.StatusActive, l1.ID).Error; err != nil {
				t.Fatal(err)
			}
			check("B's SQL moved a status, members ask", members, 2)
			check("B's SQL moved a status", everyone, 1)
			create(t, a, owner, "three", "2030-01-06 12:00", "2030-01-07 12:00")
			check("A created a lease", everyone, 1)
			if err := b.Delete(ctx, owner, l1.ID); err != nil {
				t.Fatal(err)
			}
			check("B deleted a lease, members ask", members, 2)
			check("B deleted a lease", everyone, 1)
			// Time alone moves nothing in the listing.
			clock.Add(72 * time.Hour)
			check("the clock moved", everyone, 0)
		})
	}
}

// TestListCacheConcurrent: readers of A's listing run while B writes;
// every answer is a well-formed listing, and once the writes are done A
// answers what a fresh read does.
func TestListCacheConcurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	da, dbB := openTwice(t, db.SQLite)
	clock := leasestest.NewClock(t0)
	a, _ := leasestest.New(da, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
	b, _ := leasestest.New(dbB, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
	admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for i := range 4 {
		c := admin
		if i%2 == 1 {
			c = owner
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := a.ListJSON(ctx, c)
				var vs []leases.View
				if err == nil {
					err = json.Unmarshal(got, &vs)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	for i := range 8 {
		start := t0.Add(time.Duration(24*(i+1)) * time.Hour).Format("2006-01-02 15:04")
		end := t0.Add(time.Duration(24*(i+1)+2) * time.Hour).Format("2006-01-02 15:04")
		create(t, b, owner, "c", start, end)
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	views, err := a.List(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(views)
	got, err := a.ListJSON(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || len(views) != 8 {
		t.Errorf("after the writes: %d leases\n got %s\nwant %s", len(views), got, want)
	}
}

// TestGate: one holder at a time; a caller whose context ends while it
// waits gives up with the context's error.
func TestGate(t *testing.T) {
	var g leases.Gate
	if err := g.Enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Enter(ctx); err != context.Canceled {
		t.Errorf("Enter on a held gate with a canceled context: %v", err)
	}
	g.Leave()
	if err := g.Enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Leave()
}
