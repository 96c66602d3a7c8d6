package models

import "time"

// OutboxAction is one external call (a compute driver call, a Nova
// request, a notification) recorded by a write transaction and carried
// out by pkg/outbox's worker after the commit.
//
// Status is PENDING (due at NextAt, or at once when NextAt is nil),
// CLAIMED (a worker named ClaimedBy runs it since ClaimedAt) or FAILED
// (kept for the operator). Rows that succeed are deleted. Attempts
// counts the claims (runs started); LastError is the latest failure.
// Rows with one OrderKey run one at a time in ID order.
type OutboxAction struct {
	ID        int64      `gorm:"primaryKey;autoIncrement;index:idx_outbox_key_id,priority:2;index:idx_outbox_status_id,priority:2"`
	Kind      string     `gorm:"size:128;not null"`
	OrderKey  string     `gorm:"size:255;not null;index:idx_outbox_key_id,priority:1"`
	LeaseID   string     `gorm:"size:36;not null;default:'';index"`
	Payload   string     `gorm:"type:text;not null"`
	Status    string     `gorm:"size:13;not null;index:idx_outbox_status_id,priority:1"`
	Attempts  int        `gorm:"not null;default:0"`
	LastError string     `gorm:"type:text;not null"`
	NextAt    *time.Time `gorm:"precision:6"`
	ClaimedBy string     `gorm:"size:64;not null;default:''"`
	ClaimedAt *time.Time `gorm:"precision:6"`
	CreatedAt time.Time  `gorm:"precision:6;not null;autoCreateTime:false"`
	UpdatedAt *time.Time `gorm:"precision:6;autoUpdateTime:false"`
}

// TableName is the outbox table.
func (OutboxAction) TableName() string { return "outbox" }
