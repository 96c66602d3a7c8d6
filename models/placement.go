package models

import "time"

// ResourceProvider is a Placement resource provider. RootProviderID equals
// ID for a root; ParentProviderID is nil for a root.
type ResourceProvider struct {
	ID               int64  `gorm:"primaryKey;autoIncrement"`
	UUID             string `gorm:"size:36;not null;uniqueIndex:uniq_resource_providers0uuid"`
	Name             string `gorm:"size:200;not null;uniqueIndex:uniq_resource_providers0name"`
	Generation       int64  `gorm:"not null;default:0"`
	ParentProviderID *int64 `gorm:"index"`
	RootProviderID   int64  `gorm:"index;not null"`
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// ResourceClass is a standard or custom (CUSTOM_*) resource class.
// Standard classes keep ids 1..N in their upstream order; custom classes
// start at CustomResourceClassMinID.
type ResourceClass struct {
	ID        int64  `gorm:"primaryKey;autoIncrement:false"`
	Name      string `gorm:"size:255;not null;uniqueIndex"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CustomResourceClassMinID is the first id given to a custom class.
const CustomResourceClassMinID = 10000

// Inventory is one resource class of one provider.
type Inventory struct {
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

// Allocation is an amount of one class used by one consumer on one provider.
type Allocation struct {
	ID                 int64  `gorm:"primaryKey;autoIncrement"`
	ResourceProviderID int64  `gorm:"not null;index:idx_allocations_rp_rc"`
	ConsumerID         string `gorm:"size:36;not null;index"`
	ResourceClassID    int64  `gorm:"not null;index:idx_allocations_rp_rc"`
	Used               int64  `gorm:"not null"`
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Consumer is the owner of allocations (an instance, a migration, a lease).
type Consumer struct {
	ID             int64  `gorm:"primaryKey;autoIncrement"`
	UUID           string `gorm:"size:36;not null;uniqueIndex"`
	ProjectID      string `gorm:"size:255;not null;index"`
	UserID         string `gorm:"size:255;not null"`
	Generation     int64  `gorm:"not null;default:0"`
	ConsumerTypeID *int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// ConsumerType names a kind of consumer (1.38), e.g. INSTANCE, MIGRATION.
type ConsumerType struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	Name      string `gorm:"size:255;not null;uniqueIndex"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Trait is a standard or custom (CUSTOM_*) trait.
type Trait struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	Name      string `gorm:"size:255;not null;uniqueIndex"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ResourceProviderTrait links a provider and a trait.
type ResourceProviderTrait struct {
	ResourceProviderID int64 `gorm:"primaryKey;autoIncrement:false"`
	TraitID            int64 `gorm:"primaryKey;autoIncrement:false;index"`
}

// PlacementAggregate is an aggregate known to Placement by UUID.
type PlacementAggregate struct {
	ID   int64  `gorm:"primaryKey;autoIncrement"`
	UUID string `gorm:"size:36;not null;uniqueIndex"`
}

// ResourceProviderAggregate links a provider and an aggregate.
type ResourceProviderAggregate struct {
	ResourceProviderID int64 `gorm:"primaryKey;autoIncrement:false"`
	AggregateID        int64 `gorm:"primaryKey;autoIncrement:false;index"`
}
