package db

import (
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Frozen copies of the Blazar lease tables as of migration 0005.
type (
	m0005Lease struct {
		ID        string    `gorm:"primaryKey;size:36"`
		Name      string    `gorm:"size:80;not null"`
		UserID    string    `gorm:"size:255"`
		ProjectID string    `gorm:"size:255;index"`
		StartDate time.Time `gorm:"not null"`
		EndDate   time.Time `gorm:"not null"`
		TrustID   string    `gorm:"size:36"`
		Status    string    `gorm:"size:255;not null"`
		Degraded  bool      `gorm:"not null;default:false"`
		CreatedAt time.Time
		UpdatedAt *time.Time
	}
	m0005Reservation struct {
		ID               string `gorm:"primaryKey;size:36"`
		LeaseID          string `gorm:"size:36;not null;index"`
		ResourceID       string `gorm:"size:36"`
		ResourceType     string `gorm:"size:66;not null"`
		Status           string `gorm:"size:13;not null"`
		MissingResources bool   `gorm:"not null;default:false"`
		ResourcesChanged bool   `gorm:"not null;default:false"`
		CreatedAt        time.Time
		UpdatedAt        *time.Time
	}
	m0005ComputeHostReservation struct {
		ID                   string `gorm:"primaryKey;size:36"`
		ReservationID        string `gorm:"size:36;not null;uniqueIndex"`
		AggregateID          *int64
		CountRange           string `gorm:"size:36;not null"`
		HypervisorProperties string `gorm:"type:text"`
		ResourceProperties   string `gorm:"type:text"`
		BeforeEnd            string `gorm:"size:36;not null;default:''"`
		CreatedAt            time.Time
		UpdatedAt            *time.Time
	}
	m0005ComputeHostAllocation struct {
		ID            string    `gorm:"primaryKey;size:36"`
		ReservationID string    `gorm:"size:36;not null;index"`
		ComputeHostID string    `gorm:"size:36;not null;index:idx_challoc_host_window,priority:1"`
		StartDate     time.Time `gorm:"not null;index:idx_challoc_host_window,priority:3"`
		EndDate       time.Time `gorm:"not null;index:idx_challoc_host_window,priority:2"`
		CreatedAt     time.Time
	}
	m0005FloatingIPReservation struct {
		ID            string `gorm:"primaryKey;size:36"`
		ReservationID string `gorm:"size:36;not null;uniqueIndex"`
		NetworkID     string `gorm:"size:255;not null"`
		Amount        int    `gorm:"not null"`
		CreatedAt     time.Time
		UpdatedAt     *time.Time
	}
	m0005RequiredFloatingIP struct {
		ID                      string `gorm:"primaryKey;size:36"`
		FloatingIPReservationID string `gorm:"size:36;not null;index"`
		Address                 string `gorm:"size:255;not null"`
	}
	m0005FloatingIPAllocation struct {
		ID            string    `gorm:"primaryKey;size:36"`
		ReservationID string    `gorm:"size:36;not null;index"`
		FloatingIPID  string    `gorm:"size:36;not null;index:idx_fipalloc_fip_window,priority:1"`
		StartDate     time.Time `gorm:"not null;index:idx_fipalloc_fip_window,priority:3"`
		EndDate       time.Time `gorm:"not null;index:idx_fipalloc_fip_window,priority:2"`
		CreatedAt     time.Time
	}
	m0005Event struct {
		ID        string    `gorm:"primaryKey;size:36"`
		LeaseID   string    `gorm:"size:36;not null;index"`
		EventType string    `gorm:"size:66;not null"`
		Time      time.Time `gorm:"not null;index:idx_events_status_time,priority:2"`
		Status    string    `gorm:"size:13;not null;index:idx_events_status_time,priority:1"`
		ClaimedBy string    `gorm:"size:64;not null;default:''"`
		ClaimedAt *time.Time
		Attempts  int `gorm:"not null;default:0"`
		CreatedAt time.Time
		UpdatedAt *time.Time
	}
	m0005ResourceLock struct {
		ResourceType string `gorm:"primaryKey;size:66"`
		ResourceID   string `gorm:"primaryKey;size:36"`
		Version      int64  `gorm:"not null;default:0"`
	}
)

func (m0005Lease) TableName() string                  { return "leases" }
func (m0005Reservation) TableName() string            { return "reservations" }
func (m0005ComputeHostReservation) TableName() string { return "computehost_reservations" }
func (m0005ComputeHostAllocation) TableName() string  { return "computehost_allocations" }
func (m0005FloatingIPReservation) TableName() string  { return "floatingip_reservations" }
func (m0005RequiredFloatingIP) TableName() string     { return "required_floatingips" }
func (m0005FloatingIPAllocation) TableName() string   { return "floatingip_allocations" }
func (m0005Event) TableName() string                  { return "events" }
func (m0005ResourceLock) TableName() string           { return "blazar_resource_locks" }

var m0005Tables = []any{
	&m0005Lease{}, &m0005Reservation{}, &m0005ComputeHostReservation{}, &m0005ComputeHostAllocation{},
	&m0005FloatingIPReservation{}, &m0005RequiredFloatingIP{}, &m0005FloatingIPAllocation{},
	&m0005Event{}, &m0005ResourceLock{},
}

func init() {
	register(&gormigrate.Migration{
		ID: "0005_blazar_leases",
		Migrate: func(tx *gorm.DB) error {
			return tableOptions(tx).Migrator().CreateTable(m0005Tables...)
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Migrator().DropTable(m0005Tables...)
		},
	})
}
