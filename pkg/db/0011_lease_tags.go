package db

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// 0011 adds the lease tags (a Leasehold extension): a JSON array of
// strings, NULL for a lease without tags (every lease before this
// migration). The tags the cluster rules name exclusion tags
// (htools:iextags:P) keep leases that overlap in time apart in host
// choice. TEXT without a default: MariaDB refuses defaults on TEXT, and
// NULL reads as no tags on both dialects.
func init() {
	register(&gormigrate.Migration{
		ID: "0011_lease_tags",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec("ALTER TABLE leases ADD COLUMN tags TEXT NULL").Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec("ALTER TABLE leases DROP COLUMN tags").Error
		},
	})
}
