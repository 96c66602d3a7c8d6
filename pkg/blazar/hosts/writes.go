package hosts

import (
	"context"
	"strconv"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/placement"
)

// newHost is a host-create body validated and resolved by the driver.
type newHost struct {
	details compute.HostDetails
	caps    map[string]string
	// reservable is the host's flag (the body's "reservable", default
	// true).
	reservable bool
}

// Create registers a host from a host-create body: the driver resolves
// it and splits the body into the host's fields and extra capabilities;
// "reservable" (true/false, default true) sets the host's flag. The host
// joins the freepool through the outbox after the commit.
func (s *Service) Create(ctx context.Context, body map[string]any) (*Host, error) {
	req, err := s.resolveNew(ctx, body)
	if err != nil {
		return nil, err
	}
	var out *Host
	err = s.write(ctx, func(tx *gorm.DB) error {
		var err error
		out, err = s.insertHost(ctx, tx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// resolveNew validates a host-create body and asks the compute driver
// about the host, before any transaction: the driver's refusals (unknown
// host, servers running on it) are the answer.
func (s *Service) resolveNew(ctx context.Context, body map[string]any) (*newHost, error) {
	strs, err := bodyStrings(body)
	if err != nil {
		return nil, err
	}
	details, caps, err := s.driver.DescribeHost(ctx, strs)
	if err != nil {
		return nil, err
	}
	reservable, err := takeReservable(caps)
	if err != nil {
		return nil, err
	}
	if err := checkCapabilityKeys(caps); err != nil {
		return nil, err
	}
	if err := checkDetails(details); err != nil {
		return nil, err
	}
	name := details.HypervisorHostname
	if len(name) > maxHostname {
		return nil, errs.BadRequestf("Malformed parameter `name`: a host name has at most %d characters", maxHostname)
	}
	servers, err := s.driver.ServersOnHost(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(servers) > 0 {
		return nil, errs.Conflictf("Host %s has running servers (%d); move them away before registering it.", name, len(servers))
	}
	return &newHost{details: details, caps: caps, reservable: reservable == nil || *reservable}, nil
}

// insertHost writes a new host, its Placement providers and capabilities
// in tx and returns it as read back.
func (s *Service) insertHost(ctx context.Context, tx *gorm.DB, req *newHost) (*Host, error) {
	d, name := req.details, req.details.HypervisorHostname
	var n int64
	if err := tx.Model(&models.ComputeHost{}).Where("hypervisor_hostname = ?", name).Count(&n).Error; err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, errs.Conflictf("Host %s is already registered.", name)
	}
	hp, err := placement.CreateHostProvidersTx(tx, placement.HostResources{
		Hostname: name, VCPUs: d.VCPUs, MemoryMB: d.MemoryMB, DiskGB: d.LocalGB,
	})
	if err != nil {
		return nil, placementError(err)
	}
	t := s.now()
	row := models.ComputeHost{
		ID: d.ID, VCPUs: d.VCPUs, CPUInfo: d.CPUInfo, HypervisorType: d.HypervisorType,
		HypervisorVersion: d.HypervisorVersion, HypervisorHostname: name, ServiceName: d.ServiceName,
		MemoryMB: d.MemoryMB, LocalGB: d.LocalGB, AvailabilityZone: d.AvailabilityZone,
		Reservable: req.reservable, ComputeProviderUUID: hp.ComputeUUID, ReservationProviderUUID: hp.ReservationUUID,
		OwnsComputeProvider: hp.CreatedCompute, CreatedAt: t,
	}
	if err := tx.Create(&row).Error; err != nil {
		if db.IsDuplicate(err) {
			return nil, errs.Conflictf("Host %s is already registered.", name)
		}
		return nil, err
	}
	if err := s.setCapabilities(ctx, tx, row.ID, req.caps, false, t); err != nil {
		return nil, err
	}
	id := strconv.FormatInt(row.ID, 10)
	if err := enqueuePool(tx, KindAddToFreePool, id, d.ServiceName); err != nil {
		return nil, err
	}
	return getHost(tx, id)
}

// Update creates or updates extra capabilities from a flat body: every
// key is a capability, even one named like a host field (as upstream),
// except "reservable" (true/false), which sets the host's flag.
func (s *Service) Update(ctx context.Context, id string, body map[string]any) (*Host, error) {
	if len(body) == 0 {
		// Upstream's generic helper: a bad request named as an internal
		// error.
		return nil, errs.WithCode(errs.BadRequest, "INTERNAL_SERVER_ERROR", "No data to update")
	}
	caps, err := bodyStrings(body)
	if err != nil {
		return nil, err
	}
	if _, ok := caps["id"]; ok {
		// A capability "id" would shadow the host's id in every view.
		return nil, errs.BadRequestf("Malformed parameter `id`: a host's id cannot be changed or used as an extra capability")
	}
	reservable, err := takeReservable(caps)
	if err != nil {
		return nil, err
	}
	if err := checkCapabilityKeys(caps); err != nil {
		return nil, err
	}
	n, ok := parseID(id)
	if !ok {
		return nil, notFound(id)
	}
	var out *Host
	err = s.write(ctx, func(tx *gorm.DB) error {
		t := s.now()
		updates := map[string]any{"updated_at": t}
		if reservable != nil {
			updates["reservable"] = *reservable
		}
		res := tx.Model(&models.ComputeHost{}).Where("id = ?", n).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			// MySQL counts changed rows: an update to the same values
			// (same clock reading) changes none of an existing host.
			var found int64
			if err := tx.Model(&models.ComputeHost{}).Where("id = ?", n).Count(&found).Error; err != nil {
				return err
			}
			if found == 0 {
				return notFound(id)
			}
		}
		if err := s.setCapabilities(ctx, tx, n, caps, true, t); err != nil {
			return err
		}
		out, err = getHost(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete unregisters a host: refused (a conflict) while it is reserved,
// runs servers, or its providers have allocations. The checks are made
// before the transaction in that order (the driver's ServersOnHost is
// never called inside one), and the reservation check again inside it
// under the host's resource lock. The host leaves the freepool through
// the outbox after the commit.
func (s *Service) Delete(ctx context.Context, id string) error {
	h, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	reserved, err := s.allocated(s.db.WithContext(ctx), false, "computehost_allocations", "compute_host_id", id)
	if err != nil {
		return err
	}
	if reserved {
		return hostReserved(id)
	}
	servers, err := s.driver.ServersOnHost(ctx, h.HypervisorHostname)
	if err != nil {
		return err
	}
	if len(servers) > 0 {
		return errs.Conflictf("Can't delete host %s. Host has running servers (%d).", id, len(servers))
	}
	return s.write(ctx, func(tx *gorm.DB) error { return s.deleteHostTx(ctx, tx, id, h.HypervisorHostname) })
}

func hostReserved(id string) *errs.Error {
	return errs.Conflictf("Can't delete host %s. The host is reserved.", id)
}

// deleteHostTx removes host id (named name when it was checked) with its
// providers and capabilities, once it holds the host's resource lock and
// has found no allocation.
func (s *Service) deleteHostTx(ctx context.Context, tx *gorm.DB, id, name string) error {
	n, _ := parseID(id)
	var rows []models.ComputeHost
	if err := tx.Where("id = ?", n).Limit(1).Find(&rows).Error; err != nil {
		return err
	}
	if len(rows) == 0 || rows[0].HypervisorHostname != name {
		return notFound(id) // gone (or replaced) since it was checked
	}
	row := rows[0]
	reserved, err := s.hostReservedTx(ctx, tx, id)
	if err != nil {
		return err
	}
	if reserved {
		return hostReserved(id)
	}
	if err := placement.DeleteHostProvidersTx(tx, placement.HostProviders{
		ComputeUUID: row.ComputeProviderUUID, ReservationUUID: row.ReservationProviderUUID, CreatedCompute: row.OwnsComputeProvider,
	}); err != nil {
		if e := errs.As(placementError(err)); e != nil {
			return errs.Wrap(errs.Conflict, err, "Can't delete host %s. %s", id, e.Msg)
		}
		return err
	}
	// The host row goes first: its delete waits for an Update holding
	// the row, and the capabilities delete that follows then sees what
	// that Update inserted (READ COMMITTED on MySQL takes no gap locks,
	// so deleting the capabilities first could miss them and leave
	// orphans). An Update that comes after finds no host.
	if err := tx.Exec("DELETE FROM computehosts WHERE id = ?", n).Error; err != nil {
		return err
	}
	if err := tx.Exec("DELETE FROM computehost_extra_capabilities WHERE computehost_id = ?", n).Error; err != nil {
		return err
	}
	return enqueuePool(tx, KindRemoveFromFreePool, id, row.ServiceName)
}
