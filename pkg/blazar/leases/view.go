package leases

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// View is a lease as the API returns it.
type View struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	UserID       string        `json:"user_id"`
	ProjectID    string        `json:"project_id"`
	StartDate    string        `json:"start_date"`
	EndDate      string        `json:"end_date"`
	TrustID      *string       `json:"trust_id"`
	Status       string        `json:"status"`
	Degraded     bool          `json:"degraded"`
	CreatedAt    string        `json:"created_at"`
	UpdatedAt    *string       `json:"updated_at"`
	Reservations []Reservation `json:"reservations"`
	Events       []EventView   `json:"events"`
}

// Reservation is a reservation with its plugin fields merged in.
type Reservation map[string]any

// EventView is an event as the API returns it.
type EventView struct {
	ID        string  `json:"id"`
	LeaseID   string  `json:"lease_id"`
	EventType string  `json:"event_type"`
	Time      string  `json:"time"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt *string `json:"updated_at"`
}

func stampPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatStamp(*t)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Service) view(ctx context.Context, g *gorm.DB, id string) (*View, error) {
	var l models.Lease
	if err := g.WithContext(ctx).Where("id = ?", id).Take(&l).Error; err != nil {
		return nil, err
	}
	vs, err := s.views(ctx, g, []models.Lease{l})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// views renders leases with a constant number of queries (one per table
// and one per plugin), whatever the number of leases.
func (s *Service) views(ctx context.Context, g *gorm.DB, ls []models.Lease) ([]*View, error) {
	out := make([]*View, len(ls))
	if len(ls) == 0 {
		return out, nil
	}
	ids := make([]string, len(ls))
	byID := map[string]*View{}
	for i := range ls {
		ids[i] = ls[i].ID
		v := newView(&ls[i])
		out[i], byID[ls[i].ID] = v, v
	}
	var ress []*models.Reservation
	var evs []models.Event
	// Chunk the IN lists to stay under SQLite's variable limit.
	for from := 0; from < len(ids); from += 500 {
		chunk := ids[from:min(from+500, len(ids))]
		var r []*models.Reservation
		if err := g.WithContext(ctx).Where("lease_id IN ?", chunk).Order("created_at, id").Find(&r).Error; err != nil {
			return nil, err
		}
		ress = append(ress, r...)
		var e []models.Event
		if err := g.WithContext(ctx).Where("lease_id IN ?", chunk).Order("created_at, id").Find(&e).Error; err != nil {
			return nil, err
		}
		evs = append(evs, e...)
	}
	extra, err := s.describe(ctx, g, ress, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range ress {
		m := reservationView(r)
		for k, v := range extra[r.ID] {
			m[k] = v
		}
		byID[r.LeaseID].Reservations = append(byID[r.LeaseID].Reservations, m)
	}
	sortEvents(evs)
	for i := range evs {
		byID[evs[i].LeaseID].Events = append(byID[evs[i].LeaseID].Events, eventView(&evs[i]))
	}
	return out, nil
}

func newView(l *models.Lease) *View {
	return &View{
		ID: l.ID, Name: l.Name, UserID: l.UserID, ProjectID: l.ProjectID,
		StartDate: FormatDate(l.StartDate), EndDate: FormatDate(l.EndDate),
		TrustID: strPtr(l.TrustID), Status: l.Status, Degraded: l.Degraded,
		CreatedAt: FormatStamp(l.CreatedAt), UpdatedAt: stampPtr(l.UpdatedAt),
		Reservations: []Reservation{}, Events: []EventView{},
	}
}

func reservationView(r *models.Reservation) Reservation {
	return Reservation{
		"id": r.ID, "lease_id": r.LeaseID, "resource_id": r.ResourceID, "resource_type": r.ResourceType,
		"status": r.Status, "missing_resources": r.MissingResources, "resources_changed": r.ResourcesChanged,
		"created_at": FormatStamp(r.CreatedAt), "updated_at": stampPtr(r.UpdatedAt),
	}
}

func eventView(e *models.Event) EventView {
	return EventView{
		ID: e.ID, LeaseID: e.LeaseID, EventType: e.EventType, Time: FormatDate(e.Time),
		Status: e.Status, CreatedAt: FormatStamp(e.CreatedAt), UpdatedAt: stampPtr(e.UpdatedAt),
	}
}

// eventRank orders a lease's events as upstream lists them: in the order
// they were created, start_lease, end_lease, before_end_lease, then the
// extra ones.
var eventRank = map[string]int{EventStart: 0, EventEnd: 1, EventBeforeEnd: 2}

func rank(typ string) int {
	if r, ok := eventRank[typ]; ok {
		return r
	}
	return len(eventRank)
}

// sortEvents orders events by creation, then start, end, before-end,
// extra, then id.
func sortEvents(evs []models.Event) {
	sort.SliceStable(evs, func(i, j int) bool { return lessEvent(&evs[i], &evs[j]) })
}

func lessEvent(a, b *models.Event) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	if ra, rb := rank(a.EventType), rank(b.EventType); ra != rb {
		return ra < rb
	}
	return a.ID < b.ID
}

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
	l, err := s.listing(ctx, c)
	if err != nil {
		return nil, err
	}
	return l.appendJSON(b)
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
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		return nil, err
	}
	t := func(col string) string { return TimeExpr(s.db.Dialect, col) }
	var join, where string
	var args []any
	var project *string
	if !c.Admin {
		join, where, args = " JOIN leases l ON l.id = x.lease_id", " WHERE l.project_id = ?", []any{c.ProjectID}
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
		errs[0] = query(ctx, sqlDB, "SELECT l.id, l.name, l.user_id, l.project_id, "+t("l.start_date")+", "+t("l.end_date")+
			", l.trust_id, l.status, l.degraded, "+t("l.created_at")+", "+t("l.updated_at")+
			" FROM leases l"+where+order("l.created_at, l.id"), args, func(rows *sql.Rows) error {
			var x listedLease
			var start, end, created, updated TimeCol
			if err := rows.Scan(Str{&x.l.ID}, Str{&x.l.Name}, Str{&x.l.UserID}, Str{&x.l.ProjectID}, &start, &end,
				Str{&x.l.TrustID}, Str{&x.l.Status}, &x.l.Degraded, &created, &updated); err != nil {
				return err
			}
			x.l.StartDate, x.l.EndDate, x.l.CreatedAt, x.l.UpdatedAt = start.T, end.T, created.T, updated.Ptr()
			x.created = created.Raw
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
		errs[1] = query(ctx, sqlDB, "SELECT x.id, x.lease_id, x.resource_id, x.resource_type, x.status, x.missing_resources, x.resources_changed, "+
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
		extra, errs[1] = s.describe(ctx, s.db.DB, ress, func(p plugins.Plugin) (map[string]map[string]any, bool, error) {
			if l, ok := p.(listDescriber); ok {
				m, err := l.DescribeListed(ctx, sqlDB, project)
				return m, true, err
			}
			return nil, false, nil
		})
	})
	wg.Go(func() {
		errs[2] = query(ctx, sqlDB, "SELECT x.id, x.lease_id, x.event_type, "+t("x.time")+", x.status, "+t("x.created_at")+", "+t("x.updated_at")+
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

// query runs q and calls scan for each row.
func query(ctx context.Context, d *sql.DB, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := d.QueryContext(ctx, q, args...)
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

// appendJSON appends the listing as encoding/json writes l.views().
func (l *listing) appendJSON(b []byte) ([]byte, error) {
	// A generous estimate of the body: one allocation for the whole of it.
	b = slices.Grow(b, 2+400*len(l.leases)+560*l.nRes+280*l.nEv)
	b = append(b, '[')
	var keys keyOrder
	var err error
	for i := range l.leases {
		if i > 0 {
			b = append(b, ',')
		}
		x := &l.leases[i]
		b = append(b, `{"id":`...)
		b = AppendString(b, x.l.ID)
		b = append(b, `,"name":`...)
		b = AppendString(b, x.l.Name)
		b = append(b, `,"user_id":`...)
		b = AppendString(b, x.l.UserID)
		b = append(b, `,"project_id":`...)
		b = AppendString(b, x.l.ProjectID)
		b = append(b, `,"start_date":`...)
		b = AppendDate(b, x.l.StartDate)
		b = append(b, `,"end_date":`...)
		b = AppendDate(b, x.l.EndDate)
		b = append(b, `,"trust_id":`...)
		if x.l.TrustID == "" {
			b = append(b, "null"...)
		} else {
			b = AppendString(b, x.l.TrustID)
		}
		b = append(b, `,"status":`...)
		b = AppendString(b, x.l.Status)
		b = append(b, `,"degraded":`...)
		b = strconv.AppendBool(b, x.l.Degraded)
		b = append(b, `,"created_at":`...)
		b = AppendStamp(b, x.l.CreatedAt)
		b = append(b, `,"updated_at":`...)
		b = appendStampPtr(b, x.l.UpdatedAt)
		b = append(b, `,"reservations":[`...)
		for j, r := range x.ress {
			if j > 0 {
				b = append(b, ',')
			}
			if b, err = appendReservation(b, r, l.extra[r.ID], &keys); err != nil {
				return nil, err
			}
		}
		b = append(b, `],"events":[`...)
		for j, e := range x.evs {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = AppendString(b, e.ID)
			b = append(b, `,"lease_id":`...)
			b = AppendString(b, e.LeaseID)
			b = append(b, `,"event_type":`...)
			b = AppendString(b, e.EventType)
			b = append(b, `,"time":`...)
			b = AppendDate(b, e.Time)
			b = append(b, `,"status":`...)
			b = AppendString(b, e.Status)
			b = append(b, `,"created_at":`...)
			b = AppendStamp(b, e.CreatedAt)
			b = append(b, `,"updated_at":`...)
			b = appendStampPtr(b, e.UpdatedAt)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, ']'), nil
}

// The keys reservationView sets, sorted as encoding/json writes a map.
var resBaseKeys = []string{"created_at", "id", "lease_id", "missing_resources", "resource_id",
	"resource_type", "resources_changed", "status", "updated_at"}

// resKey is one key of a reservation object: a field of the reservation
// row (base ≥ 0, an index in resBaseKeys) or a plugin field (base < 0).
type resKey struct {
	enc  []byte // "key":
	name string
	base int
}

// keyOrder is the sorted key list of the last set of plugin field names
// seen: every reservation of one plugin has the same names, so the keys
// are sorted once per run of a plugin rather than once per reservation.
type keyOrder struct {
	extra map[string]bool
	keys  []resKey
}

func (o *keyOrder) of(extra map[string]any) []resKey {
	if o.keys != nil && len(extra) == len(o.extra) {
		same := true
		for k := range extra {
			if !o.extra[k] {
				same = false
				break
			}
		}
		if same {
			return o.keys
		}
	}
	o.extra = make(map[string]bool, len(extra))
	names := make([]string, 0, len(resBaseKeys)+len(extra))
	for k := range extra {
		o.extra[k] = true
		names = append(names, k)
	}
	for _, k := range resBaseKeys {
		if !o.extra[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	o.keys = make([]resKey, len(names))
	for i, k := range names {
		o.keys[i] = resKey{enc: append(AppendString(nil, k), ':'), name: k, base: -1}
		if !o.extra[k] {
			o.keys[i].base = slices.Index(resBaseKeys, k)
		}
	}
	return o.keys
}

func appendReservation(b []byte, r *models.Reservation, extra map[string]any, o *keyOrder) ([]byte, error) {
	b = append(b, '{')
	for i, k := range o.of(extra) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, k.enc...)
		switch k.base {
		case -1:
			var err error
			if b, err = appendAny(b, extra[k.name]); err != nil {
				return nil, err
			}
		case 0:
			b = AppendStamp(b, r.CreatedAt)
		case 1:
			b = AppendString(b, r.ID)
		case 2:
			b = AppendString(b, r.LeaseID)
		case 3:
			b = strconv.AppendBool(b, r.MissingResources)
		case 4:
			b = AppendString(b, r.ResourceID)
		case 5:
			b = AppendString(b, r.ResourceType)
		case 6:
			b = strconv.AppendBool(b, r.ResourcesChanged)
		case 7:
			b = AppendString(b, r.Status)
		case 8:
			b = appendStampPtr(b, r.UpdatedAt)
		}
	}
	return append(b, '}'), nil
}

// appendAny appends a plugin field value: the types plugins use directly,
// anything else through encoding/json.
func appendAny(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case []string:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, s)
		}
		return append(b, ']'), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// jsonPlain marks the bytes encoding/json writes unchanged inside a
// string: printable ASCII but the quote, the backslash and the HTML
// characters it escapes.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s quoted as encoding/json writes it (HTML
// characters escaped, invalid UTF-8 replaced): ASCII directly, a string
// with any other byte through encoding/json itself.
func AppendString(b []byte, s string) []byte {
	i := 0
	for i < len(s) && jsonPlain[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	for j := i; j < len(s); j++ {
		if s[j] >= 0x80 {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if jsonPlain[c] {
			b = append(b, c)
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default: // other control characters and <, >, &
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// AppendDate appends FormatDate(t) as a JSON string.
func AppendDate(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1 || y > 9999 {
		return AppendString(b, FormatDate(t))
	}
	b = appendDateTime(append(b, '"'), y, int(mo), d, t, 'T')
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, '"')
}

// AppendStamp appends FormatStamp(t) as a JSON string.
func AppendStamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1 || y > 9999 {
		return AppendString(b, FormatStamp(t))
	}
	b = appendDateTime(append(b, '"'), y, int(mo), d, t, ' ')
	if us := t.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		b = appendDigits(b, us, 6)
	}
	return append(b, '"')
}

func appendStampPtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return AppendStamp(b, *t)
}

// appendDateTime appends "YYYY-MM-DD<sep>HH:MM:SS".
func appendDateTime(b []byte, y, mo, d int, t time.Time, sep byte) []byte {
	h, mi, s := t.Clock()
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, mo, 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, sep)
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	return appendDigits(b, s, 2)
}

// appendDigits appends n (≥ 0) zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[:width]...)
}

// TimeCol scans a date column selected with TimeExpr: a time.Time (MySQL),
// the stored text (SQLite) or NULL.
type TimeCol struct {
	T     time.Time
	Valid bool
	// Raw is the stored text on SQLite (what it sorts by), else "".
	Raw string
}

// Scan implements sql.Scanner.
func (c *TimeCol) Scan(src any) error {
	var err error
	switch v := src.(type) {
	case nil:
		*c = TimeCol{}
		return nil
	case time.Time:
		c.T, c.Valid, c.Raw = v.UTC(), true, ""
		return nil
	case string:
		c.Raw = v
		c.T, err = ParseStoredTime(v)
	case []byte:
		c.Raw = string(v)
		c.T, err = ParseStoredTime(c.Raw)
	default:
		return fmt.Errorf("cannot scan %T into a date", src)
	}
	c.Valid = err == nil
	return err
}

// Ptr is the time, or nil for NULL.
func (c TimeCol) Ptr() *time.Time {
	if !c.Valid {
		return nil
	}
	t := c.T
	return &t
}

// storedLayouts are the layouts the SQLite driver (modernc.org/sqlite)
// reads dates in, the first being the one it writes with
// _time_format=sqlite; the last is time.Time.String's.
var storedLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
	"2006-01-02 15:04:05.999999999 -0700 MST",
}

// ParseStoredTime reads a date as SQLite stores it, in UTC:
// "YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]" directly, the other layouts
// the driver accepts through time.Parse.
func ParseStoredTime(s string) (time.Time, error) {
	if t, ok := parseFast(s); ok {
		return t, nil
	}
	if i := strings.Index(s, " m="); i > 0 {
		s = s[:i] // a monotonic clock reading written by time.Time.String
	}
	s = strings.TrimSuffix(s, "Z")
	for _, f := range storedLayouts {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot read %q as a date", s)
}

func parseFast(s string) (time.Time, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if d > daysIn(time.Month(mo), y) {
		return time.Time{}, false
	}
	i, ns := 19, 0
	if i < len(s) && s[i] == '.' {
		i++
		digits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if digits < 9 {
				ns = ns*10 + int(s[i]-'0')
				digits++
			} else {
				return time.Time{}, false
			}
			i++
		}
		if digits == 0 {
			return time.Time{}, false
		}
		for ; digits < 9; digits++ {
			ns *= 10
		}
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC)
	switch rest := s[i:]; {
	case rest == "" || rest == "Z":
		return t, true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(i+1, 2), num(i+4, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		off := time.Duration(oh)*time.Hour + time.Duration(om)*time.Minute
		if rest[0] == '+' {
			off = -off
		}
		return t.Add(off), true
	}
	return time.Time{}, false
}

func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Str scans a text column into *P (NULL as "").
type Str struct{ P *string }

// Scan implements sql.Scanner.
func (s Str) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*s.P = v
	case []byte:
		*s.P = string(v)
	case nil:
		*s.P = ""
	default:
		return fmt.Errorf("cannot scan %T into a string", src)
	}
	return nil
}
