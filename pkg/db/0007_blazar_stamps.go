package db

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// m0007StampTables are the Blazar tables whose created_at/updated_at the
// API shows with microseconds (as upstream's isoformat(' ') does): on
// MySQL they were DATETIME(3), which would round what a create answered.
// SQLite stores the full value already.
var m0007StampTables = []string{"leases", "reservations", "events", "computehosts", "resource_properties", "floatingips"}

func init() {
	register(&gormigrate.Migration{
		ID: "0007_blazar_stamps",
		Migrate: func(tx *gorm.DB) error {
			return m0007Precision(tx, 6)
		},
		Rollback: func(tx *gorm.DB) error {
			return m0007Precision(tx, 3)
		},
	})
}

func m0007Precision(tx *gorm.DB, fsp int) error {
	if tx.Dialector.Name() != "mysql" {
		return nil
	}
	for _, t := range m0007StampTables {
		if err := tx.Exec("ALTER TABLE " + t + " MODIFY created_at DATETIME(" + string(rune('0'+fsp)) + ") NULL, MODIFY updated_at DATETIME(" + string(rune('0'+fsp)) + ") NULL").Error; err != nil {
			return err
		}
	}
	return nil
}
