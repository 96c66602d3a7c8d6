package leases

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/pkg/db"
)

// The listings (GET /v1/leases here, GET /v1/os-hosts/allocations in
// pkg/blazar/hosts) keep their last rendered body for as long as the
// database is unchanged. "Unchanged" is SQLite's PRAGMA data_version
// read on a connection of the watch's own that never writes: it moves
// whenever any other connection, of this process or of another one on
// the same file, commits. So a body is never served after a write that
// committed before the request read the version, whoever wrote it, and
// no write path has to remember to bump anything. On MySQL there is no
// such counter (and a marker row bumped by every lease write would be a
// hot row every lease transaction locks, a certification conflict on
// Galera): there the listings read the total of the lease_changes log
// the database's triggers append to (pkg/db 0013) and serve the last
// body while it is unchanged, else join it from the objects kept per
// bucket of lease ids (listing_frags.go, and pkg/blazar/hosts for the
// allocations).

// DataVersion is a point in a database's change history as a ChangeWatch
// sees it: equal versions mean no commit in between. Versions from
// different connections (Epoch) are never compared.
type DataVersion struct {
	Epoch, V int64
}

// AtLeast reports whether v is known to be no older than w: same
// connection and no fewer commits seen.
func (v DataVersion) AtLeast(w DataVersion) bool { return v.Epoch == w.Epoch && v.V >= w.V }

// ChangeWatch reads a SQLite database's data_version on a connection of
// its own, opened on first use. The zero value is ready.
type ChangeWatch struct {
	mu    sync.Mutex
	conn  *sql.Conn
	epoch int64
	off   bool // MySQL, a private in-memory database
}

// Version returns the database's current DataVersion; ok is false when
// d has none to offer (MySQL, a private in-memory database: nothing may
// be cached). An error is the context's: the request is gone.
func (w *ChangeWatch) Version(ctx context.Context, d *db.DB) (v DataVersion, ok bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off {
		return DataVersion{}, false, nil
	}
	if w.conn == nil {
		sqlDB, err := d.DB.DB()
		// A private in-memory database has one connection: the requests
		// need it.
		if d.Dialect != db.SQLite || err != nil || sqlDB.Stats().MaxOpenConnections < 2 {
			w.off = true
			return DataVersion{}, false, nil
		}
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return DataVersion{}, false, ctx.Err()
			}
			return DataVersion{}, false, nil
		}
		// A new connection counts from its own start: versions read on
		// the old one mean nothing against it.
		w.conn = conn
		w.epoch++
	}
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v.V); err != nil {
		// A query cut short may leave the connection unusable: open
		// another next time.
		_ = w.conn.Close()
		w.conn = nil
		if ctx.Err() != nil {
			return DataVersion{}, false, ctx.Err()
		}
		return DataVersion{}, false, nil
	}
	v.Epoch = w.epoch
	return v, true, nil
}

// Gate lets one caller at a time load what the others then share; the
// zero value is ready.
type Gate struct {
	once sync.Once
	ch   chan struct{}
}

// Enter waits for the gate (or ctx); the caller must call Leave.
func (g *Gate) Enter(ctx context.Context) error {
	g.once.Do(func() { g.ch = make(chan struct{}, 1) })
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave opens the gate for the next caller.
func (g *Gate) Leave() { <-g.ch }

// listCache is the last admin listing rendered, with each lease's bytes
// and project so a member's listing is cut from it, and the last
// listings of the projects whose members asked since (a member does not
// pay for reading every project's leases).
type listCache struct {
	watch ChangeWatch
	gate  Gate
	loads atomic.Int64 // listings read into the cache (tests)
	mu    sync.Mutex
	at    DataVersion
	body  *renderedListing
	// projects holds members' listings, each at its own version; those
	// older than the newest stored are dropped when one is stored.
	projects map[string]projectListing
}

type projectListing struct {
	at   DataVersion
	body []byte
}

// renderedListing is every lease as the JSON array the API shows an
// admin; segs locate each lease's object in body, in listing order.
type renderedListing struct {
	body []byte
	segs []leaseSeg
}

type leaseSeg struct {
	from, to int
	project  string
}

// cached returns the rendered listing at v, or at a later version.
func (c *listCache) cached(v DataVersion) *renderedListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body != nil && c.at.AtLeast(v) {
		return c.body
	}
	return nil
}

// projectJSON returns the listing of caller c (a member), reflecting
// every write that committed before the call: cut from the admin
// listing when that one is current, else the project's own, read and
// kept when missing. nil (and no error) when the database offers no
// change counter.
func (s *Service) projectJSON(ctx context.Context, c Caller) ([]byte, error) {
	lc := &s.listCache
	v, ok, err := lc.watch.Version(ctx, s.db)
	if err != nil || !ok {
		return nil, err
	}
	if r := lc.cached(v); r != nil {
		return r.of(c), nil
	}
	lc.mu.Lock()
	p, hit := lc.projects[c.ProjectID]
	lc.mu.Unlock()
	if hit && p.at.AtLeast(v) {
		return p.body, nil
	}
	// Members of different projects load side by side (no gate): each
	// reads only its own leases.
	lc.loads.Add(1)
	r, err := s.incremental(ctx, c)
	if err != nil {
		return nil, err
	}
	body := r.body
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.projects == nil {
		lc.projects = map[string]projectListing{}
	}
	for k, e := range lc.projects {
		if !e.at.AtLeast(v) {
			delete(lc.projects, k)
		}
	}
	if e, ok := lc.projects[c.ProjectID]; !ok || !e.at.AtLeast(v) {
		lc.projects[c.ProjectID] = projectListing{at: v, body: body}
	}
	return body, nil
}

// rendered returns every lease rendered, reflecting every write that
// committed before the call; nil (and no error) when the database offers
// no change counter, and the listing must be read.
//
// Nothing in the body depends on the clock: a lease's status is the
// stored one, moved by the event manager's writes, which move the
// version like any other.
func (s *Service) rendered(ctx context.Context) (*renderedListing, error) {
	c := &s.listCache
	v, ok, err := c.watch.Version(ctx, s.db)
	if err != nil || !ok {
		return nil, err
	}
	if r := c.cached(v); r != nil {
		return r, nil
	}
	if err := c.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer c.gate.Leave()
	// The caller before may have loaded it meanwhile.
	if r := c.cached(v); r != nil {
		return r, nil
	}
	// Read after the version: a write racing with this load moves the
	// version again, and the next request reloads.
	c.loads.Add(1)
	r, err := s.incremental(ctx, Caller{Admin: true})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.body == nil || v.Epoch != c.at.Epoch || v.V >= c.at.V {
		c.at, c.body = v, r
	}
	c.mu.Unlock()
	return r, nil
}

// of returns the JSON array of the leases c may see: the shared body
// itself for an admin (read only), else a new array of the project's
// leases in the same order, byte for byte what the project's own query
// renders.
func (r *renderedListing) of(c Caller) []byte {
	if c.Admin {
		return r.body
	}
	n := 2
	for _, s := range r.segs {
		if s.project == c.ProjectID {
			n += s.to - s.from + 1
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	first := true
	for _, s := range r.segs {
		if s.project != c.ProjectID {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, r.body[s.from:s.to]...)
	}
	return append(b, ']')
}
