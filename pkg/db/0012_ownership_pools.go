package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// m0012OwnershipPool is the frozen ownership_pools table: for each host a
// physical:host reservation holds, the ownership pool it came from (a
// Leasehold extension shown in lease bodies). Pool is owned, private or
// public; Consumer the consumer whose ownership or private pool it is ("" for
// public); LentBy the consumer that lent it when it was borrowed. Reclaim
// records what a reclaim did to the booking (JSON, NULL when nothing
// happened). LeaseID is repeated so listings and reclaims read it without
// joining the reservations. Rows exist only while ownership is on, so a
// lease made without it shows no ownership field.
type m0012OwnershipPool struct {
	ReservationID string    `gorm:"primaryKey;size:36"`
	ComputeHostID string    `gorm:"primaryKey;size:36"`
	LeaseID       string    `gorm:"size:36;not null;index"`
	Pool          string    `gorm:"size:16;not null"`
	Consumer      string    `gorm:"size:255;not null;default:''"`
	LentBy        string    `gorm:"size:255;not null;default:'';index"`
	Reclaim       *string   `gorm:"type:text"`
	CreatedAt     time.Time `gorm:"autoCreateTime:false"`
}

func (m0012OwnershipPool) TableName() string { return "ownership_pools" }

func init() {
	register(&gormigrate.Migration{
		ID: "0012_ownership_pools",
		Migrate: func(tx *gorm.DB) error {
			return tableOptions(tx).Migrator().CreateTable(&m0012OwnershipPool{})
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(&m0012OwnershipPool{})
		},
	})
}
