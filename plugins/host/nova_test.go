package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// novaSource lists registered hosts; Reservable gives the reservable
// ones, List all of them (hostLister).
type novaSource struct{ all []hosts.Host }

func (s *novaSource) Reservable(context.Context) ([]hosts.Host, error) {
	var out []hosts.Host
	for _, h := range s.all {
		if h.Reservable {
			out = append(out, h)
		}
	}
	return out, nil
}

func (s *novaSource) Properties(context.Context, bool) ([]hosts.Property, error) { return nil, nil }
func (s *novaSource) List(context.Context) ([]hosts.Host, error)                 { return s.all, nil }

// fakeNova is a compute service's hosts and servers (ComputeView).
type fakeNova struct {
	hosts   []compute.HostDetails
	servers map[string][]compute.Server
	// down makes every server listing fail, as a Nova that cannot be
	// reached does.
	down bool
}

func (f *fakeNova) ComputeHosts(context.Context) ([]compute.HostDetails, error) { return f.hosts, nil }
func (f *fakeNova) ServersOnHostDetail(_ context.Context, h string) ([]compute.Server, error) {
	if f.down {
		return nil, errs.Unavailablef("Nova: list servers on %s: connection refused", h)
	}
	return f.servers[h], nil
}

// novaPlugin is the plugin on fakeNova: c1 and c2 registered and
// reservable, c4 registered but not reservable (still in a Blazar pool:
// no target), c3 and c5 not registered (targets); c1 runs one server of
// project other.
func novaPlugin(t *testing.T, c3 compute.HostDetails) (*Plugin, *fakeNova, plugins.Lease) {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := func(id, name string, reservable bool) hosts.Host {
		return hosts.Host{ID: id, HypervisorHostname: name + ".example.org", ServiceName: name, VCPUs: 8, MemoryMB: 16384, LocalGB: 100,
			Reservable: reservable, ExtraCapabilities: map[string]string{}}
	}
	src := &novaSource{all: []hosts.Host{reg("1", "c1", true), reg("2", "c2", true), reg("4", "c4", false)}}
	size := func(n string, vcpus, mem, disk int64) compute.HostDetails {
		return compute.HostDetails{ServiceName: n, HypervisorHostname: n + ".example.org", VCPUs: vcpus, MemoryMB: mem, LocalGB: disk}
	}
	nova := &fakeNova{
		hosts: []compute.HostDetails{size("c1", 8, 16384, 100), size("c2", 8, 16384, 100), c3, size("c4", 64, 262144, 1000)},
		servers: map[string][]compute.Server{
			"c1": {{ID: "s-other", ProjectID: "other", Status: "ACTIVE", FlavorVCPUs: 2, FlavorRAM: 4096, FlavorDisk: 20}},
		},
	}
	p := New(src, dbtest.Open(t).DB, Config{ClearHosts: true, Compute: nova, Driver: "nova"}, func() time.Time { return now })
	if err := p.Refresh(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return p, nova, plugins.Lease{ID: "lease-1", ProjectID: "mine", Start: now, End: now.Add(24 * time.Hour)}
}

func twoHosts(t *testing.T, p *Plugin, lease plugins.Lease) plugins.Request {
	t.Helper()
	req, err := p.Parse(plugins.Values{"min": json.Number("2"), "max": json.Number("2"), "hypervisor_properties": "", "resource_properties": ""}, lease)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestNovaBusyNowAndPlan: with a compute service of its own, a host
// running another project's server (as the service reports it) is not
// free for a lease starting now, and the refusal names the server; a
// server of the lease's own project does not make it busy. The
// BEST-EFFORT plan moves the other project's server to a host outside
// the registered ones, sized by the compute service's host and flavor
// sizes; with no such host big enough it is refused, naming the server.
func TestNovaBusyNowAndPlan(t *testing.T) {
	ctx := context.Background()
	t.Run("busy now", func(t *testing.T) {
		p, nova, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 8, MemoryMB: 16384, LocalGB: 100})
		req := twoHosts(t, p, lease)
		_, err := p.Prepare(ctx, lease, req, true, nil)
		if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), "host 1 in use by another project now (server s-other on c1)") {
			t.Errorf("Prepare with c1 running another project's server: %v, want not enough hosts naming s-other", err)
		}
		nova.servers["c1"][0].ProjectID = "mine"
		c, err := p.Prepare(ctx, lease, req, true, nil)
		if err != nil {
			t.Fatalf("Prepare with c1 running the lease project's own server: %v", err)
		}
		if got := c.(*choice).chosen; len(got) != 2 {
			t.Errorf("chosen %v, want two hosts", got)
		}
	})
	t.Run("compute service down", func(t *testing.T) {
		// The lease is still taken, as with every other Nova call while
		// Nova is down: the check falls back to Leasehold's Placement,
		// where no other project's consumer is.
		p, nova, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 8, MemoryMB: 16384, LocalGB: 100})
		nova.down = true
		c, err := p.Prepare(ctx, lease, twoHosts(t, p, lease), true, nil)
		if err != nil {
			t.Fatalf("Prepare with Nova down: %v, want the hosts", err)
		}
		if got := c.(*choice).chosen; len(got) != 2 {
			t.Errorf("chosen %v, want two hosts", got)
		}
	})
	t.Run("plan", func(t *testing.T) {
		p, _, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 1, MemoryMB: 4096, LocalGB: 20})
		c, err := p.PrepareClearing(ctx, lease, twoHosts(t, p, lease), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch := c.(*choice)
		// c3's 1 VCPU is 4 at Nova's default ratio: room for 2.
		want := []move{{Consumer: "s-other", From: "c1", To: "c3", FromHost: "c1", ToHost: "c3"}}
		if diff := cmp.Diff(want, ch.moves, cmp.AllowUnexported(move{})); diff != "" {
			t.Errorf("moves (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"2", "1"}, ch.chosen); diff != "" {
			t.Errorf("hosts (-want +got):\n%s", diff)
		}
	})
	t.Run("not live-migratable", func(t *testing.T) {
		p, nova, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 8, MemoryMB: 16384, LocalGB: 100})
		nova.servers["c1"][0].Status = "SHUTOFF"
		_, err := p.PrepareClearing(ctx, lease, twoHosts(t, p, lease), true, nil)
		if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), "server s-other of another project is SHUTOFF and cannot be live-migrated") {
			t.Errorf("PrepareClearing with a stopped server on the host to clear: %v, want a refusal naming it", err)
		}
	})
	t.Run("exclusion tags", func(t *testing.T) {
		// c3 runs a server of a third project tagged svc:db; with svc:
		// naming exclusion tags, s-other goes there only when it does
		// not carry svc:db too (Nova's server tags, as listed).
		for _, tc := range []struct {
			tags []string
			want string
		}{
			{[]string{"svc:web", "team-a"}, "moved"},
			{[]string{"svc:db"}, "instance s-other has nowhere to go"},
		} {
			p, nova, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 8, MemoryMB: 16384, LocalGB: 100})
			p.cfg.Rules = &allocator.TagRules{ExclusionPrefixes: []string{"svc:"}}
			nova.servers["c1"][0].Tags = tc.tags
			nova.servers["c3"] = []compute.Server{{ID: "s-third", ProjectID: "third", Status: "ACTIVE", FlavorVCPUs: 1, FlavorRAM: 1024, FlavorDisk: 10, Tags: []string{"svc:db"}}}
			c, err := p.PrepareClearing(ctx, lease, twoHosts(t, p, lease), true, nil)
			got := "moved"
			if err != nil {
				got = err.Error()
			} else if moves := c.(*choice).moves; len(moves) != 1 || moves[0].To != "c3" {
				got = fmt.Sprint(moves)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("s-other tagged %v: %s, want %s", tc.tags, got, tc.want)
			}
		}
	})
	t.Run("nowhere to go", func(t *testing.T) {
		// c3 lacks the memory; c4 has room but is registered (in a
		// Blazar pool), so the server may not go there.
		p, _, lease := novaPlugin(t, compute.HostDetails{ServiceName: "c3", VCPUs: 8, MemoryMB: 2048, LocalGB: 100})
		_, err := p.PrepareClearing(ctx, lease, twoHosts(t, p, lease), true, nil)
		if !errs.Is(err, errs.NotEnoughResources) || !strings.Contains(err.Error(), "instance s-other has nowhere to go") {
			t.Errorf("PrepareClearing with no host outside the pools big enough: %v, want a refusal naming s-other", err)
		}
	})
}

// directoryNova is fakeNova that also lists every server at once, and
// counts the listings of each kind.
type directoryNova struct {
	*fakeNova
	perHost, all atomic.Int32 // the per-host listings run concurrently
}

func (f *directoryNova) ServersOnHostDetail(ctx context.Context, h string) ([]compute.Server, error) {
	f.perHost.Add(1)
	return f.fakeNova.ServersOnHostDetail(ctx, h)
}

func (f *directoryNova) ServersByHost(context.Context) (map[string][]compute.Server, error) {
	f.all.Add(1)
	if f.down {
		return nil, errs.Unavailablef("Nova: list servers: connection refused")
	}
	return f.servers, nil
}

// TestBusyNowListings: the busy-now check asks about a few hosts one
// listing each and about many with one listing of every server, with
// the same answer either way.
func TestBusyNowListings(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		hosts        int
		perHost, all int32
	}{
		{hosts: 3, perHost: 3},
		{hosts: perHostListings, perHost: perHostListings},
		{hosts: perHostListings + 1, all: 1},
		{hosts: 40, all: 1},
	} {
		t.Run(fmt.Sprint(tc.hosts), func(t *testing.T) {
			src := &novaSource{}
			nova := &directoryNova{fakeNova: &fakeNova{servers: map[string][]compute.Server{}}}
			want := map[string]string{}
			for i := range tc.hosts {
				name := fmt.Sprintf("c%d", i)
				src.all = append(src.all, hosts.Host{ID: fmt.Sprint(i), HypervisorHostname: name, ServiceName: name,
					VCPUs: 8, MemoryMB: 16384, LocalGB: 100, Reservable: true, ExtraCapabilities: map[string]string{}})
				switch i % 3 {
				case 0:
					nova.servers[name] = []compute.Server{{ID: "s" + name, ProjectID: "other"}}
					want[fmt.Sprint(i)] = "in use by another project now (server s" + name + " on " + name + ")"
				case 1:
					nova.servers[name] = []compute.Server{{ID: "s" + name, ProjectID: "mine"}}
				}
			}
			// A server on a host Leasehold does not know changes nothing.
			nova.servers["elsewhere"] = []compute.Server{{ID: "s-x", ProjectID: "other"}}
			p := New(src, dbtest.Open(t).DB, Config{ClearHosts: true, Compute: nova, Driver: "nova"}, func() time.Time { return now })
			if err := p.Refresh(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			got, err := p.busyNowCompute(context.Background(), "mine")
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				want = nil
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("busy hosts (-want +got):\n%s", diff)
			}
			if nova.perHost.Load() != tc.perHost || nova.all.Load() != tc.all {
				t.Errorf("%d per-host listings and %d of every server, want %d and %d", nova.perHost.Load(), nova.all.Load(), tc.perHost, tc.all)
			}
		})
	}
}
