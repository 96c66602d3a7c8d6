package nova

import (
	"context"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"

	"github.com/leasehold/leasehold/pkg/errs"
)

// CreateServerGroup makes the server group name with policy ("affinity"
// or "anti-affinity") and returns its id. It is made once: a group of
// that name that exists already (an earlier run whose answer was lost)
// is returned instead.
func (d *Driver) CreateServerGroup(ctx context.Context, name, policy string) (string, error) {
	found, err := d.serverGroupsNamed(ctx, name)
	if err != nil {
		return "", err
	}
	if len(found) > 0 {
		return found[0], nil
	}
	sg, err := servergroups.Create(ctx, d.client, servergroups.CreateOpts{Name: name, Policy: policy}).Extract()
	if err != nil {
		return "", d.fail(ctx, "create server group "+name, err)
	}
	if sg.ID == "" {
		return "", errs.New(errs.Internal, "Nova created server group %s without an id.", name)
	}
	return sg.ID, nil
}

// DeleteServerGroups deletes every server group named name (none left
// is done).
func (d *Driver) DeleteServerGroups(ctx context.Context, name string) error {
	found, err := d.serverGroupsNamed(ctx, name)
	if err != nil {
		return err
	}
	for _, id := range found {
		if err := servergroups.Delete(ctx, d.client, id).ExtractErr(); err != nil && !isNotFound(err) {
			return d.fail(ctx, "delete server group "+id, err)
		}
	}
	return nil
}

// serverGroupsNamed lists the ids of the server groups named name, of
// every project.
func (d *Driver) serverGroupsNamed(ctx context.Context, name string) ([]string, error) {
	pages, err := servergroups.List(d.client, servergroups.ListOpts{AllProjects: true}).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list server groups", err)
	}
	all, err := servergroups.ExtractServerGroups(pages)
	if err != nil {
		return nil, d.fail(ctx, "list server groups", err)
	}
	var ids []string
	for _, g := range all {
		if g.Name == name {
			ids = append(ids, g.ID)
		}
	}
	return ids, nil
}
