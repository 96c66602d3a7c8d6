package hosts

import (
	"context"
	"database/sql"
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
// reservations hold) under the lease's version, the sum of its
// lease_changes rows the database's triggers append (pkg/db 0013; the
// host allocations are among the rows they watch). A listing reads the
// log's total first: unchanged, with the same hosts and the clock still
// inside the span the last body holds for, that body is served. Else it
// reads every lease's version, reads again only the leases whose version
// moved (all at once when many did), and regroups the kept entries by
// host in memory. The rows are read after the versions, so an entry is
// never older than the version it is kept under.

// leaseAllocs is one lease's part of the allocation listing.
type leaseAllocs struct {
	version    int64
	start, end leases.TimeCol
	allocs     []hostRes // by host and reservation, as read
}

type hostRes struct{ host, res string }

// allocFrags holds the entries by lease id, and the last body joined.
type allocFrags struct {
	mu   sync.Mutex
	m    map[string]*leaseAllocs
	body []byte
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
	vs, err := leases.ReadVersions(ctx, sqlDB)
	if err != nil {
		return nil, time.Time{}, err
	}
	total := vs.Total
	ids, err := hostIDs(ctx, sqlDB)
	if err != nil {
		return nil, time.Time{}, err
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if fa.body != nil && fa.total == total && slices.Equal(fa.hosts, ids) && !now.Before(fa.from) && (fa.until.IsZero() || now.Before(fa.until)) {
		return fa.body, fa.until, nil
	}
	var (
		keep  = make(map[string]*leaseAllocs, len(fa.m))
		stale = map[string]int64{}
		ids2  []string
	)
	err = leases.EachLease(ctx, sqlDB, nil, func(id []byte) {
		version := vs.Sums[string(id)]
		if e := fa.m[string(id)]; e != nil && e.version == version {
			keep[string(id)] = e
			return
		}
		stale[string(id)] = version
		ids2 = append(ids2, string(id))
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(ids2) > 0 {
		var fresh map[string]*leaseAllocs
		if len(ids2)*4 > len(keep)+len(ids2) {
			fresh, err = s.readLeaseAllocs(ctx, sqlDB, nil)
		} else {
			fresh = map[string]*leaseAllocs{}
			for from := 0; from < len(ids2) && err == nil; from += 500 {
				var m map[string]*leaseAllocs
				m, err = s.readLeaseAllocs(ctx, sqlDB, ids2[from:min(from+500, len(ids2))])
				for k, v := range m {
					fresh[k] = v
				}
			}
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		// A lease created after the versions were read waits for the
		// next listing; one deleted since is left out.
		for id, v := range stale {
			if e := fresh[id]; e != nil {
				e.version = v
				keep[id] = e
			}
		}
		fa.read.Add(int64(len(ids2)))
	}
	fa.m = keep
	body, until = renderLeaseAllocs(ids, keep, now, s.db.Dialect)
	fa.body, fa.total, fa.hosts, fa.from, fa.until = body, total, ids, now, until
	return body, until, nil
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
// leases ids (of every lease when nil), the two tables side by side.
func (s *Service) readLeaseAllocs(ctx context.Context, d *sql.DB, ids []string) (map[string]*leaseAllocs, error) {
	t := func(col string) string { return leases.TimeExpr(s.db.Dialect, col) }
	var leaseWhere, resWhere string
	var args []any
	if ids != nil {
		in := strings.Repeat(",?", len(ids))[1:]
		leaseWhere, resWhere = " WHERE id IN ("+in+")", " WHERE r.lease_id IN ("+in+")"
		for _, id := range ids {
			args = append(args, id)
		}
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

// renderLeaseAllocs regroups the entries of the leases ending at or
// after now by host, in the order of the SQL join (start date, as SQLite
// compares the stored text or MySQL the value, then reservation id), and
// renders them; until is the earliest end among the leases shown.
func renderLeaseAllocs(ids []string, m map[string]*leaseAllocs, now time.Time, dialect db.Dialect) ([]byte, time.Time) {
	type row struct {
		host, res, lease string
		e                *leaseAllocs
	}
	n := 0
	for _, e := range m {
		n += len(e.allocs)
	}
	all := make([]row, 0, n)
	var until time.Time
	for id, e := range m {
		if len(e.allocs) == 0 || e.end.T.Before(now) {
			continue
		}
		if until.IsZero() || e.end.T.Before(until) {
			until = e.end.T
		}
		for _, a := range e.allocs {
			all = append(all, row{a.host, a.res, id, e})
		}
	}
	slices.SortFunc(all, func(a, b row) int {
		var c int
		if dialect == db.SQLite {
			c = strings.Compare(a.e.start.Raw, b.e.start.Raw)
		} else {
			c = a.e.start.T.Compare(b.e.start.T)
		}
		if c != 0 {
			return c
		}
		return strings.Compare(a.res, b.res)
	})
	byHost := make(map[string][]HostReservation, len(ids))
	for _, x := range all {
		byHost[x.host] = append(byHost[x.host], HostReservation{ID: x.res, LeaseID: x.lease, StartDate: x.e.start.T, EndDate: x.e.end.T})
	}
	return renderAllocations(ids, byHost), until
}
