package db_test

import (
	"testing"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

func listingVersion(t *testing.T, d *db.DB, lease string) int64 {
	t.Helper()
	var v []int64
	if err := d.Raw("SELECT listing_version FROM leases WHERE id = ?", lease).Scan(&v).Error; err != nil || len(v) != 1 {
		t.Fatalf("listing_version of %s: %v, %v", lease, v, err)
	}
	return v[0]
}

// TestListingVersionTriggers: every write to a row shown in a lease's
// body, by raw SQL as another program would write it, moves that lease's
// listing_version and no other lease's.
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
				{"lease counter written back", "UPDATE leases SET listing_version = 0 WHERE id = 'L1'", nil},
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
					t.Errorf("%s: L1's listing_version %d was seen before", s.name, v)
				}
				seen[v] = true
				if v2 := listingVersion(t, d, "L2"); v2 != before2 && s.name != "reservation moved to another lease" {
					t.Errorf("%s: L2's listing_version moved %d → %d", s.name, before2, v2)
				} else if v2 == before2 && s.name == "reservation moved to another lease" {
					t.Errorf("%s: L2's listing_version did not move", s.name)
				}
			}
			// A lease deleted and written again under its id does not
			// come back at its old count.
			old := listingVersion(t, d, "L2")
			mustExec(t, d, "DELETE FROM leases WHERE id = 'L2'")
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, lease_type)
 VALUES ('L2', 'L2', 'u', 'p', ?, ?, '', 'PENDING', ?, ?, 'SCHEDULE')`, upStart, upEnd, false, upCreated)
			if v := listingVersion(t, d, "L2"); v == old {
				t.Errorf("re-created lease at its old listing_version %d", v)
			}
		})
	}
}
