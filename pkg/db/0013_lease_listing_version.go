package db

import (
	"fmt"
	"strings"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// 0013 adds leases.listing_version, a counter the database itself moves
// whenever a row shown in the lease's listed body is written: the lease
// row, and through triggers its reservations, events and plugin rows
// (host, instance and floating IP reservations, the floating IPs they
// require, the ownership pools of its hosts). The lease listing keeps
// each lease's rendered object for as long as its counter is unchanged,
// so the first listing after a write reads only the leases written, and
// no write path (nor another process, nor raw SQL) has to remember to
// invalidate anything. The counter is per lease, so it adds no row that
// writers of different leases would contend on (a hot row on Galera).
//
// A new lease starts from a random value rather than 0: a lease deleted
// and written again under the same id does not come back at a count a
// listing has already seen.

// listingOwners names, for each table shown in a lease's body, the
// expressions giving the ids of the leases a row (%[1]s: NEW or OLD)
// belongs to.
var listingOwners = []struct {
	table  string
	owners []string
}{
	{"reservations", []string{"%[1]s.lease_id"}},
	{"events", []string{"%[1]s.lease_id"}},
	// The listing shows pools under their reservation: both owners.
	{"ownership_pools", []string{"%[1]s.lease_id", "(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"computehost_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"instance_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"floatingip_reservations", []string{"(SELECT r.lease_id FROM reservations r WHERE r.id = %[1]s.reservation_id)"}},
	{"required_floatingips", []string{"(SELECT r.lease_id FROM floatingip_reservations f JOIN reservations r ON r.id = f.reservation_id" +
		" WHERE f.id = %[1]s.floating_ip_reservation_id)"}},
}

// listingTriggers is the DDL of 0013's triggers on dialect name
// ("mysql" or "sqlite"), and their names.
func listingTriggers(name string) (ddl, names []string) {
	mysql := name == "mysql"
	add := func(trigger, stmt string) {
		names = append(names, trigger)
		ddl = append(ddl, stmt)
	}
	// The lease row itself. MySQL cannot update the table a trigger is
	// on: its BEFORE triggers set the new row's value instead. SQLite's
	// AFTER triggers update the row (recursive triggers are off, so the
	// update does not fire the trigger again).
	if mysql {
		add("lh_listing_leases_ins", "CREATE TRIGGER lh_listing_leases_ins BEFORE INSERT ON leases FOR EACH ROW"+
			" SET NEW.listing_version = FLOOR(RAND() * 1000000000000000)")
		add("lh_listing_leases_upd", "CREATE TRIGGER lh_listing_leases_upd BEFORE UPDATE ON leases FOR EACH ROW"+
			" SET NEW.listing_version = OLD.listing_version + 1")
	} else {
		add("lh_listing_leases_ins", "CREATE TRIGGER lh_listing_leases_ins AFTER INSERT ON leases FOR EACH ROW"+
			" BEGIN UPDATE leases SET listing_version = abs(random() % 1000000000000000) WHERE id = NEW.id; END")
		// An update that moved the counter up (the other triggers') is
		// counted already.
		add("lh_listing_leases_upd", "CREATE TRIGGER lh_listing_leases_upd AFTER UPDATE ON leases FOR EACH ROW"+
			" WHEN NEW.listing_version <= OLD.listing_version"+
			" BEGIN UPDATE leases SET listing_version = OLD.listing_version + 1 WHERE id = NEW.id; END")
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
					owners = append(owners, fmt.Sprintf(o, row))
				}
			}
			trigger := "lh_listing_" + t.table + "_" + op.name
			head := "CREATE TRIGGER " + trigger + " AFTER " + op.event + " ON " + t.table + " FOR EACH ROW BEGIN "
			if !mysql {
				add(trigger, head+"UPDATE leases SET listing_version = listing_version + 1 WHERE id IN ("+strings.Join(owners, ", ")+"); END")
				continue
			}
			// MySQL runs a single-table UPDATE whose IN list holds a
			// subquery as a scan of every lease, locking each: the owners
			// are read into variables first, so the update locks only
			// their rows. (The leases' own trigger counts from the old
			// row.)
			var decl, set, vars []string
			for i, o := range owners {
				v := fmt.Sprintf("o%d", i)
				decl = append(decl, "DECLARE "+v+" VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin; ")
				set = append(set, "SET "+v+" = "+o+"; ")
				vars = append(vars, v)
			}
			add(trigger, head+strings.Join(decl, "")+strings.Join(set, "")+
				"UPDATE leases SET listing_version = listing_version + 1 WHERE id IN ("+strings.Join(vars, ", ")+"); END")
		}
	}
	return ddl, names
}

func init() {
	register(&gormigrate.Migration{
		ID: "0013_lease_listing_version",
		Migrate: func(tx *gorm.DB) error {
			// MySQL DDL is not transactional: a migration cut short is
			// run again from the start.
			if !tx.Migrator().HasColumn("leases", "listing_version") {
				if err := tx.Exec("ALTER TABLE leases ADD COLUMN listing_version BIGINT NOT NULL DEFAULT 0").Error; err != nil {
					return err
				}
			}
			// The listing reads (id, listing_version) of every lease, or of
			// a project's: from this index alone, not the wide rows.
			if !tx.Migrator().HasIndex("leases", "idx_leases_listing") {
				if err := tx.Exec("CREATE INDEX idx_leases_listing ON leases (project_id, id, listing_version)").Error; err != nil {
					return err
				}
			}
			ddl, names := listingTriggers(tx.Dialector.Name())
			for i, stmt := range ddl {
				if err := tx.Exec("DROP TRIGGER IF EXISTS " + names[i]).Error; err != nil {
					return err
				}
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
			if err := tx.Migrator().DropIndex("leases", "idx_leases_listing"); err != nil {
				return err
			}
			return tx.Exec("ALTER TABLE leases DROP COLUMN listing_version").Error
		},
	})
}
