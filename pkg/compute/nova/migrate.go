package nova

import (
	"context"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// liveMigrateOpts asks for block_migration "auto" (Nova decides by the
// storage; since 2.25 the key is required), which gophercloud's
// LiveMigrateOpts (a *bool) cannot say.
type liveMigrateOpts struct{ host string }

func (o liveMigrateOpts) ToLiveMigrateMap() (map[string]any, error) {
	return map[string]any{"os-migrateLive": map[string]any{"host": o.host, "block_migration": "auto"}}, nil
}

// serverState is what LiveMigrate watches of a server.
type serverState struct {
	Status    string  `json:"status"`
	Host      string  `json:"OS-EXT-SRV-ATTR:host"`
	TaskState *string `json:"OS-EXT-STS:task_state"`
}

func (d *Driver) serverState(ctx context.Context, id string) (serverState, error) {
	var out serverState
	err := servers.Get(ctx, d.client, id).ExtractInto(&out) // the "server" object
	return out, err
}

// LiveMigrate implements compute.Driver. A server already on targetHost
// is done (a retry after a lost answer); otherwise it asks Nova and polls
// until the server is ACTIVE with no task on targetHost, failing when it
// settles anywhere else (Nova rolled the migration back), goes to ERROR,
// or Config.MigrateTimeout passes.
func (d *Driver) LiveMigrate(ctx context.Context, serverID, targetHost string) error {
	st, err := d.serverState(ctx, serverID)
	if err != nil {
		if isNotFound(err) {
			return errs.NotFoundf("Server %s could not be found.", serverID)
		}
		return d.fail(ctx, "get server "+serverID, err)
	}
	if st.Host == targetHost && st.TaskState == nil && st.Status == "ACTIVE" {
		return nil
	}
	if st.TaskState == nil {
		if err := servers.LiveMigrate(ctx, d.client, serverID, liveMigrateOpts{host: targetHost}).ExtractErr(); err != nil {
			return d.fail(ctx, fmt.Sprintf("live-migrate server %s to %s", serverID, targetHost), err)
		}
	}
	deadline := time.Now().Add(d.cfg.MigrateTimeout)
	for {
		if err := d.sleep(ctx); err != nil {
			return err
		}
		st, err := d.serverState(ctx, serverID)
		if err != nil {
			return d.fail(ctx, "get server "+serverID, err)
		}
		switch {
		case st.Status == "ERROR":
			return errs.New(errs.Internal, "Live migration of server %s to %s failed: the server is in ERROR.", serverID, targetHost)
		case st.TaskState == nil && st.Status == "ACTIVE" && st.Host == targetHost:
			return nil
		case st.TaskState == nil && st.Status == "ACTIVE":
			return errs.New(errs.Internal, "Live migration of server %s to %s did not happen: it runs on %s.", serverID, targetHost, st.Host)
		}
		if time.Now().After(deadline) {
			return errs.New(errs.Internal, "Timed out after %s waiting for server %s to run on %s (status %s on %s).", d.cfg.MigrateTimeout, serverID, targetHost, st.Status, st.Host)
		}
	}
}

// ServersOnHostDetail implements compute.Driver, with the flavor sizes
// Nova embeds in a server since microversion 2.47.
func (d *Driver) ServersOnHostDetail(ctx context.Context, hostname string) ([]compute.Server, error) {
	all, err := d.serversOn(ctx, hostname)
	if err != nil {
		return nil, err
	}
	out := make([]compute.Server, len(all))
	for i, s := range all {
		out[i] = serverOf(&s)
	}
	return out, nil
}

// ServersByHost lists the servers of every project in one paginated
// listing (all_tenants), grouped by service host name; servers on no host
// (shelved offloaded, never scheduled) are left out. One listing costs
// less than one per host once a read asks about more than a few hosts.
func (d *Driver) ServersByHost(ctx context.Context) (map[string][]compute.Server, error) {
	pages, err := servers.List(d.client, servers.ListOpts{AllTenants: true, Limit: serverPage}).AllPages(ctx)
	if err != nil {
		return nil, d.fail(ctx, "list servers", err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, d.fail(ctx, "list servers", err)
	}
	out := map[string][]compute.Server{}
	for _, s := range all {
		if s.Host == "" {
			continue
		}
		out[s.Host] = append(out[s.Host], serverOf(&s))
	}
	return out, nil
}

// serverOf is a listed server as the compute driver reports it: the
// flavor sizes (embedded since microversion 2.47) and the tags (in the
// server body since 2.26).
func serverOf(s *servers.Server) compute.Server {
	out := compute.Server{ID: s.ID, ProjectID: s.TenantID, Status: s.Status,
		FlavorVCPUs: number(s.Flavor["vcpus"]), FlavorRAM: number(s.Flavor["ram"]), FlavorDisk: number(s.Flavor["disk"])}
	if s.Tags != nil {
		out.Tags = *s.Tags
	}
	return out
}

// serverPage is the page size of the every-server listing: Nova's
// default [api] max_limit, so no page is cut shorter than asked.
const serverPage = 1000

// number reads a JSON number decoded into an any.
func number(v any) int64 {
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return 0
}
