package leases

import (
	"cmp"
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// The listing read path (GET /v1/leases): a fixed number of queries
// (leases, reservations and events, read concurrently, and one or two
// per plugin through DescribeListed; a plugin without it is asked per
// 500 reservations), typed rows scanned with database/sql instead of
// GORM's reflection, and the JSON appended from those rows into one pre-sized
// buffer. The bytes are those encoding/json writes for []*View: struct
// fields in declaration order, reservation keys sorted (a map), strings
// escaped as encoding/json escapes them.

// listing is the typed rows of a lease listing: the leases in listing
// order, each with its reservations and events in display order, and the
// plugin fields by reservation id.
type listing struct {
	leases []listedLease
	extra  map[string]map[string]any
	nRes   int
	nEv    int
}

type listedLease struct {
	l    models.Lease
	ress []*models.Reservation
	evs  []*models.Event
	// created and resCreated are the created_at of the lease and of its
	// reservations as SQLite stores them (see listing).
	created    string
	resCreated []string
}

// List returns the leases the caller may see: its project's, or all for
// an admin.
func (s *Service) List(ctx context.Context, c Caller) ([]*View, error) {
	l, err := s.listing(ctx, c)
	if err != nil {
		return nil, err
	}
	return l.views(), nil
}

// AppendList appends to b the JSON array of the leases the caller may
// see (what List returns, as encoding/json would write it).
func (s *Service) AppendList(ctx context.Context, c Caller, b []byte) ([]byte, error) {
	body, err := s.ListJSON(ctx, c)
	if err != nil {
		return nil, err
	}
	return append(b, body...), nil
}

// ListJSON returns the JSON array of the leases the caller may see, as
// AppendList appends it. The bytes may be shared with other callers
// (the cached listing, see listing_cache.go): read them, never write.
func (s *Service) ListJSON(ctx context.Context, c Caller) ([]byte, error) {
	if c.Admin {
		r, err := s.rendered(ctx)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return r.body, nil
		}
	} else if body, err := s.projectJSON(ctx, c); err != nil || body != nil {
		return body, err
	}
	r, err := s.incremental(ctx, c)
	if err != nil {
		return nil, err
	}
	return r.body, nil
}

// TimeExpr is the select expression reading the date column col for a
// TimeCol: on SQLite the stored text itself, which TimeCol parses much
// faster than the driver's layout-by-layout search.
func TimeExpr(d db.Dialect, col string) string {
	if d == db.SQLite {
		return "CAST(" + col + " AS TEXT)"
	}
	return col
}

func (s *Service) listing(ctx context.Context, c Caller) (*listing, error) {
	return s.listingOf(ctx, c, nil)
}

// listingOf reads the listing of c's leases, or when buckets is not nil
// of the leases in those buckets' id ranges (pkg/db BucketRange, which
// hold other ids too), described by the plugins' Describe rather than
// DescribeListed.
func (s *Service) listingOf(ctx context.Context, c Caller, buckets []string) (*listing, error) {
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	t := func(col string) string { return TimeExpr(s.db.Dialect, col) }
	var join, where, leaseWhere string
	var args []any
	var project *string
	switch {
	case buckets != nil:
		where, args = BucketWhere("x.lease_id", buckets)
		leaseWhere, _ = BucketWhere("l.id", buckets)
		where, leaseWhere = " WHERE "+where, " WHERE "+leaseWhere
	case !c.Admin:
		join, where, args = " JOIN leases l ON l.id = x.lease_id", " WHERE l.project_id = ?", []any{c.ProjectID}
		leaseWhere = where
		project = &c.ProjectID
	}
	// SQLite sorts the rows of an unindexed ORDER BY in a sorter as slow
	// as the scan itself: there the rows are sorted here instead, by the
	// same keys compared the same way (the stored text, bytewise, as
	// SQLite's BINARY collation). MySQL sorts by its own collation.
	order := func(cols string) string {
		if s.db.Dialect == db.SQLite {
			return ""
		}
		return " ORDER BY " + cols
	}
	type resRow struct {
		r       *models.Reservation
		created string
	}
	var (
		evSlab  slab[models.Event]
		resSlab slab[models.Reservation]
		ls      []listedLease
		rs      []resRow
		evs     []*models.Event
		extra   map[string]map[string]any
		errs    [3]error
		wg      sync.WaitGroup
	)
	// The three tables are read concurrently, each on its own
	// connection; rows of a lease created between two reads have no
	// lease here and are left out.
	wg.Go(func() {
		errs[0] = db.EachRow(ctx, sqlDB, "SELECT l.id, l.name, l.user_id, l.project_id, "+t("l.start_date")+", "+t("l.end_date")+
			", l.trust_id, l.status, l.degraded, "+t("l.created_at")+", "+t("l.updated_at")+", l.lease_type, l.timeout, l.tags"+
			" FROM leases l"+leaseWhere+order("l.created_at, l.id"), args, func(rows *sql.Rows) error {
			var x listedLease
			var start, end, created, updated TimeCol
			var timeout sql.NullInt64
			var tags sql.NullString
			if err := rows.Scan(Str{&x.l.ID}, Str{&x.l.Name}, Str{&x.l.UserID}, Str{&x.l.ProjectID}, &start, &end,
				Str{&x.l.TrustID}, Str{&x.l.Status}, &x.l.Degraded, &created, &updated, Str{&x.l.LeaseType}, &timeout, &tags); err != nil {
				return err
			}
			x.l.StartDate, x.l.EndDate, x.l.CreatedAt, x.l.UpdatedAt = start.T, end.T, created.T, updated.Ptr()
			x.created = created.Raw
			if timeout.Valid {
				n := int(timeout.Int64)
				x.l.Timeout = &n
			}
			if tags.Valid {
				x.l.Tags = &tags.String
			}
			ls = append(ls, x)
			return nil
		})
		if errs[0] == nil && s.db.Dialect == db.SQLite {
			slices.SortFunc(ls, func(a, b listedLease) int {
				return cmp.Or(strings.Compare(a.created, b.created), strings.Compare(a.l.ID, b.l.ID))
			})
		}
	})
	wg.Go(func() {
		errs[1] = db.EachRow(ctx, sqlDB, "SELECT x.id, x.lease_id, x.resource_id, x.resource_type, x.status, x.missing_resources, x.resources_changed, "+
			t("x.created_at")+", "+t("x.updated_at")+" FROM reservations x"+join+where+order("x.created_at, x.id"), args, func(rows *sql.Rows) error {
			r := resSlab.next()
			var created, updated TimeCol
			if err := rows.Scan(Str{&r.ID}, Str{&r.LeaseID}, Str{&r.ResourceID}, Str{&r.ResourceType}, Str{&r.Status},
				&r.MissingResources, &r.ResourcesChanged, &created, &updated); err != nil {
				return err
			}
			r.CreatedAt, r.UpdatedAt = created.T, updated.Ptr()
			rs = append(rs, resRow{r, created.Raw})
			return nil
		})
		if errs[1] != nil || len(rs) == 0 {
			return
		}
		ress := make([]*models.Reservation, len(rs))
		for i := range rs {
			ress[i] = rs[i].r
		}
		var listed func(plugins.Plugin) (map[string]map[string]any, bool, error)
		if buckets == nil {
			listed = func(p plugins.Plugin) (map[string]map[string]any, bool, error) {
				if l, ok := p.(listDescriber); ok {
					m, err := l.DescribeListed(ctx, sqlDB, project)
					return m, true, err
				}
				return nil, false, nil
			}
		}
		extra, errs[1] = s.describe(ctx, s.db.DB, ress, listed)
	})
	wg.Go(func() {
		errs[2] = db.EachRow(ctx, sqlDB, "SELECT x.id, x.lease_id, x.event_type, "+t("x.time")+", x.status, "+t("x.created_at")+", "+t("x.updated_at")+
			" FROM events x"+join+where, args, func(rows *sql.Rows) error {
			e := evSlab.next()
			var at, created, updated TimeCol
			if err := rows.Scan(Str{&e.ID}, Str{&e.LeaseID}, Str{&e.EventType}, &at, Str{&e.Status}, &created, &updated); err != nil {
				return err
			}
			e.Time, e.CreatedAt, e.UpdatedAt = at.T, created.T, updated.Ptr()
			evs = append(evs, e)
			return nil
		})
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := &listing{leases: ls, extra: extra}
	byID := make(map[string]*listedLease, len(ls))
	for i := range ls {
		byID[ls[i].l.ID] = &ls[i]
	}
	for _, x := range rs {
		if l := byID[x.r.LeaseID]; l != nil {
			l.ress = append(l.ress, x.r)
			l.resCreated = append(l.resCreated, x.created)
			out.nRes++
		}
	}
	for _, e := range evs {
		if l := byID[e.LeaseID]; l != nil {
			l.evs = append(l.evs, e)
			out.nEv++
		}
	}
	for i := range ls {
		if x := &ls[i]; s.db.Dialect == db.SQLite && len(x.ress) > 1 {
			sortReservations(x.ress, x.resCreated)
		}
		// A lease has a handful of events: sorting each alone is
		// cheaper than sorting them all.
		slices.SortFunc(ls[i].evs, func(a, b *models.Event) int {
			if lessEvent(a, b) {
				return -1
			}
			if lessEvent(b, a) {
				return 1
			}
			return 0
		})
	}
	return out, nil
}

// listDescriber is implemented by plugins that describe the reservations
// of a whole listing (every lease of a project, or of every project when
// project is nil) with a fixed number of queries joined on the leases,
// rather than Describe's IN lists of ids.
type listDescriber interface {
	DescribeListed(ctx context.Context, d *sql.DB, project *string) (map[string]map[string]any, error)
}

// slab hands out pointers to values allocated a chunk at a time: one
// allocation per chunk rather than per row.
type slab[T any] struct{ chunk []T }

func (s *slab[T]) next() *T {
	if len(s.chunk) == cap(s.chunk) {
		s.chunk = make([]T, 0, 512)
	}
	s.chunk = s.chunk[:len(s.chunk)+1]
	return &s.chunk[len(s.chunk)-1]
}

// sortReservations sorts a lease's few reservations by created (their
// stored created_at) then id: insertion sort on both slices.
func sortReservations(ress []*models.Reservation, created []string) {
	for i := 1; i < len(ress); i++ {
		for j := i; j > 0 && cmp.Or(strings.Compare(created[j], created[j-1]), strings.Compare(ress[j].ID, ress[j-1].ID)) < 0; j-- {
			ress[j], ress[j-1] = ress[j-1], ress[j]
			created[j], created[j-1] = created[j-1], created[j]
		}
	}
}

// describe asks each plugin for the fields of its reservations, 500 at a
// time (SQLite's and MySQL's limits on IN lists stay far away).
// listed, when not nil, describes the reservations of a plugin at once
// (true) or leaves them to Describe (false).
func (s *Service) describe(ctx context.Context, g *gorm.DB, ress []*models.Reservation,
	listed func(plugins.Plugin) (map[string]map[string]any, bool, error)) (map[string]map[string]any, error) {
	byType := map[string][]*models.Reservation{}
	for _, r := range ress {
		byType[r.ResourceType] = append(byType[r.ResourceType], r)
	}
	extra := make(map[string]map[string]any, len(ress))
	for rt, rs := range byType {
		p, ok := s.plugins.Lookup(rt)
		if !ok {
			continue
		}
		if listed != nil {
			m, done, err := listed(p)
			if err != nil {
				return nil, err
			}
			if done {
				maps.Copy(extra, m)
				continue
			}
		}
		for from := 0; from < len(rs); from += 500 {
			m, err := p.Describe(ctx, g, rs[from:min(from+500, len(rs))])
			if err != nil {
				return nil, err
			}
			maps.Copy(extra, m)
		}
	}
	return extra, nil
}

// views is the listing as the API's View values.
func (l *listing) views() []*View {
	out := make([]*View, len(l.leases))
	for i := range l.leases {
		x := &l.leases[i]
		v := newView(&x.l)
		for _, r := range x.ress {
			m := reservationView(r)
			for k, v := range l.extra[r.ID] {
				m[k] = v
			}
			v.Reservations = append(v.Reservations, m)
		}
		for _, e := range x.evs {
			v.Events = append(v.Events, eventView(e))
		}
		out[i] = v
	}
	return out
}
