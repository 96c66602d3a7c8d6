// Package leasestest builds a lease service over a fake host list and a
// fake clock for tests of the lease engine, the event manager and the
// concurrency checks.
package leasestest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/notify"
	"github.com/leasehold/leasehold/pkg/outbox"
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
	hosts   []hosts.Host
	Private map[string]bool
}

// Properties implements hostplugin.Source: the private ones are named in
// Private.
func (h *Hosts) Properties(_ context.Context, includePrivate bool) ([]hosts.Property, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hosts.Property
	for k, v := range h.Private {
		if v || !includePrivate {
			out = append(out, hosts.Property{Name: k, Private: v})
		}
	}
	return out, nil
}

// Actions records the host plugin's compute actions as the outbox runs
// them, one line per host: "start <project> [<host>]", "end [<host>]",
// "snapshot [<host>]".
type Actions struct {
	mu    sync.Mutex
	Calls []string
	w     *outbox.Worker
}

func (a *Actions) record(s string) {
	a.mu.Lock()
	a.Calls = append(a.Calls, s)
	a.mu.Unlock()
}

func (a *Actions) handlers() map[string]outbox.Handler {
	h := func(line func(project, host string) string) outbox.Handler {
		return func(_ context.Context, payload json.RawMessage) error {
			var p struct {
				ProjectID string `json:"project_id"`
				Host      string `json:"host"`
			}
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			a.record(line(p.ProjectID, p.Host))
			return nil
		}
	}
	return map[string]outbox.Handler{
		hostplugin.KindReserveHost:  h(func(p, host string) string { return fmt.Sprintf("start %s [%s]", p, host) }),
		hostplugin.KindReleaseHost:  h(func(_, host string) string { return fmt.Sprintf("end [%s]", host) }),
		hostplugin.KindSnapshotHost: h(func(_, host string) string { return fmt.Sprintf("snapshot [%s]", host) }),
		// The reservation aggregate's own life is not a host action:
		// done, not recorded.
		hostplugin.KindCreateAggregate: func(context.Context, json.RawMessage) error { return nil },
		hostplugin.KindDeleteAggregate: func(context.Context, json.RawMessage) error { return nil },
	}
}

// Log runs the outbox rows that are due (as the server's worker does after
// each commit) and returns the actions recorded so far.
func (a *Actions) Log() []string {
	if a.w != nil {
		if _, err := a.w.RunDue(context.Background()); err != nil {
			a.record("outbox: " + err.Error())
		}
	}
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
	hh := hosts.Host{ID: fmt.Sprint(i), HypervisorHostname: fmt.Sprintf("compute-%d", i), VCPUs: 8,
		Reservable: true, ExtraCapabilities: map[string]string{}}
	for k, v := range caps {
		switch k {
		case "hypervisor_hostname":
			hh.HypervisorHostname = v
		case "service_name":
			hh.ServiceName = v
		case "vcpus":
			hh.VCPUs, _ = strconv.ParseInt(v, 10, 64)
		case "memory_mb":
			hh.MemoryMB, _ = strconv.ParseInt(v, 10, 64)
		default:
			hh.ExtraCapabilities[k] = v
		}
	}
	h.hosts = append(h.hosts, hh)
}

// Reservable implements hostplugin.Source; the same slice is returned
// while nothing changed.
func (h *Hosts) Reservable(context.Context) ([]hosts.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hosts, nil
}

// FIPs is a fake floating-IP pool.
type FIPs struct{ List []floatingip.FIP }

// ListFloatingIPs implements floatingip.Source.
func (f *FIPs) ListFloatingIPs(context.Context) ([]hosts.FloatingIP, error) {
	out := make([]hosts.FloatingIP, len(f.List))
	for i, x := range f.List {
		out[i] = hosts.FloatingIP{ID: x.ID, FloatingNetworkID: x.NetworkID, FloatingIPAddress: x.Address, Reservable: x.Reservable}
	}
	return out, nil
}

// Options tune New.
type Options struct {
	Cleaning              time.Duration
	MinutesBeforeEndLease int
	Filters               []leases.Filter
	FIPs                  *FIPs
	// Actions, when set, records the compute actions (run from the
	// outbox by Actions.Log).
	Actions          *Actions
	DefaultBeforeEnd string
	// EventsChanged is the lease service's wake-up of the event manager.
	EventsChanged func()
	// Notifier, when set, has the service record usage notifications.
	Notifier *notify.Notifier
	// Rules are the host plugin's tag rules (failure domains, exclusion
	// tags); nil: none.
	Rules *allocator.TagRules
	// Trusts, when set, makes the leases' Keystone trusts.
	Trusts leases.Trusts
}

// New returns a lease service with the host plugin (and the floating-IP
// plugin when o.FIPs is set) on d.
func New(d *db.DB, src hostplugin.Source, clock *Clock, o Options) (*leases.Service, *hostplugin.Plugin) {
	hp := hostplugin.New(src, d.DB, hostplugin.Config{Cleaning: o.Cleaning, DefaultBeforeEnd: o.DefaultBeforeEnd, Rules: o.Rules}, clock.Now)
	ps := []plugins.Plugin{hp}
	if o.FIPs != nil {
		ps = append(ps, floatingip.New(o.FIPs))
	}
	reg, err := plugins.NewRegistry(ps...)
	if err != nil {
		panic(err) // one plugin per type above
	}
	svc := leases.New(d, reg, leases.Config{MinutesBeforeEndLease: o.MinutesBeforeEndLease, Filters: o.Filters, Notifier: o.Notifier, Trusts: o.Trusts}, clock.Now, o.EventsChanged)
	if o.Actions != nil {
		o.Actions.w = outbox.NewWorker(d, o.Actions.handlers(), outbox.Config{OnFailure: svc.OutboxFailure, OnSuccess: svc.OutboxSuccess}, clock.Now)
	}
	return svc, hp
}

// Request is a create request for a lease with reservations given as
// JSON-like objects (each with its resource_type).
func Request(name, start, end string, res ...map[string]any) leases.CreateRequest {
	req := leases.CreateRequest{Name: &name, StartDate: &start, EndDate: &end}
	for _, r := range res {
		req.Reservations = append(req.Reservations, Reservation(r))
	}
	return req
}

// Reservation is a reservation request from a JSON-like object.
func Reservation(m map[string]any) leases.ReservationRequest {
	rr := leases.ReservationRequest{Values: plugins.Values{}}
	if rt, ok := m["resource_type"].(string); ok {
		rr.ResourceType = &rt
	}
	for k, v := range m {
		if k != "resource_type" {
			rr.Values[k] = v
		}
	}
	return rr
}

// Update is an update request that changes reservations given as
// JSON-like objects (each with its id).
func Update(res ...map[string]any) leases.UpdateRequest {
	var req leases.UpdateRequest
	for _, m := range res {
		id, _ := m["id"].(string)
		vals := plugins.Values{}
		for k, v := range m {
			if k != "id" {
				vals[k] = v
			}
		}
		req.Reservations = append(req.Reservations, leases.ReservationUpdate{ID: id, Values: vals})
	}
	return req
}

// Str returns a pointer to s (optional request fields).
func Str(s string) *string { return &s }

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

// Res is the reservations of a create request, from JSON-like objects.
func Res(ms ...map[string]any) []leases.ReservationRequest {
	out := make([]leases.ReservationRequest, len(ms))
	for i, m := range ms {
		out[i] = Reservation(m)
	}
	return out
}

// Upd is an update request from a JSON-like body with well-typed values
// (the API's decoding of bad values is tested in handlers/blazar).
func Upd(body map[string]any) leases.UpdateRequest {
	var req leases.UpdateRequest
	for k, dst := range map[string]**string{"name": &req.Name, "start_date": &req.StartDate, "end_date": &req.EndDate, "before_end_date": &req.BeforeEndDate} {
		if v, ok := body[k].(string); ok {
			*dst = &v
		}
	}
	if list, ok := body["reservations"].([]any); ok {
		var ms []map[string]any
		for _, x := range list {
			ms = append(ms, x.(map[string]any))
		}
		req.Reservations = Update(ms...).Reservations
		if req.Reservations == nil {
			req.Reservations = []leases.ReservationUpdate{}
		}
	}
	return req
}
