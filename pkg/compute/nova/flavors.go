package nova

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// CreateReservationFlavor implements compute.Driver: a private flavor
// with id f.ID. A flavor that exists already (an earlier run whose answer
// was lost) is kept and only its extra specs are set again.
func (d *Driver) CreateReservationFlavor(ctx context.Context, f compute.FlavorSpec) error {
	if f.ID == "" {
		return errs.New(errs.Internal, "a reservation flavor needs an id")
	}
	_, err := flavors.Get(ctx, d.client, f.ID).Extract()
	switch {
	case err == nil:
	case isNotFound(err):
		private := false
		disk := int(f.DiskGB)
		name := f.Name
		if name == "" {
			name = f.ID
		}
		_, err = flavors.Create(ctx, d.client, flavors.CreateOpts{
			ID: f.ID, Name: name, RAM: int(f.MemoryMB), VCPUs: int(f.VCPUs), Disk: &disk, IsPublic: &private,
		}).Extract()
		if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			return d.fail(ctx, "create flavor "+f.ID, err)
		}
	default:
		return d.fail(ctx, "get flavor "+f.ID, err)
	}
	if len(f.ExtraSpecs) == 0 {
		return nil
	}
	if _, err := flavors.CreateExtraSpecs(ctx, d.client, f.ID, flavors.ExtraSpecsOpts(maps.Clone(f.ExtraSpecs))).Extract(); err != nil {
		return d.fail(ctx, "set extra specs of flavor "+f.ID, err)
	}
	return nil
}

// AddFlavorAccess implements compute.Driver; a project that has access
// already (Nova's 409) is done.
func (d *Driver) AddFlavorAccess(ctx context.Context, flavorID, projectID string) error {
	_, err := flavors.AddAccess(ctx, d.client, flavorID, flavors.AddAccessOpts{Tenant: projectID}).Extract()
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return d.fail(ctx, fmt.Sprintf("give project %s access to flavor %s", projectID, flavorID), err)
	}
	return nil
}

// DeleteReservationFlavor implements compute.Driver: the servers of
// every project booted with the flavor are deleted and waited for
// (Config.ServerDeleteTimeout), then the flavor; a flavor already gone
// is done.
func (d *Driver) DeleteReservationFlavor(ctx context.Context, flavorID string) error {
	deadline := time.Now().Add(d.cfg.ServerDeleteTimeout)
	deleted := map[string]bool{}
	for {
		pages, err := servers.List(d.client, servers.ListOpts{AllTenants: true, Flavor: flavorID}).AllPages(ctx)
		if err != nil {
			return d.fail(ctx, "list servers of flavor "+flavorID, err)
		}
		all, err := servers.ExtractServers(pages)
		if err != nil {
			return d.fail(ctx, "list servers of flavor "+flavorID, err)
		}
		var left []string
		for _, s := range all {
			left = append(left, s.ID)
			if deleted[s.ID] {
				continue
			}
			d.log.InfoContext(ctx, "deleting a server of a reservation flavor", "server", s.ID, "flavor", flavorID)
			if err := servers.Delete(ctx, d.client, s.ID).ExtractErr(); err != nil && !isNotFound(err) {
				return d.fail(ctx, "delete server "+s.ID, err)
			}
			deleted[s.ID] = true
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return errs.New(errs.Internal, "Timed out after %s waiting for servers %s of flavor %s to be deleted.", d.cfg.ServerDeleteTimeout, strings.Join(left, ", "), flavorID)
		}
		if err := d.sleep(ctx); err != nil {
			return err
		}
	}
	if err := flavors.Delete(ctx, d.client, flavorID).ExtractErr(); err != nil && !isNotFound(err) {
		return d.fail(ctx, "delete flavor "+flavorID, err)
	}
	return nil
}

// sleep waits one PollInterval, or until ctx ends.
func (d *Driver) sleep(ctx context.Context) error {
	t := time.NewTimer(d.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// GetFlavor implements the flavor lookup of flavor:instance reservations:
// flavor flavorID with its extra specs, when projectID may use it (a
// public flavor, or a private one whose access list holds the project).
// A flavor that does not exist, or that the project cannot see, is an
// errs.NotFound, as Nova would answer the project itself.
func (d *Driver) GetFlavor(ctx context.Context, flavorID, projectID string) (compute.Flavor, error) {
	notFound := errs.NotFoundf("Flavor %s could not be found.", flavorID)
	fl, err := flavors.Get(ctx, d.client, flavorID).Extract()
	if isNotFound(err) {
		return compute.Flavor{}, notFound
	}
	if err != nil {
		return compute.Flavor{}, d.fail(ctx, "get flavor "+flavorID, err)
	}
	if !fl.IsPublic && projectID != "" {
		pages, err := flavors.ListAccesses(d.client, flavorID).AllPages(ctx)
		if err != nil {
			return compute.Flavor{}, d.fail(ctx, "list the projects of flavor "+flavorID, err)
		}
		acc, err := flavors.ExtractAccesses(pages)
		if err != nil {
			return compute.Flavor{}, d.fail(ctx, "list the projects of flavor "+flavorID, err)
		}
		if !slices.ContainsFunc(acc, func(a flavors.FlavorAccess) bool { return a.TenantID == projectID }) {
			return compute.Flavor{}, notFound
		}
	}
	specs := fl.ExtraSpecs
	if specs == nil { // below microversion 2.61 a flavor comes without them
		if specs, err = flavors.ListExtraSpecs(ctx, d.client, flavorID).Extract(); err != nil {
			return compute.Flavor{}, d.fail(ctx, "get the extra specs of flavor "+flavorID, err)
		}
	}
	return compute.Flavor{ID: fl.ID, Name: fl.Name, VCPUs: int64(fl.VCPUs), RAM: int64(fl.RAM), Disk: int64(fl.Disk),
		Ephemeral: int64(fl.Ephemeral), ExtraSpecs: specs}, nil
}
