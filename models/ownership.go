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

// OwnershipPool records the ownership pool one host of a physical:host
// reservation came from (migration 0012): Pool is owned, private or
// public, Consumer whose ownership or private pool it is, LentBy the
// lender of a borrowed host; Reclaim is a JSON note of what a reclaim did
// to the booking (nil: nothing).
type OwnershipPool struct {
	ReservationID string    `gorm:"primaryKey;size:36"`
	ComputeHostID string    `gorm:"primaryKey;size:36"`
	LeaseID       string    `gorm:"size:36;not null;index"`
	Pool          string    `gorm:"size:16;not null"`
	Consumer      string    `gorm:"size:255;not null;default:''"`
	LentBy        string    `gorm:"size:255;not null;default:'';index"`
	Reclaim       *string   `gorm:"type:text"`
	CreatedAt     time.Time `gorm:"autoCreateTime:false"`
}

// TableName is the table's name.
func (OwnershipPool) TableName() string { return "ownership_pools" }
