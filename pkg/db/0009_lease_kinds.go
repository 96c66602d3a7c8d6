package db

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// 0009 adds the lease kind (capacity-leasing seed) to the leases table:
// lease_type is SCHEDULE (every lease before this migration, and what a
// client that sends none gets), IMMEDIATE or BEST-EFFORT; timeout is a
// BEST-EFFORT lease's scavenger-hunt timeout in seconds (NULL otherwise).
// Plain ALTERs: both dialects add a column with a default to existing
// rows in place.
func init() {
	register(&gormigrate.Migration{
		ID: "0009_lease_kinds",
		Migrate: func(tx *gorm.DB) error {
			if err := tx.Exec("ALTER TABLE leases ADD COLUMN lease_type VARCHAR(16) NOT NULL DEFAULT 'SCHEDULE'").Error; err != nil {
				return err
			}
			return tx.Exec("ALTER TABLE leases ADD COLUMN timeout INTEGER NULL").Error
		},
		Rollback: func(tx *gorm.DB) error {
			if err := tx.Exec("ALTER TABLE leases DROP COLUMN timeout").Error; err != nil {
				return err
			}
			return tx.Exec("ALTER TABLE leases DROP COLUMN lease_type").Error
		},
	})
}
