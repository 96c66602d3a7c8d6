package leases

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/pkg/db"
)

// Every lease's rendered object is kept with the version it was read
// at: the sum of the lease's rows in lease_changes, a log the database
// itself appends to (triggers, see pkg/db 0013) in the transaction of
// any write to a row the object shows, whoever writes it. A listing
// first reads every lease's version from the log's index alone, and
// their total: equal to the one the last listing was joined at, nothing
// listed changed and that body is served. Else it reads the ids of its
// leases (an index too),
// reuses the objects whose version is unchanged, reads and renders only
// the others (all of them at once when they are many, else 500 at a
// time by id) and joins the objects in listing order. Rows are read
// after the versions: an object is never older than the version it is
// kept under, and a write racing with the read adds to the version
// again, so the next listing reads it anew.

// leaseFrag is one lease's object in the listing.
type leaseFrag struct {
	version int64
	id      string
	project string
	// key sorts the objects in listing order: created_at as stored
	// (SQLite compares the text) or as a time (MySQL compares the
	// value), then id.
	key  string
	body []byte
}

// fragCache holds the leases' rendered objects by id, and the last admin
// listing joined from them.
type fragCache struct {
	mu       sync.RWMutex
	m        map[string]*leaseFrag
	last     []*leaseFrag
	lastBody *renderedListing
	// lastTotal is the log's total read before lastBody's versions.
	lastTotal  int64
	rendered   atomic.Int64 // objects rendered (tests)
	compacting atomic.Bool
	compacted  atomic.Int64 // compactions run (tests)
}

// sortKey is the order of the listing as one string: the stored text of
// created_at on SQLite (no NUL in it, so the NUL after it keeps a shorter
// text first), else the time in a fixed-width layout; then the id.
func sortKey(x *listedLease) string {
	if x.created != "" {
		return x.created + "\x00" + x.l.ID
	}
	return x.l.CreatedAt.UTC().Format("20060102150405.000000000") + "\x00" + x.l.ID
}

// fullReadShare: when more than this share of the listed leases changed,
// the whole listing is read (a fixed number of queries joined on the
// leases) rather than the changed ones by id.
const fullReadShare = 4

// incremental returns the listing of c's leases, reflecting every write
// that committed before the call.
func (s *Service) incremental(ctx context.Context, c Caller) (*renderedListing, error) {
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	fc := &s.frags
	vs, err := ReadVersions(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	total := vs.Total
	fc.mu.RLock()
	last, lastTotal := fc.lastBody, fc.lastTotal
	fc.mu.RUnlock()
	if last != nil && lastTotal == total {
		if c.Admin {
			return last, nil
		}
		return &renderedListing{body: last.of(c)}, nil
	}
	// The kept objects are looked up while the rows are read: the ids of
	// those found are not copied out of the driver's buffer.
	var (
		frags    []*leaseFrag
		stale    = map[string]int64{}
		staleIDs []string
	)
	var project *string
	if !c.Admin {
		project = &c.ProjectID
	}
	fc.mu.RLock()
	err = EachLease(ctx, sqlDB, project, func(id []byte) {
		version := vs.Sums[string(id)]
		if f := fc.m[string(id)]; f != nil && f.version == version {
			frags = append(frags, f)
		} else {
			stale[string(id)] = version
			staleIDs = append(staleIDs, string(id))
		}
	})
	fc.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	nScan := len(frags) + len(staleIDs)
	if c.Admin && vs.Rows > int64(nScan+compactSlack) {
		s.compactSoon()
	}
	if len(staleIDs) > 0 {
		var l *listing
		if len(staleIDs)*fullReadShare > nScan {
			l, err = s.listing(ctx, c)
		} else {
			l, err = s.listingByID(ctx, staleIDs)
		}
		if err != nil {
			return nil, err
		}
		var keys keyOrder
		fresh := make([]*leaseFrag, 0, len(staleIDs))
		for i := range l.leases {
			x := &l.leases[i]
			v, ok := stale[x.l.ID]
			// A lease created after the scan is left for the next
			// listing; one that was current is kept as it was.
			if !ok {
				continue
			}
			b := make([]byte, 0, 400+560*len(x.ress)+280*len(x.evs))
			if b, err = l.appendLease(b, x, &keys); err != nil {
				return nil, err
			}
			fresh = append(fresh, &leaseFrag{version: v, id: x.l.ID, project: x.l.ProjectID, key: sortKey(x), body: b})
		}
		fc.rendered.Add(int64(len(fresh)))
		frags = append(frags, fresh...)
		fc.mu.Lock()
		if fc.m == nil {
			fc.m = make(map[string]*leaseFrag, nScan)
		}
		for _, f := range fresh {
			fc.m[f.id] = f
		}
		fc.mu.Unlock()
	}
	s.evict(c, frags)
	slices.SortFunc(frags, func(a, b *leaseFrag) int { return strings.Compare(a.key, b.key) })
	if c.Admin {
		// Nothing listed changed since the last admin listing (a
		// compaction, a write to the rows of a lease since deleted): its body
		// still holds.
		fc.mu.Lock()
		last, lastBody := fc.last, fc.lastBody
		if lastBody != nil && slices.Equal(last, frags) {
			fc.lastTotal = total
			fc.mu.Unlock()
			return lastBody, nil
		}
		fc.mu.Unlock()
	}
	n := 2
	for _, f := range frags {
		n += len(f.body) + 1
	}
	r := &renderedListing{body: make([]byte, 0, n), segs: make([]leaseSeg, len(frags))}
	r.body = append(r.body, '[')
	for i, f := range frags {
		if i > 0 {
			r.body = append(r.body, ',')
		}
		r.segs[i] = leaseSeg{from: len(r.body), to: len(r.body) + len(f.body), project: f.project}
		r.body = append(r.body, f.body...)
	}
	r.body = append(r.body, ']')
	if c.Admin {
		fc.mu.Lock()
		fc.last, fc.lastBody, fc.lastTotal = frags, r, total
		fc.mu.Unlock()
	}
	return r, nil
}

// compactSlack is how many more log rows than one per lease the listing
// lets pile up before it starts a compaction: every listing after a
// write scans them all.
const compactSlack = 1024

// compactSoon starts a compaction of the log in the background unless
// one is running. It is not tied to a request: a failure (a conflict
// with another process's compaction, the database gone) is logged and
// the next listing that sees the log grown starts another.
func (s *Service) compactSoon() {
	fc := &s.frags
	if !fc.compacting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer fc.compacting.Store(false)
		n, err := s.db.CompactLeaseChanges(context.Background())
		fc.compacted.Add(1)
		if err != nil {
			slog.Warn("lease listing: compacting lease_changes", "err", err, "removed", n)
			return
		}
		slog.Debug("lease listing: compacted lease_changes", "removed", n)
	}()
}

// Versions is what lease_changes (pkg/db 0013) says of every lease.
type Versions struct {
	// Sums is the version of each lease with rows (absent: 0), and of
	// gone leases whose rows are not compacted yet.
	Sums map[string]int64
	// Total is the sum of every row: it grows with every commit that
	// changes a row a lease listing or the allocation listing shows, and
	// compaction keeps it, so equal totals mean nothing listed changed
	// in between. Rows is the number of rows.
	Total, Rows int64
}

// ReadVersions reads Versions in one statement, a scan of the index
// (lease_id, n) alone.
func ReadVersions(ctx context.Context, d *sql.DB) (*Versions, error) {
	v := &Versions{}
	var (
		id       sql.RawBytes
		sum, cnt int64
	)
	err := db.EachRow(ctx, d, "SELECT lease_id, SUM(n), COUNT(*) FROM "+db.LeaseChangesTable+" GROUP BY lease_id", nil, func(rows *sql.Rows) error {
		if err := rows.Scan(&id, &sum, &cnt); err != nil {
			return err
		}
		if v.Sums == nil {
			v.Sums = make(map[string]int64, 1024)
		}
		v.Sums[string(id)] = sum
		v.Total += sum
		v.Rows += cnt
		return nil
	})
	return v, err
}

// EachLease calls fn with the id of every lease, or of project's when
// project is not nil: a scan of an index. id is the driver's buffer,
// valid during the call only.
func EachLease(ctx context.Context, d *sql.DB, project *string, fn func(id []byte)) error {
	q := "SELECT id FROM leases"
	var args []any
	if project != nil {
		q, args = q+" WHERE project_id = ?", []any{*project}
	}
	var id sql.RawBytes
	return db.EachRow(ctx, d, q, args, func(rows *sql.Rows) error {
		if err := rows.Scan(&id); err != nil {
			return err
		}
		fn(id)
		return nil
	})
}

// evict drops the objects of leases that are gone: any lease an admin
// listing did not list, or, after a member's, any lease of the member's
// project it did not list.
func (s *Service) evict(c Caller, listed []*leaseFrag) {
	fc := &s.frags
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if c.Admin && len(fc.m) <= len(listed) {
		return // every kept object is a listed lease
	}
	seen := make(map[string]bool, len(listed))
	for _, f := range listed {
		seen[f.id] = true
	}
	for id, f := range fc.m {
		if !seen[id] && (c.Admin || f.project == c.ProjectID) {
			delete(fc.m, id)
		}
	}
}
