package models

import "time"

// ComputeHost is a Blazar host (upstream table computehosts). ID is the
// API's numeric string id. ComputeProviderUUID / ReservationProviderUUID
// name the host's Placement providers (the compute node, and its child
// blazar_<hostname>); OwnsComputeProvider says whether Leasehold created
// the compute node provider (and so deletes it with the host) or found it
// already there (registered by Nova).
type ComputeHost struct {
	ID                      int64      `gorm:"column:id;primaryKey;autoIncrement"`
	VCPUs                   int64      `gorm:"column:vcpus;not null"`
	CPUInfo                 string     `gorm:"column:cpu_info;type:text;not null"`
	HypervisorType          string     `gorm:"column:hypervisor_type;size:255;not null"`
	HypervisorVersion       int64      `gorm:"column:hypervisor_version;not null"`
	HypervisorHostname      string     `gorm:"column:hypervisor_hostname;size:255;not null;uniqueIndex:uniq_computehosts0hypervisor_hostname"`
	ServiceName             string     `gorm:"column:service_name;size:255;not null"`
	MemoryMB                int64      `gorm:"column:memory_mb;not null"`
	LocalGB                 int64      `gorm:"column:local_gb;not null"`
	Status                  *string    `gorm:"column:status;size:13"`
	AvailabilityZone        string     `gorm:"column:availability_zone;size:255;not null"`
	TrustID                 *string    `gorm:"column:trust_id;size:36"`
	Reservable              bool       `gorm:"column:reservable;not null;index"`
	ComputeProviderUUID     string     `gorm:"column:compute_provider_uuid;size:36;not null"`
	ReservationProviderUUID string     `gorm:"column:reservation_provider_uuid;size:36;not null"`
	OwnsComputeProvider     bool       `gorm:"column:owns_compute_provider;not null"`
	CreatedAt               time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt               *time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// ResourceProperty names an extra capability of one resource type
// (physical:host, …); Private hides it from non-admin listings.
type ResourceProperty struct {
	ID           string     `gorm:"column:id;primaryKey;size:36"`
	ResourceType string     `gorm:"column:resource_type;size:255;not null;uniqueIndex:uniq_resource_properties0type_name,priority:1"`
	PropertyName string     `gorm:"column:property_name;size:255;not null;uniqueIndex:uniq_resource_properties0type_name,priority:2"`
	Private      bool       `gorm:"column:private;not null"`
	CreatedAt    time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt    *time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// ComputeHostExtraCapability is one capability value of one host.
type ComputeHostExtraCapability struct {
	ID              string     `gorm:"column:id;primaryKey;size:36"`
	ComputeHostID   int64      `gorm:"column:computehost_id;not null;uniqueIndex:uniq_chcap0host_property,priority:1"`
	PropertyID      string     `gorm:"column:property_id;size:36;not null;uniqueIndex:uniq_chcap0host_property,priority:2;index"`
	CapabilityValue string     `gorm:"column:capability_value;type:text;not null"`
	CreatedAt       time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt       *time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// FloatingIP is a floating IP address in the virtual:floatingip pool.
type FloatingIP struct {
	ID                string     `gorm:"column:id;primaryKey;size:36"`
	FloatingNetworkID string     `gorm:"column:floating_network_id;size:255;not null;uniqueIndex:uniq_floatingips0network_address,priority:1"`
	SubnetID          *string    `gorm:"column:subnet_id;size:255"`
	FloatingIPAddress string     `gorm:"column:floating_ip_address;size:255;not null;uniqueIndex:uniq_floatingips0network_address,priority:2"`
	Reservable        bool       `gorm:"column:reservable;not null"`
	CreatedAt         time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt         *time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// ChangeMarker is a counter bumped in the same transaction as every write
// to a group of tables (Name, e.g. "computehosts"), so a process can tell
// cheaply whether its in-memory copy is still current.
type ChangeMarker struct {
	Name    string `gorm:"column:name;primaryKey;size:64"`
	Version int64  `gorm:"column:version;not null"`
}

// TableName keeps upstream Blazar's table names.
func (ComputeHost) TableName() string                { return "computehosts" }
func (ResourceProperty) TableName() string           { return "resource_properties" }
func (ComputeHostExtraCapability) TableName() string { return "computehost_extra_capabilities" }
func (FloatingIP) TableName() string                 { return "floatingips" }
func (ChangeMarker) TableName() string               { return "leasehold_change_markers" }
