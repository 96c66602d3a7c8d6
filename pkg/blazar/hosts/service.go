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
//     cached view was taken must not be booked; Delete holds the same
//     resource lock through ReservationChecker.HostReserved).
//   - Cost: a cached call is one marker read (~30 µs on SQLite, ~0.25 ms
//     on MariaDB); after a host write the next call re-reads everything
//     (10,000 hosts with 3 capabilities each: ~110 ms on MariaDB, ~130 ms
//     CPU on SQLite), see BenchmarkReservable.
//   - Anything else that changes computehosts or their capabilities
//     (healing marking a host non-reservable, …) must call BumpMarkerTx in
//     its transaction.
//   - The server wiring sets an AllocationLister (GET
//     /v1/os-hosts/allocations data) and a ReservationChecker (refusing
//     to delete reserved hosts or floating IPs, or to change a capability
//     a reservation depends on) with SetAllocationLister and
//     SetReservationChecker; until then allocations are empty and nothing
//     counts as reserved.
//
// Registering a host creates, in the same transaction, its compute node
// provider and the child provider blazar_<hostname> in the built-in
// Placement (placement.CreateHostProvidersTx); deleting it removes them.
// The compute driver (pkg/compute) resolves the host and keeps Nova's
// freepool in step; its calls run inside the transaction, so a driver
// failure rolls the registration back.
//
// Leasehold extensions to upstream: "reservable" in a host-create or PUT
// body sets the host's flag instead of becoming a capability; PUT refuses
// an "id" key (it would shadow the host's id); field and
// capability sizes are checked (400, not a database error); an unknown
// property in PATCH /os-hosts/properties/{name} is a 404; a duplicate
// floating IP is a 409.
package hosts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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

// Error is a domain error carrying its HTTP status (the Blazar handlers
// render it as {"error_code","error_message","error_name"}).
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// HTTPStatus implements the handlers' StatusError.
func (e *Error) HTTPStatus() int { return e.Status }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// HostReservation is one reservation holding a host, with its lease's
// window.
type HostReservation struct {
	ID        string
	LeaseID   string
	StartDate time.Time
	EndDate   time.Time
}

// AllocationFilter narrows allocations to a lease or a reservation; with
// neither set only leases ending at or after now are included.
type AllocationFilter struct {
	LeaseID       string
	ReservationID string
}

// AllocationLister gives the reservations holding each host, keyed by the
// host's API id. The lease engine implements it.
type AllocationLister interface {
	HostAllocations(ctx context.Context, f AllocationFilter) (map[string][]HostReservation, error)
}

// ReservationChecker answers, inside the caller's transaction, whether a
// resource is held by a current or future reservation. The lease engine
// implements it.
type ReservationChecker interface {
	// HostReserved reports whether the host (API id) has any allocation.
	HostReserved(ctx context.Context, tx *gorm.DB, hostID string) (bool, error)
	// CapabilityInUse reports whether a current or future reservation on
	// the host names the capability key in its requirements.
	CapabilityInUse(ctx context.Context, tx *gorm.DB, hostID, key string) (bool, error)
	// FloatingIPReserved reports whether the floating IP has any
	// allocation.
	FloatingIPReserved(ctx context.Context, tx *gorm.DB, fipID string) (bool, error)
}

// Host is a registered host as the API shows it.
type Host struct {
	ID                 string
	HypervisorHostname string
	ServiceName        string
	VCPUs              int64
	MemoryMB           int64
	LocalGB            int64
	HypervisorType     string
	HypervisorVersion  int64
	CPUInfo            string
	AvailabilityZone   string
	Status             *string
	Reservable         bool
	TrustID            *string
	CreatedAt          time.Time
	UpdatedAt          *time.Time
	// ExtraCapabilities maps capability name to value.
	ExtraCapabilities map[string]string
	// ComputeProviderUUID and ReservationProviderUUID are the host's
	// Placement providers (compute node, blazar_<hostname> child).
	ComputeProviderUUID     string
	ReservationProviderUUID string
}

// Lookup returns the value of a host field, or else of an extra
// capability, as hostquery compares it. A NULL field (status, trust_id)
// is absent.
func (h *Host) Lookup(key string) (string, bool) {
	switch key {
	case "id":
		return h.ID, true
	case "hypervisor_hostname":
		return h.HypervisorHostname, true
	case "service_name":
		return h.ServiceName, true
	case "vcpus":
		return strconv.FormatInt(h.VCPUs, 10), true
	case "memory_mb":
		return strconv.FormatInt(h.MemoryMB, 10), true
	case "local_gb":
		return strconv.FormatInt(h.LocalGB, 10), true
	case "hypervisor_type":
		return h.HypervisorType, true
	case "hypervisor_version":
		return strconv.FormatInt(h.HypervisorVersion, 10), true
	case "cpu_info":
		return h.CPUInfo, true
	case "availability_zone":
		return h.AvailabilityZone, true
	case "reservable":
		return strconv.FormatBool(h.Reservable), true
	case "status":
		if h.Status == nil {
			return "", false
		}
		return *h.Status, true
	case "trust_id":
		if h.TrustID == nil {
			return "", false
		}
		return *h.TrustID, true
	}
	v, ok := h.ExtraCapabilities[key]
	return v, ok
}

// Service manages hosts, properties and floating IPs.
type Service struct {
	db     *db.DB
	driver compute.Driver

	mu      sync.RWMutex
	alloc   AllocationLister
	checker ReservationChecker

	loadMu       sync.Mutex // held while (re)loading the cache
	loads        atomic.Int64
	cacheMu      sync.Mutex
	cacheValid   bool
	cacheVersion int64
	cache        []Host // reservable hosts
	cacheAll     []Host

	now func() time.Time
}

// New returns a Service on d using the compute driver drv.
func New(d *db.DB, drv compute.Driver) *Service {
	return &Service{db: d, driver: drv, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// SetClock replaces the clock stamping created_at/updated_at (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// Driver returns the compute driver.
func (s *Service) Driver() compute.Driver { return s.driver }

// SetAllocationLister sets the source of host allocations.
func (s *Service) SetAllocationLister(l AllocationLister) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alloc = l
}

// SetReservationChecker sets the reservation checker.
func (s *Service) SetReservationChecker(c ReservationChecker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checker = c
}

func (s *Service) getChecker() ReservationChecker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.checker
}

func (s *Service) getLister() AllocationLister {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.alloc
}

// BumpMarkerTx records, inside tx, that computehosts or their
// capabilities changed, so every process re-reads its host cache.
func BumpMarkerTx(tx *gorm.DB) error {
	return bumpMarker(tx, hostsMarker)
}

func bumpMarker(tx *gorm.DB, name string) error {
	res := tx.Exec("UPDATE leasehold_change_markers SET version = version + 1 WHERE name = ?", name)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return tx.Create(&models.ChangeMarker{Name: name, Version: 1}).Error
	}
	return nil
}

func (s *Service) invalidate() {
	s.cacheMu.Lock()
	s.cacheValid = false
	s.cache, s.cacheAll = nil, nil
	s.cacheMu.Unlock()
}

// write runs fn in a transaction that also bumps the hosts marker, and
// drops the local cache afterwards. A transaction lost to a lock conflict
// (MySQL deadlock or lock wait timeout, SQLite still busy) or to a
// concurrent insert of the same row did not happen and is run again, up
// to writeAttempts times.
func (s *Service) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	defer s.invalidate()
	var err error
	for attempt := 0; attempt < writeAttempts; attempt++ {
		err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := fn(tx); err != nil {
				return err
			}
			return BumpMarkerTx(tx)
		})
		// A raw duplicate-key error is a race lost to a concurrent writer
		// (two updates adding the same capability): run again, and the
		// other's row is seen. Expected duplicates are mapped to a 409
		// inside fn and never reach here raw.
		if err == nil || !(isLockConflict(err) || db.IsDuplicate(err)) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

const writeAttempts = 4

// isLockConflict reports a MySQL deadlock (1213) or lock wait timeout
// (1205), or SQLITE_BUSY/SQLITE_LOCKED after the busy timeout.
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == 5 || c == 6
	}
	return false
}

func notFound(id string) *Error {
	return errorf(http.StatusNotFound, "Object with {'host_id': '%s'} not found", id)
}

// parseID turns an API id into the row id (non-numeric ids cannot exist).
func parseID(id string) (int64, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
		return 0, false
	}
	return n, true
}

func toHost(r *models.ComputeHost, caps map[string]string) Host {
	if caps == nil {
		caps = map[string]string{}
	}
	return Host{
		ID: strconv.FormatInt(r.ID, 10), HypervisorHostname: r.HypervisorHostname, ServiceName: r.ServiceName,
		VCPUs: r.VCPUs, MemoryMB: r.MemoryMB, LocalGB: r.LocalGB, HypervisorType: r.HypervisorType,
		HypervisorVersion: r.HypervisorVersion, CPUInfo: r.CPUInfo, AvailabilityZone: r.AvailabilityZone,
		Status: r.Status, Reservable: r.Reservable, TrustID: r.TrustID, CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: utcPtr(r.UpdatedAt), ExtraCapabilities: caps,
		ComputeProviderUUID: r.ComputeProviderUUID, ReservationProviderUUID: r.ReservationProviderUUID,
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// loadCaps reads capabilities keyed by host row id: of one host when
// hostID > 0, else of every host. Property names are read separately (a
// small table) so the capability read is a plain scan without joins.
func loadCaps(tx *gorm.DB, hostID int64) (map[int64]map[string]string, error) {
	names := map[string]string{}
	prows, err := tx.Raw("SELECT id, property_name FROM resource_properties WHERE resource_type = ?", ResourceType).Rows()
	if err != nil {
		return nil, err
	}
	defer prows.Close()
	for prows.Next() {
		var id, name string
		if err := prows.Scan(&id, &name); err != nil {
			return nil, err
		}
		names[id] = name
	}
	if err := prows.Err(); err != nil {
		return nil, err
	}
	q := "SELECT computehost_id, property_id, capability_value FROM computehost_extra_capabilities"
	var args []any
	if hostID > 0 {
		q += " WHERE computehost_id = ?"
		args = append(args, hostID)
	}
	rows, err := tx.Raw(q, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]map[string]string{}
	var (
		hid      int64
		pid, val string
		lastID   int64 = -1
		lastCaps map[string]string
	)
	for rows.Next() {
		if err := rows.Scan(&hid, &pid, &val); err != nil {
			return nil, err
		}
		name, ok := names[pid]
		if !ok {
			continue
		}
		if hid != lastID {
			lastID = hid
			lastCaps = out[hid]
			if lastCaps == nil {
				lastCaps = map[string]string{}
				out[hid] = lastCaps
			}
		}
		lastCaps[name] = val
	}
	return out, rows.Err()
}

// hostColumns are read by scanHosts, in this order.
const hostColumns = `id, vcpus, cpu_info, hypervisor_type, hypervisor_version, hypervisor_hostname, service_name,
 memory_mb, local_gb, status, availability_zone, trust_id, reservable, compute_provider_uuid,
 reservation_provider_uuid, owns_compute_provider, created_at, updated_at`

// scanHosts reads computehosts rows with plain database/sql scanning (no
// reflection: this is the hot path of a cold Reservable).
func scanHosts(tx *gorm.DB, where string, args ...any) ([]models.ComputeHost, error) {
	q := "SELECT " + hostColumns + " FROM computehosts"
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := tx.Raw(q+" ORDER BY id", args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []models.ComputeHost
	for rows.Next() {
		var (
			r       models.ComputeHost
			status  sql.NullString
			trust   sql.NullString
			updated sql.NullTime
		)
		if err := rows.Scan(&r.ID, &r.VCPUs, &r.CPUInfo, &r.HypervisorType, &r.HypervisorVersion, &r.HypervisorHostname,
			&r.ServiceName, &r.MemoryMB, &r.LocalGB, &status, &r.AvailabilityZone, &trust, &r.Reservable,
			&r.ComputeProviderUUID, &r.ReservationProviderUUID, &r.OwnsComputeProvider, &r.CreatedAt, &updated); err != nil {
			return nil, err
		}
		if status.Valid {
			r.Status = &status.String
		}
		if trust.Valid {
			r.TrustID = &trust.String
		}
		if updated.Valid {
			r.UpdatedAt = &updated.Time
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// listHosts reads the hosts (only the reservable ones if asked) and their
// capabilities.
func listHosts(tx *gorm.DB, reservableOnly bool) ([]Host, error) {
	where, args := "", []any(nil)
	if reservableOnly {
		where, args = "reservable = ?", []any{true}
	}
	rows, err := scanHosts(tx, where, args...)
	if err != nil {
		return nil, err
	}
	caps, err := loadCaps(tx, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Host, len(rows))
	for i := range rows {
		out[i] = toHost(&rows[i], caps[rows[i].ID])
	}
	return out, nil
}

// Get returns the host with API id, or a 404 *Error.
func (s *Service) Get(ctx context.Context, id string) (*Host, error) {
	return getHost(s.db.WithContext(ctx), id)
}

func getHost(tx *gorm.DB, id string) (*Host, error) {
	n, ok := parseID(id)
	if !ok {
		return nil, notFound(id)
	}
	rows, err := scanHosts(tx, "id = ?", n)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, notFound(id)
	}
	caps, err := loadCaps(tx, n)
	if err != nil {
		return nil, err
	}
	h := toHost(&rows[0], caps[n])
	return &h, nil
}

// Reservable returns every reservable host with its capabilities, by id.
// See the package documentation for the caching rules; the result is
// shared and must not be modified.
func (s *Service) Reservable(ctx context.Context) ([]Host, error) {
	_, res, err := s.snapshot(ctx)
	return res, err
}

// List returns every registered host, by id, from the same cache as
// Reservable (shared: do not modify).
func (s *Service) List(ctx context.Context) ([]Host, error) {
	all, _, err := s.snapshot(ctx)
	return all, err
}

// snapshot returns all hosts and the reservable ones, re-read when the
// change marker moved since the cached copy was taken.
func (s *Service) snapshot(ctx context.Context) (all, reservable []Host, err error) {
	conn := s.db.WithContext(ctx)
	var version int64
	if err := conn.Raw("SELECT version FROM leasehold_change_markers WHERE name = ?", hostsMarker).Scan(&version).Error; err != nil {
		return nil, nil, err
	}
	s.cacheMu.Lock()
	if s.cacheValid && s.cacheVersion == version {
		all, reservable = s.cacheAll, s.cache
		s.cacheMu.Unlock()
		return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
	}
	s.cacheMu.Unlock()
	// One loader at a time: callers arriving meanwhile wait and take its
	// copy when it is at least as new as the marker they read.
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.cacheMu.Lock()
	if s.cacheValid && s.cacheVersion >= version {
		all, reservable = s.cacheAll, s.cache
		s.cacheMu.Unlock()
		return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
	}
	s.cacheMu.Unlock()
	// Read after the marker: a write racing with this load moves the
	// marker again, so the copy below is at worst re-read next time.
	s.loads.Add(1)
	all, err = listHosts(conn, false)
	if err != nil {
		return nil, nil, err
	}
	reservable = make([]Host, 0, len(all))
	for i := range all {
		if all[i].Reservable {
			reservable = append(reservable, all[i])
		}
	}
	s.cacheMu.Lock()
	s.cacheAll, s.cache, s.cacheVersion, s.cacheValid = all, reservable, version, true
	s.cacheMu.Unlock()
	return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
}

// bodyStrings turns a decoded JSON body into string values: strings as
// they are, numbers and booleans as their JSON text, null as "". Objects
// and arrays are kept as JSON text only for cpu_info.
func bodyStrings(body map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(body))
	for k, v := range body {
		switch x := v.(type) {
		case string:
			out[k] = x
		case nil:
			out[k] = ""
		case bool:
			out[k] = strconv.FormatBool(x)
		case fmt.Stringer: // json.Number
			out[k] = x.String()
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			out[k] = strconv.Itoa(x)
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		case map[string]any, []any:
			if k != "cpu_info" {
				return nil, errorf(http.StatusBadRequest, "Malformed parameter `%s`: the value must be a string, number or boolean", k)
			}
			b, err := jsonText(x)
			if err != nil {
				return nil, errorf(http.StatusBadRequest, "Malformed parameter `%s`", k)
			}
			out[k] = b
		default:
			return nil, errorf(http.StatusBadRequest, "Malformed parameter `%s`", k)
		}
	}
	return out, nil
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// takeReservable removes the "reservable" key from caps and parses it
// (Leasehold extension: it sets the host's flag instead of becoming a
// capability that would shadow the field).
func takeReservable(caps map[string]string) (*bool, error) {
	v, ok := caps["reservable"]
	if !ok {
		return nil, nil
	}
	delete(caps, "reservable")
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "Malformed parameter `reservable`: %q is not true or false", v)
	}
	return &b, nil
}

// maxTextBytes is the most a TEXT column holds on MySQL.
const maxTextBytes = 65535

func checkCapabilityKeys(caps map[string]string) error {
	for k, v := range caps {
		if strings.TrimSpace(k) == "" {
			return errorf(http.StatusBadRequest, "Extra capability keys must not be empty")
		}
		if n := utf8.RuneCountInString(k); n > MaxCapabilityKey {
			return errorf(http.StatusBadRequest, "Extra capability key too long: %q has %d characters, at most %d are allowed", k, n, MaxCapabilityKey)
		}
		if len(v) > maxTextBytes {
			return errorf(http.StatusBadRequest, "Extra capability %s is too long: %d bytes, at most %d are allowed", k, len(v), maxTextBytes)
		}
	}
	return nil
}

// checkDetails bounds the host's own fields to their column sizes.
func checkDetails(d compute.HostDetails) error {
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"service_name", d.ServiceName, 255}, {"hypervisor_type", d.HypervisorType, 255},
		{"availability_zone", d.AvailabilityZone, 255}, {"cpu_info", d.CPUInfo, maxTextBytes},
	} {
		if len(f.value) > f.max {
			return errorf(http.StatusBadRequest, "Malformed parameter `%s`: %d bytes, at most %d are allowed", f.name, len(f.value), f.max)
		}
	}
	return nil
}

// Create registers a host from a host-create body: the driver resolves
// it and splits the body into the host's fields and extra capabilities;
// "reservable" (true/false, default true) sets the host's flag.
func (s *Service) Create(ctx context.Context, body map[string]any) (*Host, error) {
	strs, err := bodyStrings(body)
	if err != nil {
		return nil, err
	}
	details, caps, err := s.driver.DescribeHost(ctx, strs)
	if err != nil {
		return nil, err
	}
	reservable, err := takeReservable(caps)
	if err != nil {
		return nil, err
	}
	if err := checkCapabilityKeys(caps); err != nil {
		return nil, err
	}
	if err := checkDetails(details); err != nil {
		return nil, err
	}
	name := details.HypervisorHostname
	if len(name) > maxHostname {
		return nil, errorf(http.StatusBadRequest, "Malformed parameter `name`: a host name has at most %d characters", maxHostname)
	}
	servers, err := s.driver.ServersOnHost(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(servers) > 0 {
		return nil, errorf(http.StatusConflict, "Host %s has running servers (%d); move them away before registering it.", name, len(servers))
	}
	var out *Host
	err = s.write(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&models.ComputeHost{}).Where("hypervisor_hostname = ?", name).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return errorf(http.StatusConflict, "Host %s is already registered.", name)
		}
		hp, err := placement.CreateHostProvidersTx(tx, placement.HostResources{
			Hostname: name, VCPUs: details.VCPUs, MemoryMB: details.MemoryMB, DiskGB: details.LocalGB,
		})
		if err != nil {
			return placementError(err)
		}
		t := s.now()
		row := models.ComputeHost{
			ID: details.ID, VCPUs: details.VCPUs, CPUInfo: details.CPUInfo, HypervisorType: details.HypervisorType,
			HypervisorVersion: details.HypervisorVersion, HypervisorHostname: name, ServiceName: details.ServiceName,
			MemoryMB: details.MemoryMB, LocalGB: details.LocalGB, AvailabilityZone: details.AvailabilityZone,
			Reservable: reservable == nil || *reservable, ComputeProviderUUID: hp.ComputeUUID, ReservationProviderUUID: hp.ReservationUUID,
			OwnsComputeProvider: hp.CreatedCompute, CreatedAt: t,
		}
		if err := tx.Create(&row).Error; err != nil {
			if db.IsDuplicate(err) {
				return errorf(http.StatusConflict, "Host %s is already registered.", name)
			}
			return err
		}
		if err := s.setCapabilities(ctx, tx, row.ID, caps, false, t); err != nil {
			return err
		}
		if err := s.driver.AddToFreePool(ctx, []string{name}); err != nil {
			return err
		}
		out, err = getHost(tx, strconv.FormatInt(row.ID, 10))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// placementError maps a Placement domain error to a Blazar one.
func placementError(err error) error {
	if pe := errs.As(err); pe != nil {
		status := http.StatusInternalServerError
		switch pe.Kind {
		case errs.BadRequest:
			status = http.StatusBadRequest
		case errs.NotFound:
			status = http.StatusNotFound
		case errs.Conflict, errs.NotEnoughResources:
			status = http.StatusConflict
		}
		return errorf(status, "%s", pe.Msg)
	}
	return err
}

// propertyIDs returns the ids of properties of resourceType named names,
// creating missing ones.
func propertyIDs(tx *gorm.DB, resourceType string, names []string, t time.Time) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	var rows []models.ResourceProperty
	if err := tx.Where("resource_type = ? AND property_name IN ?", resourceType, names).Find(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.PropertyName] = r.ID
	}
	var missing []models.ResourceProperty
	for _, n := range names {
		if _, ok := out[n]; !ok {
			missing = append(missing, models.ResourceProperty{ID: uuid.NewString(), ResourceType: resourceType, PropertyName: n, CreatedAt: t})
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&missing).Error; err != nil {
		return nil, err
	}
	rows = nil
	if err := tx.Where("resource_type = ? AND property_name IN ?", resourceType, names).Find(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.PropertyName] = r.ID
	}
	return out, nil
}

// setCapabilities creates or updates the host's capabilities. With check,
// a capability a reservation depends on cannot change (409).
func (s *Service) setCapabilities(ctx context.Context, tx *gorm.DB, hostID int64, caps map[string]string, check bool, t time.Time) error {
	if len(caps) == 0 {
		return nil
	}
	names := make([]string, 0, len(caps))
	for k := range caps {
		names = append(names, k)
	}
	sort.Strings(names)
	ids, err := propertyIDs(tx, ResourceType, names, t)
	if err != nil {
		return err
	}
	var existing []models.ComputeHostExtraCapability
	if err := tx.Where("computehost_id = ?", hostID).Find(&existing).Error; err != nil {
		return err
	}
	byProp := map[string]*models.ComputeHostExtraCapability{}
	for i := range existing {
		byProp[existing[i].PropertyID] = &existing[i]
	}
	checker := s.getChecker()
	hostID36 := strconv.FormatInt(hostID, 10)
	for _, name := range names {
		val, pid := caps[name], ids[name]
		cur := byProp[pid]
		if cur != nil && cur.CapabilityValue == val {
			continue
		}
		if check && cur != nil && checker != nil {
			inUse, err := checker.CapabilityInUse(ctx, tx, hostID36, name)
			if err != nil {
				return err
			}
			if inUse {
				return errorf(http.StatusConflict, "Can't add extra capability %s to host %s: a current or future reservation depends on it.", name, hostID36)
			}
		}
		if cur != nil {
			if err := tx.Model(&models.ComputeHostExtraCapability{}).Where("id = ?", cur.ID).
				Updates(map[string]any{"capability_value": val, "updated_at": t}).Error; err != nil {
				return err
			}
			continue
		}
		row := models.ComputeHostExtraCapability{ID: uuid.NewString(), ComputeHostID: hostID, PropertyID: pid, CapabilityValue: val, CreatedAt: t}
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
	}
	return nil
}

// Update creates or updates extra capabilities from a flat body: every
// key is a capability, even one named like a host field (as upstream),
// except "reservable" (true/false), which sets the host's flag.
func (s *Service) Update(ctx context.Context, id string, body map[string]any) (*Host, error) {
	if len(body) == 0 {
		return nil, errorf(http.StatusBadRequest, "No data to update")
	}
	caps, err := bodyStrings(body)
	if err != nil {
		return nil, err
	}
	if _, ok := caps["id"]; ok {
		// A capability "id" would shadow the host's id in every view.
		return nil, errorf(http.StatusBadRequest, "Malformed parameter `id`: a host's id cannot be changed or used as an extra capability")
	}
	reservable, err := takeReservable(caps)
	if err != nil {
		return nil, err
	}
	if err := checkCapabilityKeys(caps); err != nil {
		return nil, err
	}
	n, ok := parseID(id)
	if !ok {
		return nil, notFound(id)
	}
	var out *Host
	err = s.write(ctx, func(tx *gorm.DB) error {
		t := s.now()
		updates := map[string]any{"updated_at": t}
		if reservable != nil {
			updates["reservable"] = *reservable
		}
		res := tx.Model(&models.ComputeHost{}).Where("id = ?", n).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return notFound(id)
		}
		if err := s.setCapabilities(ctx, tx, n, caps, true, t); err != nil {
			return err
		}
		out, err = getHost(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete unregisters a host: refused (409) while it is reserved, runs
// servers, or its providers have allocations.
func (s *Service) Delete(ctx context.Context, id string) error {
	n, ok := parseID(id)
	if !ok {
		return notFound(id)
	}
	return s.write(ctx, func(tx *gorm.DB) error {
		var rows []models.ComputeHost
		if err := tx.Where("id = ?", n).Limit(1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return notFound(id)
		}
		row := rows[0]
		if c := s.getChecker(); c != nil {
			reserved, err := c.HostReserved(ctx, tx, id)
			if err != nil {
				return err
			}
			if reserved {
				return errorf(http.StatusConflict, "Can't delete host %s. The host is reserved.", id)
			}
		}
		servers, err := s.driver.ServersOnHost(ctx, row.HypervisorHostname)
		if err != nil {
			return err
		}
		if len(servers) > 0 {
			return errorf(http.StatusConflict, "Can't delete host %s. Host has running servers (%d).", id, len(servers))
		}
		if err := placement.DeleteHostProvidersTx(tx, placement.HostProviders{
			ComputeUUID: row.ComputeProviderUUID, ReservationUUID: row.ReservationProviderUUID, CreatedCompute: row.OwnsComputeProvider,
		}); err != nil {
			if pe := errs.As(err); pe != nil {
				return errorf(http.StatusConflict, "Can't delete host %s. %s", id, pe.Msg)
			}
			return err
		}
		if err := tx.Exec("DELETE FROM computehost_extra_capabilities WHERE computehost_id = ?", n).Error; err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM computehosts WHERE id = ?", n).Error; err != nil {
			return err
		}
		return s.driver.RemoveFromFreePool(ctx, []string{row.HypervisorHostname})
	})
}

// HostAllocation is the allocation view of one host.
type HostAllocation struct {
	ResourceID   string
	Reservations []HostReservation
}

// Allocations returns one entry per registered host, by id, with the
// reservations holding it.
func (s *Service) Allocations(ctx context.Context, f AllocationFilter) ([]HostAllocation, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&models.ComputeHost{}).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, err
	}
	byHost, err := s.hostAllocations(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]HostAllocation, len(ids))
	for i, n := range ids {
		id := strconv.FormatInt(n, 10)
		out[i] = HostAllocation{ResourceID: id, Reservations: sortedReservations(byHost[id])}
	}
	return out, nil
}

// Allocation returns the allocation view of one host (404 if unknown).
func (s *Service) Allocation(ctx context.Context, id string, f AllocationFilter) (*HostAllocation, error) {
	h, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	byHost, err := s.hostAllocations(ctx, f)
	if err != nil {
		return nil, err
	}
	return &HostAllocation{ResourceID: h.ID, Reservations: sortedReservations(byHost[h.ID])}, nil
}

func (s *Service) hostAllocations(ctx context.Context, f AllocationFilter) (map[string][]HostReservation, error) {
	l := s.getLister()
	if l == nil {
		return nil, nil
	}
	return l.HostAllocations(ctx, f)
}

func sortedReservations(in []HostReservation) []HostReservation {
	out := append([]HostReservation{}, in...)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartDate.Equal(out[j].StartDate) {
			return out[i].StartDate.Before(out[j].StartDate)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// ReservableTx returns which of the host ids (API ids) exist and are
// reservable, read inside tx. The lease engine calls it after locking the
// hosts it is about to book: a host deleted (Delete takes the same lock
// through ReservationChecker.HostReserved) or made non-reservable since
// its cached view was taken is then not booked.
func ReservableTx(tx *gorm.DB, ids []string) (map[string]bool, error) {
	var nums []int64
	for _, id := range ids {
		if n, ok := parseID(id); ok {
			nums = append(nums, n)
		}
	}
	out := make(map[string]bool, len(nums))
	if len(nums) == 0 {
		return out, nil
	}
	var found []int64
	if err := tx.Model(&models.ComputeHost{}).Where("id IN ? AND reservable = ?", nums, true).Pluck("id", &found).Error; err != nil {
		return nil, err
	}
	for _, n := range found {
		out[strconv.FormatInt(n, 10)] = true
	}
	return out, nil
}
