package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// Blazar is the wired Blazar side (exposed for tests).
type Blazar struct {
	Hosts   *hosts.Service
	Leases  *leases.Service
	Events  *events.Manager
	HostPlg *hostplugin.Plugin
}

// blazarOf maps a Server to its Blazar services (kept here so that
// server.go needs no Blazar field).
var blazarOf sync.Map

// BlazarOf returns the Blazar services of s (tests, tools).
func BlazarOf(s *Server) *Blazar {
	b, _ := blazarOf.Load(s)
	bz, _ := b.(*Blazar)
	return bz
}

// setupBlazar builds the Blazar v1 API (routes registered by the resource
// packages) and the lease event manager, run as a background worker.
func (s *Server) setupBlazar(ctx context.Context, psvc *placement.Service) (http.Handler, error) {
	_ = psvc
	bc := s.cfg.Blazar
	if err := bc.Normalize(); err != nil {
		return nil, err
	}
	poll, err := time.ParseDuration(bc.Events.PollInterval)
	if err != nil {
		return nil, fmt.Errorf("config: events.poll_interval: %w", err)
	}
	if poll <= 0 || poll > time.Second {
		poll = time.Second // events made by another process are seen within 1s
	}
	claim, err := time.ParseDuration(bc.Events.ClaimTimeout)
	if err != nil {
		return nil, fmt.Errorf("config: events.claim_timeout: %w", err)
	}
	drv := standalone.New(slog.Default())
	hsvc := hosts.New(s.db, drv)

	hp := hostplugin.New(&hostSource{svc: hsvc}, s.db.DB, &hostActions{svc: hsvc, drv: drv}, hostplugin.Config{
		Cleaning:         time.Duration(bc.HostCleaningMinutes()) * time.Minute,
		DefaultBeforeEnd: bc.PhysicalHost.BeforeEnd,
	}, nil)
	fp := floatingip.New(&fipSource{svc: hsvc})
	lsvc := leases.New(s.db, []plugins.Plugin{hp, fp}, leases.Config{
		MinutesBeforeEndLease: bc.Manager.MinutesBeforeEndLease,
		Filters:               leases.NewFilters(bc.Enforcement, &http.Client{Timeout: 30 * time.Second}),
	}, nil)
	api := &leases.HostsAPI{DB: s.db}
	hsvc.SetAllocationLister(api)
	hsvc.SetReservationChecker(api)

	mgr := events.New(s.db, lsvc, events.Config{Poll: poll, ClaimTimeout: claim, MaxRetries: bc.Manager.EventMaxRetries}, nil)
	lsvc.OnEventsChanged(mgr.Notify)
	s.AddBackground(mgr.Run)
	blazarOf.Store(s, &Blazar{Hosts: hsvc, Leases: lsvc, Events: mgr, HostPlg: hp})

	rt := blazarapi.NewRouter()
	blazarapi.RegisterLeases(rt, lsvc)
	blazarapi.RegisterHosts(rt, hsvc)
	blazarapi.RegisterFloatingIPs(rt, hsvc)
	return rt.Handler(blazarapi.NoAuth{}), nil
}

// hostSource adapts hosts.Service to the host plugin. hosts.Service
// returns the very same slice while nothing changed; the conversion is
// cached on it so the plugin's view sees an unchanged slice too.
type hostSource struct {
	svc  *hosts.Service
	mu   sync.Mutex
	last []hosts.Host
	out  []hostplugin.Host
}

func (h *hostSource) Reservable(ctx context.Context) ([]hostplugin.Host, error) {
	hs, err := h.svc.Reservable(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(hs) == len(h.last) && (len(hs) == 0 || &hs[0] == &h.last[0]) && h.out != nil {
		return h.out, nil
	}
	out := make([]hostplugin.Host, len(hs))
	for i := range hs {
		hh := &hs[i]
		out[i] = hostplugin.Host{ID: hh.ID, Name: hh.HypervisorHostname, Lookup: hh.Lookup}
	}
	h.last, h.out = hs, out
	return out, nil
}

// hostActions moves reserved hosts between the freepool and the
// reservation's aggregate through the compute driver.
type hostActions struct {
	svc *hosts.Service
	drv compute.Driver
}

func (a *hostActions) names(ctx context.Context, ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		h, err := a.svc.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", id, err)
		}
		out = append(out, h.ServiceName)
	}
	return out, nil
}

func (a *hostActions) Start(ctx context.Context, reservationID, projectID string, hostIDs []string) error {
	names, err := a.names(ctx, hostIDs)
	if err != nil || len(names) == 0 {
		return err
	}
	if err := a.drv.RemoveFromFreePool(ctx, names); err != nil {
		return err
	}
	agg := compute.ReservationAggregate{ReservationID: reservationID, ProjectID: projectID, AvailabilityZone: "blazar_" + reservationID}
	if err := a.drv.AddToReservation(ctx, agg, names); err != nil {
		_ = a.drv.AddToFreePool(ctx, names)
		return err
	}
	return nil
}

func (a *hostActions) End(ctx context.Context, reservationID string, hostIDs []string) error {
	names, err := a.names(ctx, hostIDs)
	if err != nil || len(names) == 0 {
		return err
	}
	if err := a.drv.CleanupServers(ctx, names); err != nil {
		return err
	}
	if err := a.drv.RemoveFromReservation(ctx, compute.ReservationAggregate{ReservationID: reservationID}, names); err != nil {
		return err
	}
	return a.drv.AddToFreePool(ctx, names)
}

func (a *hostActions) Snapshot(ctx context.Context, reservationID string, hostIDs []string) error {
	slog.InfoContext(ctx, "before_end snapshot: the compute driver takes no snapshots", "driver", a.drv.Name(), "reservation", reservationID, "hosts", hostIDs)
	return nil
}

// fipSource adapts the floating-IP pool of hosts.Service.
type fipSource struct{ svc *hosts.Service }

func (f *fipSource) FloatingIPs(ctx context.Context) ([]floatingip.FIP, error) {
	fs, err := f.svc.ListFloatingIPs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]floatingip.FIP, len(fs))
	for i, x := range fs {
		out[i] = floatingip.FIP{ID: x.ID, NetworkID: x.FloatingNetworkID, Address: x.FloatingIPAddress, Reservable: x.Reservable}
	}
	return out, nil
}
