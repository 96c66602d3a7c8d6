// Package compute is the boundary between Leasehold and the compute
// service that runs the reserved hosts. A Driver resolves a host when an
// operator registers it, keeps Nova's host aggregates in step with
// reservations (the freepool for unreserved hosts, one aggregate per
// reservation tagged with the owning project) and removes leftover
// servers when a lease ends.
//
// Two implementations: standalone (package compute/standalone: no Nova,
// the host's description comes from the request and aggregate operations
// are recorded no-ops) and nova (package compute/nova, through
// gophercloud: os-hypervisors for DescribeHost, os-aggregates for the
// pool operations, servers for cleanup; the server wiring chooses one
// from the configuration). The lease engine calls the Driver, never Nova
// directly.
package compute

import (
	"context"
)

// HostDetails are the fields of a host as the compute service reports
// them (Nova's hypervisor detail keys).
type HostDetails struct {
	// ID is the compute service's numeric id for the host (Nova's
	// hypervisor id); 0 lets the database assign one.
	ID                 int64
	HypervisorHostname string
	ServiceName        string
	HypervisorType     string
	HypervisorVersion  int64
	CPUInfo            string
	AvailabilityZone   string
	VCPUs              int64
	MemoryMB           int64
	LocalGB            int64
}

// DetailKeys are the host-create body keys that describe the host itself;
// every other key (besides "name" and "id") is an extra capability.
var DetailKeys = []string{
	"vcpus", "memory_mb", "local_gb", "hypervisor_type", "hypervisor_version",
	"hypervisor_hostname", "cpu_info", "service_name", "availability_zone",
}

// IsDetailKey reports whether key is a host detail key or the host's
// name/id rather than an extra capability.
func IsDetailKey(key string) bool {
	if key == "name" || key == "id" {
		return true
	}
	for _, k := range DetailKeys {
		if k == key {
			return true
		}
	}
	return false
}

// ReservationAggregate identifies the aggregate of one reservation:
// Nova's aggregate named after the reservation id, with metadata
// blazar:owner = ProjectID.
type ReservationAggregate struct {
	ReservationID string
	ProjectID     string
	// AvailabilityZone, when set, makes the aggregate an AZ (Blazar's
	// blazar_az_prefix behaviour).
	AvailabilityZone string
}

// Driver is a compute service. Every method is synchronous: it returns
// when the change is done, or an error (an *errs.Error says what kind of
// failure it is: a refused request, an unknown host, the compute service
// failing).
//
// The pool and reservation operations may run again after a crash or a
// lost answer (the outbox retries them), so each must succeed when its
// change is already done: adding a host already in the aggregate,
// removing one that is not there.
type Driver interface {
	// Name is "standalone", "nova", … (for logs and /v1/plugins).
	Name() string
	// DescribeHost resolves the host named by a host-create body (key
	// "name", or "id") and splits the body: HostDetails for the host
	// itself and the remaining keys as extra capabilities. Unknown hosts
	// are an errs.NotFound, ambiguous names an errs.Conflict, a body
	// without a name an errs.BadRequest.
	DescribeHost(ctx context.Context, body map[string]string) (HostDetails, map[string]string, error)
	// ServersOnHost lists the ids of servers running on the host, named
	// as the compute service knows it (service_name; a host with servers
	// cannot be registered or removed).
	ServersOnHost(ctx context.Context, hostname string) ([]string, error)
	// AddToFreePool and RemoveFromFreePool move hosts in and out of the
	// freepool aggregate of unreserved hosts.
	AddToFreePool(ctx context.Context, hostnames []string) error
	RemoveFromFreePool(ctx context.Context, hostnames []string) error
	// AddToReservation adds hosts to the reservation's aggregate, creating
	// it with blazar:owner metadata if needed; RemoveFromReservation takes
	// them out, and deletes the aggregate when it becomes empty.
	AddToReservation(ctx context.Context, agg ReservationAggregate, hostnames []string) error
	RemoveFromReservation(ctx context.Context, agg ReservationAggregate, hostnames []string) error
	// CleanupServers deletes the servers left on the hosts when a lease
	// ends and waits until they are gone.
	CleanupServers(ctx context.Context, hostnames []string) error

	// EnsureFreePool creates the freepool aggregate when it is missing
	// (at start; the pool operations create it too).
	EnsureFreePool(ctx context.Context) error
	// CreateReservationAggregate creates the reservation's aggregate
	// (owner metadata, no hosts) when the reservation is created, as
	// upstream does; DeleteReservationAggregate takes any hosts left out
	// of it and deletes it (a reservation deleted, or ended without
	// having started).
	CreateReservationAggregate(ctx context.Context, agg ReservationAggregate) error
	DeleteReservationAggregate(ctx context.Context, agg ReservationAggregate) error
	// SnapshotServers asks for an image of every server on the hosts
	// (the before_end "snapshot" action).
	SnapshotServers(ctx context.Context, hostnames []string) error
	// HostStatuses is every compute host's status (StatusUp, StatusDown,
	// StatusDisabled) by host name; nil when the driver cannot tell.
	HostStatuses(ctx context.Context) (map[string]string, error)

	// The flavors of instance reservations. CreateReservationFlavor
	// creates a private flavor (succeeding when it exists);
	// AddFlavorAccess lets a project use it; DeleteReservationFlavor
	// deletes the servers using it, waits until they are gone, then
	// deletes it (succeeding when it is gone).
	CreateReservationFlavor(ctx context.Context, f FlavorSpec) error
	AddFlavorAccess(ctx context.Context, flavorID, projectID string) error
	DeleteReservationFlavor(ctx context.Context, flavorID string) error

	// LiveMigrate moves a server to targetHost and waits (bounded) until
	// it runs there; ServersOnHostDetail lists the servers on a host
	// with their owners and sizes (for planning moves).
	LiveMigrate(ctx context.Context, serverID, targetHost string) error
	ServersOnHostDetail(ctx context.Context, hostname string) ([]Server, error)
}

// StatusKey is the extra capability that records a host the compute
// service reports down or disabled (value StatusDown or StatusDisabled);
// such a host is registered, or kept, as not reservable until the
// service reports it up again (the key then reads StatusUp).
const StatusKey = "compute_status"

// The values of StatusKey.
const (
	StatusUp       = "up"
	StatusDown     = "down"
	StatusDisabled = "disabled"
)

// FlavorSpec is the private flavor of an instance reservation.
type FlavorSpec struct {
	// ID is the flavor id (the reservation id); Name its name.
	ID, Name string
	VCPUs    int64
	MemoryMB int64
	DiskGB   int64
	// ExtraSpecs are set on the flavor (e.g. resources:CUSTOM_RESERVATION_…=1,
	// aggregate_instance_extra_specs:reservation=<id>).
	ExtraSpecs map[string]string
}

// Flavor is an existing flavor as a flavor:instance reservation reads
// it; its JSON is what upstream shows as that reservation's
// resource_properties.
type Flavor struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	VCPUs      int64             `json:"vcpus"`
	RAM        int64             `json:"ram"`
	Disk       int64             `json:"disk"`
	Ephemeral  int64             `json:"OS-FLV-EXT-DATA:ephemeral"`
	ExtraSpecs map[string]string `json:"extra_specs"`
}

// Server is a server on a compute host, with its flavor's size.
type Server struct {
	ID, ProjectID string
	FlavorVCPUs   int64
	FlavorRAM     int64 // MB
	FlavorDisk    int64 // GB

	// Status is the compute service's (Nova: ACTIVE, SHUTOFF, …); only
	// an ACTIVE or PAUSED server can be live-migrated.
	Status string

	// Tags are the server's tags (Nova's server tags): those the cluster
	// tags name exclusion tags keep two servers sharing one off a host
	// when the scavenger hunt plans its moves.
	Tags []string
}
