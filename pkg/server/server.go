// Package server is Leasehold's composition root: New builds every
// service from the loaded configuration, in one function, and Run serves
// them. Nothing else wires services together: no setters, no package
// state keyed by a handle, every route registered once.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/blazar/scheduler"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/nova"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/metrics"
	"github.com/leasehold/leasehold/pkg/notify"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/external"
	"github.com/leasehold/leasehold/pkg/policy"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/instance"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	placementapi "github.com/leasehold/leasehold/handlers/placement"
)

// Version is set at build time with -ldflags "-X …/pkg/server.Version=…".
var Version = "0.1.0-dev"

// Server is a built Leasehold: its services and HTTP handlers.
type Server struct {
	cfg       *config.Config
	db        *db.DB
	main      http.Handler
	placement http.Handler
	// metrics serves /metrics on the separate [metrics] listen listener
	// (nil when metrics are off).
	metrics http.Handler
	// background are long-running workers (the lease event manager, the
	// outbox worker) run for the life of the server and stopped before
	// the database closes.
	background []func(ctx context.Context)
	// Ready is closed when the listeners accept connections; Addrs then
	// holds the bound addresses (main first).
	Ready chan struct{}
	Addrs []string
	// MetricsAddr is the bound address of the [metrics] listen listener
	// ("" when there is none), set with Addrs.
	MetricsAddr string

	// Services, for tests and tools.
	Hosts  *hosts.Service
	Leases *leases.Service
	Events *events.Manager
	Outbox *outbox.Worker
	// Notifier sends the usage notifications (nil when they are off).
	Notifier *notify.Notifier
	// Mover carries out the instance moves of BEST-EFFORT leases.
	Mover *hostplugin.Mover
	// Scheduler answers Nova's LeaseholdFilter (POST /v1/scheduler/filter).
	Scheduler *scheduler.Service
	// Ownership is the ownership policy extension (/v1/ownership).
	Ownership *ownership.Service
	// hostPlugin explains ownership requests (POST /v1/ownership/explain).
	hostPlugin *hostplugin.Plugin
}

// New opens the database (migrating unless disabled) and builds every
// service and handler from cfg.
func New(ctx context.Context, cfg *config.Config) (s *Server, err error) {
	bc := cfg.Blazar
	if err := bc.Normalize(); err != nil {
		return nil, err
	}
	evCfg, err := eventsConfig(bc)
	if err != nil {
		return nil, err
	}
	// Identity first: a keystone configuration missing options refuses
	// to start before anything is opened. One validator (one token
	// cache) serves both APIs.
	var v1Auth blazarapi.Authenticator = blazarapi.NoAuth{}
	var placementOpts []placementapi.Option
	var ks *identity.Keystone
	if cfg.Auth == config.AuthKeystone {
		ks, err = identity.NewKeystone(cfg.KeystoneAuthtoken, identity.Options{})
		if err != nil {
			return nil, err
		}
		v1Auth = ks
		placementOpts = append(placementOpts, placementapi.WithAuthenticator(ks))
	} else {
		warnNoAuthExposed(cfg)
	}

	// Policy: one enforcer per API from [oslo_policy] and the policy
	// file, before anything is opened (a broken file stops start-up).
	blazarPolicy, placementPolicy, metricsPolicy, err := buildPolicy(cfg)
	if err != nil {
		return nil, err
	}
	d, err := db.Open(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	if cfg.AutoMigrate {
		if err := d.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	s = &Server{cfg: cfg, db: d, Ready: make(chan struct{})}

	// Usage notifications ([oslo_messaging_notifications]): nil when
	// off. A bad driver or transport_url stops start-up; the broker is
	// not contacted until the first notification.
	mc := cfg.Messaging
	s.Notifier, err = notify.New(notify.Config{
		Drivers: mc.OsloMessagingNotifications.Driver, Topics: mc.OsloMessagingNotifications.Topics,
		TransportURL: mc.NotificationTransportURL(), Exchange: mc.ControlExchange,
		Durable: mc.OsloMessagingRabbit.AMQPDurableQueues, PublisherID: mc.Notifications.PublisherID,
	})
	if err != nil {
		return nil, err
	}

	// Metrics: one registry, fed by the services built below (nil when
	// [metrics] serves them nowhere: nothing is measured then).
	met, err := buildMetrics(cfg.Metrics, d)
	if err != nil {
		return nil, err
	}
	instrument := func(api, prefix string, h http.Handler) http.Handler { return h }
	if met != nil {
		evCfg.ObserveLag = met.ObserveEventLag
		if ks != nil {
			if err := met.AddTokenCache(func() metrics.TokenCacheStats {
				st := ks.CacheStats()
				return metrics.TokenCacheStats{Hits: st.Hits, Misses: st.Misses, KeystoneCalls: st.KeystoneCalls, Entries: st.Entries}
			}); err != nil {
				return nil, err
			}
		}
		instrument = func(api, prefix string, h http.Handler) http.Handler {
			return httpx.Instrument(api, prefix, met.ObserveRequest, nil)(h)
		}
	}

	// Placement.
	pcfg := placement.Config{
		IncompleteConsumerProjectID: cfg.Placement.IncompleteConsumerProjectID,
		IncompleteConsumerUserID:    cfg.Placement.IncompleteConsumerUserID,
	}
	if met != nil {
		pcfg.ObserveCandidates = met.ObserveCandidates
	}
	psvc := placement.NewService(d, pcfg)
	placementOpts = append(placementOpts, placementapi.WithPolicy(placementapi.PolicyFor(placementPolicy)))
	papi := placementapi.New(psvc, cfg.Placement, cfg.CORS, placementOpts...)

	// The compute service the reserved hosts run in.
	drv, err := buildCompute(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// An external Placement for instance reservations ([placement]
	// keystoneauth options); nil keeps them in the built-in one.
	extPlacement, err := buildExternalPlacement(ctx, cfg)
	if err != nil {
		return nil, err
	}

	// Blazar: hosts, the reservation types, leases and their events.
	s.Hosts = hosts.New(d, drv)
	s.Ownership = ownership.New(d, s.Hosts, nil)
	s.Ownership.SetRedistributeInterval(time.Duration(cfg.Ownership.RedistributeInterval) * time.Second)
	if err := s.Ownership.Refresh(ctx); err != nil {
		// Ownership stays off until a refresh succeeds (a schema without
		// migration 0010 must not stop the rest of the service).
		slog.WarnContext(ctx, "ownership: build the view", "err", err)
	}
	tagRules := hostRules(bc.PhysicalHost)
	// BEST-EFFORT leases clear hosts by moving other projects' instances:
	// Placement consumers rewritten in standalone mode, live migrations
	// with a driver that has them.
	migrator, canMigrate := any(drv).(hostplugin.LiveMigrator)
	canMigrate = canMigrate && drv.Name() != "standalone"
	// A compute service that lists its own hosts and servers (Nova) is
	// where the host plugin reads who runs what, not this Placement.
	var computeView hostplugin.ComputeView
	if cv, ok := any(drv).(hostplugin.ComputeView); ok && drv.Name() != "standalone" {
		computeView = cv
	}
	// Instance reservations: private flavors only with a real compute
	// service (standalone has no flavors; flavor_id is still the
	// reservation id).
	inst := instance.New(s.Hosts, instance.Config{
		Cleaning:   time.Duration(bc.HostCleaningMinutes()) * time.Minute,
		Rules:      tagRules,
		CheckHosts: hosts.ReservableTx,
		Flavors:    drv.Name() != "standalone",
		DB:         d,
		External:   extPlacement,
		Ownership:  s.Ownership,

		WholeReservePercent: bc.VirtualInstance.WholeHostReservePercent,
		Sizes:               policySizes(bc.VirtualInstance.Sizes),
	})
	// flavor:instance needs the compute service's flavors.
	var flavorPlugin *instance.FlavorPlugin
	if lookup, ok := any(drv).(instance.FlavorLookup); ok {
		flavorPlugin = instance.NewFlavor(inst, lookup)
	}
	// An owner's reclaim shortens borrower leases of instance
	// reservations through the instance plugins' own updates.
	shorteners := []plugins.Plugin{inst}
	if flavorPlugin != nil {
		shorteners = append(shorteners, flavorPlugin)
	}
	hostPlugin := hostplugin.New(s.Hosts, d.DB, hostplugin.Config{
		Cleaning:         time.Duration(bc.HostCleaningMinutes()) * time.Minute,
		DefaultBeforeEnd: bc.PhysicalHost.BeforeEnd,
		CheckHosts:       hosts.ReservableTx,
		Rules:            tagRules,
		ReservePercent:   bc.PhysicalHost.BigHostReservePercent,
		ClearHosts:       drv.Name() == "standalone" || canMigrate,
		Driver:           drv.Name(),
		Compute:          computeView,
		Ownership:        s.Ownership,
		Shorteners:       shorteners,
	}, nil)
	s.hostPlugin = hostPlugin
	// An owner's instance request reclaims through the host plugin's
	// reclaim, which shortens borrowers through the instance plugins.
	inst.SetReclaimer(hostPlugin)
	types := []plugins.Plugin{
		hostPlugin,
		floatingip.New(s.Hosts),
		inst,
	}
	if flavorPlugin != nil {
		types = append(types, flavorPlugin)
	}
	reg, err := plugins.NewRegistry(types...)
	if err != nil {
		return nil, err
	}
	s.Leases = leases.New(d, reg, leases.Config{
		MinutesBeforeEndLease: bc.Manager.MinutesBeforeEndLease,
		Filters:               leases.NewFilters(bc.Enforcement, &http.Client{Timeout: 30 * time.Second}),
		Notifier:              s.Notifier,
		Trusts:                leaseTrusts(ks),
	}, nil, func() { s.Events.Notify(); s.Outbox.Notify() })
	s.Events = events.New(d, s.Leases, evCfg, nil)
	s.Scheduler = scheduler.New(d, s.Hosts, nil)
	// A host made non-reservable or deleted by force: its reservations
	// move to equivalent free hosts.
	s.Hosts.SetHealer(func(ctx context.Context, id string, lookup func(string) (string, bool)) error {
		_, err := s.Leases.HealHost(ctx, id, lookup)
		return err
	})

	// External calls, after the commits that decided them.
	handlers := hostplugin.OutboxHandlers(drv)
	maps.Copy(handlers, instance.OutboxHandlers(drv, d.DB))
	if extPlacement != nil {
		maps.Copy(handlers, instance.ExternalHandlers(extPlacement))
	}
	maps.Copy(handlers, hosts.OutboxHandlers(drv))
	maps.Copy(handlers, s.Notifier.Handlers())
	if ks != nil {
		// Lease trusts: revoked at the lease's end; the server groups of
		// instance reservations are made with them (in the lease's
		// project).
		maps.Copy(handlers, leases.TrustHandlers(ks))
		if nd, ok := drv.(*nova.Driver); ok {
			nd.SetTrustLogin(ks.TrustProvider)
		}
	}
	s.Mover = &hostplugin.Mover{Placement: psvc, Wanted: s.Leases.InProgress}
	if canMigrate {
		s.Mover.Migrator = migrator
	}
	maps.Copy(handlers, s.Mover.Handlers())
	obCfg := outbox.Config{OnFailure: s.Leases.OutboxFailure, OnSuccess: s.Leases.OutboxSuccess,
		// A notification waits out a message-bus outage of any length,
		// and the external Placement clean-up of an ended lease its
		// servers' deletion and a Placement outage.
		// A trust's revocation waits out a Keystone outage too.
		KeepRetrying: func(kind string) bool {
			return kind == notify.KindLease || kind == leases.KindDeleteTrust || instance.ExternalKeepRetrying(kind)
		},
		// A dead process's outbox claims are taken back after the same
		// [events] claim_timeout as its event claims.
		ClaimTimeout: evCfg.ClaimTimeout}
	if met != nil {
		obCfg.OnRun = met.ObserveOutboxRun
	}
	s.Outbox = outbox.NewWorker(d, handlers, obCfg, nil)
	s.background = append(s.background, s.Events.Run, s.Outbox.Run, func(ctx context.Context) { ensureFreePool(ctx, drv) },
		// Other replicas' plan writes and host changes reach the view;
		// host changes and the redistribution interval recompute it.
		func(ctx context.Context) { s.Ownership.RunRefresh(ctx, 10*time.Second) })
	if cfg.Compute.Driver == config.ComputeNova && cfg.Nova.HostStatusInterval > 0 {
		every := time.Duration(cfg.Nova.HostStatusInterval) * time.Second
		s.background = append(s.background, func(ctx context.Context) { s.Hosts.RunComputeStatusSync(ctx, every) })
	}

	// HTTP. Each API's requests are measured by route pattern
	// (instrument); /healthcheck and /metrics are not.
	rt := blazarapi.NewRouterWithPolicy(blazarPolicy)
	blazarapi.RegisterLeases(rt, s.Leases)
	blazarapi.RegisterEarliest(rt, s.Leases)
	blazarapi.RegisterHosts(rt, s.Hosts)
	blazarapi.RegisterFloatingIPs(rt, s.Hosts)
	blazarapi.RegisterOwnership(rt, s.Ownership, s.hostPlugin)
	blazarapi.RegisterScheduler(rt, s.Scheduler)
	v1 := instrument("blazar", "/v1", http.StripPrefix("/v1", rt.Handler(v1Auth)))
	mounted := instrument("placement", "", papi.Mount("/placement"))
	blazarRoot := instrument("blazar", "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/", "/versions":
			httpx.SetRoute(r, r.URL.Path) // one of two constants
			blazarapi.Versions(w, r)
		default:
			blazarapi.NotFound(w, r)
		}
	}))
	var metricsMain http.Handler
	if met != nil {
		s.metrics = met.Handler()
		if cfg.Metrics.OnMain {
			metricsMain = protectMetrics(met.Handler(), v1Auth, metricsPolicy)
		}
	}
	s.placement = wrap(instrument("placement", "", papi.Handler()))
	s.main = wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/healthcheck":
			s.healthcheck(w, r)
		case p == "/metrics" && metricsMain != nil:
			metricsMain.ServeHTTP(w, r)
		case p == "/placement" || strings.HasPrefix(p, "/placement/"):
			mounted.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/v1/"):
			v1.ServeHTTP(w, r)
		default:
			blazarRoot.ServeHTTP(w, r)
		}
	}))
	return s, nil
}

// buildCompute builds the compute driver [compute] driver names: for
// nova, after checking [nova], with the one compute client every Nova
// call goes through (the Keystone login is made here, bounded by [nova]
// timeout: a wrong password or a catalog without Nova stops start-up).
func buildCompute(ctx context.Context, cfg *config.Config) (compute.Driver, error) {
	if cfg.Compute.Driver != config.ComputeNova {
		return standalone.New(slog.Default()), nil
	}
	nc := cfg.Nova
	if err := nc.Check(); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 2*nc.HTTPTimeout())
	defer cancel()
	client, err := nova.NewClient(lctx, nc)
	if err != nil {
		return nil, err
	}
	slog.InfoContext(ctx, "compute driver nova", "endpoint", client.Endpoint, "microversion", client.Microversion, "freepool", nc.AggregateFreepoolName, "az_aware", nc.AZAware)
	return nova.New(client, nova.Config{
		FreePoolName:        nc.AggregateFreepoolName,
		OwnerKey:            nc.BlazarOwner,
		AZPrefix:            nc.BlazarAZPrefix,
		AZAware:             nc.AZAware,
		ServerDeleteTimeout: time.Duration(nc.ServerDeleteTimeout) * time.Second,
	}, slog.Default()), nil
}

// buildExternalPlacement logs in to Keystone as [placement]'s user and
// returns the external Placement client when [placement] names one (nil,
// nil otherwise): missing options, a wrong password or a catalog without
// Placement stop start-up. Placement itself is not called here: an
// outage of it delays the outbox actions, not the start.
func buildExternalPlacement(ctx context.Context, cfg *config.Config) (instance.ExternalPlacement, error) {
	pc := cfg.Placement.ExternalPlacement
	if !pc.Enabled() {
		return nil, nil
	}
	if err := pc.Check(); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 2*pc.HTTPTimeout())
	defer cancel()
	client, err := external.NewClient(lctx, pc)
	if err != nil {
		return nil, err
	}
	slog.InfoContext(ctx, "instance reservations on an external Placement", "endpoint", client.Endpoint(), "microversion", external.Microversion)
	return client, nil
}

// leaseTrusts is the leases' trust maker: Keystone's in keystone mode,
// none in noauth (a nil *identity.Keystone must not become a non-nil
// interface).
func leaseTrusts(ks *identity.Keystone) leases.Trusts {
	if ks == nil {
		return nil
	}
	return ks
}

// ensureFreePool creates the freepool aggregate when it is missing,
// trying again (every 5 s, then up to every minute) while the compute
// service cannot be reached, until it is done or ctx ends. The pool
// actions create it too, so nothing waits for this.
func ensureFreePool(ctx context.Context, drv compute.Driver) {
	wait := 5 * time.Second
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := drv.EnsureFreePool(cctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		slog.WarnContext(ctx, "could not make sure the freepool aggregate exists; trying again", "driver", drv.Name(), "in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

// hostRules are the allocator's tag rules for host reservations: the
// configured failure-domain and migration-class keys (host fields or
// extra capabilities) as Ganeti-style tag prefixes.
// Ganeti-style cluster_tags (htools:nlocation, htools:migration,
// htools:allowmigration) and the named keys add up: one set of rules
// serves host choice, healing and the BEST-EFFORT moves.
func hostRules(ph config.PhysicalHost) *allocator.TagRules {
	r := allocator.ParseClusterTags(ph.ClusterTags)
	r.LocationPrefixes = append(r.LocationPrefixes, ph.FailureDomains...)
	r.MigrationPrefixes = append(r.MigrationPrefixes, ph.MigrationClasses...)
	for _, a := range ph.AllowMigration {
		from, to, _ := strings.Cut(a, "::") // checked by config.Blazar.Normalize
		r.AllowMigration = append(r.AllowMigration, allocator.MigrationRule{From: from, To: to})
	}
	return &r
}

// buildMetrics builds the metrics registry on d's pool when [metrics]
// serves it somewhere, nil otherwise.
func buildMetrics(mc config.Metrics, d *db.DB) (*metrics.Metrics, error) {
	if !mc.Enabled() {
		return nil, nil
	}
	sqlDB, err := d.DB.DB()
	if err != nil {
		return nil, err
	}
	return metrics.New(metrics.Config{DB: sqlDB, QueryTimeout: mc.QueryTimeout})
}

// protectMetrics serves h to callers that authn identifies and enf's
// leasehold:metrics:get admits: 401 without an identity, 403 when the
// policy refuses.
func protectMetrics(h http.Handler, authn blazarapi.Authenticator, enf *policy.Enforcer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := authn.Authenticate(r)
		if errs.Is(err, errs.Unavailable) {
			http.Error(w, "The request could not be authenticated now.", http.StatusServiceUnavailable)
			return
		}
		if err != nil || id == nil {
			challenge := ""
			if c, ok := authn.(identity.Challenger); ok {
				challenge = c.Challenge()
			}
			httpx.WriteUnauthorized(w, challenge)
			return
		}
		if !enf.Allowed(metrics.RuleGet, blazarapi.Credentials(id), nil) {
			http.Error(w, "Policy doesn't allow "+metrics.RuleGet+" to be performed.", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// buildPolicy loads [oslo_policy] policy_file (a malformed file or an
// undefined rule reference stops start-up) and builds the Blazar and
// Placement enforcers, and the one for /metrics on the main listener
// (Blazar's rules and settings plus leasehold:metrics:get).
func buildPolicy(cfg *config.Config) (blazarEnf, placementEnf, metricsEnf *policy.Enforcer, err error) {
	file, err := policy.LoadFile(cfg.OsloPolicy.PolicyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	opts := policy.Options{
		EnforceNewDefaults: cfg.OsloPolicy.EnforceNewDefaults,
		EnforceScope:       cfg.OsloPolicy.EnforceScope,
		File:               file,
	}
	blazarEnf, err = blazarapi.NewEnforcer(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	placementEnf, err = placementapi.NewEnforcer(cfg.Placement.PolicyMode, policy.Options{File: file})
	if err != nil {
		return nil, nil, nil, err
	}
	metricsEnf, err = policy.New(append(policy.BlazarRules(), metrics.PolicyRule()), blazarapi.PolicyOptions(opts))
	if err != nil {
		return nil, nil, nil, err
	}
	return blazarEnf, placementEnf, metricsEnf, nil
}

// warnNoAuthExposed logs a warning for every listener of a noauth server
// that other machines can reach: there, anyone can act as admin.
func warnNoAuthExposed(cfg *config.Config) {
	for _, addr := range []string{cfg.Listen, cfg.PlacementListen} {
		if addr != "" && !identity.IsLoopback(addr) {
			slog.Warn("auth_strategy is noauth on a listener other machines can reach: anyone sending X-Auth-Token: admin is an admin; use auth_strategy = keystone", "listen", addr)
		}
	}
}

// eventsConfig is the lease event manager's configuration.
func eventsConfig(bc config.Blazar) (events.Config, error) {
	poll, err := time.ParseDuration(bc.Events.PollInterval)
	if err != nil {
		return events.Config{}, fmt.Errorf("config: events.poll_interval: %w", err)
	}
	if poll <= 0 || poll > time.Second {
		poll = time.Second // events made by another process are seen within 1s
	}
	claim, err := time.ParseDuration(bc.Events.ClaimTimeout)
	if err != nil {
		return events.Config{}, fmt.Errorf("config: events.claim_timeout: %w", err)
	}
	return events.Config{Poll: poll, ClaimTimeout: claim, MaxRetries: bc.Manager.EventMaxRetries}, nil
}

// wrap adds the outer middleware every listener shares.
func wrap(h http.Handler) http.Handler { return httpx.RequestID(httpx.AccessLog(h)) }

// Handler returns the main listener's handler (for tests).
func (s *Server) Handler() http.Handler { return s.main }

// PlacementHandler returns Placement served at the root (for tests).
func (s *Server) PlacementHandler() http.Handler { return s.placement }

// DB returns the open database.
func (s *Server) DB() *db.DB { return s.db }

// policySizes are [virtual:instance] policy_sizes as the allocator's
// sizes (nil when none are configured: the sizes in use count).
func policySizes(in []config.PolicySize) []allocator.SlotSize {
	var out []allocator.SlotSize
	for _, s := range in {
		out = append(out, allocator.SlotSize{VCPUs: s.VCPUs, MemoryMB: s.MemoryMB, DiskGB: s.DiskGB})
	}
	return out
}
