package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// m0006OutboxAction is the frozen outbox table: external calls recorded
// by write transactions, run after commit by pkg/outbox. The two indexes
// serve the worker's claim query: pending rows in id order
// (status, id), and "is an earlier row of this key still pending"
// (order_key, id). Time columns keep microseconds on MySQL (the default
// would round claims and retry times to milliseconds).
type m0006OutboxAction struct {
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
	CreatedAt time.Time  `gorm:"precision:6;not null"`
	UpdatedAt *time.Time `gorm:"precision:6"`
}

func (m0006OutboxAction) TableName() string { return "outbox" }

func init() {
	register(&gormigrate.Migration{
		ID: "0006_outbox",
		Migrate: func(tx *gorm.DB) error {
			return tableOptions(tx).Migrator().CreateTable(&m0006OutboxAction{})
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(&m0006OutboxAction{})
		},
	})
}
