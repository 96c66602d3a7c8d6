package host

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/plugins"
)

// With a compute service of its own (the nova driver), who runs what on a
// host is the compute service's account, not Leasehold's Placement: Nova
// may use another Placement, and a server Nova schedules is never a
// consumer here. Config.Compute then answers "is this host busy now with
// other projects' instances" and feeds the scavenger hunt: every host
// Nova reports up, its size, and the servers on it with their owners and
// flavor sizes.

// ComputeView is the part of a compute driver that lists its hosts and
// the servers on each (the nova driver).
type ComputeView interface {
	// ComputeHosts are the hosts the service reports up and enabled,
	// with their sizes.
	ComputeHosts(ctx context.Context) ([]compute.HostDetails, error)
	// ServersOnHostDetail lists the servers on a host (by service host
	// name) with their projects and flavor sizes.
	ServersOnHostDetail(ctx context.Context, hostname string) ([]compute.Server, error)
}

// serverDirectory is a compute service that can also list every server
// at once, grouped by host (the nova driver).
type serverDirectory interface {
	ServersByHost(ctx context.Context) (map[string][]compute.Server, error)
}

// perHostListings is the most hosts a read asks about one listing each;
// above it, one listing of every server is fewer calls (Nova pages of
// 1,000 servers) than one per host.
const perHostListings = 2 * serversParallel

// Nova's default initial allocation ratios (its scheduler checks the
// real ones again when it live-migrates): the plan's capacity of a host
// is its size times these.
const (
	novaCPURatio  = 4.0
	novaRAMRatio  = 1.0
	novaDiskRatio = 1.0
)

// novaClasses are the resource classes of a Nova-based plan, in vector
// order.
var novaClasses = []string{"VCPU", "MEMORY_MB", "DISK_GB"}

// serversParallel bounds the concurrent server listings of one read.
const serversParallel = 4

// serviceHost is the name the compute service files h's servers under.
func serviceHost(h *Host) string {
	if h.ServiceName != "" {
		return h.ServiceName
	}
	return h.HypervisorHostname
}

// serversOn lists the servers on each of names, a few listings at once;
// the first error ends the read.
func (p *Plugin) serversOn(ctx context.Context, names []string) (map[string][]compute.Server, error) {
	out := make(map[string][]compute.Server, len(names))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, serversParallel)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ss, err := p.cfg.Compute.ServersOnHostDetail(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			out[n] = ss
		}()
	}
	wg.Wait()
	return out, firstErr
}

// busyNowCompute is busyNow read from the compute service: the view's
// hosts running a server of another project than project's (a lease
// holding a host now makes it busy anyway: not asked). A few hosts are
// asked one listing each; more, one listing of every server.
func (p *Plugin) busyNowCompute(ctx context.Context, project string) (map[string]string, error) {
	now := p.now()
	p.idx.mu.RLock()
	idOf := make(map[string]string, len(p.idx.infos))
	names := make([]string, 0, len(p.idx.infos))
	for i := range p.idx.infos {
		if heldNow(&p.idx.hosts[i], now) {
			continue
		}
		n := serviceHost(&p.idx.infos[i])
		if _, dup := idOf[n]; !dup {
			names = append(names, n)
		}
		idOf[n] = p.idx.infos[i].ID
	}
	p.idx.mu.RUnlock()
	var servers map[string][]compute.Server
	var err error
	if dir, ok := p.cfg.Compute.(serverDirectory); ok && len(names) > perHostListings {
		servers, err = dir.ServersByHost(ctx)
	} else {
		servers, err = p.serversOn(ctx, names)
	}
	if err != nil {
		return nil, err
	}
	var out map[string]string
	for _, n := range names {
		for _, s := range servers[n] {
			if s.ProjectID == project {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[idOf[n]] = fmt.Sprintf("in use by another project now (server %s on %s)", s.ID, n)
			break
		}
	}
	return out, nil
}

// hostLister lists every registered host, reservable or not
// (hosts.Service): a registered host sits in a Blazar pool, where Nova's
// BlazarFilter lets no server without a reservation land.
type hostLister interface {
	List(ctx context.Context) ([]Host, error)
}

// scavengeInputCompute builds the scavenger hunt's input from the compute
// service: each host Nova reports up is a planning host (id: its service
// host name); the registered ones of the view may be eligible, the
// unregistered ones are the targets (the only hosts a server without a
// reservation may be scheduled to under the BlazarFilter). It returns
// the input and the Blazar host id of each registered planning host.
func (p *Plugin) scavengeInputCompute(ctx context.Context, lease plugins.Lease, ps params, taken map[string]bool) (allocator.ScavengeInput, map[string]string, error) {
	in := allocator.ScavengeInput{Min: ps.min, Max: ps.max, Rules: p.cfg.Rules, Classes: novaClasses}
	chs, err := p.cfg.Compute.ComputeHosts(ctx)
	if err != nil {
		return in, nil, err
	}
	registered := map[string]bool{}
	if l, ok := p.src.(hostLister); ok {
		all, err := l.List(ctx)
		if err != nil {
			return in, nil, err
		}
		for i := range all {
			registered[serviceHost(&all[i])] = true
		}
	}
	names := make([]string, 0, len(chs))
	size := map[string]compute.HostDetails{}
	for _, h := range chs {
		n := h.ServiceName
		if n == "" {
			n = h.HypervisorHostname
		}
		if _, dup := size[n]; dup {
			continue
		}
		size[n] = h
		names = append(names, n)
	}
	sort.Strings(names)
	servers, err := p.serversOn(ctx, names)
	if err != nil {
		return in, nil, err
	}
	win := allocator.Interval{Start: lease.Start, End: lease.End}
	lo, hi := win.Start.Add(-p.cfg.Cleaning), win.End.Add(p.cfg.Cleaning)
	hostOf := map[string]string{}
	p.idx.mu.RLock()
	defer p.idx.mu.RUnlock()
	match := ps.match(p.idx.info)
	byName := map[string]int{}
	for i := range p.idx.infos {
		byName[serviceHost(&p.idx.infos[i])] = i
	}
	for _, n := range names {
		d := size[n]
		sh := allocator.ScavengeHost{ID: n, Used: make([]int64, 3), Capacity: []int64{
			int64(float64(d.VCPUs) * novaCPURatio), int64(float64(d.MemoryMB) * novaRAMRatio), int64(float64(d.LocalGB) * novaDiskRatio)}}
		for _, s := range servers[n] {
			use := []int64{s.FlavorVCPUs, s.FlavorRAM, s.FlavorDisk}
			for c := range use {
				sh.Used[c] += use[c]
			}
			switch {
			case s.ProjectID == lease.ProjectID:
			case liveMigratable(s.Status):
				sh.Instances = append(sh.Instances, allocator.ScavengeInstance{ID: s.ID, Usage: use, Tags: s.Tags})
			case sh.Pinned == "":
				sh.Pinned = fmt.Sprintf("server %s of another project is %s and cannot be live-migrated", s.ID, s.Status)
			}
		}
		sort.Slice(sh.Instances, func(a, b int) bool { return sh.Instances[a].ID < sh.Instances[b].ID })
		i, inView := byName[n]
		switch {
		case inView:
			info := &p.idx.infos[i]
			hostOf[n] = info.ID
			sh.Tags = hostTags(info)
			eligible, held := p.eligibility(i, match, taken, lo, hi)
			sh.Eligible = eligible
			if held {
				in.NotEligible++
			}
		case !registered[n]:
			sh.Target = true
		}
		in.Hosts = append(in.Hosts, sh)
	}
	return in, hostOf, nil
}

// clearedCompute reports, in tx, whether every planned move of lease is
// done (no move of it left in the outbox: a move completes only once
// Nova runs the server on its target; a failed one stays, FAILED, and
// the lease's timeout decides). The compute service is not asked inside
// the transaction.
func clearedCompute(ctx context.Context, tx *plugins.Tx, lease plugins.Lease) (bool, error) {
	var n int64
	err := tx.WithContext(ctx).Model(&models.OutboxAction{}).
		Where("lease_id = ? AND kind = ?", lease.ID, KindMoveInstance).Count(&n).Error
	return n == 0, err
}

// liveMigratable reports whether Nova live-migrates a server of status
// st ("" when the driver does not say: left to Nova).
func liveMigratable(st string) bool {
	switch st {
	case "", "ACTIVE", "PAUSED":
		return true
	}
	return false
}

// heldNow reports whether a booking of h contains now.
func heldNow(h *allocator.Host, now time.Time) bool {
	for _, b := range h.Busy {
		if !b.Start.After(now) && b.End.After(now) {
			return true
		}
	}
	return false
}
