package leases

import (
	"context"
	"database/sql"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/pkg/db"
)

// The leases' rendered objects are kept by bucket (the first two
// characters of the lease id, pkg/db LeaseBucket), each bucket's with
// the version it was read at: the sum of the bucket's rows in
// lease_changes, a log the database itself appends to (triggers, see
// pkg/db 0013) in the transaction of any write to a row an object shows,
// whoever writes it. A listing first reads every bucket's version from
// the log's index alone (a few hundred rows with UUID ids, whatever the
// number of leases), and their total: equal to the one the last listing
// was joined at, nothing listed changed and that body is served. Else it
// reads again the leases of the buckets whose version moved, by primary
// key range, and replaces those buckets' objects wholesale, so a lease
// deleted since drops out without listing every id (all leases at once
// when many buckets moved). The kept objects stay in listing order: the
// untouched ones in the order they were, merged with the new ones
// sorted. Rows are read after the versions: an object is never older
// than the version it is kept under, and a write racing with the read
// moves the version again, so the next listing reads the bucket anew.
// A member's listing is cut from the same objects (their project is
// kept with them).

// leaseFrag is one lease's object in the listing.
type leaseFrag struct {
	id      string
	bucket  string
	project string
	// key sorts the objects in listing order: created_at as stored
	// (SQLite compares the text) or as a time (MySQL compares the
	// value), then id.
	key  string
	body []byte
}

// fragCache holds the leases' rendered objects in listing order, the
// version of each bucket they were read at, and the admin listing joined
// from them.
type fragCache struct {
	mu      sync.Mutex
	buckets map[string]int64
	order   []*leaseFrag
	body    *renderedListing
	// total is the log's total read before body's versions.
	total      int64
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

// fullReadShare: when more than this share of the buckets moved, every
// lease is read (a fixed number of queries) rather than the buckets'
// ranges.
const fullReadShare = 4

// incremental returns the listing of c's leases, reflecting every write
// that committed before the call.
func (s *Service) incremental(ctx context.Context, c Caller) (*renderedListing, error) {
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	fc := &s.frags
	vs, err := ReadBucketVersions(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	// One listing at a time joins: the others wait, then mostly find
	// the body current.
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.body == nil || fc.total != vs.Total {
		if err := s.refresh(ctx, vs); err != nil {
			return nil, err
		}
	}
	if vs.Rows > int64(len(vs.Sums)+compactSlack) {
		s.compactSoon()
	}
	if c.Admin {
		return fc.body, nil
	}
	return &renderedListing{body: fc.body.of(c)}, nil
}

// refresh reads again the buckets whose version moved and joins the
// body; fc.mu is held.
func (s *Service) refresh(ctx context.Context, vs *BucketVersions) error {
	fc := &s.frags
	changed := vs.Changed(fc.buckets)
	full := fc.buckets == nil || len(changed)*fullReadShare > len(vs.Sums)
	var l *listing
	var err error
	if full {
		l, err = s.listing(ctx, Caller{Admin: true})
	} else if len(changed) > 0 {
		l, err = s.listingOf(ctx, Caller{Admin: true}, changed)
	}
	if err != nil {
		return err
	}
	moved := make(map[string]bool, len(changed))
	for _, b := range changed {
		moved[b] = true
	}
	var fresh []*leaseFrag
	if l != nil {
		var keys keyOrder
		fresh = make([]*leaseFrag, 0, len(l.leases))
		for i := range l.leases {
			x := &l.leases[i]
			// A range holds ids of other buckets too.
			b := db.LeaseBucket(x.l.ID)
			if !full && !moved[b] {
				continue
			}
			body := make([]byte, 0, 400+560*len(x.ress)+280*len(x.evs))
			if body, err = l.appendLease(body, x, &keys); err != nil {
				return err
			}
			fresh = append(fresh, &leaseFrag{id: x.l.ID, bucket: b, project: x.l.ProjectID, key: sortKey(x), body: body})
		}
		fc.rendered.Add(int64(len(fresh)))
	}
	byKey := func(a, b *leaseFrag) int { return strings.Compare(a.key, b.key) }
	slices.SortFunc(fresh, byKey)
	if full {
		fc.buckets = maps.Clone(vs.Sums)
		fc.order = fresh
	} else {
		// The untouched objects keep their order; the new ones are
		// merged in.
		old := fc.order
		order := make([]*leaseFrag, 0, len(old)+len(fresh))
		i := 0
		for _, f := range old {
			if moved[f.bucket] {
				continue
			}
			for i < len(fresh) && byKey(fresh[i], f) < 0 {
				order = append(order, fresh[i])
				i++
			}
			order = append(order, f)
		}
		order = append(order, fresh[i:]...)
		fc.order = order
		for _, b := range changed {
			if v, ok := vs.Sums[b]; ok {
				fc.buckets[b] = v
			} else {
				delete(fc.buckets, b)
			}
		}
	}
	n := 2
	for _, f := range fc.order {
		n += len(f.body) + 1
	}
	r := &renderedListing{body: make([]byte, 0, n), segs: make([]leaseSeg, len(fc.order))}
	r.body = append(r.body, '[')
	for i, f := range fc.order {
		if i > 0 {
			r.body = append(r.body, ',')
		}
		r.segs[i] = leaseSeg{from: len(r.body), to: len(r.body) + len(f.body), project: f.project}
		r.body = append(r.body, f.body...)
	}
	r.body = append(r.body, ']')
	fc.body, fc.total = r, vs.Total
	return nil
}

// compactSlack is how many more log rows than one per bucket the
// listing lets pile up before it starts a compaction: every listing
// scans them all.
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

// BucketVersions is what lease_changes (pkg/db 0013) says of every
// bucket of lease ids.
type BucketVersions struct {
	// Sums is the version of each bucket with rows (absent: 0).
	Sums map[string]int64
	// Total is the sum of every row: it grows with every commit that
	// changes a row a lease listing or the allocation listing shows, and
	// compaction keeps it, so equal totals mean nothing listed changed
	// in between. Rows is the number of rows.
	Total, Rows int64
}

// ReadBucketVersions reads BucketVersions in one statement, a scan of
// the index (bucket, n) alone.
func ReadBucketVersions(ctx context.Context, d *sql.DB) (*BucketVersions, error) {
	v := &BucketVersions{Sums: make(map[string]int64, 256)}
	var (
		b        sql.RawBytes
		sum, cnt int64
	)
	err := db.EachRow(ctx, d, "SELECT bucket, SUM(n), COUNT(*) FROM "+db.LeaseChangesTable+" GROUP BY bucket", nil, func(rows *sql.Rows) error {
		if err := rows.Scan(&b, &sum, &cnt); err != nil {
			return err
		}
		v.Sums[string(b)] = sum
		v.Total += sum
		v.Rows += cnt
		return nil
	})
	return v, err
}

// Changed returns the buckets whose version in v is not the one in kept
// (absent from either: 0), sorted.
func (v *BucketVersions) Changed(kept map[string]int64) []string {
	var out []string
	for b, n := range v.Sums {
		if kept[b] != n {
			out = append(out, b)
		}
	}
	for b, n := range kept {
		if _, ok := v.Sums[b]; !ok && n != 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// BucketWhere is the condition "col is in the range of one of buckets"
// (pkg/db BucketRange) and its arguments. The ranges also hold ids of
// other buckets: the reader keeps those of buckets.
func BucketWhere(col string, buckets []string) (string, []any) {
	var w strings.Builder
	args := make([]any, 0, 2*len(buckets))
	for i, b := range buckets {
		if i > 0 {
			w.WriteString(" OR ")
		}
		lo, hi := db.BucketRange(b)
		args = append(args, lo)
		if hi == "" {
			w.WriteString(col + " >= ?")
			continue
		}
		w.WriteString("(" + col + " >= ? AND " + col + " < ?)")
		args = append(args, hi)
	}
	return "(" + w.String() + ")", args
}
