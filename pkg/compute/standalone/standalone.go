// Package standalone is the compute driver for a Leasehold without Nova
// (laptops, demos, tests, and sites that only want reservations on
// record). Host-create takes the host's description from the request
// body — name plus the Nova detail keys vcpus, memory_mb, local_gb,
// hypervisor_type, hypervisor_version, hypervisor_hostname, cpu_info,
// service_name, availability_zone — and every other key becomes an extra
// capability. There are no aggregates and no servers: the pool
// operations only log at debug level and record what they were asked,
// every time they are asked (a retried call is recorded twice), which
// tests and the operator can read back with Calls.
package standalone

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Driver is the standalone compute driver. The zero value is not usable;
// use New.
type Driver struct {
	log *slog.Logger

	mu    sync.Mutex
	calls []Call
}

// Call is one recorded pool operation.
type Call struct {
	// Op is add_to_freepool, remove_from_freepool, add_to_reservation,
	// remove_from_reservation, cleanup_servers, ensure_freepool,
	// create_reservation_aggregate, delete_reservation_aggregate,
	// snapshot_servers, create_reservation_flavor, add_flavor_access,
	// delete_reservation_flavor or live_migrate.
	Op            string
	ReservationID string
	ProjectID     string
	Hosts         []string
	// Flavor is the flavor of the flavor operations; Server the server
	// of live_migrate (Hosts then holds the target).
	Flavor *compute.FlavorSpec
	Server string
}

// maxCalls bounds the recorded history.
const maxCalls = 1000

// New returns a standalone driver logging to log (slog.Default if nil).
func New(log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	return &Driver{log: log}
}

var _ compute.Driver = (*Driver)(nil)

// Name implements compute.Driver.
func (d *Driver) Name() string { return "standalone" }

// DescribeHost implements compute.Driver: the body is the description.
func (d *Driver) DescribeHost(ctx context.Context, body map[string]string) (compute.HostDetails, map[string]string, error) {
	name := strings.TrimSpace(body["name"])
	if name == "" {
		name = strings.TrimSpace(body["id"])
	}
	if hh := strings.TrimSpace(body["hypervisor_hostname"]); hh != "" {
		if name == "" {
			name = hh
		}
	}
	if name == "" {
		return compute.HostDetails{}, nil, errs.BadRequestf("Missing parameter `name`")
	}
	h := compute.HostDetails{
		HypervisorHostname: name,
		ServiceName:        name,
		CPUInfo:            "{}",
		AvailabilityZone:   body["availability_zone"],
		HypervisorType:     body["hypervisor_type"],
	}
	if v := strings.TrimSpace(body["hypervisor_hostname"]); v != "" {
		h.HypervisorHostname = v
	}
	if v := strings.TrimSpace(body["service_name"]); v != "" {
		h.ServiceName = v
	}
	if v, ok := body["cpu_info"]; ok && v != "" {
		if !json.Valid([]byte(v)) {
			return compute.HostDetails{}, nil, errs.BadRequestf("Malformed parameter `cpu_info`: it must be JSON text, e.g. {\"arch\": \"x86_64\"}")
		}
		h.CPUInfo = v
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"vcpus", &h.VCPUs}, {"memory_mb", &h.MemoryMB}, {"local_gb", &h.LocalGB}, {"hypervisor_version", &h.HypervisorVersion}} {
		v, ok := body[f.key]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return compute.HostDetails{}, nil, errs.BadRequestf("Malformed parameter `%s`: %q is not a non-negative integer", f.key, v)
		}
		*f.dst = n
	}
	caps := map[string]string{}
	for k, v := range body {
		if !compute.IsDetailKey(k) {
			caps[k] = v
		}
	}
	return h, caps, nil
}

// ServersOnHost implements compute.Driver: there are no servers.
func (d *Driver) ServersOnHost(ctx context.Context, hostname string) ([]string, error) {
	return nil, nil
}

func (d *Driver) record(ctx context.Context, c Call) {
	d.log.DebugContext(ctx, "standalone compute driver: no Nova, nothing to do", "op", c.Op, "reservation", c.ReservationID, "project", c.ProjectID, "hosts", c.Hosts)
	d.mu.Lock()
	defer d.mu.Unlock()
	c.Hosts = append([]string(nil), c.Hosts...)
	d.calls = append(d.calls, c)
	if len(d.calls) > maxCalls {
		d.calls = append([]Call(nil), d.calls[len(d.calls)-maxCalls:]...)
	}
}

// Calls returns the pool operations recorded so far (the latest 1000).
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// AddToFreePool implements compute.Driver.
func (d *Driver) AddToFreePool(ctx context.Context, hostnames []string) error {
	d.record(ctx, Call{Op: "add_to_freepool", Hosts: hostnames})
	return nil
}

// RemoveFromFreePool implements compute.Driver.
func (d *Driver) RemoveFromFreePool(ctx context.Context, hostnames []string) error {
	d.record(ctx, Call{Op: "remove_from_freepool", Hosts: hostnames})
	return nil
}

// AddToReservation implements compute.Driver.
func (d *Driver) AddToReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	d.record(ctx, Call{Op: "add_to_reservation", ReservationID: agg.ReservationID, ProjectID: agg.ProjectID, Hosts: hostnames})
	return nil
}

// RemoveFromReservation implements compute.Driver.
func (d *Driver) RemoveFromReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	d.record(ctx, Call{Op: "remove_from_reservation", ReservationID: agg.ReservationID, ProjectID: agg.ProjectID, Hosts: hostnames})
	return nil
}

// CleanupServers implements compute.Driver.
func (d *Driver) CleanupServers(ctx context.Context, hostnames []string) error {
	d.record(ctx, Call{Op: "cleanup_servers", Hosts: hostnames})
	return nil
}

// EnsureFreePool implements compute.Driver.
func (d *Driver) EnsureFreePool(ctx context.Context) error {
	d.record(ctx, Call{Op: "ensure_freepool"})
	return nil
}

// CreateReservationAggregate implements compute.Driver.
func (d *Driver) CreateReservationAggregate(ctx context.Context, agg compute.ReservationAggregate) error {
	d.record(ctx, Call{Op: "create_reservation_aggregate", ReservationID: agg.ReservationID, ProjectID: agg.ProjectID})
	return nil
}

// DeleteReservationAggregate implements compute.Driver.
func (d *Driver) DeleteReservationAggregate(ctx context.Context, agg compute.ReservationAggregate) error {
	d.record(ctx, Call{Op: "delete_reservation_aggregate", ReservationID: agg.ReservationID, ProjectID: agg.ProjectID})
	return nil
}

// SnapshotServers implements compute.Driver: there are no servers.
func (d *Driver) SnapshotServers(ctx context.Context, hostnames []string) error {
	d.record(ctx, Call{Op: "snapshot_servers", Hosts: hostnames})
	return nil
}

// HostStatuses implements compute.Driver: nothing reports host status.
func (d *Driver) HostStatuses(ctx context.Context) (map[string]string, error) {
	return nil, nil
}

// CreateReservationFlavor implements compute.Driver.
func (d *Driver) CreateReservationFlavor(ctx context.Context, f compute.FlavorSpec) error {
	f.ExtraSpecs = maps.Clone(f.ExtraSpecs)
	d.record(ctx, Call{Op: "create_reservation_flavor", Flavor: &f})
	return nil
}

// AddFlavorAccess implements compute.Driver.
func (d *Driver) AddFlavorAccess(ctx context.Context, flavorID, projectID string) error {
	d.record(ctx, Call{Op: "add_flavor_access", ProjectID: projectID, Flavor: &compute.FlavorSpec{ID: flavorID}})
	return nil
}

// DeleteReservationFlavor implements compute.Driver.
func (d *Driver) DeleteReservationFlavor(ctx context.Context, flavorID string) error {
	d.record(ctx, Call{Op: "delete_reservation_flavor", Flavor: &compute.FlavorSpec{ID: flavorID}})
	return nil
}

// LiveMigrate implements compute.Driver: there are no servers to move,
// so there is none to find.
func (d *Driver) LiveMigrate(ctx context.Context, serverID, targetHost string) error {
	d.record(ctx, Call{Op: "live_migrate", Server: serverID, Hosts: []string{targetHost}})
	return errs.NotFoundf("Server %s could not be found (the standalone compute driver runs no servers).", serverID)
}

// ServersOnHostDetail implements compute.Driver: there are no servers.
func (d *Driver) ServersOnHostDetail(ctx context.Context, hostname string) ([]compute.Server, error) {
	return nil, nil
}
