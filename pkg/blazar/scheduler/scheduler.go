// Package scheduler answers Nova's scheduler filter (contrib/nova's
// LeaseholdFilter): which of a boot's candidate hosts may take the
// instance now, and why each other one may not.
//
// # Semantics, at the moment of the request (the service's clock)
//
//   - A request naming a reservation (hint reservation=<id>, or an
//     instance-reservation flavor: resources:CUSTOM_RESERVATION_<ID>=1 or
//     upstream's aggregate_instance_extra_specs:reservation=<id>) passes
//     only the hosts that reservation holds now, and only when the
//     reservation is active (its lease started, its window contains now)
//     and its lease belongs to the request's project. When both a hint and
//     a flavor name one, a host must pass both.
//   - A request naming none never lands on a host registered in Leasehold:
//     such a host is either reserved by some lease at that moment or in the
//     free pool, which only leases hand out. Hosts Leasehold does not know
//     pass (the cloud's unreserved capacity).
//   - Every rejected host gets a reason a person can act on. For a boot
//     naming no reservation, which lease holds a registered host now (or
//     that none does: the free pool) is read only when the request asks
//     with "explain": true, which the filter does when it logs at debug
//     level: it is the one part of the answer that costs a read per
//     candidate.
//
// # Cost
//
// A host name is resolved through the hosts service's cached host list
// (one change-marker read per call). A reservation named costs one more
// query: the reservation, its lease and its allocations, by primary key
// and reservation_id. A boot naming none costs nothing more, unless it
// asks to explain: then the allocations containing now of the registered
// candidates are read through the (compute_host_id, end_date,
// start_date) index (one or two statements; busyNow).
// BenchmarkFilter measures every case.
//
// # Reservation types and the extension point
//
// The hosts of a reservation are its computehost_allocations rows,
// whatever its resource type: physical:host reservations write one per
// host, and an instance reservation (virtual:instance, issue 13) must
// record its slots there too, one row per slot with the lease window, as
// upstream Blazar's instance plugin does. A reservation type that keeps
// its hosts elsewhere is answered "holds no hosts" until the query in
// (*Service).reservation learns its table.
package scheduler

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
)

// HostSource lists the registered hosts; hosts.Service's List is one, and
// returns the very same slice while nothing changed (the name index below
// is rebuilt only when it does not).
type HostSource interface {
	List(ctx context.Context) ([]hosts.Host, error)
}

// Result is the answer: the passing hosts in request order (each name
// once) and the reason for each rejected one.
type Result struct {
	Hosts    []string          `json:"hosts"`
	Rejected map[string]string `json:"rejected"`
}

// MarshalJSON writes the bytes encoding/json writes for Result (hosts in
// order, rejected hosts by sorted name, strings as leases.AppendString
// writes them) without reflection: an answer names every candidate host, and encoding/json's
// reflective map encoding and key sort were half of the endpoint's CPU.
func (r Result) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(r.Rejected))
	size := 32
	for k, v := range r.Rejected {
		keys = append(keys, k)
		size += len(k) + len(v) + 6
	}
	for _, h := range r.Hosts {
		size += len(h) + 3
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, `{"hosts":`...)
	if r.Hosts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, h := range r.Hosts {
			if i > 0 {
				b = append(b, ',')
			}
			b = leases.AppendString(b, h)
		}
		b = append(b, ']')
	}
	b = append(b, `,"rejected":`...)
	if r.Rejected == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = leases.AppendString(b, k)
			b = append(b, ':')
			b = leases.AppendString(b, r.Rejected[k])
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// Service decides filter requests.
type Service struct {
	db    *db.DB
	hosts HostSource
	now   func() time.Time

	mu  sync.Mutex
	idx *nameIndex
}

// New returns a Service reading d and the hosts of src; now is the clock
// the decisions are taken at (nil: the wall clock).
func New(d *db.DB, src HostSource, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: d, hosts: src, now: now}
}

// nameIndex maps host names to API ids for one version of the host list.
type nameIndex struct {
	first *hosts.Host // &list[0] of the list it was built from (nil: empty)
	n     int
	// byNode maps hypervisor_hostname → id; byService maps a compute
	// service's host name to its id when exactly one registered host has
	// it ("" when several do: ironic-style services own many nodes).
	byNode    map[string]string
	byService map[string]string
	// unreservable holds the ids of hosts taking no new reservations
	// (reservable false: in maintenance, or reported down).
	unreservable map[string]bool
}

func (s *Service) index(ctx context.Context) (*nameIndex, error) {
	list, err := s.hosts.List(ctx)
	if err != nil {
		return nil, err
	}
	var first *hosts.Host
	if len(list) > 0 {
		first = &list[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if x := s.idx; x != nil && x.first == first && x.n == len(list) {
		return x, nil
	}
	x := &nameIndex{first: first, n: len(list), byNode: make(map[string]string, len(list)),
		byService: make(map[string]string, len(list)), unreservable: map[string]bool{}}
	for i := range list {
		h := &list[i]
		if !h.Reservable {
			x.unreservable[h.ID] = true
		}
		x.byNode[h.HypervisorHostname] = h.ID
		if _, dup := x.byService[h.ServiceName]; dup {
			x.byService[h.ServiceName] = ""
		} else {
			x.byService[h.ServiceName] = h.ID
		}
	}
	s.idx = x
	return x, nil
}

// lookup returns the API id of the registered host called name ("" for
// none): by hypervisor hostname first, else by a unique service name.
func (x *nameIndex) lookup(name string) string {
	if id, ok := x.byNode[name]; ok {
		return id
	}
	return x.byService[name]
}

// Filter decides req at the service's clock.
func (s *Service) Filter(ctx context.Context, req Request) (*Result, error) {
	now := s.now().UTC()
	idx, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(req.Hosts))
	for i, name := range req.Hosts {
		ids[i] = idx.lookup(name)
	}
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	var checks []*resCheck
	for _, id := range []string{req.Reservation, req.FlavorReservation} {
		if id == "" || (len(checks) == 1 && checks[0].id == id) {
			continue
		}
		c, err := s.reservation(ctx, sqlDB, id, now)
		if err != nil {
			return nil, err
		}
		c.refuse = c.judge(req.ProjectID, now)
		checks = append(checks, c)
	}
	var busy map[string]busyRow
	if len(checks) == 0 && req.Explain {
		if busy, err = s.busyNow(ctx, sqlDB, ids, now); err != nil {
			return nil, err
		}
	}
	out := &Result{Hosts: make([]string, 0, len(req.Hosts)), Rejected: map[string]string{}}
	seen := make(map[string]bool, len(req.Hosts))
	for i, name := range req.Hosts {
		if seen[name] {
			continue
		}
		seen[name] = true
		if reason := decide(ids[i], checks, busy, idx.unreservable); reason != "" {
			out.Rejected[name] = reason
			continue
		}
		out.Hosts = append(out.Hosts, name)
	}
	return out, nil
}

// decide returns why the host (API id, "" when not registered) may not
// take the instance, or "" when it may.
func decide(id string, checks []*resCheck, busy map[string]busyRow, unreservable map[string]bool) string {
	if len(checks) == 0 {
		if id == "" {
			return ""
		}
		if busy == nil {
			return registered
		}
		if b, ok := busy[id]; ok {
			return fmt.Sprintf("reserved by reservation %s until %s; boot with that reservation to use it", b.reservation, b.end.Format(time.RFC3339))
		}
		if unreservable[id] {
			return "registered in Leasehold and not reservable (maintenance, or reported down): it takes no instances without a reservation"
		}
		return "in Leasehold's free pool: it takes instances only through a reservation"
	}
	for _, c := range checks {
		if c.refuse != "" {
			return c.refuse
		}
		if id == "" || !c.hosts[id] {
			return fmt.Sprintf("not a host of reservation %s", c.id)
		}
	}
	return ""
}

// registered is the reason a registered host is refused to a boot that
// names no reservation, when the request did not ask to explain which
// lease holds it.
const registered = "registered in Leasehold: it takes instances only through a reservation (ask with explain for the lease holding it)"

// resCheck is a named reservation as read at now.
type resCheck struct {
	id                   string
	found                bool
	status, resourceType string
	project, leaseStatus string
	// start and end are the allocations' window (windowKnown: there is
	// at least one allocation).
	start, end  time.Time
	windowKnown bool
	hosts       map[string]bool // the hosts held now, by API id
	refuse      string          // why no host passes ("": the hosts pass)
}

// judge returns why no host passes for a request of project, or "".
func (c *resCheck) judge(project string, now time.Time) string {
	switch {
	case !c.found:
		return fmt.Sprintf("reservation %s does not exist", c.id)
	case c.project != project:
		return fmt.Sprintf("reservation %s belongs to another project", c.id)
	case len(c.hosts) == 0 && !c.windowKnown:
		return fmt.Sprintf("reservation %s (%s) holds no hosts", c.id, c.resourceType)
	case c.status != leases.ResActive:
		return fmt.Sprintf("reservation %s is not active (status %s, lease %s)", c.id, c.status, c.leaseStatus)
	case now.Before(c.start):
		return fmt.Sprintf("reservation %s starts at %s", c.id, c.start.Format(time.RFC3339))
	case !now.Before(c.end):
		return fmt.Sprintf("reservation %s ended at %s", c.id, c.end.Format(time.RFC3339))
	}
	return ""
}

// reservation reads reservation id, its lease and its host allocations in
// one query (primary key, then the reservation_id index); hosts holds
// the allocations whose window contains now.
func (s *Service) reservation(ctx context.Context, sqlDB *sql.DB, id string, now time.Time) (*resCheck, error) {
	t := func(col string) string { return leases.TimeExpr(s.db.Dialect, col) }
	q := "SELECT r.status, r.resource_type, l.project_id, l.status, a.compute_host_id, " + t("a.start_date") + ", " + t("a.end_date") +
		" FROM reservations r JOIN leases l ON l.id = r.lease_id" +
		" LEFT JOIN computehost_allocations a ON a.reservation_id = r.id WHERE r.id = ?"
	c := &resCheck{id: id, hosts: map[string]bool{}}
	err := db.EachRow(ctx, sqlDB, q, []any{id}, func(rows *sql.Rows) error {
		var host string
		var start, end leases.TimeCol
		if err := rows.Scan(leases.Str{P: &c.status}, leases.Str{P: &c.resourceType}, leases.Str{P: &c.project},
			leases.Str{P: &c.leaseStatus}, leases.Str{P: &host}, &start, &end); err != nil {
			return err
		}
		c.found = true
		if !start.Valid || !end.Valid {
			return nil // LEFT JOIN: no allocation
		}
		// The window shown in a reason is the widest of the rows (they
		// all repeat the lease window).
		if !c.windowKnown || start.T.Before(c.start) {
			c.start = start.T
		}
		if !c.windowKnown || end.T.After(c.end) {
			c.end = end.T
		}
		c.windowKnown = true
		if !now.Before(start.T) && now.Before(end.T) {
			c.hosts[host] = true
		}
		return nil
	})
	return c, err
}

// busyRow is the allocation holding a host now.
type busyRow struct {
	reservation string
	end         time.Time
}

// busyNow returns, by host id, an allocation containing now of the
// registered hosts among ids.
func (s *Service) busyNow(ctx context.Context, sqlDB *sql.DB, ids []string, now time.Time) (map[string]busyRow, error) {
	uniq := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] && decimal(id) {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	out := map[string]busyRow{}
	if len(uniq) == 0 {
		return out, nil
	}
	if s.db.Dialect == db.SQLite {
		return out, s.busyNowSQLite(ctx, sqlDB, uniq, now, out)
	}
	// MySQL: one range scan of (compute_host_id, end_date) per host, in
	// one statement. The ids are written into it (decimal API ids of
	// registered hosts: nothing else gets here) in IN lists shorter than
	// MariaDB's in_predicate_conversion_threshold (1000), beyond which
	// the list becomes a subquery and the table is scanned whole.
	const chunk = 500
	var q strings.Builder
	var args []any
	for i := 0; i < len(uniq); i += chunk {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("SELECT compute_host_id, reservation_id, end_date FROM computehost_allocations WHERE compute_host_id IN ('")
		q.WriteString(strings.Join(uniq[i:min(i+chunk, len(uniq))], "','"))
		q.WriteString("') AND end_date > ? AND start_date <= ?")
		args = append(args, now, now)
	}
	return out, db.EachRow(ctx, sqlDB, q.String(), args, scanBusy(out))
}

// busyNowSQLite fills out on SQLite. The ids travel as one JSON array (a
// thousand bound parameters cost the driver more than the query: its
// bind is quadratic in their number). First, per host, the allocation
// that ends first after now, read from the (compute_host_id, end_date)
// index and fetched by rowid: if it started, the host is busy; if there
// is none, it is free. Only a host whose first allocation starts later
// can still be busy, through a longer allocation overlapping it
// (instance slots share hosts): those alone are scanned in a second
// query. Scanning every candidate's future bookings at once costs twice
// the CPU on a well-booked cloud.
func (s *Service) busyNowSQLite(ctx context.Context, sqlDB *sql.DB, ids []string, now time.Time, out map[string]busyRow) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	first := "SELECT a.compute_host_id, a.reservation_id, CAST(a.start_date AS TEXT), CAST(a.end_date AS TEXT)" +
		" FROM (SELECT (SELECT b.rowid FROM computehost_allocations b WHERE b.compute_host_id = h.value" +
		" AND b.end_date > ? ORDER BY b.end_date LIMIT 1) AS aid FROM json_each(?) h) x" +
		" JOIN computehost_allocations a ON a.rowid = x.aid"
	var later []string
	err = db.EachRow(ctx, sqlDB, first, []any{now, string(list)}, func(rows *sql.Rows) error {
		var host string
		var b busyRow
		var start, end leases.TimeCol
		if err := rows.Scan(leases.Str{P: &host}, leases.Str{P: &b.reservation}, &start, &end); err != nil {
			return err
		}
		if start.T.After(now) {
			later = append(later, host)
			return nil
		}
		b.end = end.T
		out[host] = b
		return nil
	})
	if err != nil || len(later) == 0 {
		return err
	}
	if list, err = json.Marshal(later); err != nil {
		return err
	}
	q := "SELECT compute_host_id, reservation_id, CAST(end_date AS TEXT) FROM computehost_allocations" +
		" WHERE compute_host_id IN (SELECT value FROM json_each(?)) AND end_date > ? AND start_date <= ?"
	return db.EachRow(ctx, sqlDB, q, []any{string(list), now, now}, scanBusy(out))
}

// scanBusy reads (compute_host_id, reservation_id, end_date) rows into
// out.
func scanBusy(out map[string]busyRow) func(*sql.Rows) error {
	return func(rows *sql.Rows) error {
		var host string
		var b busyRow
		var end leases.TimeCol
		if err := rows.Scan(leases.Str{P: &host}, leases.Str{P: &b.reservation}, &end); err != nil {
			return err
		}
		b.end = end.T
		out[host] = b
		return nil
	}
}

// decimal reports whether s is a host API id (a positive int64 in
// decimal).
func decimal(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0 && len(s) <= 19
}
