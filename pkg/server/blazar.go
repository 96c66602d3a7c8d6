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

	hp := hostplugin.New(leases.NewHostSource(hsvc), s.db.DB, leases.NewHostActions(drv), hostplugin.Config{
		Cleaning:         time.Duration(bc.HostCleaningMinutes()) * time.Minute,
		DefaultBeforeEnd: bc.PhysicalHost.BeforeEnd,
		CheckHosts:       hosts.ReservableTx,
	}, nil)
	fp := floatingip.New(leases.NewFIPSource(hsvc))
	lsvc := leases.New(s.db, []plugins.Plugin{hp, fp}, leases.Config{
		MinutesBeforeEndLease: bc.Manager.MinutesBeforeEndLease,
		Filters:               leases.NewFilters(bc.Enforcement, &http.Client{Timeout: 30 * time.Second}),
	}, nil)

	mgr := events.New(s.db, lsvc, events.Config{Poll: poll, ClaimTimeout: claim, MaxRetries: bc.Manager.EventMaxRetries}, nil)
	lsvc.OnEventsChanged(mgr.Notify)
	s.AddBackground(mgr.Run)
	blazarOf.Store(s, &Blazar{Hosts: hsvc, Leases: lsvc, Events: mgr, HostPlg: hp})

	rt := blazarapi.NewRouter()
	blazarapi.RegisterLeases(rt, lsvc)
	blazarapi.RegisterHosts(rt, hsvc)
	blazarapi.RegisterFloatingIPs(rt, hsvc)
	blazarapi.RegisterHosts(rt, hsvc)
	blazarapi.RegisterFloatingIPs(rt, hsvc)
	return rt.Handler(blazarapi.NoAuth{}), nil
}
