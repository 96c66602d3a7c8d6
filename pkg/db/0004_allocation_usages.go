package db

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// m0004AllocationUsage is the frozen allocation_usages table: the sum of
// allocations.used per (provider, class), kept by every allocation write
// in the same transaction, so capacity checks read one row instead of
// summing every allocation against a provider.
type m0004AllocationUsage struct {
	ResourceProviderID int64 `gorm:"primaryKey;autoIncrement:false"`
	ResourceClassID    int64 `gorm:"primaryKey;autoIncrement:false"`
	Used               int64 `gorm:"not null;default:0"`
}

func (m0004AllocationUsage) TableName() string { return "allocation_usages" }

func init() {
	register(&gormigrate.Migration{
		ID: "0004_allocation_usages",
		Migrate: func(tx *gorm.DB) error {
			if err := tableOptions(tx).Migrator().CreateTable(&m0004AllocationUsage{}); err != nil {
				return err
			}
			return tx.Exec(`INSERT INTO allocation_usages (resource_provider_id, resource_class_id, used)
 SELECT resource_provider_id, resource_class_id, SUM(used) FROM allocations GROUP BY resource_provider_id, resource_class_id`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(&m0004AllocationUsage{})
		},
	})
}
