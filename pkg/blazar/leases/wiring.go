package leases

import (
	"context"
	"log/slog"
	"sync"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// hostSource adapts hosts.Service to the host plugin. hosts.Service
// returns the very same slice while nothing changed; the conversion is
// cached on it so the plugin's view sees an unchanged slice too.
type hostSource struct {
	svc  *hosts.Service
	mu   sync.Mutex
	last []hosts.Host
	out  []hostplugin.Host
}

// NewHostSource adapts hosts.Service to the physical:host plugin (with
// property privacy).
func NewHostSource(svc *hosts.Service) hostplugin.Source { return &hostSource{svc: svc} }

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

// PrivateProperties implements hostplugin.PrivacySource.
func (h *hostSource) PrivateProperties(ctx context.Context) (map[string]bool, error) {
	ps, err := h.svc.Properties(ctx, true)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range ps {
		if p.Private {
			out[p.Name] = true
		}
	}
	return out, nil
}

// hostActions moves reserved hosts between the freepool and the
// reservation's aggregate through the compute driver.
type hostActions struct {
	drv compute.Driver
}

// NewHostActions returns the host plugin's compute actions over drv.
func NewHostActions(drv compute.Driver) hostplugin.Actions {
	return &hostActions{drv: drv}
}

func (a *hostActions) Start(ctx context.Context, reservationID, projectID string, names []string) error {
	if len(names) == 0 {
		return nil
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

func (a *hostActions) End(ctx context.Context, reservationID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := a.drv.CleanupServers(ctx, names); err != nil {
		return err
	}
	if err := a.drv.RemoveFromReservation(ctx, compute.ReservationAggregate{ReservationID: reservationID}, names); err != nil {
		return err
	}
	return a.drv.AddToFreePool(ctx, names)
}

func (a *hostActions) Snapshot(ctx context.Context, reservationID string, names []string) error {
	slog.InfoContext(ctx, "before_end snapshot: the compute driver takes no snapshots", "driver", a.drv.Name(), "reservation", reservationID, "hosts", names)
	return nil
}

// fipSource adapts the floating-IP pool of hosts.Service.
type fipSource struct{ svc *hosts.Service }

// NewFIPSource adapts the floating-IP pool of hosts.Service to the
// virtual:floatingip plugin.
func NewFIPSource(svc *hosts.Service) floatingip.Source { return &fipSource{svc: svc} }

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
