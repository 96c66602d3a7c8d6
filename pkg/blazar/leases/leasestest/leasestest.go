// Package leasestest builds a lease service over a fake host list and a
// fake clock for tests of the lease engine, the event manager and the
// concurrency checks.
package leasestest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t.UTC()} }

// Now returns the current fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t.UTC()
	c.mu.Unlock()
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// Hosts is a fake host source: hosts "1".."N" named compute-<i> with
// fields and capabilities given per host. Private names the private
// properties (property privacy).
type Hosts struct {
	mu      sync.Mutex
	hosts   []hostplugin.Host
	Private map[string]bool
}

// PrivateProperties implements hostplugin.PrivacySource.
func (h *Hosts) PrivateProperties(context.Context) (map[string]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for k, v := range h.Private {
		out[k] = v
	}
	return out, nil
}

// Actions records the compute actions of the host plugin.
type Actions struct {
	mu    sync.Mutex
	Calls []string
}

func (a *Actions) record(s string) error {
	a.mu.Lock()
	a.Calls = append(a.Calls, s)
	a.mu.Unlock()
	return nil
}

// Start implements hostplugin.Actions.
func (a *Actions) Start(_ context.Context, res, project string, hosts []string) error {
	return a.record(fmt.Sprintf("start %s %v", project, hosts))
}

// End implements hostplugin.Actions.
func (a *Actions) End(_ context.Context, res string, hosts []string) error {
	return a.record(fmt.Sprintf("end %v", hosts))
}

// Snapshot implements hostplugin.Actions.
func (a *Actions) Snapshot(_ context.Context, res string, hosts []string) error {
	return a.record(fmt.Sprintf("snapshot %v", hosts))
}

// Log returns the calls so far.
func (a *Actions) Log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.Calls...)
}

// NewHosts returns n hosts; caps(i) gives host i's values (may be nil).
func NewHosts(n int, caps func(i int) map[string]string) *Hosts {
	h := &Hosts{}
	for i := 1; i <= n; i++ {
		var m map[string]string
		if caps != nil {
			m = caps(i)
		}
		h.add(i, m)
	}
	return h
}

func (h *Hosts) add(i int, caps map[string]string) {
	vals := map[string]string{"id": fmt.Sprint(i), "hypervisor_hostname": fmt.Sprintf("compute-%d", i), "vcpus": "8"}
	for k, v := range caps {
		vals[k] = v
	}
	h.hosts = append(h.hosts, hostplugin.Host{
		ID: fmt.Sprint(i), Name: vals["hypervisor_hostname"],
		Lookup: func(k string) (string, bool) { v, ok := vals[k]; return v, ok },
	})
}

// Reservable implements hostplugin.Source; the same slice is returned
// while nothing changed.
func (h *Hosts) Reservable(context.Context) ([]hostplugin.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hosts, nil
}

// FIPs is a fake floating-IP pool.
type FIPs struct{ List []floatingip.FIP }

// FloatingIPs implements floatingip.Source.
func (f *FIPs) FloatingIPs(context.Context) ([]floatingip.FIP, error) { return f.List, nil }

// Options tune New.
type Options struct {
	Cleaning              time.Duration
	MinutesBeforeEndLease int
	Filters               []leases.Filter
	FIPs                  *FIPs
	Actions               hostplugin.Actions
	DefaultBeforeEnd      string
}

// New returns a lease service with the host plugin (and the floating-IP
// plugin when o.FIPs is set) on d.
func New(d *db.DB, hosts hostplugin.Source, clock *Clock, o Options) (*leases.Service, *hostplugin.Plugin) {
	hp := hostplugin.New(hosts, d.DB, o.Actions, hostplugin.Config{Cleaning: o.Cleaning, DefaultBeforeEnd: o.DefaultBeforeEnd}, clock.Now)
	ps := []plugins.Plugin{hp}
	if o.FIPs != nil {
		ps = append(ps, floatingip.New(o.FIPs))
	}
	svc := leases.New(d, ps, leases.Config{MinutesBeforeEndLease: o.MinutesBeforeEndLease, Filters: o.Filters}, clock.Now)
	return svc, hp
}

// HostReservation is a physical:host reservation request.
func HostReservation(min, max int, hyper, resource string) map[string]any {
	return map[string]any{"resource_type": "physical:host", "min": min, "max": max,
		"hypervisor_properties": hyper, "resource_properties": resource}
}

// Overlaps returns, per host, the pairs of allocations that overlap in
// time on that host (must be empty: no double booking), by SQL.
func Overlaps(ctx context.Context, d *db.DB) ([]string, error) {
	type row struct {
		ComputeHostID string
		A, B          string
	}
	var rows []row
	err := d.WithContext(ctx).Raw(`SELECT a.compute_host_id, a.reservation_id AS a, b.reservation_id AS b
		FROM computehost_allocations a JOIN computehost_allocations b
		  ON a.compute_host_id = b.compute_host_id AND a.id < b.id
		 AND a.start_date < b.end_date AND b.start_date < a.end_date`).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("host %s: reservations %s and %s overlap", r.ComputeHostID, r.A, r.B))
	}
	return out, nil
}
