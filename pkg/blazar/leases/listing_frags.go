package leases

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/pkg/db"
)

// Every lease's rendered object is kept with the leases.listing_version
// it was read at. The database moves that counter itself (triggers, see
// pkg/db 0013) in the transaction of any write to a row the object
// shows, whoever writes it. A listing reads (id, project,
// listing_version) of its leases in one query, reuses the objects whose
// counter is unchanged, reads and renders only the others (all of them
// at once when they are many, else 500 at a time by id) and joins the
// objects in listing order. Rows are read after the counters: an object
// is never older than the counter it is kept under, and a write racing
// with the read moves the counter again, so the next listing reads it
// anew.

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
	rendered atomic.Int64 // objects rendered (tests)
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
	q, args := "SELECT id, listing_version FROM leases", []any(nil)
	if !c.Admin {
		q, args = q+" WHERE project_id = ?", []any{c.ProjectID}
	}
	// The kept objects are looked up while the rows are read: the ids of
	// those found are not copied out of the driver's buffer.
	fc := &s.frags
	var (
		frags    []*leaseFrag
		stale    = map[string]int64{}
		staleIDs []string
		id       sql.RawBytes
		version  int64
	)
	fc.mu.RLock()
	err = db.EachRow(ctx, sqlDB, q, args, func(rows *sql.Rows) error {
		if err := rows.Scan(&id, &version); err != nil {
			return err
		}
		if f := fc.m[string(id)]; f != nil && f.version == version {
			frags = append(frags, f)
		} else {
			stale[string(id)] = version
			staleIDs = append(staleIDs, string(id))
		}
		return nil
	})
	fc.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	nScan := len(frags) + len(staleIDs)
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
		// Nothing listed changed since the last admin listing (a write
		// elsewhere moved SQLite's data_version): its body still holds.
		fc.mu.Lock()
		last, lastBody := fc.last, fc.lastBody
		fc.mu.Unlock()
		if lastBody != nil && slices.Equal(last, frags) {
			return lastBody, nil
		}
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
		fc.last, fc.lastBody = frags, r
		fc.mu.Unlock()
	}
	return r, nil
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
