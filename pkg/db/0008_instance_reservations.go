package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Frozen tables of the virtual:instance and flavor:instance plugins.
//
// instance_reservations holds a reservation's parameters as upstream's
// table of that name does (flavor_id is the reservation id; affinity is
// NULL for "any split"); source_flavor keeps the JSON of the flavor a
// flavor:instance reservation was derived from.
//
// instance_allocations holds the slots of a reservation per host with
// the lease window repeated, so the usage of a set of hosts over a window
// is one indexed query; span_s is the window's length in seconds, whose
// (indexed) maximum bounds the range of start dates a window query scans. Each (reservation, host) also has one
// computehost_allocations row, which keeps whole-host reservations,
// host deletion and the allocations API aware of instance slots.
type (
	m0008InstanceReservation struct {
		ID                 string `gorm:"primaryKey;size:36"`
		ReservationID      string `gorm:"size:36;not null;uniqueIndex"`
		VCPUs              int    `gorm:"column:vcpus;not null"`
		MemoryMB           int    `gorm:"not null"`
		DiskGB             int    `gorm:"not null"`
		Amount             int    `gorm:"not null"`
		Affinity           *bool
		ResourceProperties string  `gorm:"type:text"`
		FlavorID           string  `gorm:"size:36;not null;default:''"`
		ServerGroupID      *string `gorm:"size:36"`
		AggregateID        *int64
		SourceFlavor       string     `gorm:"type:text"`
		CreatedAt          time.Time  `gorm:"precision:6"`
		UpdatedAt          *time.Time `gorm:"precision:6"`
	}
	m0008InstanceAllocation struct {
		ID            string    `gorm:"primaryKey;size:36"`
		ReservationID string    `gorm:"size:36;not null;index"`
		ComputeHostID string    `gorm:"size:36;not null;index:idx_installoc_host_window,priority:1"`
		Slots         int       `gorm:"not null"`
		StartDate     time.Time `gorm:"precision:6;not null;index:idx_installoc_window,priority:1;index:idx_installoc_host_window,priority:3"`
		EndDate       time.Time `gorm:"precision:6;not null;index:idx_installoc_window,priority:2;index:idx_installoc_host_window,priority:2"`
		SpanS         int64     `gorm:"column:span_s;not null;default:0;index"`
		CreatedAt     time.Time `gorm:"precision:6"`
	}
)

func (m0008InstanceReservation) TableName() string { return "instance_reservations" }
func (m0008InstanceAllocation) TableName() string  { return "instance_allocations" }

func init() {
	register(&gormigrate.Migration{
		ID: "0008_instance_reservations",
		Migrate: func(tx *gorm.DB) error {
			return tableOptions(tx).Migrator().CreateTable(&m0008InstanceReservation{}, &m0008InstanceAllocation{})
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(&m0008InstanceAllocation{}, &m0008InstanceReservation{})
		},
	})
}
