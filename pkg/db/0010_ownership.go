package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// m0010OwnershipPlan is the frozen ownership table: one row (id 1) holding
// the ownership plan (consumers, resource groups, entries) as a JSON
// document with its generation, and the ownership last computed from it
// with the report of what moved. One row keeps a plan edit atomic: a
// write is a compare-and-set on the generation, as Placement's are.
type m0010OwnershipPlan struct {
	ID         int64      `gorm:"primaryKey;autoIncrement:false"`
	Generation int64      `gorm:"not null"`
	Plan       string     `gorm:"type:longtext;not null"`
	Ownership  string     `gorm:"type:longtext;not null"`
	Report     string     `gorm:"type:longtext;not null"`
	UpdatedAt  *time.Time `gorm:"precision:6"`
}

func (m0010OwnershipPlan) TableName() string { return "ownership_plans" }

func init() {
	register(&gormigrate.Migration{
		ID: "0010_ownership",
		Migrate: func(tx *gorm.DB) error {
			if err := tableOptions(tx).Migrator().CreateTable(&m0010OwnershipPlan{}); err != nil {
				return err
			}
			return tx.Create(&m0010OwnershipPlan{ID: 1, Plan: "{}", Ownership: "{}", Report: "{}"}).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(&m0010OwnershipPlan{})
		},
	})
}
