package leases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// fresh is the listing c sees, read and rendered without any cache (what
// encoding/json writes for List).
func fresh(t interface {
	Helper()
	Fatal(...any)
}, s *leases.Service, c leases.Caller) string {
	t.Helper()
	views, err := s.List(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(views)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freshAllocations is the unfiltered allocation listing of hs read with
// the SQL join and written by encoding/json, without any cache.
func freshAllocations(t interface {
	Helper()
	Fatal(...any)
}, hs *hosts.Service) string {
	t.Helper()
	all, err := hs.Allocations(context.Background(), hosts.AllocationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(all))
	for i, h := range all {
		res := make([]map[string]any, len(h.Reservations))
		for j, x := range h.Reservations {
			res[j] = map[string]any{"id": x.ID, "lease_id": x.LeaseID,
				"start_date": leases.FormatDate(x.StartDate), "end_date": leases.FormatDate(x.EndDate)}
		}
		out[i] = map[string]any{"resource_id": h.ResourceID, "reservations": res}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cloneLease copies lease from's rows (the lease, its host reservation
// with its host allocation) under the id to, as another program writing
// raw SQL would: the property's ids share a bucket (pkg/db LeaseBucket)
// with others, differ from them only in case, or were deleted before.
func cloneLease(d *db.DB, from, to string) error {
	var old []string
	if err := d.Raw("SELECT id FROM reservations WHERE lease_id = ? AND resource_type = 'physical:host'", from).Scan(&old).Error; err != nil {
		return err
	}
	stmts := []struct {
		sql  string
		args []any
	}{{`INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout, tags)
 SELECT ?, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout, tags FROM leases WHERE id = ?`,
		[]any{to, from}}}
	if len(old) > 0 {
		// Ids of the copies' rows derived from to, as long as a UUID
		// (the columns are 36 characters on MySQL).
		child := func(kind string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(kind+to)).String() }
		res, hr := child("r-"), child("h-")
		stmts = append(stmts, []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO reservations (id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at, updated_at)
 SELECT ?, ?, ?, resource_type, status, missing_resources, resources_changed, created_at, updated_at FROM reservations WHERE id = ?`, []any{res, to, hr, old[0]}},
			{`INSERT INTO computehost_reservations (id, reservation_id, aggregate_id, count_range, hypervisor_properties, resource_properties, before_end, created_at, updated_at)
 SELECT ?, ?, aggregate_id, count_range, hypervisor_properties, resource_properties, before_end, created_at, updated_at FROM computehost_reservations WHERE reservation_id = ?`,
				[]any{hr, res, old[0]}},
			{`INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at)
 SELECT ?, ?, compute_host_id, start_date, end_date, created_at FROM computehost_allocations WHERE reservation_id = ? LIMIT 1`,
				[]any{child("a-"), res, old[0]}},
		}...)
	}
	for _, st := range stmts {
		if err := d.Exec(st.sql, st.args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// TestListingPropertyAfterWrites: after any sequence of writes — leases
// created, updated, deleted and their events run through the service of
// process A or B, rows of a lease's body written by raw SQL in B, leases
// copied by raw SQL under ids sharing a bucket with others, differing
// from them only in case or deleted before, a lease deleted and another
// created in its bucket at once, the clock moved, the change log
// compacted — A's listing (kept lease objects, the cached body) is
// byte for byte a fresh uncached render, for the admin and for members,
// and so is A's allocation listing.
func TestListingPropertyAfterWrites(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			da, dbB := openTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			a, _ := leasestest.New(da, leasestest.NewHosts(6, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			b, _ := leasestest.New(dbB, leasestest.NewHosts(6, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			// The hosts the fake source offers, registered (ids 1 to 6) so
			// the allocation listing shows them.
			ha := hosts.New(da, standalone.New(nil))
			ha.SetClock(clock.Now)
			for i := range 6 {
				if _, err := ha.Create(ctx, map[string]any{"name": fmt.Sprint("compute-", i+1)}); err != nil {
					t.Fatal(err)
				}
			}
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			callers := []leases.Caller{admin, owner, {UserID: "u2", ProjectID: "p2"}}
			day := 0
			var deleted []string
			rapid.Check(t, func(rt *rapid.T) {
				var ids []string
				if err := dbB.Raw("SELECT id FROM leases ORDER BY id").Scan(&ids).Error; err != nil {
					rt.Fatal(err)
				}
				pick := func() string { return rapid.SampledFrom(ids).Draw(rt, "lease") }
				svc := []*leases.Service{a, b}[rapid.IntRange(0, 1).Draw(rt, "process")]
				caller := rapid.SampledFrom(callers).Draw(rt, "caller")
				if caller.Admin {
					caller = owner // the admin lists, members write
				}
				op := rapid.IntRange(0, 12).Draw(rt, "op")
				if len(ids) == 0 {
					op = 0
				}
				var err error
				switch op {
				case 0, 1: // create, with a host or none
					day++
					start := t0.Add(time.Duration(day) * 24 * time.Hour).Format("2006-01-02 15:04")
					end := t0.Add(time.Duration(day)*24*time.Hour + 3*time.Hour).Format("2006-01-02 15:04")
					var res []map[string]any
					if op == 0 {
						res = append(res, leasestest.HostReservation(1, 1, "", ""))
					}
					_, err = svc.Create(ctx, caller, leasestest.Request(fmt.Sprint("l-", day), start, end, res...))
				case 2: // rename
					_, err = svc.Update(ctx, admin, pick(), leasestest.Upd(map[string]any{"name": rapid.StringMatching(`[a-z<&"]{1,8}`).Draw(rt, "name")}))
				case 3:
					id := pick()
					if err = svc.Delete(ctx, admin, id); err == nil {
						deleted = append(deleted, id)
					}
				case 4: // run a lease's first undone event, as the event manager does
					var evs []models.Event
					if err = dbB.Where("lease_id = ? AND status = ?", pick(), leases.EventUndone).Order("time").Limit(1).Find(&evs).Error; err == nil && len(evs) == 1 {
						ev := evs[0]
						ev.Status, ev.ClaimedBy = leases.EventInProgress, "t"
						if err = dbB.Model(&models.Event{}).Where("id = ?", ev.ID).Updates(map[string]any{"status": leases.EventInProgress, "claimed_by": "t"}).Error; err == nil {
							clock.Set(ev.Time)
							err = svc.RunEvent(ctx, ev, "t")
						}
					}
				case 5: // raw SQL in B on a lease's rows
					id := pick()
					stmt := rapid.SampledFrom([]string{
						"UPDATE events SET status = 'ERROR' WHERE lease_id = ?",
						"UPDATE computehost_reservations SET resource_properties = '[\"==\", \"$x\", \"y\"]' WHERE reservation_id IN (SELECT id FROM reservations WHERE lease_id = ?)",
						"UPDATE reservations SET missing_resources = NOT missing_resources WHERE lease_id = ?",
						"DELETE FROM events WHERE event_type = 'before_end_lease' AND lease_id = ?",
						"UPDATE leases SET tags = '[\"svc\"]' WHERE id = ?",
					}).Draw(rt, "sql")
					err = dbB.Exec(stmt, id).Error
				case 6: // ownership pool rows of a lease's host reservation
					id := pick()
					err = dbB.Exec(`INSERT INTO ownership_pools (reservation_id, compute_host_id, lease_id, pool, consumer, lent_by, created_at)
 SELECT r.id, ?, r.lease_id, 'public', '', '', ? FROM reservations r WHERE r.lease_id = ? AND r.resource_type = 'physical:host'`,
						fmt.Sprint(rapid.IntRange(100, 1000).Draw(rt, "host")), t0, id).Error
				case 7:
					clock.Add(time.Duration(rapid.IntRange(1, 48).Draw(rt, "hours")) * time.Hour)
				case 8: // B folds the change log (same versions, fewer rows)
					_, err = dbB.CompactLeaseChanges(ctx)
				case 9, 10, 11, 12:
					src := pick()
					bucket := db.LeaseBucket(src)
					switch op {
					case 10: // a bucket differing only in case
						bucket = strings.ToUpper(bucket)
						if bucket == db.LeaseBucket(src) {
							bucket = "X" + bucket[1:]
						}
					case 11: // a lease deleted, another created in its bucket
						if err := svc.Delete(ctx, admin, src); err != nil {
							rt.Logf("op %d: %v", op, err)
						} else {
							deleted = append(deleted, src)
						}
						if len(ids) == 1 {
							break
						}
						bucket, src = db.LeaseBucket(src), rapid.SampledFrom(ids).Filter(func(id string) bool { return id != src }).Draw(rt, "source")
					}
					to := bucket + rapid.StringMatching(`[0-9a-fA-F]{1,8}`).Draw(rt, "suffix")
					if op == 12 { // an id deleted before, created again
						if len(deleted) == 0 {
							break
						}
						to = rapid.SampledFrom(deleted).Draw(rt, "deleted")
					}
					var n int64
					if err := dbB.Raw("SELECT COUNT(*) FROM leases WHERE id = ?", to).Scan(&n).Error; err != nil {
						rt.Fatal(err)
					}
					if n == 0 && (op != 11 || len(ids) > 1) {
						if err := cloneLease(dbB, src, to); err != nil {
							rt.Fatalf("op %d: copying %s to %s: %v", op, src, to, err)
						}
					}
				}
				if err != nil {
					rt.Logf("op %d: %v", op, err) // refused writes (conflicts, 409s) are writes too
				}
				for _, c := range callers {
					got, err := a.ListJSON(ctx, c)
					if err != nil {
						rt.Fatal(err)
					}
					if diff := cmp.Diff(fresh(rt, a, c), string(got)); diff != "" {
						rt.Fatalf("op %d, %s: listing differs from a fresh render (-want +got):\n%s", op, c.ProjectID, diff)
					}
				}
				got, err := ha.AllocationsJSON(ctx, hosts.AllocationFilter{})
				if err != nil {
					rt.Fatal(err)
				}
				if diff := cmp.Diff(freshAllocations(rt, ha), string(got)); diff != "" {
					rt.Fatalf("op %d: allocation listing differs from a fresh render (-want +got):\n%s", op, diff)
				}
			})
		})
	}
}

// TestListingRendersOnlyWritten: after a write the listing renders again
// only the leases of the buckets the write touched, whoever wrote them;
// the rest are the objects kept from before.
func TestListingRendersOnlyWritten(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			da, dbB := openTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			a, _ := leasestest.New(da, leasestest.NewHosts(12, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			var ls []*leases.View
			for i := range 12 {
				start := t0.Add(time.Duration(i+1) * 24 * time.Hour).Format("2006-01-02 15:04")
				end := t0.Add(time.Duration(i+1)*24*time.Hour + time.Hour).Format("2006-01-02 15:04")
				ls = append(ls, create(t, a, owner, fmt.Sprint("l", i), start, end, leasestest.HostReservation(1, 1, "", "")))
			}
			check := func(step string, rendered int64) {
				t.Helper()
				before := leases.RenderedLeases(a)
				for _, c := range []leases.Caller{admin, owner} {
					got, err := a.ListJSON(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(fresh(t, a, c), string(got)); diff != "" {
						t.Errorf("%s, %s: listing differs from a fresh render (-want +got):\n%s", step, c.ProjectID, diff)
					}
				}
				if n := leases.RenderedLeases(a) - before; n != rendered {
					t.Errorf("%s: %d lease objects rendered, want %d", step, n, rendered)
				}
			}
			// A write renders again the leases of the written lease's
			// bucket (random ids: mostly that lease alone).
			gone := map[string]bool{}
			inBucket := func(id string) int64 {
				n := int64(0)
				for _, l := range ls {
					if !gone[l.ID] && db.LeaseBucket(l.ID) == db.LeaseBucket(id) {
						n++
					}
				}
				return n
			}
			check("first listing", 12)
			check("nothing written", 0)
			if _, err := a.Update(ctx, owner, ls[3].ID, leasestest.Upd(map[string]any{"name": "renamed"})); err != nil {
				t.Fatal(err)
			}
			check("a lease renamed", inBucket(ls[3].ID))
			steps := []struct{ name, sql string }{
				{"another process's SQL on an event", "UPDATE events SET status = 'ERROR' WHERE lease_id = ? AND event_type = 'start_lease'"},
				{"on a host reservation", "UPDATE computehost_reservations SET before_end = 'snapshot' WHERE reservation_id IN (SELECT id FROM reservations WHERE lease_id = ?)"},
				{"on a reservation", "UPDATE reservations SET status = 'active' WHERE lease_id = ?"},
				{"an event deleted", "DELETE FROM events WHERE lease_id = ? AND event_type = 'end_lease'"},
			}
			for i, s := range steps {
				if err := dbB.Exec(s.sql, ls[5+i].ID).Error; err != nil {
					t.Fatal(err)
				}
				check(s.name, inBucket(ls[5+i].ID))
			}
			if err := dbB.Exec("DELETE FROM leases WHERE id = ?", ls[0].ID).Error; err != nil {
				t.Fatal(err)
			}
			gone[ls[0].ID] = true
			check("a lease deleted", inBucket(ls[0].ID))
		})
	}
}

// TestListingCompactsTheLog: an admin listing that finds many more
// lease_changes rows than leases folds them in the background, and the
// listings after it are still a fresh render with nothing rendered
// again (compaction keeps every version).
func TestListingCompactsTheLog(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			da, dbB := openTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			a, _ := leasestest.New(da, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			var ids []string
			for i := range 3 {
				start := t0.Add(time.Duration(i+1) * 24 * time.Hour).Format("2006-01-02 15:04")
				end := t0.Add(time.Duration(i+1)*24*time.Hour + time.Hour).Format("2006-01-02 15:04")
				ids = append(ids, create(t, a, owner, fmt.Sprint("l", i), start, end, leasestest.HostReservation(1, 1, "", "")).ID)
			}
			// Another process's writes to one lease, 1,500 of them.
			for range 3 {
				q := "INSERT INTO lease_changes (bucket, n) VALUES " + strings.Repeat(",(?, 1)", 500)[1:]
				args := make([]any, 500)
				for i := range args {
					args[i] = db.LeaseBucket(ids[1])
				}
				if err := dbB.Exec(q, args...).Error; err != nil {
					t.Fatal(err)
				}
			}
			if got, err := a.ListJSON(ctx, admin); err != nil {
				t.Fatal(err)
			} else if diff := cmp.Diff(fresh(t, a, admin), string(got)); diff != "" {
				t.Fatalf("listing differs from a fresh render (-want +got):\n%s", diff)
			}
			// The compaction runs in the background: wait for it.
			for i := 0; leases.CompactionsRun(a) == 0; i++ {
				if i == 2000 {
					t.Fatal("no compaction after a listing found 1,500 more rows than leases")
				}
				time.Sleep(5 * time.Millisecond)
			}
			var rows int64
			if err := dbB.Raw("SELECT COUNT(*) FROM lease_changes").Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			buckets := map[string]bool{}
			for _, id := range ids {
				buckets[db.LeaseBucket(id)] = true
			}
			if rows != int64(len(buckets)) {
				t.Errorf("%d lease_changes rows after compaction, want one per bucket (%d)", rows, len(buckets))
			}
			rendered := leases.RenderedLeases(a)
			for _, c := range []leases.Caller{admin, owner} {
				got, err := a.ListJSON(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(fresh(t, a, c), string(got)); diff != "" {
					t.Errorf("%s after compaction: listing differs from a fresh render (-want +got):\n%s", c.ProjectID, diff)
				}
			}
			if n := leases.RenderedLeases(a) - rendered; n != 0 {
				t.Errorf("%d lease objects rendered again after compaction, want 0", n)
			}
		})
	}
}

// TestListingBuckets: the listings stay a fresh render through the cases
// a bucket of lease ids (pkg/db LeaseBucket) has to get right, each
// between two listings: leases added to a bucket others are in, to a
// bucket differing from another only in case, a lease deleted and
// another created in its bucket, a deleted id created again.
func TestListingBuckets(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			da, dbB := openTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			a, _ := leasestest.New(da, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
			ha := hosts.New(da, standalone.New(nil))
			ha.SetClock(clock.Now)
			for i := range 4 {
				if _, err := ha.Create(ctx, map[string]any{"name": fmt.Sprint("compute-", i+1)}); err != nil {
					t.Fatal(err)
				}
			}
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			var src []string
			for i := range 2 {
				start := t0.Add(time.Duration(i+1) * 24 * time.Hour).Format("2006-01-02 15:04")
				end := t0.Add(time.Duration(i+1)*24*time.Hour + time.Hour).Format("2006-01-02 15:04")
				src = append(src, create(t, a, owner, fmt.Sprint("l", i), start, end, leasestest.HostReservation(1, 1, "", "")).ID)
			}
			check := func(step string) {
				t.Helper()
				for _, c := range []leases.Caller{admin, owner} {
					got, err := a.ListJSON(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(fresh(t, a, c), string(got)); diff != "" {
						t.Errorf("%s, %s: listing differs from a fresh render (-want +got):\n%s", step, c.ProjectID, diff)
					}
				}
				got, err := ha.AllocationsJSON(ctx, hosts.AllocationFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(freshAllocations(t, ha), string(got)); diff != "" {
					t.Errorf("%s: allocation listing differs from a fresh render (-want +got):\n%s", step, diff)
				}
			}
			clone := func(from, to string) {
				t.Helper()
				if err := cloneLease(dbB, from, to); err != nil {
					t.Fatal(err)
				}
			}
			check("first listing")
			for _, step := range []struct {
				name  string
				write func()
			}{
				{"leases sharing a bucket", func() { clone(src[0], "ab1"); clone(src[1], "ab2") }},
				{"a bucket differing only in case", func() { clone(src[0], "AB1"); clone(src[1], "aB1") }},
				{"a lease deleted, another created in its bucket", func() {
					if err := a.Delete(ctx, admin, "ab1"); err != nil {
						t.Fatal(err)
					}
					clone(src[1], "ab3")
				}},
				{"a deleted id created again", func() {
					if err := a.Delete(ctx, admin, "AB1"); err != nil {
						t.Fatal(err)
					}
					check("a lease deleted")
					if _, err := dbB.CompactLeaseChanges(ctx); err != nil {
						t.Fatal(err)
					}
					clone(src[1], "AB1")
				}},
				{"a one-character id, a prefix of a bucket", func() { clone(src[0], "a") }},
			} {
				step.write()
				check(step.name)
			}
		})
	}
}
