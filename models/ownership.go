package models

import "time"

// OwnershipPlan is the ownership policy's one row (ID 1): the plan as a
// JSON document with its generation, and the ownership computed from it
// with the report of the last recomputation (pkg/blazar/ownership).
type OwnershipPlan struct {
	ID         int64      `gorm:"primaryKey;autoIncrement:false"`
	Generation int64      `gorm:"not null"`
	Plan       string     `gorm:"type:longtext;not null"`
	Ownership  string     `gorm:"type:longtext;not null"`
	Report     string     `gorm:"type:longtext;not null"`
	UpdatedAt  *time.Time `gorm:"precision:6;autoUpdateTime:false"`
}

// TableName is the table's name.
func (OwnershipPlan) TableName() string { return "ownership_plans" }
