package models

import "time"

// Lease is a Blazar lease: a time window [StartDate, EndDate) with
// reservations and events. Status is the lease status machine's state
// (PENDING, ACTIVE, TERMINATED, ERROR and the transitional ones).
type Lease struct {
	ID        string     `gorm:"primaryKey;size:36"`
	Name      string     `gorm:"size:80;not null"`
	UserID    string     `gorm:"size:255"`
	ProjectID string     `gorm:"size:255;index"`
	StartDate time.Time  `gorm:"not null"`
	EndDate   time.Time  `gorm:"not null"`
	TrustID   string     `gorm:"size:36"`
	Status    string     `gorm:"size:255;not null"`
	Degraded  bool       `gorm:"not null;default:false"`
	CreatedAt time.Time  `gorm:"autoCreateTime:false"`
	UpdatedAt *time.Time `gorm:"autoUpdateTime:false"`
	// LeaseType is SCHEDULE, IMMEDIATE or BEST-EFFORT (migration 0009);
	// Timeout is a BEST-EFFORT lease's timeout in seconds.
	LeaseType string `gorm:"size:16;not null;default:SCHEDULE"`
	Timeout   *int
	// Tags are the lease's tags as a JSON array of strings, nil for none
	// (migration 0011).
	Tags *string `gorm:"type:text"`
}

// Reservation is one resource request of a lease; ResourceID points at the
// plugin row (ComputeHostReservation, FloatingIPReservation, …). Status is
// pending, active, deleted or error.
type Reservation struct {
	ID               string     `gorm:"primaryKey;size:36"`
	LeaseID          string     `gorm:"size:36;not null;index"`
	ResourceID       string     `gorm:"size:36"`
	ResourceType     string     `gorm:"size:66;not null"`
	Status           string     `gorm:"size:13;not null"`
	MissingResources bool       `gorm:"not null;default:false"`
	ResourcesChanged bool       `gorm:"not null;default:false"`
	CreatedAt        time.Time  `gorm:"autoCreateTime:false"`
	UpdatedAt        *time.Time `gorm:"autoUpdateTime:false"`
}

// ComputeHostReservation holds the physical:host parameters of a
// reservation. CountRange is "min-max" as upstream stores it.
type ComputeHostReservation struct {
	ID                   string     `gorm:"primaryKey;size:36"`
	ReservationID        string     `gorm:"size:36;not null;uniqueIndex"`
	AggregateID          *int64     `gorm:""`
	CountRange           string     `gorm:"size:36;not null"`
	HypervisorProperties string     `gorm:"type:text"`
	ResourceProperties   string     `gorm:"type:text"`
	BeforeEnd            string     `gorm:"size:36;not null;default:''"`
	CreatedAt            time.Time  `gorm:"autoCreateTime:false"`
	UpdatedAt            *time.Time `gorm:"autoUpdateTime:false"`
}

// ComputeHostAllocation books one host for one reservation. StartDate and
// EndDate repeat the lease window (upstream joins through the lease) so
// the overlap check on a set of hosts is one indexed query.
type ComputeHostAllocation struct {
	ID            string    `gorm:"primaryKey;size:36"`
	ReservationID string    `gorm:"size:36;not null;index"`
	ComputeHostID string    `gorm:"size:36;not null;index:idx_challoc_host_window,priority:1"`
	StartDate     time.Time `gorm:"not null;index:idx_challoc_host_window,priority:3"`
	EndDate       time.Time `gorm:"not null;index:idx_challoc_host_window,priority:2"`
	CreatedAt     time.Time `gorm:"autoCreateTime:false"`
}

// FloatingIPReservation holds the virtual:floatingip parameters.
type FloatingIPReservation struct {
	ID            string     `gorm:"primaryKey;size:36"`
	ReservationID string     `gorm:"size:36;not null;uniqueIndex"`
	NetworkID     string     `gorm:"size:255;not null"`
	Amount        int        `gorm:"not null"`
	CreatedAt     time.Time  `gorm:"autoCreateTime:false"`
	UpdatedAt     *time.Time `gorm:"autoUpdateTime:false"`
}

// RequiredFloatingIP is one address a floating-IP reservation asked for.
type RequiredFloatingIP struct {
	ID                      string `gorm:"primaryKey;size:36"`
	FloatingIPReservationID string `gorm:"size:36;not null;index"`
	Address                 string `gorm:"size:255;not null"`
}

// FloatingIPAllocation books one floating IP for one reservation, with the
// lease window repeated for the indexed overlap check.
type FloatingIPAllocation struct {
	ID            string    `gorm:"primaryKey;size:36"`
	ReservationID string    `gorm:"size:36;not null;index"`
	FloatingIPID  string    `gorm:"size:36;not null;index:idx_fipalloc_fip_window,priority:1"`
	StartDate     time.Time `gorm:"not null;index:idx_fipalloc_fip_window,priority:3"`
	EndDate       time.Time `gorm:"not null;index:idx_fipalloc_fip_window,priority:2"`
	CreatedAt     time.Time `gorm:"autoCreateTime:false"`
}

// Event is a lease event (start_lease, end_lease, before_end_lease, or an
// extra event stored as given). Status is UNDONE, IN_PROGRESS, DONE or
// ERROR. ClaimedBy/ClaimedAt record which event manager runs it, so two
// managers on one database run it exactly once and a dead manager's claim
// can be taken back after a timeout.
type Event struct {
	ID        string     `gorm:"primaryKey;size:36"`
	LeaseID   string     `gorm:"size:36;not null;index"`
	EventType string     `gorm:"size:66;not null"`
	Time      time.Time  `gorm:"not null;index:idx_events_status_time,priority:2"`
	Status    string     `gorm:"size:13;not null;index:idx_events_status_time,priority:1"`
	ClaimedBy string     `gorm:"size:64;not null;default:''"`
	ClaimedAt *time.Time `gorm:""`
	Attempts  int        `gorm:"not null;default:0"`
	CreatedAt time.Time  `gorm:"autoCreateTime:false"`
	UpdatedAt *time.Time `gorm:"autoUpdateTime:false"`
}

// ResourceLock is a row locked (written) by every transaction that books a
// resource (a host, a floating IP), so two transactions booking the same
// resource are serialised on every database; Version counts bookings.
type ResourceLock struct {
	ResourceType string `gorm:"primaryKey;size:66"`
	ResourceID   string `gorm:"primaryKey;size:36"`
	Version      int64  `gorm:"not null;default:0"`
}

// TableName keeps upstream Blazar's table names.
func (Lease) TableName() string                  { return "leases" }
func (Reservation) TableName() string            { return "reservations" }
func (ComputeHostReservation) TableName() string { return "computehost_reservations" }
func (ComputeHostAllocation) TableName() string  { return "computehost_allocations" }
func (FloatingIPReservation) TableName() string  { return "floatingip_reservations" }
func (RequiredFloatingIP) TableName() string     { return "required_floatingips" }
func (FloatingIPAllocation) TableName() string   { return "floatingip_allocations" }
func (Event) TableName() string                  { return "events" }
func (ResourceLock) TableName() string           { return "blazar_resource_locks" }
