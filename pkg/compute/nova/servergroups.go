package nova

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
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
	return d.createServerGroup(ctx, d.client, name, policy)
}

// TrustLogin returns a provider client logged in with Keystone trust
// trustID (identity.Keystone.TrustProvider).
type TrustLogin func(ctx context.Context, trustID string) (*gophercloud.ProviderClient, error)

// SetTrustLogin makes CreateServerGroupWithTrust log in with the lease's
// trust (Keystone mode); without it the service's login is used.
func (d *Driver) SetTrustLogin(login TrustLogin) { d.trustLogin = login }

// CreateServerGroupWithTrust is CreateServerGroup made with a login
// scoped to trust trustID, so that the group belongs to the trust's
// project (the lease's) and its members may boot into it. The look-up of
// an existing group of that name uses the service's login (all
// projects), as CreateServerGroup's.
func (d *Driver) CreateServerGroupWithTrust(ctx context.Context, trustID, name, policy string) (string, error) {
	if d.trustLogin == nil || trustID == "" {
		return d.CreateServerGroup(ctx, name, policy)
	}
	found, err := d.serverGroupsNamed(ctx, name)
	if err != nil {
		return "", err
	}
	if len(found) > 0 {
		return found[0], nil
	}
	pc, err := d.trustLogin(ctx, trustID)
	if err != nil {
		return "", err
	}
	c := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: d.client.Endpoint, ResourceBase: d.client.ResourceBase,
		Type: d.client.Type, Microversion: d.client.Microversion}
	return d.createServerGroup(ctx, c, name, policy)
}

func (d *Driver) createServerGroup(ctx context.Context, c *gophercloud.ServiceClient, name, policy string) (string, error) {
	sg, err := servergroups.Create(ctx, c, servergroups.CreateOpts{Name: name, Policy: policy}).Extract()
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
