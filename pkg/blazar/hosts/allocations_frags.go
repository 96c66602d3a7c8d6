package hosts

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
)

// The unfiltered allocation listing after a write, and on MySQL always,
// keeps each lease's allocations (its window and the hosts its
// reservations hold) by bucket of lease ids (pkg/db LeaseBucket), each
// bucket's under its version, the sum of its lease_changes rows the
// database's triggers append (pkg/db 0013; the host allocations are
// among the rows they watch). A listing reads the buckets' versions and
// their total first (a few hundred rows): the total unchanged, with the
// same hosts and the clock still inside the span the last body holds
// for, that body is served. Else it reads again the leases of the
// buckets whose version moved, by primary key range (every lease when
// many did), replaces those buckets' entries wholesale, merges their
// allocations into the kept ones in listing order and regroups them by
// host. The rows are read after the versions, so an entry is never older
// than the version it is kept under.

// leaseAllocs is one lease's part of the allocation listing.
type leaseAllocs struct {
	start, end leases.TimeCol
	allocs     []hostRes // by host and reservation, as read
}

type hostRes struct{ host, res string }

// allocRow is one host allocation of the listing, with its lease.
type allocRow struct {
	host, res, lease, bucket string
	e                        *leaseAllocs
}

// allocFrags holds every lease's allocations in listing order, the
// version of each bucket they were read at, and the last body joined.
type allocFrags struct {
	mu      sync.Mutex
	buckets map[string]int64
	rows    []allocRow
	body    []byte
	// The last body holds while the log's total and the hosts are
	// unchanged and the clock is within [from, until) (until zero: no
	// lease shown).
	total       int64
	hosts       []string
	from, until time.Time
	read        atomic.Int64 // leases read again (tests)
}

// incrementalAllocations is the unfiltered listing at now, reflecting
// every write committed before the call; until is the earliest end
// among the leases it shows (zero: none).
func (s *Service) incrementalAllocations(ctx context.Context, now time.Time) (body []byte, until time.Time, err error) {
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, time.Time{}, err
	}
	fa := &s.allocFrags
	vs, err := leases.ReadBucketVersions(ctx, sqlDB)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, err := hostIDs(ctx, sqlDB)
	if err != nil {
		return nil, time.Time{}, err
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if fa.body != nil && fa.total == vs.Total && slices.Equal(fa.hosts, ids) && !now.Before(fa.from) && (fa.until.IsZero() || now.Before(fa.until)) {
		return fa.body, fa.until, nil
	}
	if fa.buckets == nil || fa.total != vs.Total {
		changed := vs.Changed(fa.buckets)
		full := fa.buckets == nil || len(changed)*4 > len(vs.Sums)
		var fresh map[string]*leaseAllocs
		switch {
		case full:
			fresh, err = s.readLeaseAllocs(ctx, sqlDB, nil)
		case len(changed) > 0:
			fresh, err = s.readLeaseAllocs(ctx, sqlDB, changed)
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		moved := make(map[string]bool, len(changed))
		for _, b := range changed {
			moved[b] = true
		}
		var rows []allocRow
		for id, e := range fresh {
			// A range holds ids of other buckets too.
			b := db.LeaseBucket(id)
			if !full && !moved[b] {
				continue
			}
			for _, a := range e.allocs {
				rows = append(rows, allocRow{host: a.host, res: a.res, lease: id, bucket: b, e: e})
			}
			fa.read.Add(1)
		}
		cmpRow := rowOrder(s.db.Dialect)
		slices.SortFunc(rows, cmpRow)
		if full {
			fa.rows, fa.buckets = rows, maps.Clone(vs.Sums)
		} else {
			// The untouched rows keep their order; the new ones are
			// merged in.
			out := make([]allocRow, 0, len(fa.rows)+len(rows))
			i := 0
			for _, r := range fa.rows {
				if moved[r.bucket] {
					continue
				}
				for i < len(rows) && cmpRow(rows[i], r) < 0 {
					out = append(out, rows[i])
					i++
				}
				out = append(out, r)
			}
			fa.rows = append(out, rows[i:]...)
			for _, b := range changed {
				if v, ok := vs.Sums[b]; ok {
					fa.buckets[b] = v
				} else {
					delete(fa.buckets, b)
				}
			}
		}
	}
	body, until = renderAllocRows(ids, fa.rows, now)
	fa.body, fa.total, fa.hosts, fa.from, fa.until = body, vs.Total, ids, now, until
	return body, until, nil
}

// rowOrder is the order of the SQL join: start date (as SQLite compares
// the stored text or MySQL the value), then reservation id; then host,
// so that the order is total.
func rowOrder(dialect db.Dialect) func(a, b allocRow) int {
	return func(a, b allocRow) int {
		var c int
		if dialect == db.SQLite {
			c = strings.Compare(a.e.start.Raw, b.e.start.Raw)
		} else {
			c = a.e.start.T.Compare(b.e.start.T)
		}
		if c != 0 {
			return c
		}
		if c = strings.Compare(a.res, b.res); c != 0 {
			return c
		}
		return strings.Compare(a.host, b.host)
	}
}

// hostIDs reads the API ids of every host, in id order.
func hostIDs(ctx context.Context, d *sql.DB) ([]string, error) {
	var ids []string
	err := db.EachRow(ctx, d, "SELECT id FROM computehosts ORDER BY id", nil, func(rows *sql.Rows) error {
		var n sql.RawBytes
		if err := rows.Scan(&n); err != nil {
			return err
		}
		ids = append(ids, string(n))
		return nil
	})
	return ids, err
}

// readLeaseAllocs reads the window and the host allocations of the
// leases in the id ranges of buckets (pkg/db BucketRange, which hold
// other ids too), of every lease when nil, the two tables side by side.
func (s *Service) readLeaseAllocs(ctx context.Context, d *sql.DB, buckets []string) (map[string]*leaseAllocs, error) {
	t := func(col string) string { return leases.TimeExpr(s.db.Dialect, col) }
	var leaseWhere, resWhere string
	var args []any
	if buckets != nil {
		leaseWhere, args = leases.BucketWhere("id", buckets)
		resWhere, _ = leases.BucketWhere("r.lease_id", buckets)
		leaseWhere, resWhere = " WHERE "+leaseWhere, " WHERE "+resWhere
	}
	out := map[string]*leaseAllocs{}
	type alloc struct{ lease, host, res string }
	var (
		allocs []alloc
		errs   [2]error
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		errs[0] = db.EachRow(ctx, d, "SELECT id, "+t("start_date")+", "+t("end_date")+" FROM leases"+leaseWhere, args, func(rows *sql.Rows) error {
			var id string
			e := &leaseAllocs{}
			if err := rows.Scan(leases.Str{P: &id}, &e.start, &e.end); err != nil {
				return err
			}
			out[id] = e
			return nil
		})
	})
	wg.Go(func() {
		errs[1] = db.EachRow(ctx, d, "SELECT r.lease_id, a.compute_host_id, a.reservation_id FROM computehost_allocations a"+
			" JOIN reservations r ON r.id = a.reservation_id"+resWhere, args, func(rows *sql.Rows) error {
			var x alloc
			if err := rows.Scan(leases.Str{P: &x.lease}, leases.Str{P: &x.host}, leases.Str{P: &x.res}); err != nil {
				return err
			}
			allocs = append(allocs, x)
			return nil
		})
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, a := range allocs {
		if e := out[a.lease]; e != nil {
			e.allocs = append(e.allocs, hostRes{a.host, a.res})
		}
	}
	return out, nil
}

// renderAllocRows groups the rows of the leases ending at or after now
// by host, in their order, and renders them; until is the earliest end
// among the leases shown.
func renderAllocRows(ids []string, rows []allocRow, now time.Time) ([]byte, time.Time) {
	var until time.Time
	byHost := make(map[string][]HostReservation, len(ids))
	for _, x := range rows {
		if x.e.end.T.Before(now) {
			continue
		}
		if until.IsZero() || x.e.end.T.Before(until) {
			until = x.e.end.T
		}
		byHost[x.host] = append(byHost[x.host], HostReservation{ID: x.res, LeaseID: x.lease, StartDate: x.e.start.T, EndDate: x.e.end.T})
	}
	return renderAllocations(ids, byHost), until
}
