package db

import (
	"fmt"
	"strings"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// 0013 adds lease_changes, an append-only log the database itself writes
// (triggers) whenever a row shown in a lease's listed body or in the
// host allocation listing is inserted, updated or deleted: the lease
// row, its reservations and events, its plugin rows (host, instance and
// floating IP reservations, the floating IPs they require, the ownership
// pools of its hosts) and the host allocations of its reservations. Each
// trigger only INSERTs one row (bucket, n) per lease the written row
// belongs to, the bucket being the first two characters of the lease's
// id (LeaseBucket). A bucket's version is SUM(n) of its rows: it grows
// with every committed change to any of its leases whatever the order
// the rows' ids were handed out in, so the listings keep each bucket's
// leases rendered for as long as its version is unchanged, read the
// versions of a few hundred buckets rather than of every lease, and no
// write path (nor another process, nor raw SQL) has to remember to
// invalidate anything.
//
// Locks (MariaDB, Galera). A trigger runs in the writer's transaction
// and takes only what inserting a new row takes: an insert-intention
// lock on its own new primary key and on the (bucket, n) entry of a
// non-unique index. Nothing else ever updates a row of lease_changes,
// and no one reads it with a locking read (the listings' reads are
// plain consistent reads, the compaction deletes by primary key rows
// nobody else writes), so the insert never waits on another
// transaction and adds no lock order between the tables it is fired
// from: an event claim (UPDATE events) takes the event's row and a new
// log row, never the lease's row. The owners of a plugin row are read
// from reservations by a subquery, a consistent (non-locking) read at
// READ COMMITTED, which every Leasehold write uses. On Galera each node
// hands out its own auto-increment values (offsets), row-based
// replication applies the inserted rows without firing triggers again,
// and two transactions never write the same log row: no certification
// conflict either.
//
// Every n is positive and only compaction deletes rows, keeping each
// bucket's sum, so a bucket's version never comes back to a value it
// had: a lease deleted and created again under the same id moves its
// bucket forward like any write. The lease's own INSERT still adds a
// random n rather than 1, so a database restored from a backup (its
// sums back to older values) and written again is unlikely to reach a
// version a running listing has kept another content under.

// LeaseChangesTable is the log 0013 adds.
const LeaseChangesTable = "lease_changes"

// listingOwners names, for each table shown in a lease's listed body or
// in the allocation listing, the expressions giving the ids of the
// leases a row (%[1]s: NEW or OLD) belongs to.
var listingOwners = []struct {
	table  string
	owners []string
}{
	{"leases", []string{"%[1]s.id"}},
	{"reservations", []string{"%[1]s.lease_id"}},
	{"events", []string{"%[1]s.lease_id"}},
	// The listing shows pools under their reservation: both owners.
	{"ownership_pools", []string{"%[1]s.lease_id", "(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"computehost_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"instance_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"floatingip_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"required_floatingips", []string{"(SELECT r.lease_id FROM floatingip_reservations f JOIN reservations r ON r.id = f.reservation_id" +
		" WHERE f.id = %[1]s.floating_ip_reservation_id)"}},
	{"computehost_allocations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
}

// listingTriggers is the DDL of 0013's triggers on dialect name
// ("mysql" or "sqlite"), and their names.
func listingTriggers(name string) (ddl, names []string) {
	mysql := name == "mysql"
	random := "abs(random() % 1073741824) + 1"
	// Characters, not bytes, on both (LeaseBucket).
	bucket := "substr(x.o, 1, 2)"
	if mysql {
		random = "FLOOR(RAND() * 1073741824) + 1"
		bucket = "LEFT(x.o, 2)"
	}
	for _, t := range listingOwners {
		for _, op := range []struct {
			name, event string
			rows        []string
		}{
			{"ins", "INSERT", []string{"NEW"}},
			{"upd", "UPDATE", []string{"OLD", "NEW"}},
			{"del", "DELETE", []string{"OLD"}},
		} {
			var owners []string
			for _, row := range op.rows {
				for _, o := range t.owners {
					owners = append(owners, "SELECT "+fmt.Sprintf(o, row)+" AS o")
				}
			}
			n := "1"
			if t.table == "leases" && op.event == "INSERT" {
				n = random
			}
			// UNION drops the duplicates (an update that kept its
			// owner) and the WHERE the rows that have none (a plugin row
			// whose reservation is gone).
			trigger := "lh_changes_" + t.table + "_" + op.name
			names = append(names, trigger)
			ddl = append(ddl, "CREATE TRIGGER IF NOT EXISTS "+trigger+" AFTER "+op.event+" ON "+t.table+" FOR EACH ROW BEGIN"+
				" INSERT INTO "+LeaseChangesTable+" (bucket, n) SELECT "+bucket+", "+n+" FROM ("+strings.Join(owners, " UNION ")+") x"+
				" WHERE x.o IS NOT NULL; END")
		}
	}
	return ddl, names
}

func init() {
	register(&gormigrate.Migration{
		ID: "0013_lease_changes",
		Migrate: func(tx *gorm.DB) error {
			// MySQL DDL is not transactional: a migration cut short is
			// run again from the start.
			if !tx.Migrator().HasTable(LeaseChangesTable) {
				ddl := "CREATE TABLE " + LeaseChangesTable + " (id INTEGER PRIMARY KEY, bucket VARCHAR(2) NOT NULL, n BIGINT NOT NULL DEFAULT 1)"
				if tx.Dialector.Name() == "mysql" {
					ddl = "CREATE TABLE " + LeaseChangesTable + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, bucket VARCHAR(2) NOT NULL," +
						" n BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
				}
				if err := tx.Exec(ddl).Error; err != nil {
					return err
				}
			}
			// A bucket's version is the sum over its entries of this
			// index: the listings' GROUP BY reads the index alone.
			if !tx.Migrator().HasIndex(LeaseChangesTable, "idx_lease_changes") {
				if err := tx.Exec("CREATE INDEX idx_lease_changes ON " + LeaseChangesTable + " (bucket, n)").Error; err != nil {
					return err
				}
			}
			// IF NOT EXISTS, never drop and create again: a run cut short
			// finds its triggers as it made them, and on Galera a
			// replica that migrates beside another (reading the
			// migrations table before the other's rows reached its node)
			// must not drop a trigger the other's replicated DDL is
			// making.
			ddl, names := listingTriggers(tx.Dialector.Name())
			for i, stmt := range ddl {
				if err := tx.Exec(stmt).Error; err != nil {
					return fmt.Errorf("trigger %s: %w", names[i], err)
				}
			}
			return nil
		},
		Rollback: func(tx *gorm.DB) error {
			_, names := listingTriggers(tx.Dialector.Name())
			for _, n := range names {
				if err := tx.Exec("DROP TRIGGER IF EXISTS " + n).Error; err != nil {
					return err
				}
			}
			return tx.Migrator().DropTable(LeaseChangesTable)
		},
	})
}
