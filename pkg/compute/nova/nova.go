// Package nova is the compute driver for a Leasehold in front of Nova,
// through gophercloud (compute API without a microversion, as Blazar's
// nova_client_version 2, so hypervisor ids are integers and the resource
// fields are present):
//
//   - DescribeHost resolves the host-create "name" among the hypervisors
//     (os-hypervisors/detail, exact hostname; "id" looks one up by id) and
//     takes the host's fields from Nova; the availability zone is that of
//     the aggregate holding the service host, when AZAware.
//   - ServersOnHost lists the servers of every project on the host.
//   - the freepool is the aggregate named Config.FreePoolName, which the
//     operator creates; reservation aggregates are named after the
//     reservation id, carry Config.OwnerKey = project id in their metadata
//     and are deleted once empty.
//   - CleanupServers deletes the servers left on the hosts and waits until
//     they are gone (Config.ServerDeleteTimeout).
//
// Every pool operation may be run again (see compute.Driver): a host that
// Nova says is already in the aggregate (409 on add_host) or not in it
// (404 on remove_host) is checked against a fresh read of the aggregate
// and, if Nova's state is already the wanted one, counts as done.
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
	// AZAware records each host's availability zone at registration.
	AZAware bool
	// ServerDeleteTimeout bounds CleanupServers (10 minutes upstream);
	// PollInterval is how often it looks (5 s upstream).
	ServerDeleteTimeout time.Duration
	PollInterval        time.Duration
}

func (c *Config) defaults() {
	if c.FreePoolName == "" {
		c.FreePoolName = "freepool"
	}
	if c.OwnerKey == "" {
		c.OwnerKey = "blazar:owner"
	}
	if c.ServerDeleteTimeout <= 0 {
		c.ServerDeleteTimeout = 10 * time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
}

// Driver talks to Nova.
type Driver struct {
	client *gophercloud.ServiceClient
	cfg    Config
	log    *slog.Logger
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

// novaError maps a Nova failure to an internal error (Blazar's
// NovaClientError); an *errs.Error is kept as it is.
func novaError(op string, err error) error {
	if errs.As(err) != nil {
		return err
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
			if isNotFound(err) {
				return compute.HostDetails{}, nil, errs.NotFoundf("Host '%s' not found!", id)
			}
			return compute.HostDetails{}, nil, novaError("get hypervisor "+id, err)
		}
		hv = h
	case name != "":
		pages, err := hypervisors.List(d.client, hypervisors.ListOpts{HypervisorHostnamePattern: &name}).AllPages(ctx)
		if err != nil && !isNotFound(err) { // Nova answers 404 when the pattern matches nothing
			return compute.HostDetails{}, nil, novaError("list hypervisors", err)
		}
		var all []hypervisors.Hypervisor
		if err == nil {
			if all, err = hypervisors.ExtractHypervisors(pages); err != nil {
				return compute.HostDetails{}, nil, novaError("list hypervisors", err)
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
		return compute.HostDetails{}, nil, novaError("cpu_info", err)
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
	return det, caps, nil
}

func (d *Driver) listAggregates(ctx context.Context) ([]aggregates.Aggregate, error) {
	pages, err := aggregates.List(d.client).AllPages(ctx)
	if err != nil {
		return nil, novaError("list aggregates", err)
	}
	all, err := aggregates.ExtractAggregates(pages)
	if err != nil {
		return nil, novaError("list aggregates", err)
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

// ServersOnHost implements compute.Driver.
func (d *Driver) ServersOnHost(ctx context.Context, hostname string) ([]string, error) {
	pages, err := servers.List(d.client, servers.ListOpts{AllTenants: true, Host: hostname}).AllPages(ctx)
	if err != nil {
		return nil, novaError("list servers on "+hostname, err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, novaError("list servers on "+hostname, err)
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
			return novaError(fmt.Sprintf("add %s to aggregate %s", h, a.Name), err)
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
			return novaError(fmt.Sprintf("remove %s from aggregate %s", h, a.Name), err)
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

func (d *Driver) freePool(ctx context.Context) (*aggregates.Aggregate, error) {
	a, err := d.aggregateNamed(ctx, d.cfg.FreePoolName)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, errs.NotFoundf("No freepool '%s' found.", d.cfg.FreePoolName)
	}
	return a, nil
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
	a, err := d.freePool(ctx)
	if err != nil {
		return err
	}
	return d.removeHosts(ctx, a, hostnames)
}

// AddToReservation implements compute.Driver.
func (d *Driver) AddToReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	a, err := d.aggregateNamed(ctx, agg.ReservationID)
	if err != nil {
		return err
	}
	if a == nil {
		created, err := aggregates.Create(ctx, d.client, aggregates.CreateOpts{Name: agg.ReservationID, AvailabilityZone: agg.AvailabilityZone}).Extract()
		if err != nil {
			return novaError("create aggregate "+agg.ReservationID, err)
		}
		a = created
	}
	if a.Metadata[d.cfg.OwnerKey] != agg.ProjectID {
		if _, err := aggregates.SetMetadata(ctx, d.client, a.ID, aggregates.SetMetadataOpts{
			Metadata: map[string]any{d.cfg.OwnerKey: agg.ProjectID},
		}).Extract(); err != nil {
			return novaError("set metadata of aggregate "+agg.ReservationID, err)
		}
	}
	return d.addHosts(ctx, a, hostnames)
}

// RemoveFromReservation implements compute.Driver.
func (d *Driver) RemoveFromReservation(ctx context.Context, agg compute.ReservationAggregate, hostnames []string) error {
	a, err := d.aggregateNamed(ctx, agg.ReservationID)
	if err != nil || a == nil {
		return err
	}
	if err := d.removeHosts(ctx, a, hostnames); err != nil {
		return err
	}
	if len(a.Hosts) > 0 {
		return nil
	}
	if err := aggregates.Delete(ctx, d.client, a.ID).ExtractErr(); err != nil && !isNotFound(err) {
		return novaError("delete aggregate "+agg.ReservationID, err)
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
					return novaError("delete server "+id, err)
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
