package placement

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

// The allocation-candidates engine works on an in-memory snapshot of all
// providers. Building it takes a handful of bulk queries; it is cached per
// database and reused for as long as a cheap change marker (one query of
// counts, maxima and sums, one scan per table) is unchanged. Every write
// that matters changes the marker: provider create/delete (count, max
// id) and re-parent (sum of parent/root ids); inventory and trait changes
// and allocation writes bump provider generations (and the usage summary,
// which is all the snapshot reads of allocations, has a weighted sum);
// aggregate membership has its own position-sensitive sum
// (PUT aggregates below 1.19 bumps no generation); new, deleted or
// renamed classes and new traits change counts, max ids or name lengths.
// The marker is read on every request, so several processes sharing one
// database never answer from a stale snapshot.

const snapshotMarkerSQL = `SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(generation), 0),
 COALESCE(SUM(root_provider_id * 3 + COALESCE(parent_provider_id, 0) * 7), 0) FROM resource_providers
UNION ALL SELECT COUNT(*), COALESCE(SUM(aggregate_id * aggregate_id * 7 + resource_provider_id * resource_provider_id * 13 + aggregate_id * resource_provider_id * 31), 0), 0, 0
 FROM resource_provider_aggregates
UNION ALL SELECT COUNT(*), COALESCE(SUM(used), 0), COALESCE(SUM((used % 1000003) * ((resource_provider_id * 3 + resource_class_id * 7) % 1000003)), 0), 0
 FROM allocation_usages
UNION ALL SELECT COUNT(*), COALESCE(MAX(id), 0), 0, 0 FROM traits
UNION ALL SELECT COUNT(*), COALESCE(MAX(id), 0), MAX(updated_at), COALESCE(SUM(LENGTH(name)), 0) FROM resource_classes`

// snapshotCache is a Service's allocation-candidates snapshot with the
// marker it was built at.
type snapshotCache struct {
	mu     sync.Mutex // serialises rebuilds
	cur    sync.Mutex // guards marker/snap
	marker string
	snap   *candidates.Snapshot
	// Marker reads are shared by concurrent requests (group commit
	// style): a request joins the next read to start, never one already
	// running, so the marker it gets was read after it arrived and
	// reflects every write committed before that.
	fmu     sync.Mutex
	running bool
	next    *markerCall

	// On a SQLite file, PRAGMA data_version on a connection of its own
	// (never used for writes) changes whenever any other connection, in
	// this process or another, commits. While it is unchanged since the
	// last full marker read (data_version read first), that marker still
	// holds and the five table scans are skipped. dv guards the fields.
	dv       sync.Mutex
	dvConn   *sql.Conn
	dvOff    bool // not SQLite, a private in-memory database, or failed
	dvValid  bool
	dvLast   int64
	dvMarker string
}

type markerCall struct {
	done   chan struct{}
	marker string
	err    error
}

// sharedMarker returns a marker read that started after the call.
func (c *snapshotCache) sharedMarker(read func() (string, error)) (string, error) {
	c.fmu.Lock()
	if c.next == nil {
		c.next = &markerCall{done: make(chan struct{})}
	}
	my := c.next
	if !c.running {
		c.running = true
		go c.readLoop(read)
	}
	c.fmu.Unlock()
	<-my.done
	return my.marker, my.err
}

// readLoop runs marker reads while requests are waiting for one.
func (c *snapshotCache) readLoop(read func() (string, error)) {
	for {
		c.fmu.Lock()
		call := c.next
		c.next = nil
		if call == nil {
			c.running = false
			c.fmu.Unlock()
			return
		}
		c.fmu.Unlock()
		call.marker, call.err = read()
		close(call.done)
	}
}

func readMarker(tx *gorm.DB) (string, error) {
	rows, err := tx.Raw(snapshotMarkerSQL).Rows()
	if err != nil {
		return "", err
	}
	defer rows.Close()
	vals := make([]sql.NullString, 4)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var m []byte
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		for _, v := range vals {
			m = append(m, v.String...)
			m = append(m, '|')
		}
		n++
	}
	if n != 5 {
		return "", fmt.Errorf("snapshot marker: %d rows", n)
	}
	return string(m), rows.Err()
}

// dataVersion reads PRAGMA data_version on the cache's own connection
// (opened on first use); ok is false when the fast path is unavailable.
func (c *snapshotCache) dataVersion(ctx context.Context, d *db.DB) (v int64, ok bool) {
	if c.dvOff {
		return 0, false
	}
	if c.dvConn == nil {
		sqlDB, err := d.DB.DB()
		// A private in-memory database has one connection: keep it for
		// the requests.
		if d.Dialect != db.SQLite || err != nil || sqlDB.Stats().MaxOpenConnections < 2 {
			c.dvOff = true
			return 0, false
		}
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return 0, false
		}
		c.dvConn = conn
	}
	if err := c.dvConn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		// Closed database or broken connection: full marker reads from
		// now on (a new connection would not know the old version).
		_ = c.dvConn.Close()
		c.dvConn, c.dvOff, c.dvValid = nil, true, false
		return 0, false
	}
	return v, true
}

// currentDataVersion reads the SQLite data_version (ok false when the
// database has none to offer: MySQL, a private in-memory database).
func (c *snapshotCache) currentDataVersion(ctx context.Context, d *db.DB) (int64, bool) {
	c.dv.Lock()
	defer c.dv.Unlock()
	return c.dataVersion(ctx, d)
}

// readMarkerFast is readMarker with the data_version shortcut.
func (c *snapshotCache) readMarkerFast(ctx context.Context, d *db.DB) (string, error) {
	c.dv.Lock()
	defer c.dv.Unlock()
	v, ok := c.dataVersion(ctx, d)
	if ok && c.dvValid && v == c.dvLast {
		return c.dvMarker, nil
	}
	m, err := readMarker(d.WithContext(ctx))
	if err != nil {
		c.dvValid = false
		return "", err
	}
	c.dvValid, c.dvLast, c.dvMarker = ok, v, m
	return m, nil
}

// at returns the cached snapshot if it was built at marker, else nil.
func (c *snapshotCache) at(marker string) *candidates.Snapshot {
	c.cur.Lock()
	defer c.cur.Unlock()
	if c.snap != nil && c.marker == marker {
		return c.snap
	}
	return nil
}

// candidateSnapshot returns a snapshot that reflects every write
// committed before the call.
func (s *Service) candidateSnapshot(ctx context.Context) (*candidates.Snapshot, error) {
	c := s.snapshots
	marker, err := c.sharedMarker(func() (string, error) {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.readMarkerFast(rctx, s.db)
	})
	if err != nil {
		return nil, wrap("snapshot marker", err)
	}
	if snap := c.at(marker); snap != nil {
		return snap, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Another request may have rebuilt it while this one waited.
	if snap := c.at(marker); snap != nil {
		return snap, nil
	}
	var snap *candidates.Snapshot
	var built string
	err = s.tx(ctx, func(tx *gorm.DB) error {
		var err error
		if built, err = readMarker(tx); err != nil {
			return err
		}
		snap, err = LoadSnapshot(tx)
		return err
	})
	if err != nil {
		return nil, wrap("load snapshot", err)
	}
	c.cur.Lock()
	c.marker, c.snap = built, snap
	c.cur.Unlock()
	return snap, nil
}

// LoadSnapshot reads every provider with its inventories, usages, traits
// and aggregates, plus the known classes and traits, in seven queries.
func LoadSnapshot(tx *gorm.DB) (*candidates.Snapshot, error) {
	return LoadSnapshotInto(tx, candidates.NewBuilder())
}

// LoadSnapshotInto is LoadSnapshot on a builder the caller may have
// primed (e.g. with classes that live outside the database).
func LoadSnapshotInto(tx *gorm.DB, b *candidates.Builder) (*candidates.Snapshot, error) {
	each := func(q string, scan func(*sql.Rows) error) error {
		rows, err := tx.Raw(q).Rows()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	// idNames reads (id, name) rows into add.
	idNames := func(q string, add func(id int64, name string)) error {
		return each(q, func(r *sql.Rows) error {
			var id int64
			var name string
			if err := r.Scan(&id, &name); err != nil {
				return err
			}
			add(id, name)
			return nil
		})
	}
	if err := idNames("SELECT id, name FROM resource_classes", b.AddClass); err != nil {
		return nil, err
	}
	if err := each("SELECT name FROM traits ORDER BY id", func(r *sql.Rows) error {
		var name string
		if err := r.Scan(&name); err != nil {
			return err
		}
		b.AddTrait(name)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := each("SELECT id, uuid, COALESCE(parent_provider_id, 0), root_provider_id FROM resource_providers ORDER BY id", func(r *sql.Rows) error {
		var id, parent, root int64
		var uuid string
		if err := r.Scan(&id, &uuid, &parent, &root); err != nil {
			return err
		}
		b.AddProvider(id, uuid, parent, root)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := each("SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio FROM inventories", func(r *sql.Rows) error {
		var rp, rc, total, reserved, minU, maxU, step int64
		var ratio float64
		if err := r.Scan(&rp, &rc, &total, &reserved, &minU, &maxU, &step, &ratio); err != nil {
			return err
		}
		b.AddInventory(rp, rc, total, reserved, minU, maxU, step, ratio)
		return nil
	}); err != nil {
		return nil, err
	}
	// allocation_usages is the per-provider, per-class sum every
	// allocation write keeps in its own transaction (GET usages reads
	// it too): no need to aggregate the whole allocations table.
	if err := each("SELECT resource_provider_id, resource_class_id, used FROM allocation_usages WHERE used <> 0", func(r *sql.Rows) error {
		var rp, rc, used int64
		if err := r.Scan(&rp, &rc, &used); err != nil {
			return err
		}
		b.AddUsage(rp, rc, used)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := idNames("SELECT rpt.resource_provider_id, t.name FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id ORDER BY rpt.resource_provider_id, rpt.trait_id", b.AddProviderTrait); err != nil {
		return nil, err
	}
	if err := idNames("SELECT rpa.resource_provider_id, a.uuid FROM resource_provider_aggregates rpa JOIN placement_aggregates a ON a.id = rpa.aggregate_id", b.AddProviderAggregate); err != nil {
		return nil, err
	}
	return b.Build(), nil
}

// CandidateOptions are the [placement] settings that shape the search.
type CandidateOptions struct {
	// MaxCandidates is max_allocation_candidates (−1: unlimited; 0 means
	// one, as upstream's loop does).
	MaxCandidates int
	// Randomize is randomize_allocation_candidates.
	Randomize bool
	// SearchCap is allocation_candidates_search_cap (0: none).
	SearchCap int
}

// AllocationCandidates answers a parsed GET /allocation_candidates.
func (s *Service) AllocationCandidates(ctx context.Context, req *candidates.Request, opts CandidateOptions) (*candidates.Result, error) {
	snap, err := s.candidateSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	req.MaxCandidates = opts.MaxCandidates
	if opts.MaxCandidates == 0 {
		// Upstream stops as soon as len(candidates) >= 0, i.e. after the
		// first one; the engine reads 0 as "not set".
		req.MaxCandidates = 1
	}
	req.Randomize = opts.Randomize
	req.SearchCap = opts.SearchCap
	res, err := snap.Find(ctx, req)
	if err != nil {
		switch e := err.(type) {
		case *candidates.UnknownClassError:
			return nil, BadRequest("Invalid resource class in resources parameter: %s", e.Error())
		case *candidates.UnknownTraitError:
			return nil, BadRequest("%s", e.Error())
		}
		return nil, err
	}
	if s.cfg.ObserveCandidates != nil {
		s.cfg.ObserveCandidates(res.Generated, res.Steps)
	}
	if res.SearchCapped {
		slog.WarnContext(ctx, "allocation candidates search stopped at allocation_candidates_search_cap; the answer holds what was found",
			"search_cap", opts.SearchCap, "candidates", res.Len())
	}
	return res, nil
}
