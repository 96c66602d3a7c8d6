// Package hosts is the physical:host side of Blazar: the registered
// compute hosts (/v1/os-hosts) with their extra capabilities, the
// resource properties naming those capabilities, the virtual:floatingip
// pool (/v1/floatingips), and the host view the lease engine reserves
// from.
//
// # For the lease engine
//
//   - (*Service).Reservable(ctx) returns every reservable host with its
//     fields and extra capabilities. It is served from an in-process copy
//     that is dropped on every local write and re-read whenever the
//     "computehosts" change marker in the database moves (one primary-key
//     read per call), so several processes sharing one database stay
//     correct. The returned hosts are shared: treat them as read-only.
//     While nothing changed, every call returns the very same slice.
//     List (GET /v1/os-hosts) is served from the same copy.
//   - Host.Lookup(key) gives hostquery the value of a host field (id,
//     hypervisor_hostname, service_name, vcpus, memory_mb, local_gb,
//     hypervisor_type, hypervisor_version, cpu_info, availability_zone,
//     status, reservable, trust_id) or, failing that, an extra capability.
//   - ReservableTx(tx, ids), after locking hosts to book them, says
//     which still exist and are reservable (a host deleted since the
//     cached view was taken must not be booked; Delete takes the same
//     resource lock before it checks the host's allocations).
//   - Cost: a cached call is one marker read (~30 µs on SQLite, ~0.25 ms
//     on MariaDB); after a host write the next call re-reads everything
//     (10,000 hosts with 3 capabilities each: ~110 ms on MariaDB, ~130 ms
//     CPU on SQLite), see BenchmarkReservable.
//   - Anything else that changes computehosts or their capabilities
//     (healing marking a host non-reservable, …) must call BumpMarkerTx in
//     its transaction.
//
// The service reads the lease tables itself (models: leases,
// reservations, computehost_reservations, computehost_allocations,
// floatingip_allocations) for GET /v1/os-hosts/allocations and for
// refusing to delete a reserved host or floating IP or to change a
// capability a current or future reservation depends on; those checks
// take the same resource locks (db.LockResources) as the plugins that
// book the resources, so a check and a booking never interleave.
//
// Registering a host creates, in the same transaction, its compute node
// provider and the child provider blazar_<hostname> in the built-in
// Placement (placement.CreateHostProvidersTx); deleting it removes them.
// The compute driver (pkg/compute) is never called inside a transaction:
// it resolves the host and lists its servers before the transaction (its
// refusals are the answer), and the freepool change that follows a
// registration or removal is an outbox action recorded in the same
// transaction (OutboxHandlers carries it out after the commit).
//
// Errors are *errs.Error values (pkg/errs); the Blazar handlers render
// them.
//
// Leasehold extensions to upstream: "reservable" in a host-create or PUT
// body sets the host's flag instead of becoming a capability; PUT refuses
// an "id" key (it would shadow the host's id); field and
// capability sizes are checked (a bad request, not a database error); an
// unknown property in PATCH /os-hosts/properties/{name} is not found; a
// duplicate floating IP is a conflict.
package hosts

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/placement"
)

// ResourceType is the Blazar resource type of hosts.
const ResourceType = "physical:host"

// MaxCapabilityKey is the longest extra capability key Blazar accepts.
const MaxCapabilityKey = 64

// hostsMarker is the change marker of computehosts and their capabilities.
const hostsMarker = "computehosts"

// maxHostname keeps "blazar_<hostname>" within a provider name (200).
const maxHostname = 200 - len(placement.ReservationProviderPrefix)

// Service manages hosts, properties and floating IPs.
type Service struct {
	db     *db.DB
	driver compute.Driver

	loadMu       sync.Mutex // held while (re)loading the cache
	loads        atomic.Int64
	cacheMu      sync.Mutex
	cacheValid   bool
	cacheVersion int64
	cache        []Host // reservable hosts
	cacheAll     []Host

	now func() time.Time
	// healer re-places a failed host's reservations (SetHealer).
	healer HealFunc
	// allocCache is the last allocation listing rendered (allocations.go).
	allocCache allocCache
	// allocFrags are the leases' allocations (allocations_frags.go).
	allocFrags allocFrags
}

// New returns a Service on d using the compute driver drv.
func New(d *db.DB, drv compute.Driver) *Service {
	return &Service{db: d, driver: drv, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// SetClock replaces the clock stamping created_at/updated_at and deciding
// which leases have ended (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// Driver returns the compute driver.
func (s *Service) Driver() compute.Driver { return s.driver }

// BumpMarkerTx records, inside tx, that computehosts or their
// capabilities changed, so every process re-reads its host cache.
func BumpMarkerTx(tx *gorm.DB) error {
	res := tx.Exec("UPDATE leasehold_change_markers SET version = version + 1 WHERE name = ?", hostsMarker)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return tx.Create(&models.ChangeMarker{Name: hostsMarker, Version: 1}).Error
	}
	return nil
}

// write runs fn in one durable write transaction that also bumps the
// hosts marker, and drops the local cache afterwards. db.Write runs fn
// again after a lock conflict on MySQL, so fn must have no effect outside
// the transaction.
func (s *Service) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	defer s.invalidate()
	return s.db.Write(ctx, func(tx *gorm.DB) error {
		if err := fn(tx); err != nil {
			return err
		}
		return BumpMarkerTx(tx)
	}, s.txOptions()...)
}

// txOptions makes each statement of a MySQL write see what committed
// before it (READ COMMITTED, as the lease and placement writes; SQLite's
// transactions are serializable anyway): a property row another writer
// created after this transaction's first read is then found by the read
// that follows the insert that skipped it.
func (s *Service) txOptions() []*sql.TxOptions {
	if s.db.Dialect == db.MySQL {
		return []*sql.TxOptions{{Isolation: sql.LevelReadCommitted}}
	}
	return nil
}

func notFound(id string) *errs.Error {
	return errs.NotFoundf("Object with {'host_id': '%s'} not found", id)
}

// parseID turns an API id into the row id (non-numeric ids cannot exist).
func parseID(id string) (int64, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
		return 0, false
	}
	return n, true
}
