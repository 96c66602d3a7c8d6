package placement

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

// ListProviders returns the providers matching f, ordered by id.
//
// The filters (in_tree, required, member_of, resources) are answered from
// the allocation-candidates snapshot, which holds every provider's tree,
// traits, aggregates, inventory and usage and is current as of the call
// (its marker is read after the request arrived); only the matching
// providers' own columns (name, generation, times) are then read, in one
// statement, or on SQLite taken from the rows kept since the last commit
// anywhere (PRAGMA data_version). A filter naming something the snapshot does not know (an
// unknown trait, class, aggregate or in_tree provider), the name and
// uuid filters, and in_tree on MySQL go to the database path, which words upstream's errors and
// empty answers and applies the database's collation.
func (s *Service) ListProviders(ctx context.Context, f ProviderFilter) ([]Provider, error) {
	if f.Name != "" || f.UUID != "" {
		return s.listProvidersSQL(ctx, f)
	}
	if f.InTree != "" && s.db.Dialect != db.SQLite {
		// One tree is a few indexed rows, cheaper to read than the
		// snapshot's marker is on MySQL (a scan of five tables); this is
		// the call nova-compute makes for its node on every update.
		return s.listProvidersSQL(ctx, f)
	}
	snap, err := s.candidateSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	q := candidates.ProviderQuery{
		InTree: f.InTree, RequiredTraits: f.RequiredTraits, ForbiddenTraits: f.ForbiddenTraits,
		MemberOf: f.MemberOf, ForbiddenAggs: f.ForbiddenAggs,
	}
	for _, r := range f.Resources {
		q.Resources = append(q.Resources, candidates.Amount{Class: r.Class, Amount: r.Amount})
	}
	refs, ok := snap.MatchProviders(q)
	if !ok {
		return s.listProvidersSQL(ctx, f)
	}
	ps, err := s.providerRows(ctx, refs, snap.ProviderCount())
	if errors.Is(err, errTimeText) {
		// A time stored in a form the fast reader does not know: let the
		// driver read it.
		return s.listProvidersSQL(ctx, f)
	}
	return ps, err
}

// providerRowsInMax is the largest match read by id list; a larger one
// reads the whole table in id order (one sequential scan beats a long IN
// list, and keeps the statement text constant for the statement cache).
const providerRowsInMax = 64

// providerRow is a provider's own columns, the part of a listing the
// snapshot does not hold.
type providerRow struct {
	id               int64
	name             string
	generation       int64
	created, updated time.Time
}

// providerRowCache holds every provider's row as of one SQLite
// data_version (which changes with any commit by any connection or
// process), so listings between writes read no rows at all. The rows
// read by id (in_tree: nova-compute asks for its own tree on every
// update) are kept too, under the version they were read at, up to
// providerRowsSomeMax of them.
type providerRowCache struct {
	mu     sync.Mutex
	dv     int64
	rows   []providerRow // id order; never modified once stored
	someDV int64
	some   map[int64]providerRow
}

const providerRowsSomeMax = 4096

// kept returns the rows of ids read at dv, or nil when any is missing.
func (c *providerRowCache) kept(dv int64, ids []int64) []providerRow {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.some == nil || c.someDV != dv {
		return nil
	}
	rows := make([]providerRow, 0, len(ids))
	for _, id := range ids {
		r, ok := c.some[id]
		if !ok {
			return nil
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b providerRow) int { return cmp.Compare(a.id, b.id) })
	return rows
}

// keep stores rows read by id at dv.
func (c *providerRowCache) keep(dv int64, rows []providerRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.some == nil || c.someDV != dv || len(c.some)+len(rows) > providerRowsSomeMax {
		c.some, c.someDV = make(map[int64]providerRow, len(rows)), dv
	}
	for _, r := range rows {
		c.some[r.id] = r
	}
}

// providerRows returns the providers refs (in id order) with their own
// columns. A provider deleted since the snapshot was read is left out.
func (s *Service) providerRows(ctx context.Context, refs []candidates.ProviderRef, total int) ([]Provider, error) {
	out := make([]Provider, 0, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	dv, haveDV := s.snapshots.currentDataVersion(ctx, s.db)
	var rows []providerRow
	if haveDV {
		c := s.provRows
		c.mu.Lock()
		if c.rows != nil && c.dv == dv {
			rows = c.rows
		}
		c.mu.Unlock()
	}
	if rows == nil {
		// A few providers (in_tree) are read by id; a full read is kept
		// for the next listings when data_version can tell its age (read
		// before the rows: a commit in between makes the next call
		// read them again).
		var ids []int64
		if len(refs) <= providerRowsInMax && len(refs) < total {
			ids = make([]int64, len(refs))
			for i, r := range refs {
				ids[i] = r.ID
			}
		}
		if haveDV && ids != nil {
			rows = s.provRows.kept(dv, ids)
		}
		if rows == nil {
			var err error
			if rows, err = s.readProviderRows(ctx, ids); err != nil {
				return nil, err
			}
			switch {
			case haveDV && ids == nil:
				c := s.provRows
				c.mu.Lock()
				c.dv, c.rows = dv, rows
				c.mu.Unlock()
			case haveDV:
				s.provRows.keep(dv, rows)
			}
		}
	}
	for i := range refs {
		r := &refs[i]
		j, found := slices.BinarySearchFunc(rows, r.ID, func(row providerRow, id int64) int { return cmp.Compare(row.id, id) })
		if !found {
			continue
		}
		row := &rows[j]
		p := Provider{ID: row.id, UUID: r.UUID, Name: row.name, Generation: row.generation,
			RootProviderUUID: r.RootUUID, RootProviderID: r.RootID, CreatedAt: row.created, UpdatedAt: row.updated}
		if r.ParentUUID != "" {
			parent, parentID := r.ParentUUID, r.ParentID
			p.ParentProviderUUID, p.ParentProviderID = &parent, &parentID
		}
		out = append(out, p)
	}
	return out, nil
}

// readProviderRows reads the rows of the providers ids (all when nil), in
// id order.
func (s *Service) readProviderRows(ctx context.Context, ids []int64) ([]providerRow, error) {
	// On SQLite the driver would try several layouts on every time it
	// reads (a third of a listing's cost); reading them as text and
	// parsing the one layout the service writes is much cheaper.
	sqliteText := s.db.Dialect == db.SQLite
	q := "SELECT id, name, generation, created_at, updated_at FROM resource_providers"
	if sqliteText {
		q = "SELECT id, name, generation, CAST(created_at AS TEXT), CAST(updated_at AS TEXT) FROM resource_providers"
	}
	var args []any
	if ids != nil {
		var b strings.Builder
		b.WriteString(q)
		b.WriteString(" WHERE id IN (")
		args = make([]any, len(ids))
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args[i] = id
		}
		b.WriteByte(')')
		q = b.String()
	}
	q += " ORDER BY id"
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, wrap("list providers", err)
	}
	rows := make([]providerRow, 0, len(ids))
	err = db.EachRow(ctx, sqlDB, q, args, func(r *sql.Rows) error {
		var p providerRow
		if sqliteText {
			var created, updated string
			if err := r.Scan(&p.id, &p.name, &p.generation, &created, &updated); err != nil {
				return err
			}
			var ok1, ok2 bool
			p.created, ok1 = parseSQLiteTime(created)
			p.updated, ok2 = parseSQLiteTime(updated)
			if !ok1 || !ok2 {
				return errTimeText
			}
		} else if err := r.Scan(&p.id, &p.name, &p.generation, &p.created, &p.updated); err != nil {
			return err
		}
		rows = append(rows, p)
		return nil
	})
	if err != nil {
		return nil, wrap("list providers", err)
	}
	return rows, nil
}

var errTimeText = errors.New("provider time in an unknown text form")

// sqliteTimeLayouts are the forms the SQLite driver reads times in (its
// own list, time zone offset first).
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseSQLiteTime reads a time as the SQLite driver stores it
// ("2006-01-02 15:04:05.999999999-07:00", the fraction optional): that
// layout directly, any other the driver accepts through time.Parse.
func parseSQLiteTime(s string) (time.Time, bool) {
	if t, ok := parseTimeFast(s); ok {
		return t, true
	}
	s = strings.TrimSuffix(s, "Z")
	for _, l := range sqliteTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// parseTimeFast parses "YYYY-MM-DD HH:MM:SS[.fraction](+|-)HH:MM".
func parseTimeFast(s string) (time.Time, bool) {
	if len(s) < 25 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(a, b int) int {
		n := 0
		for i := a; i < b; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	i, nsec := 19, 0
	if s[i] == '.' {
		i++
		digits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if digits < 9 {
				nsec = nsec*10 + int(s[i]-'0')
				digits++
			}
			i++
		}
		if digits == 0 {
			return time.Time{}, false
		}
		for ; digits < 9; digits++ {
			nsec *= 10
		}
	}
	if len(s)-i != 6 || (s[i] != '+' && s[i] != '-') || s[i+3] != ':' {
		return time.Time{}, false
	}
	// time.Parse takes offsets up to 24:60 (some write 24 hours or 60
	// minutes), no further.
	zh, zm := num(i+1, i+3), num(i+4, i+6)
	if year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
		minute < 0 || minute > 59 || sec < 0 || sec > 59 || zh < 0 || zh > 24 || zm < 0 || zm > 60 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day {
		return time.Time{}, false // Feb 30 and the like: time.Parse refuses them
	}
	off := time.Duration(zh)*time.Hour + time.Duration(zm)*time.Minute
	if s[i] == '+' {
		t = t.Add(-off)
	} else {
		t = t.Add(off)
	}
	if off != 0 {
		// time.Parse keeps the offset as a fixed zone.
		sign := 1
		if s[i] == '-' {
			sign = -1
		}
		t = t.In(time.FixedZone("", sign*int(off/time.Second)))
	}
	return t, true
}
