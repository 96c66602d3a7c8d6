package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Frozen copies of the Placement tables as of migration 0001.
type (
	m0001ResourceProvider struct {
		ID               int64  `gorm:"primaryKey;autoIncrement"`
		UUID             string `gorm:"size:36;not null;uniqueIndex:uniq_resource_providers0uuid"`
		Name             string `gorm:"size:200;not null;uniqueIndex:uniq_resource_providers0name"`
		Generation       int64  `gorm:"not null;default:0"`
		ParentProviderID *int64 `gorm:"index"`
		RootProviderID   int64  `gorm:"index;not null"`
		CreatedAt        time.Time
		UpdatedAt        time.Time
	}
	m0001ResourceClass struct {
		ID        int64  `gorm:"primaryKey;autoIncrement:false"`
		Name      string `gorm:"size:255;not null;uniqueIndex"`
		CreatedAt time.Time
		UpdatedAt time.Time
	}
	m0001Inventory struct {
		ID                 int64   `gorm:"primaryKey;autoIncrement"`
		ResourceProviderID int64   `gorm:"not null;uniqueIndex:uniq_inventories0rp_rc"`
		ResourceClassID    int64   `gorm:"not null;uniqueIndex:uniq_inventories0rp_rc;index"`
		Total              int64   `gorm:"not null"`
		Reserved           int64   `gorm:"not null"`
		MinUnit            int64   `gorm:"not null"`
		MaxUnit            int64   `gorm:"not null"`
		StepSize           int64   `gorm:"not null"`
		AllocationRatio    float64 `gorm:"not null"`
		CreatedAt          time.Time
		UpdatedAt          time.Time
	}
	m0001Allocation struct {
		ID                 int64  `gorm:"primaryKey;autoIncrement"`
		ResourceProviderID int64  `gorm:"not null;index:idx_allocations_rp_rc"`
		ConsumerID         string `gorm:"size:36;not null;index"`
		ResourceClassID    int64  `gorm:"not null;index:idx_allocations_rp_rc"`
		Used               int64  `gorm:"not null"`
		CreatedAt          time.Time
		UpdatedAt          time.Time
	}
	m0001Consumer struct {
		ID             int64  `gorm:"primaryKey;autoIncrement"`
		UUID           string `gorm:"size:36;not null;uniqueIndex"`
		ProjectID      string `gorm:"size:255;not null;index"`
		UserID         string `gorm:"size:255;not null"`
		Generation     int64  `gorm:"not null;default:0"`
		ConsumerTypeID *int64
		CreatedAt      time.Time
		UpdatedAt      time.Time
	}
	m0001ConsumerType struct {
		ID        int64  `gorm:"primaryKey;autoIncrement"`
		Name      string `gorm:"size:255;not null;uniqueIndex"`
		CreatedAt time.Time
		UpdatedAt time.Time
	}
	m0001Trait struct {
		ID        int64  `gorm:"primaryKey;autoIncrement"`
		Name      string `gorm:"size:255;not null;uniqueIndex"`
		CreatedAt time.Time
		UpdatedAt time.Time
	}
	m0001ResourceProviderTrait struct {
		ResourceProviderID int64 `gorm:"primaryKey;autoIncrement:false"`
		TraitID            int64 `gorm:"primaryKey;autoIncrement:false;index"`
	}
	m0001PlacementAggregate struct {
		ID   int64  `gorm:"primaryKey;autoIncrement"`
		UUID string `gorm:"size:36;not null;uniqueIndex"`
	}
	m0001ResourceProviderAggregate struct {
		ResourceProviderID int64 `gorm:"primaryKey;autoIncrement:false"`
		AggregateID        int64 `gorm:"primaryKey;autoIncrement:false;index"`
	}
)

func (m0001ResourceProvider) TableName() string          { return "resource_providers" }
func (m0001ResourceClass) TableName() string             { return "resource_classes" }
func (m0001Inventory) TableName() string                 { return "inventories" }
func (m0001Allocation) TableName() string                { return "allocations" }
func (m0001Consumer) TableName() string                  { return "consumers" }
func (m0001ConsumerType) TableName() string              { return "consumer_types" }
func (m0001Trait) TableName() string                     { return "traits" }
func (m0001ResourceProviderTrait) TableName() string     { return "resource_provider_traits" }
func (m0001PlacementAggregate) TableName() string        { return "placement_aggregates" }
func (m0001ResourceProviderAggregate) TableName() string { return "resource_provider_aggregates" }

var m0001Tables = []any{
	&m0001ResourceProvider{}, &m0001ResourceClass{}, &m0001Inventory{}, &m0001Allocation{},
	&m0001Consumer{}, &m0001ConsumerType{}, &m0001Trait{}, &m0001ResourceProviderTrait{},
	&m0001PlacementAggregate{}, &m0001ResourceProviderAggregate{},
}

func init() {
	register(&gormigrate.Migration{
		ID: "0001_placement",
		Migrate: func(tx *gorm.DB) error {
			return tableOptions(tx).Migrator().CreateTable(m0001Tables...)
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(m0001Tables...)
		},
	})
}
