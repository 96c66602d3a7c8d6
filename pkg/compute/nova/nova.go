// Package nova is the compute driver for a Leasehold in front of Nova,
// through gophercloud (the compute client NewClient builds, microversion
// pinned to Microversion):
//
//   - DescribeHost resolves the host-create "name" among the hypervisors
//     (os-hypervisors/detail, exact hostname; "id" looks one up by id) and
//     takes the host's fields from Nova; the availability zone is that of
//     the aggregate holding the service host, when AZAware. A hypervisor
//     Nova reports down or disabled is described as such (see
//     compute.StatusKey).
//   - ServersOnHost lists the servers of every project on the host.
//   - the freepool is the aggregate named Config.FreePoolName, created
//     when missing; reservation aggregates are named after the
//     reservation id (availability zone AZPrefix + id, as upstream), carry
//     Config.OwnerKey = project id in their metadata and are deleted once
//     empty.
//   - CleanupServers deletes the servers left on the hosts and waits until
//     they are gone (Config.ServerDeleteTimeout); SnapshotServers asks
//     for an image of each.
//   - the reservation flavors of instance reservations and live migration
//     (flavors.go, migrate.go).
//
// Every pool operation may be run again (see compute.Driver): a host that
// Nova says is already in the aggregate (409 on add_host) or not in it
// (404 on remove_host) is checked against a fresh read of the aggregate
// and, if Nova's state is already the wanted one, counts as done; an
// aggregate Nova says exists (409 on create) is looked up again.
//
// A failed call is logged with the operation and Nova's request id
// (x-openstack-request-id), which the error message carries too.
package nova

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Config holds the [nova] settings Blazar has.
type Config struct {
	// FreePoolName is the aggregate of unreserved hosts ("freepool").
	FreePoolName string
	// OwnerKey is the reservation aggregate metadata key holding the
	// project id ("blazar:owner").
	OwnerKey string
	// AZPrefix prefixes a reservation aggregate's availability zone
	// ("blazar_").
	AZPrefix string
	// AZAware records each host's availability zone at registration.
	AZAware bool
	// ServerDeleteTimeout bounds CleanupServers and the server deletion
	// of DeleteReservationFlavor (10 minutes upstream); PollInterval is
	// how often they look (1 s; upstream 5 s: a listing is cheap, and a
	// shorter wait frees the host sooner).
	ServerDeleteTimeout time.Duration
	PollInterval        time.Duration
	// MigrateTimeout bounds LiveMigrate (10 minutes by default).
	MigrateTimeout time.Duration
}

func (c *Config) defaults() {
	if c.FreePoolName == "" {
		c.FreePoolName = "freepool"
	}
	if c.OwnerKey == "" {
		c.OwnerKey = "blazar:owner"
	}
	if c.AZPrefix == "" {
		c.AZPrefix = "blazar_"
	}
	if c.ServerDeleteTimeout <= 0 {
		c.ServerDeleteTimeout = 10 * time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.MigrateTimeout <= 0 {
		c.MigrateTimeout = 10 * time.Minute
	}
}

// Driver talks to Nova.
type Driver struct {
	client *gophercloud.ServiceClient
	cfg    Config
	log    *slog.Logger
	// trustLogin, when set, logs in with a lease's Keystone trust
	// (servergroups.go).
	trustLogin TrustLogin
}

var _ compute.Driver = (*Driver)(nil)

// New returns a Nova driver on an authenticated compute client.
func New(client *gophercloud.ServiceClient, cfg Config, log *slog.Logger) *Driver {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	return &Driver{client: client, cfg: cfg, log: log}
}

// Name implements compute.Driver.
func (d *Driver) Name() string { return "nova" }

// fail maps a Nova failure of operation op to an internal error
// (Blazar's NovaClientError) naming the operation and Nova's request id,
// and logs it; an *errs.Error (a refusal decided here) is kept as it is.
func (d *Driver) fail(ctx context.Context, op string, err error) error {
	if errs.As(err) != nil {
		return err
	}
	rid := RequestID(err)
	d.log.WarnContext(ctx, "Nova call failed", "call", op, "request_id", rid, "error", err)
	if rid != "" {
		return errs.Wrap(errs.Internal, err, "Nova: %s (request %s): %v", op, rid, err)
	}
	return errs.Wrap(errs.Internal, err, "Nova: %s: %v", op, err)
}

func isNotFound(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}

// DescribeHost implements compute.Driver.
func (d *Driver) DescribeHost(ctx context.Context, body map[string]string) (compute.HostDetails, map[string]string, error) {
	name, id := strings.TrimSpace(body["name"]), strings.TrimSpace(body["id"])
	var hv *hypervisors.Hypervisor
	switch {
	case id != "" && name == "":
		h, err := hypervisors.Get(ctx, d.client, id).Extract()
		if err != nil {
			// Since microversion 2.53 hypervisor ids are UUIDs: Nova
			// refuses any other id with a 400, which names no host either.
			if isNotFound(err) || gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
				return compute.HostDetails{}, nil, errs.NotFoundf("Host '%s' not found!", id)
			}
			return compute.HostDetails{}, nil, d.fail(ctx, "get hypervisor "+id, err)
		}
		hv = h
	case name != "":
		pages, err := hypervisors.List(d.client, hypervisors.ListOpts{HypervisorHostnamePattern: &name}).AllPages(ctx)
		if err != nil && !isNotFound(err) { // Nova answers 404 when the pattern matches nothing
			return compute.HostDetails{}, nil, d.fail(ctx, "list hypervisors", err)
		}
		var all []hypervisors.Hypervisor
		if err == nil {
			if all, err = hypervisors.ExtractHypervisors(pages); err != nil {
				return compute.HostDetails{}, nil, d.fail(ctx, "list hypervisors", err)
			}
		}
		var match []hypervisors.Hypervisor
		for _, h := range all {
			if h.HypervisorHostname == name || h.Service.Host == name {
				match = append(match, h)
			}
		}
		switch len(match) {
		case 0:
			return compute.HostDetails{}, nil, errs.NotFoundf("Host '%s' not found!", name)
		case 1:
			hv = &match[0]
		default:
			return compute.HostDetails{}, nil, errs.Conflictf("There are multiple hosts matching %s.", name)
		}
	default:
		return compute.HostDetails{}, nil, errs.BadRequestf("Missing parameter `name`")
	}
	cpu, err := json.Marshal(hv.CPUInfo)
	if err != nil {
		return compute.HostDetails{}, nil, d.fail(ctx, "cpu_info", err)
	}
	det := compute.HostDetails{
		HypervisorHostname: hv.HypervisorHostname, ServiceName: hv.Service.Host, HypervisorType: hv.HypervisorType,
		HypervisorVersion: int64(hv.HypervisorVersion), CPUInfo: string(cpu), VCPUs: int64(hv.VCPUs),
		MemoryMB: int64(hv.MemoryMB), LocalGB: int64(hv.LocalGB),
	}
	if n, err := strconv.ParseInt(hv.ID, 10, 64); err == nil && n > 0 {
		det.ID = n
	}
	if d.cfg.AZAware {
		az, err := d.availabilityZone(ctx, hv.Service.Host)
		if err != nil {
			return compute.HostDetails{}, nil, err
		}
		det.AvailabilityZone = az
	}
	caps := map[string]string{}
	for k, v := range body {
		if !compute.IsDetailKey(k) {
			caps[k] = v
		}
	}
	if st := hostStatus(hv.State, hv.Status); st != compute.StatusUp {
		// Never registered as usable without a word: the capability says
		// why, and the host is not reservable until it is back.
		d.log.WarnContext(ctx, "Nova reports the host down or disabled: registering it as not reservable", "host", hv.Service.Host, "status", st)
		caps[compute.StatusKey] = st
		caps["reservable"] = "false"
	}
	return det, caps, nil
}

// hostStatus is compute.StatusKey's value for a hypervisor's state and
// status: disabled wins over down (an operator's decision, which a
// restart does not undo).
func hostStatus(state, status string) string {
	switch {
	case strings.EqualFold(status, "disabled"):
		return compute.StatusDisabled
	case strings.EqualFold(state, "down"):
		return compute.StatusDown
	}
	return compute.StatusUp
}

// HostStatuses implements compute.Driver: every hypervisor's status by
// its service host name.
func (d *Driver) HostStatuses(ctx context.Context) (map[string]string, error) {
	pages, err := hypervisors.List(d.client, hypervisors.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list hypervisors", err)
	}
	all, err := hypervisors.ExtractHypervisors(pages)
	if err != nil {
		return nil, d.fail(ctx, "list hypervisors", err)
	}
	out := make(map[string]string, len(all))
	for _, h := range all {
		st := hostStatus(h.State, h.Status)
		out[h.Service.Host] = st
		if h.HypervisorHostname != h.Service.Host {
			out[h.HypervisorHostname] = st
		}
	}
	return out, nil
}

func (d *Driver) listAggregates(ctx context.Context) ([]aggregates.Aggregate, error) {
	pages, err := aggregates.List(d.client).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list aggregates", err)
	}
	all, err := aggregates.ExtractAggregates(pages)
	if err != nil {
		return nil, d.fail(ctx, "list aggregates", err)
	}
	return all, nil
}

func (d *Driver) availabilityZone(ctx context.Context, host string) (string, error) {
	all, err := d.listAggregates(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range all {
		if a.AvailabilityZone == "" {
			continue
		}
		for _, h := range a.Hosts {
			if h == host {
				return a.AvailabilityZone, nil
			}
		}
	}
	return "", nil
}

func (d *Driver) aggregateNamed(ctx context.Context, name string) (*aggregates.Aggregate, error) {
	all, err := d.listAggregates(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, nil
}

// serversOn lists the servers of every project on host.
func (d *Driver) serversOn(ctx context.Context, host string) ([]servers.Server, error) {
	pages, err := servers.List(d.client, servers.ListOpts{AllTenants: true, Host: host}).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list servers on "+host, err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, d.fail(ctx, "list servers on "+host, err)
	}
	return all, nil
}

// ServersOnHost implements compute.Driver.
func (d *Driver) ServersOnHost(ctx context.Context, hostname string) ([]string, error) {
	all, err := d.serversOn(ctx, hostname)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	return ids, nil
}

func member(a *aggregates.Aggregate, host string) bool {
	for _, h := range a.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

func (d *Driver) addHosts(ctx context.Context, a *aggregates.Aggregate, hosts []string) error {
	for _, h := range hosts {
		if member(a, h) {
			continue
		}
		_, err := aggregates.AddHost(ctx, d.client, a.ID, aggregates.AddHostOpts{Host: h}).Extract()
		if err != nil && gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			// Already there (an earlier run of this call, or a listing
			// older than Nova's state)? Then it is done; any other
			// conflict (e.g. the host is in another availability zone)
			// is not.
			err = d.confirm(ctx, a, h, true, err)
		}
		if err != nil {
			return d.fail(ctx, fmt.Sprintf("add %s to aggregate %s", h, a.Name), err)
		}
		a.Hosts = append(a.Hosts, h)
	}
	return nil
}

func (d *Driver) removeHosts(ctx context.Context, a *aggregates.Aggregate, hosts []string) error {
	for _, h := range hosts {
		if !member(a, h) {
			continue
		}
		_, err := aggregates.RemoveHost(ctx, d.client, a.ID, aggregates.RemoveHostOpts{Host: h}).Extract()
		if err != nil && isNotFound(err) {
			err = d.confirm(ctx, a, h, false, err)
		}
		if err != nil {
			return d.fail(ctx, fmt.Sprintf("remove %s from aggregate %s", h, a.Name), err)
		}
		kept := a.Hosts[:0]
		for _, x := range a.Hosts {
			if x != h {
				kept = append(kept, x)
			}
		}
		a.Hosts = kept
	}
	return nil
}

// confirm re-reads aggregate a after Nova refused to add (want true) or
// remove (want false) host: nil when the host's membership is already
// what was wanted, else the refusal. A vanished aggregate holds no host.
func (d *Driver) confirm(ctx context.Context, a *aggregates.Aggregate, host string, want bool, refusal error) error {
	cur, err := aggregates.Get(ctx, d.client, a.ID).Extract()
	switch {
	case err != nil && isNotFound(err):
		if !want {
			return nil
		}
		return refusal
	case err != nil:
		return err
	}
	if member(cur, host) == want {
		return nil
	}
	return refusal
}

// freePool is the freepool aggregate, created when missing.
func (d *Driver) freePool(ctx context.Context) (*aggregates.Aggregate, error) {
	a, err := d.aggregateNamed(ctx, d.cfg.FreePoolName)
	if err != nil || a != nil {
		return a, err
	}
	a, err = d.createAggregate(ctx, d.cfg.FreePoolName, "")
	if err == nil {
		d.log.InfoContext(ctx, "created the freepool aggregate in Nova", "aggregate", d.cfg.FreePoolName, "id", a.ID)
	}
	return a, err
}

// EnsureFreePool implements compute.Driver.
func (d *Driver) EnsureFreePool(ctx context.Context) error {
	_, err := d.freePool(ctx)
	return err
}

// createAggregate creates aggregate name (in availability zone az when
// not empty); when Nova says it exists (an earlier run of the same call
// whose answer was lost, or a concurrent one) it is looked up instead.
func (d *Driver) createAggregate(ctx context.Context, name, az string) (*aggregates.Aggregate, error) {
	a, err := aggregates.Create(ctx, d.client, aggregates.CreateOpts{Name: name, AvailabilityZone: az}).Extract()
	if err == nil {
		return a, nil
	}
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		found, lerr := d.aggregateNamed(ctx, name)
		if lerr != nil {
			return nil, lerr
		}
		if found != nil {
			return found, nil
		}
	}
	return nil, d.fail(ctx, "create aggregate "+name, err)
}

// AddToFreePool implements compute.Driver.
func (d *Driver) AddToFreePool(ctx context.Context, hostnames []string) error {
	a, err := d.freePool(ctx)
	if err != nil {
		return err
	}
	return d.addHosts(ctx, a, hostnames)
}

// RemoveFromFreePool implements compute.Driver.
func (d *Driver) RemoveFromFreePool(ctx context.Context, hostnames []string) error {
	a, err := d.aggregateNamed(ctx, d.cfg.FreePoolName)
	if err != nil || a == nil {
		return err // no freepool: no host is in it
	}
	return d.removeHosts(ctx, a, hostnames)
}

// reservationAZ is the availability zone of agg's aggregate: the one
// asked for, else AZPrefix + reservation id, as upstream gives every
// reservation aggregate (the BlazarFilter counts an aggregate as a
// reservation pool by that prefix).
func (d *Driver) reservationAZ(agg compute.ReservationAggregate) string {
	if agg.AvailabilityZone != "" {
		return agg.AvailabilityZone
	}
	return d.cfg.AZPrefix + agg.ReservationID
}

// reservationAggregate is agg's aggregate with its owner metadata,
// created when missing.
func (d *Driver) reservationAggregate(ctx context.Context, agg compute.ReservationAggregate) (*aggregates.Aggregate, error) {
	a, err := d.aggregateNamed(ctx, agg.ReservationID)
	if err != nil {
		return nil, err
	}
	if a == nil {
		if a, err = d.createAggregate(ctx, agg.ReservationID, d.reservationAZ(agg)); err != nil {
			return nil, err
		}
	}
	if agg.ProjectID != "" && a.Metadata[d.cfg.OwnerKey] != agg.ProjectID {
		if _, err := aggregates.SetMetadata(ctx, d.client, a.ID, aggregates.SetMetadataOpts{
			Metadata: map[string]any{d.cfg.OwnerKey: agg.ProjectID},
		}).Extract(); err != nil {
			return nil, d.fail(ctx, "set metadata of aggregate "+agg.ReservationID, err)
		}
		if a.Metadata == nil {
			a.Metadata = map[string]string{}
		}
		a.Metadata[d.cfg.OwnerKey] = agg.ProjectID
	}
	return a, nil
}

// CreateReservationAggregate implements compute.Driver.
func (d *Driver) CreateReservationAggregate(ctx context.Context, agg compute.ReservationAggregate) error {
	_, err := d.reservationAggregate(ctx, agg)
	return err
}

// AddToReservation implements compute.Driver.
func (d *Driver) AddToReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	a, err := d.reservationAggregate(ctx, agg)
	if err != nil {
		return err
	}
	return d.addHosts(ctx, a, hostnames)
}

// RemoveFromReservation implements compute.Driver. The aggregate is
// deleted when a fresh read after the removal finds it empty: with
// several hosts leaving at once (one outbox action each), the last
// removal's read sees no host left.
func (d *Driver) RemoveFromReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	a, err := d.aggregateNamed(ctx, agg.ReservationID)
	if err != nil || a == nil {
		return err
	}
	if err := d.removeHosts(ctx, a, hostnames); err != nil {
		return err
	}
	return d.deleteIfEmpty(ctx, a)
}

func (d *Driver) deleteIfEmpty(ctx context.Context, a *aggregates.Aggregate) error {
	cur, err := aggregates.Get(ctx, d.client, a.ID).Extract()
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return d.fail(ctx, "get aggregate "+a.Name, err)
	}
	if len(cur.Hosts) > 0 {
		return nil
	}
	if err := aggregates.Delete(ctx, d.client, a.ID).ExtractErr(); err != nil && !isNotFound(err) {
		return d.fail(ctx, "delete aggregate "+a.Name, err)
	}
	return nil
}

// DeleteReservationAggregate implements compute.Driver: the hosts still
// in it are taken out first (Nova deletes only empty aggregates).
func (d *Driver) DeleteReservationAggregate(ctx context.Context, agg compute.ReservationAggregate) error {
	a, err := d.aggregateNamed(ctx, agg.ReservationID)
	if err != nil || a == nil {
		return err
	}
	if err := d.removeHosts(ctx, a, append([]string(nil), a.Hosts...)); err != nil {
		return err
	}
	return d.deleteIfEmpty(ctx, a)
}

// SnapshotServers implements compute.Driver: an image of every server
// on the hosts, named "<server name>-<server id>-before-end" so that a
// second run of the action can tell it already asked (upstream names it
// after the server only).
func (d *Driver) SnapshotServers(ctx context.Context, hostnames []string) error {
	for _, h := range hostnames {
		ss, err := d.serversOn(ctx, h)
		if err != nil {
			return err
		}
		for _, s := range ss {
			name := s.Name + "-" + s.ID + "-before-end"
			if s.Metadata["leasehold_snapshot"] == name {
				continue
			}
			if _, err := servers.CreateImage(ctx, d.client, s.ID, servers.CreateImageOpts{Name: name}).ExtractImageID(); err != nil && !isNotFound(err) {
				return d.fail(ctx, "snapshot server "+s.ID, err)
			}
			// Remember the snapshot on the server, so a retry does not
			// take a second one.
			if _, err := servers.UpdateMetadata(ctx, d.client, s.ID, servers.MetadataOpts{"leasehold_snapshot": name}).Extract(); err != nil && !isNotFound(err) {
				return d.fail(ctx, "record the snapshot of server "+s.ID, err)
			}
			d.log.InfoContext(ctx, "before_end: snapshot of a server on a reserved host", "server", s.ID, "host", h, "image", name)
		}
	}
	return nil
}

// CleanupServers implements compute.Driver.
func (d *Driver) CleanupServers(ctx context.Context, hostnames []string) error {
	deadline := time.Now().Add(d.cfg.ServerDeleteTimeout)
	deleted := map[string]bool{}
	for {
		var left []string
		for _, h := range hostnames {
			ids, err := d.ServersOnHost(ctx, h)
			if err != nil {
				return err
			}
			for _, id := range ids {
				left = append(left, id)
				if deleted[id] {
					continue
				}
				d.log.InfoContext(ctx, "deleting a server left on a reserved host", "server", id, "host", h)
				if err := servers.Delete(ctx, d.client, id).ExtractErr(); err != nil && !isNotFound(err) {
					return d.fail(ctx, "delete server "+id, err)
				}
				deleted[id] = true
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errs.New(errs.Internal, "Timed out after %s waiting for servers %s to be deleted.", d.cfg.ServerDeleteTimeout, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.cfg.PollInterval):
		}
	}
}
