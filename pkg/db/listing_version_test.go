package db_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// listingVersion is the version of lease's bucket.
func listingVersion(t *testing.T, d *db.DB, lease string) int64 {
	t.Helper()
	var v []int64
	if err := d.Raw("SELECT COALESCE(SUM(n), 0) FROM lease_changes WHERE bucket = ?", db.LeaseBucket(lease)).Scan(&v).Error; err != nil || len(v) != 1 {
		t.Fatalf("version of %s: %v, %v", lease, v, err)
	}
	return v[0]
}

// TestListingVersionTriggers: every write to a row shown in a lease's
// body or in the allocation listing, by raw SQL as another program would
// write it, moves that lease's bucket's version (the sum of its
// lease_changes rows) and no other bucket's.
func TestListingVersionTriggers(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			for _, id := range []string{"L1", "L2"} {
				mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, lease_type)
 VALUES (?, ?, 'u', 'p', ?, ?, '', 'PENDING', ?, ?, 'SCHEDULE')`, id, id, upStart, upEnd, false, upCreated)
				mustExec(t, d, `INSERT INTO reservations (id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at)
 VALUES (?, ?, ?, 'physical:host', 'pending', ?, ?, ?)`, "R"+id, id, "H"+id, false, false, upCreated)
			}
			steps := []struct {
				name, sql string
				args      []any
			}{
				{"lease update", "UPDATE leases SET status = 'ACTIVE' WHERE id = 'L1'", nil},
				{"lease update to the same value", "UPDATE leases SET status = 'ACTIVE' WHERE id = 'L1'", nil},
				{"reservation insert", `INSERT INTO reservations (id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at)
 VALUES ('R3', 'L1', 'H3', 'physical:host', 'pending', ?, ?, ?)`, []any{false, false, upCreated}},
				{"reservation update", "UPDATE reservations SET status = 'active' WHERE id = 'R3'", nil},
				{"event insert", `INSERT INTO events (id, lease_id, event_type, time, status, created_at) VALUES ('E1', 'L1', 'start_lease', ?, 'UNDONE', ?)`,
					[]any{upStart, upCreated}},
				{"event update", "UPDATE events SET status = 'DONE' WHERE id = 'E1'", nil},
				{"event delete", "DELETE FROM events WHERE id = 'E1'", nil},
				{"host reservation insert", `INSERT INTO computehost_reservations (id, reservation_id, count_range, hypervisor_properties, resource_properties, before_end, created_at)
 VALUES ('H3', 'R3', '1-1', '', '', 'default', ?)`, []any{upCreated}},
				{"host reservation update", "UPDATE computehost_reservations SET count_range = '1-2' WHERE id = 'H3'", nil},
				{"ownership pool insert", `INSERT INTO ownership_pools (reservation_id, compute_host_id, lease_id, pool, consumer, lent_by, created_at)
 VALUES ('R3', '1', 'L1', 'public', '', '', ?)`, []any{upCreated}},
				{"ownership pool update", "UPDATE ownership_pools SET pool = 'owned' WHERE reservation_id = 'R3'", nil},
				{"ownership pool delete", "DELETE FROM ownership_pools WHERE reservation_id = 'R3'", nil},
				{"host allocation insert", `INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at)
 VALUES ('A3', 'R3', '1', ?, ?, ?)`, []any{upStart, upEnd, upCreated}},
				{"host allocation update", "UPDATE computehost_allocations SET compute_host_id = '2' WHERE id = 'A3'", nil},
				{"host allocation delete", "DELETE FROM computehost_allocations WHERE id = 'A3'", nil},
				{"host reservation delete", "DELETE FROM computehost_reservations WHERE id = 'H3'", nil},
				{"instance reservation insert", `INSERT INTO instance_reservations (id, reservation_id, vcpus, memory_mb, disk_gb, amount, affinity, resource_properties, flavor_id, source_flavor, created_at)
 VALUES ('I3', 'R3', 1, 1, 1, 1, NULL, '', 'R3', '', ?)`, []any{upCreated}},
				{"instance reservation update", "UPDATE instance_reservations SET server_group_id = 'g' WHERE id = 'I3'", nil},
				{"instance reservation delete", "DELETE FROM instance_reservations WHERE id = 'I3'", nil},
				{"floating IP reservation insert", `INSERT INTO floatingip_reservations (id, reservation_id, network_id, amount, created_at)
 VALUES ('F3', 'R3', 'net', 1, ?)`, []any{upCreated}},
				{"required floating IP insert", "INSERT INTO required_floatingips (id, floating_ip_reservation_id, address) VALUES ('Q3', 'F3', '10.0.0.1')", nil},
				{"required floating IP update", "UPDATE required_floatingips SET address = '10.0.0.2' WHERE id = 'Q3'", nil},
				{"required floating IP delete", "DELETE FROM required_floatingips WHERE id = 'Q3'", nil},
				{"floating IP reservation update", "UPDATE floatingip_reservations SET amount = 2 WHERE id = 'F3'", nil},
				{"floating IP reservation delete", "DELETE FROM floatingip_reservations WHERE id = 'F3'", nil},
				{"reservation delete", "DELETE FROM reservations WHERE id = 'R3'", nil},
				{"reservation moved to another lease", "UPDATE reservations SET lease_id = 'L1' WHERE id = 'RL2'", nil},
			}
			seen := map[int64]bool{listingVersion(t, d, "L1"): true}
			for _, s := range steps {
				before2 := listingVersion(t, d, "L2")
				mustExec(t, d, s.sql, s.args...)
				v := listingVersion(t, d, "L1")
				if seen[v] {
					t.Errorf("%s: L1's version %d was seen before", s.name, v)
				}
				seen[v] = true
				if v2 := listingVersion(t, d, "L2"); v2 != before2 && s.name != "reservation moved to another lease" {
					t.Errorf("%s: L2's version moved %d → %d", s.name, before2, v2)
				} else if v2 == before2 && s.name == "reservation moved to another lease" {
					t.Errorf("%s: L2's version did not move", s.name)
				}
			}
			// A lease deleted, its rows folded, and written again under
			// its id does not bring its bucket back to a version it had.
			seen = map[int64]bool{listingVersion(t, d, "L2"): true}
			mustExec(t, d, "DELETE FROM leases WHERE id = 'L2'")
			v := listingVersion(t, d, "L2")
			if seen[v] {
				t.Errorf("lease delete: L2's bucket stayed at %d", v)
			}
			seen[v] = true
			if _, err := d.CompactLeaseChanges(context.Background()); err != nil {
				t.Fatal(err)
			}
			if w := listingVersion(t, d, "L2"); w != v {
				t.Errorf("compaction moved L2's bucket %d → %d", v, w)
			}
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, lease_type)
 VALUES ('L2', 'L2', 'u', 'p', ?, ?, '', 'PENDING', ?, ?, 'SCHEDULE')`, upStart, upEnd, false, upCreated)
			if v := listingVersion(t, d, "L2"); seen[v] {
				t.Errorf("re-created lease: its bucket back at version %d", v)
			}
		})
	}
}

// TestCompactionKeepsVersions: compaction racing with writes to leases
// (and with another compaction) never makes a lease's bucket's version go down
// or stay equal across a committed change, never lowers the table's
// total, and leaves one row per bucket once the writes stop.
func TestCompactionKeepsVersions(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			d := dbtest.OpenDialect(t, dialect)
			leases := []string{"C1", "C2", "C3", "C4"}
			for _, id := range leases {
				mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, lease_type)
 VALUES (?, ?, 'u', 'p', ?, ?, '', 'PENDING', ?, ?, 'SCHEDULE')`, id, id, upStart, upEnd, false, upCreated)
			}
			total := func() int64 {
				var v []int64
				if err := d.Raw("SELECT COALESCE(SUM(n), 0) FROM lease_changes").Scan(&v).Error; err != nil || len(v) != 1 {
					t.Errorf("total: %v, %v", v, err)
					return 0
				}
				return v[0]
			}
			const writes = 60
			var wg sync.WaitGroup
			done := make(chan struct{})
			// A deleted lease's rows are folded with the others' while
			// they are written.
			mustExec(t, d, "DELETE FROM leases WHERE id = 'C4'")
			start := total()
			for _, id := range leases[:3] {
				wg.Go(func() {
					v := listingVersion(t, d, id)
					for i := range writes {
						if err := d.Exec("UPDATE leases SET name = ? WHERE id = ?", i, id).Error; err != nil {
							t.Error(err)
							return
						}
						w := listingVersion(t, d, id)
						if w <= v {
							t.Errorf("%s: version %d after a change, %d before", id, w, v)
						}
						v = w
					}
				})
			}
			compactions := make(chan error, 2)
			for range 2 {
				go func() {
					for {
						select {
						case <-done:
							compactions <- nil
							return
						default:
						}
						if _, err := d.CompactLeaseChanges(ctx); err != nil {
							compactions <- err
							return
						}
					}
				}()
			}
			last := total()
			watch := make(chan struct{})
			go func() {
				defer close(watch)
				for {
					select {
					case <-done:
						return
					default:
					}
					if v := total(); v < last {
						t.Errorf("total went down: %d after %d", v, last)
					} else {
						last = v
					}
				}
			}()
			wg.Wait()
			close(done)
			for range 2 {
				if err := <-compactions; err != nil {
					t.Fatal(err)
				}
			}
			<-watch
			before := map[string]int64{}
			for _, id := range append(leases, "") {
				before[id] = listingVersion(t, d, id)
			}
			// Each update added one; compaction neither lost nor
			// doubled any.
			sum := total()
			if want := start + 3*writes; sum != want {
				t.Errorf("total %d after %d updates from %d, want %d", sum, 3*writes, start, want)
			}
			if _, err := d.CompactLeaseChanges(ctx); err != nil {
				t.Fatal(err)
			}
			var rows int64
			if err := d.Raw("SELECT COUNT(*) FROM lease_changes").Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if rows != 4 { // the buckets C1, C2, C3 and C4
				t.Errorf("%d rows after a compaction with no writes, want one per bucket (4)", rows)
			}
			for id, v := range before {
				if w := listingVersion(t, d, id); w != v {
					t.Errorf("%q: version %d after compaction, %d before", id, w, v)
				}
			}
			if s := total(); s != sum {
				t.Errorf("total %d after compaction, %d before", s, sum)
			}
		})
	}
}

// TestLeaseBuckets: the triggers file every lease under LeaseBucket of
// its id, and BucketRange's range holds every id of the bucket, on both
// dialects, for ids sharing a bucket, differing only in case, shorter
// than a bucket, with characters below the space (MariaDB pads with
// spaces when it compares) and outside ASCII.
func TestLeaseBuckets(t *testing.T) {
	ids := []string{"ab", "abc", "abd", "aB1", "AB2", "Ab", "a", "ab\x01", "ab!", "b", "é1", "éé", "e1",
		"\U0010FFFFx", "x\U0010FFFF", "x\U0010FFFFy", "\ud7ffa", "\ue000a"}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			want := map[string][]string{}
			for _, id := range ids {
				mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, lease_type)
 VALUES (?, 'x', 'u', 'p', ?, ?, '', 'PENDING', ?, ?, 'SCHEDULE')`, id, upStart, upEnd, false, upCreated)
				b := db.LeaseBucket(id)
				want[b] = append(want[b], id)
			}
			var buckets []string
			if err := d.Raw("SELECT DISTINCT bucket FROM lease_changes").Scan(&buckets).Error; err != nil {
				t.Fatal(err)
			}
			slices.Sort(buckets)
			var wantBuckets []string
			for b := range want {
				wantBuckets = append(wantBuckets, b)
			}
			slices.Sort(wantBuckets)
			if diff := cmp.Diff(wantBuckets, buckets); diff != "" {
				t.Errorf("buckets the triggers wrote (-LeaseBucket +table):\n%s", diff)
			}
			for b, w := range want {
				lo, hi := db.BucketRange(b)
				q, args := "SELECT id FROM leases WHERE id >= ?", []any{lo}
				if hi != "" {
					q, args = q+" AND id < ?", append(args, hi)
				}
				var got, in []string
				if err := d.Raw(q, args...).Scan(&in).Error; err != nil {
					t.Fatal(err)
				}
				for _, id := range in {
					if db.LeaseBucket(id) == b {
						got = append(got, id)
					}
				}
				slices.Sort(got)
				slices.Sort(w)
				if diff := cmp.Diff(w, got); diff != "" {
					t.Errorf("bucket %q, range [%q, %q) (-want +got):\n%s", b, lo, hi, diff)
				}
			}
		})
	}
}
