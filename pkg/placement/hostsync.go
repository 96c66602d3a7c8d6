package placement

import (
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
)

// Providers of a Blazar host (see the design note
// seeds/blazar-placement-instance-reservation.txt): the compute node
// provider named after the hypervisor hostname, with VCPU, MEMORY_MB and
// DISK_GB inventory, and its child "blazar_<hostname>" that carries the
// CUSTOM_RESERVATION_* inventory of instance reservations.

// maxHostInventory is the largest inventory amount (a signed 32-bit
// integer, as Placement stores it).
const maxHostInventory = 2147483647

// ReservationProviderPrefix starts the name of a host's child provider.
const ReservationProviderPrefix = "blazar_"

// HostResources is what a host contributes to its compute node provider.
type HostResources struct {
	Hostname string
	VCPUs    int64
	MemoryMB int64
	DiskGB   int64
}

// HostProviders names the providers created for a host.
type HostProviders struct {
	ComputeUUID     string
	ReservationUUID string
	// CreatedCompute is false when a provider named after the host
	// already existed (registered by Nova) and was reused untouched.
	CreatedCompute bool
}

// CreateHostProvidersTx creates, inside tx, the compute node provider of
// a host (unless a root provider of that name exists already, which is
// then reused as is) with inventory VCPU/MEMORY_MB/DISK_GB for the
// non-zero amounts, and the child provider blazar_<hostname>. A child
// that exists already is a Conflict *errs.Error (Blazar's
// ResourceProviderCreationConflict).
func CreateHostProvidersTx(tx *gorm.DB, h HostResources) (*HostProviders, error) {
	childName := ReservationProviderPrefix + h.Hostname
	var n int64
	if err := tx.Model(&models.ResourceProvider{}).Where("name = ?", childName).Count(&n).Error; err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, Conflict(CodeDuplicateName, "Resource provider %s already exists.", childName)
	}
	out := &HostProviders{}
	var existing []models.ResourceProvider
	if err := tx.Where("name = ?", h.Hostname).Find(&existing).Error; err != nil {
		return nil, err
	}
	var compute *Provider
	if len(existing) > 0 {
		rp := existing[0]
		if rp.ParentProviderID != nil {
			return nil, Conflict(CodeDuplicateName, "Resource provider %s exists and is not a compute node (it has a parent).", h.Hostname)
		}
		p, err := getProviderByID(tx, rp.ID)
		if err != nil {
			return nil, err
		}
		compute = p
	} else {
		p, err := CreateProviderTx(tx, h.Hostname, uuid.NewString(), nil)
		if err != nil {
			return nil, err
		}
		if err := addHostInventory(tx, p, h); err != nil {
			return nil, err
		}
		compute = p
		out.CreatedCompute = true
	}
	child, err := CreateProviderTx(tx, childName, uuid.NewString(), &compute.UUID)
	if err != nil {
		return nil, err
	}
	out.ComputeUUID, out.ReservationUUID = compute.UUID, child.UUID
	return out, nil
}

// addHostInventory inserts the host's inventory rows on a new provider
// and bumps its generation.
func addHostInventory(tx *gorm.DB, p *Provider, h HostResources) error {
	amounts := []struct {
		class string
		total int64
	}{{"VCPU", h.VCPUs}, {"MEMORY_MB", h.MemoryMB}, {"DISK_GB", h.DiskGB}}
	t := now()
	added := false
	for _, a := range amounts {
		if a.total <= 0 {
			continue
		}
		if a.total > maxHostInventory {
			return BadRequest("Unable to set the %s inventory of %s: %d is larger than %d.", a.class, h.Hostname, a.total, maxHostInventory)
		}
		var rc models.ResourceClass
		if err := tx.Where("name = ?", a.class).Take(&rc).Error; err != nil {
			return fmt.Errorf("resource class %s: %w", a.class, err)
		}
		inv := models.Inventory{
			ResourceProviderID: p.ID, ResourceClassID: rc.ID, Total: a.total, Reserved: 0,
			MinUnit: 1, MaxUnit: a.total, StepSize: 1, AllocationRatio: 1.0, CreatedAt: t, UpdatedAt: t,
		}
		if err := tx.Create(&inv).Error; err != nil {
			return err
		}
		added = true
	}
	if !added {
		return nil
	}
	if err := bumpGeneration(tx, p.ID, p.Generation, t); err != nil {
		return err
	}
	p.Generation++
	return nil
}

// DeleteHostProvidersTx deletes, inside tx, the child provider of a host
// and, when created is true, its compute node provider, with their
// inventories, traits and aggregate links. Allocations against either
// provider, or other children of the compute node, make it a Conflict *errs.Error
// and nothing is deleted. Providers already gone are skipped.
func DeleteHostProvidersTx(tx *gorm.DB, hp HostProviders) error {
	var ids []int64
	var child, compute *models.ResourceProvider
	for _, u := range []string{hp.ReservationUUID, hp.ComputeUUID} {
		if u == "" {
			continue
		}
		var rps []models.ResourceProvider
		if err := tx.Where("uuid = ?", u).Find(&rps).Error; err != nil {
			return err
		}
		if len(rps) == 0 {
			continue
		}
		if u == hp.ReservationUUID {
			child = &rps[0]
		} else {
			compute = &rps[0]
		}
	}
	if child != nil {
		ids = append(ids, child.ID)
	}
	if compute != nil && hp.CreatedCompute {
		ids = append(ids, compute.ID)
	}
	check := ids
	if compute != nil && !hp.CreatedCompute {
		check = append(append([]int64(nil), ids...), compute.ID)
	}
	if len(check) > 0 {
		var n int64
		if err := tx.Model(&models.Allocation{}).Where("resource_provider_id IN ?", check).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return Conflict(CodeProviderInUse, "The resource providers of host %s have allocations.", hostnameOf(compute, child))
		}
	}
	if compute != nil && hp.CreatedCompute {
		q := tx.Model(&models.ResourceProvider{}).Where("parent_provider_id = ?", compute.ID)
		if child != nil {
			q = q.Where("id <> ?", child.ID)
		}
		var n int64
		if err := q.Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return Conflict(CodeCannotDeleteParent, "The compute node provider %s has other child resource providers.", compute.Name)
		}
	}
	for _, id := range ids { // child first, then its parent
		for _, q := range []string{
			"DELETE FROM inventories WHERE resource_provider_id = ?",
			"DELETE FROM resource_provider_traits WHERE resource_provider_id = ?",
			"DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?",
			"DELETE FROM resource_providers WHERE id = ?",
		} {
			if err := tx.Exec(q, id).Error; err != nil {
				return err
			}
		}
	}
	return nil
}

func hostnameOf(compute, child *models.ResourceProvider) string {
	if compute != nil {
		return compute.Name
	}
	if child != nil {
		return child.Name[len(ReservationProviderPrefix):]
	}
	return ""
}
