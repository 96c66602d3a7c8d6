// Package leases is the Blazar lease engine: create, list, show, update
// and delete leases, and the start/end/before-end actions the event
// manager (pkg/blazar/events) runs. Resource types are plugins
// (plugins.Plugin); every request and every event action is ONE database
// transaction, so a failure leaves nothing half-written.
//
// No double booking: plugins choose resources from a possibly cached view,
// then lock exactly the chosen resources inside the write transaction and
// re-check them with an indexed query (see plugins/host). For a new
// lease, plugins that implement plugins.Preparer choose before each
// attempt's transaction (Create runs them in the caller's goroutine, not
// in the SQLite writer), and only the lock, the re-check and the inserts
// run inside it; the creation path writes with plain statements
// (plugins.Tx.ExecSQL) rather than GORM's reflection. On a conflict the
// plugin returns plugins.ErrRetry and this package rolls back and runs the
// whole request again, at most MaxAttempts times. MySQL/MariaDB write
// transactions run at READ COMMITTED so that re-check sees every booking
// committed by the previous holder of the lock; on SQLite every write goes
// through db.Write's group-commit writer (one writer connection, writes run
// one after another, each seeing the ones before it) and processes are
// serialised by the database lock (BEGIN IMMEDIATE).
package leases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/plugins"
)

// MaxAttempts bounds the retries of a transaction that met a concurrent
// booking or a deadlock. Concurrent requests prepared against the same view
// pick the same best-fit hosts and only one wins each round, so the bound
// is generous and the retries back off with jitter (retryPause).
const MaxAttempts = 32

// retryPause spreads the retries of requests that clashed on the same
// hosts, growing with the attempt (at most about 10 ms).
func retryPause(ctx context.Context, attempt int) {
	d := time.Duration(rand.Int64N(int64(min(attempt, 10))*int64(time.Millisecond) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Config tunes the service.
type Config struct {
	// MinutesBeforeEndLease places before_end_lease when no
	// before_end_date is given; 0 disables it.
	MinutesBeforeEndLease int
	// Filters are the enforcement filters.
	Filters []Filter
}

// Caller is who makes a request.
type Caller struct {
	UserID    string
	ProjectID string
	// Admin sees every project's leases and may use private properties.
	Admin bool
	// Allowed, when set, is the policy check for a lease of the given
	// project (the handler's rule); nil allows admins and the lease's own
	// project.
	Allowed func(project string) error
}

// Service is the lease engine.
type Service struct {
	db      *db.DB
	plugins map[string]plugins.Plugin
	cfg     Config
	now     func() time.Time
	// notify is called after a commit that created or moved events.
	notify func()
}

// New returns the service. now is the clock (time.Now in production).
func New(d *db.DB, ps []plugins.Plugin, cfg Config, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	m := map[string]plugins.Plugin{}
	for _, p := range ps {
		m[p.ResourceType()] = p
	}
	return &Service{db: d, plugins: m, cfg: cfg, now: func() time.Time { return now().UTC() }}
}

// OnEventsChanged registers f, called after every commit that created or
// moved events (the event manager's wake-up).
func (s *Service) OnEventsChanged(f func()) { s.notify = f }

func (s *Service) eventsChanged() {
	if s.notify != nil {
		s.notify()
	}
}

// Now is the service clock.
func (s *Service) Now() time.Time { return s.now() }

// DB is the database.
func (s *Service) DB() *db.DB { return s.db }

// tx runs fn in a write transaction (db.Write), after refreshing the
// plugins' views, retrying on plugins.ErrRetry, plugins.ErrStale (once,
// after a forced refresh) and MySQL deadlocks/lock wait timeouts.
func (s *Service) tx(ctx context.Context, fn func(tx *plugins.Tx) error) error {
	return s.prepTx(ctx, nil, fn)
}

// prepTx is tx with prepare run before each attempt (after the refresh,
// outside the transaction; fresh is the attempt's Tx.Fresh): the work
// that needs only the plugins' views, done concurrently by the callers
// rather than one after another in the SQLite writer.
func (s *Service) prepTx(ctx context.Context, prepare func(fresh bool) error, fn func(tx *plugins.Tx) error) error {
	var opts *sql.TxOptions
	if s.db.Dialect == db.MySQL {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	var err error
	fresh, force := false, false
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		for _, p := range s.plugins {
			if r, ok := p.(plugins.Refresher); ok {
				if rerr := r.Refresh(ctx, force); rerr != nil {
					return rerr
				}
			}
		}
		// db.Write: on SQLite the shared group-commit writer (fn runs in a
		// savepoint of a batch committed with one fsync; it may run again
		// alone if the batch fails, so only the last run's tx counts), on
		// MySQL a transaction of its own.
		if prepare != nil {
			if err = prepare(fresh); err != nil {
				if errors.Is(err, plugins.ErrStale) && !fresh {
					// The one forced refresh is not an attempt: a stale
					// refusal on the last attempt must still be re-judged
					// on a fresh view rather than escape as ErrStale.
					fresh, force = true, true
					attempt--
					continue
				}
				return err
			}
		}
		var ptx *plugins.Tx
		err = s.db.Write(ctx, func(g *gorm.DB) error {
			ptx = plugins.NewTx(g, s.db.Dialect, s.now())
			ptx.Fresh = fresh
			return fn(ptx)
		}, opts)
		if err == nil {
			ptx.Committed()
			return nil
		}
		if errors.Is(err, plugins.ErrStale) && !fresh {
			fresh, force = true, true
			attempt--
			continue
		}
		force = false
		if !retryable(err) {
			return err
		}
		slog.DebugContext(ctx, "lease transaction conflict, retrying", "attempt", attempt, "err", err)
		retryPause(ctx, attempt)
	}
	if errors.Is(err, plugins.ErrRetry) || errors.Is(err, plugins.ErrStale) {
		return plugins.Conflict("Too many concurrent bookings of the same resources; try again.")
	}
	return err
}

func retryable(err error) bool {
	if errors.Is(err, plugins.ErrRetry) {
		return true
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205 // deadlock, lock wait timeout
	}
	return false
}

// lockLease loads a lease for update.
func lockLease(ctx context.Context, tx *plugins.Tx, id string) (*models.Lease, error) {
	q := tx.WithContext(ctx)
	if tx.Dialect == db.MySQL {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var l models.Lease
	if err := q.Where("id = ?", id).Take(&l).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, notFound(id)
		}
		return nil, err
	}
	return &l, nil
}

func notFound(id string) error {
	return plugins.Errorf(http.StatusNotFound, "Object with {'lease_id': '%s'} not found", id)
}

// Forbidden is the policy refusal for another project's lease.
func Forbidden(rule string) error {
	return plugins.Errorf(http.StatusForbidden, "Policy doesn't allow %s to be performed.", rule)
}

// check applies the caller's policy to lease l.
func (c Caller) check(l *models.Lease, rule string) error {
	if c.Allowed != nil {
		return c.Allowed(l.ProjectID)
	}
	if c.Admin || l.ProjectID == c.ProjectID {
		return nil
	}
	return Forbidden(rule)
}

func pluginLease(l *models.Lease, admin bool) plugins.Lease {
	return plugins.Lease{ID: l.ID, ProjectID: l.ProjectID, UserID: l.UserID, Start: l.StartDate.UTC(), End: l.EndDate.UTC(), Status: l.Status, Admin: admin}
}

func (s *Service) plugin(rt string) (plugins.Plugin, error) {
	p, ok := s.plugins[rt]
	if !ok {
		known := make([]string, 0, len(s.plugins))
		for k := range s.plugins {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, plugins.BadRequest("Unsupported resource type %s (supported: %s)", rt, strings.Join(known, ", "))
	}
	return p, nil
}

// CreateRequest is a decoded POST /v1/leases body.
type CreateRequest struct {
	Name          any              `json:"name"`
	StartDate     any              `json:"start_date"`
	EndDate       any              `json:"end_date"`
	BeforeEndDate any              `json:"before_end_date"`
	Reservations  []map[string]any `json:"reservations"`
	Events        []map[string]any `json:"events"`
	present       map[string]bool
}

// SetPresent records which keys the body had (missing vs null).
func (r *CreateRequest) SetPresent(keys []string) {
	r.present = map[string]bool{}
	for _, k := range keys {
		r.present[k] = true
	}
}

func stringParam(v any, name string, required bool) (string, bool, error) {
	if v == nil {
		if required {
			return "", false, plugins.MissingParameter(name)
		}
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, plugins.MalformedParameter(name)
	}
	return s, true, nil
}

// Create creates a lease with its reservations and events.
func (s *Service) Create(ctx context.Context, c Caller, req CreateRequest) (*View, error) {
	name, _, err := stringParam(req.Name, "name", true)
	if err != nil {
		return nil, err
	}
	if len([]rune(name)) > 80 {
		return nil, plugins.BadRequest("Lease name is too long: %d characters, at most 80", len([]rune(name)))
	}
	startS, _, err := stringParam(req.StartDate, "start_date", true)
	if err != nil {
		return nil, err
	}
	endS, _, err := stringParam(req.EndDate, "end_date", true)
	if err != nil {
		return nil, err
	}
	for i, r := range req.Reservations {
		if r == nil {
			return nil, plugins.BadRequest("Reservation %d is not an object", i)
		}
		if _, ok := r["resource_type"].(string); !ok {
			return nil, plugins.MissingParameter("resource_type")
		}
	}
	now := s.now()
	start, err := ParseDate(startS, now)
	if err != nil {
		return nil, err
	}
	end, err := ParseDate(endS, now)
	if err != nil {
		return nil, err
	}
	if start.Before(now.Truncate(time.Minute)) {
		return nil, plugins.BadRequest("Start date must be later than current date")
	}
	if !end.After(start) {
		return nil, plugins.BadRequest("End date must be later than start date.")
	}
	lease := plugins.Lease{ProjectID: c.ProjectID, UserID: c.UserID, Start: start, End: end, Status: StatusPending, Admin: c.Admin}
	type resReq struct {
		p plugins.Plugin
		v plugins.Values
	}
	var rreqs []resReq
	var resOut []map[string]any
	for _, r := range req.Reservations {
		p, err := s.plugin(r["resource_type"].(string))
		if err != nil {
			return nil, err
		}
		v, err := p.Validate(plugins.Values(r), lease)
		if err != nil {
			return nil, err
		}
		rreqs = append(rreqs, resReq{p, v})
		m := map[string]any{"resource_type": p.ResourceType()}
		for k, x := range v {
			m[k] = x
		}
		resOut = append(resOut, m)
	}
	ec := EnforcementContext{UserID: c.UserID, ProjectID: c.ProjectID}
	lv := leaseValues("", name, c.ProjectID, c.UserID, start, end, resOut)
	for _, f := range s.cfg.Filters {
		if err := f.CheckCreate(ctx, ec, lv); err != nil {
			return nil, err
		}
	}
	var beforeEnd *time.Time
	if bs, ok, err := stringParam(req.BeforeEndDate, "before_end_date", false); err != nil {
		return nil, err
	} else if ok {
		t, err := ParseDate(bs, now)
		if err != nil {
			return nil, err
		}
		if !t.After(start) || !t.Before(end) {
			return nil, plugins.Errorf(http.StatusForbidden, "Datetime is out of lease limits")
		}
		beforeEnd = &t
	}
	var extra []models.Event
	for _, e := range req.Events {
		ev, err := extraEvent(e, now)
		if err != nil {
			return nil, err
		}
		extra = append(extra, ev)
	}

	var (
		l    models.Lease
		ress []models.Reservation
		evs  []models.Event
	)
	// Resources are chosen before each attempt's transaction (plugins
	// that are Preparers), then locked and re-checked inside it.
	prepared := make([]any, len(rreqs))
	prepare := func(fresh bool) error {
		for i, rr := range rreqs {
			if pp, ok := rr.p.(plugins.Preparer); ok {
				var earlier []any
				for j := range i {
					if rreqs[j].p == rr.p {
						earlier = append(earlier, prepared[j])
					}
				}
				c, err := pp.Prepare(ctx, lease, rr.v, fresh, earlier)
				if err != nil {
					return err
				}
				prepared[i] = c
			}
		}
		return nil
	}
	err = s.prepTx(ctx, prepare, func(tx *plugins.Tx) error {
		stamp := tx.Now.Truncate(time.Second)
		l = models.Lease{ID: uuid.NewString(), Name: name, UserID: c.UserID, ProjectID: c.ProjectID,
			StartDate: start, EndDate: end, Status: StatusPending, CreatedAt: stamp}
		if err := insertLease(tx, &l); err != nil {
			return err
		}
		// The events first: the plugins lock their resources as late as
		// possible (MySQL row locks are held until the commit).
		evs = []models.Event{
			{EventType: EventStart, Time: start},
			{EventType: EventEnd, Time: end},
		}
		if be, ok := s.beforeEndTime(beforeEnd, start, end); ok {
			evs = append(evs, models.Event{EventType: EventBeforeEnd, Time: be})
		}
		evs = append(evs, extra...)
		for i := range evs {
			evs[i].ID = uuid.NewString()
			evs[i].LeaseID = l.ID
			evs[i].Status = EventUndone
			evs[i].CreatedAt = stamp
		}
		if err := insertEvents(tx, evs); err != nil {
			return err
		}
		pl := pluginLease(&l, c.Admin)
		ress = ress[:0]
		for i, rr := range rreqs {
			res := models.Reservation{ID: uuid.NewString(), LeaseID: l.ID, ResourceType: rr.p.ResourceType(),
				Status: ResPending, CreatedAt: stamp}
			var rid string
			var err error
			if pp, ok := rr.p.(plugins.Preparer); ok && prepared[i] != nil {
				rid, err = pp.ReservePrepared(ctx, tx, pl, &res, rr.v, prepared[i])
			} else {
				rid, err = rr.p.Reserve(ctx, tx, pl, &res, rr.v)
			}
			if err != nil {
				return err
			}
			res.ResourceID = rid
			ress = append(ress, res)
		}
		return insertReservations(tx, ress)
	})
	if err != nil {
		return nil, err
	}
	s.eventsChanged()
	// The answer is built from what was written (the plugin fields are
	// the validated values, which is what Describe reads back).
	v := newView(&l)
	for i, r := range ress {
		m := reservationView(&r)
		for k, x := range rreqs[i].v {
			m[k] = x
		}
		v.Reservations = append(v.Reservations, m)
	}
	sortEvents(evs)
	for i := range evs {
		v.Events = append(v.Events, eventView(&evs[i]))
	}
	return v, nil
}

// insertLease, insertReservations and insertEvents write new rows with
// one plain statement each (no GORM reflection on the creation path).
func insertLease(tx *plugins.Tx, l *models.Lease) error {
	_, err := tx.ExecSQL(`INSERT INTO leases
		(id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		l.ID, l.Name, l.UserID, l.ProjectID, l.StartDate, l.EndDate, l.TrustID, l.Status, l.Degraded, l.CreatedAt, l.UpdatedAt)
	return err
}

func insertReservations(tx *plugins.Tx, ress []models.Reservation) error {
	if len(ress) == 0 {
		return nil
	}
	q := []byte(`INSERT INTO reservations
		(id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at, updated_at)
		VALUES `)
	q = db.Placeholders(q, len(ress), 9)
	args := make([]any, 0, 9*len(ress))
	for i := range ress {
		r := &ress[i]
		args = append(args, r.ID, r.LeaseID, r.ResourceID, r.ResourceType, r.Status, r.MissingResources, r.ResourcesChanged, r.CreatedAt, r.UpdatedAt)
	}
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

func insertEvents(tx *plugins.Tx, evs []models.Event) error {
	if len(evs) == 0 {
		return nil
	}
	q := []byte(`INSERT INTO events
		(id, lease_id, event_type, time, status, claimed_by, claimed_at, attempts, created_at, updated_at)
		VALUES `)
	q = db.Placeholders(q, len(evs), 10)
	args := make([]any, 0, 10*len(evs))
	for i := range evs {
		e := &evs[i]
		args = append(args, e.ID, e.LeaseID, e.EventType, e.Time, e.Status, e.ClaimedBy, e.ClaimedAt, e.Attempts, e.CreatedAt, e.UpdatedAt)
	}
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

// beforeEndTime places the before_end_lease event.
func (s *Service) beforeEndTime(given *time.Time, start, end time.Time) (time.Time, bool) {
	if given != nil {
		return *given, true
	}
	if s.cfg.MinutesBeforeEndLease <= 0 {
		return time.Time{}, false
	}
	t := end.Add(-time.Duration(s.cfg.MinutesBeforeEndLease) * time.Minute)
	if t.Before(start) {
		t = start
	}
	return t, true
}

// extraEvent stores an event given in the request as given; it never runs.
func extraEvent(e map[string]any, now time.Time) (models.Event, error) {
	typ, _ := e["event_type"].(string)
	if typ == "" {
		return models.Event{}, plugins.MissingParameter("event_type")
	}
	if typ == EventStart || typ == EventEnd || typ == EventBeforeEnd {
		return models.Event{}, plugins.BadRequest("Event type %s is managed by the lease and cannot be given", typ)
	}
	var when string
	for _, k := range []string{"time", "event_date"} {
		if v, ok := e[k].(string); ok {
			when = v
			break
		}
	}
	if when == "" {
		return models.Event{}, plugins.MissingParameter("event_date")
	}
	t, err := ParseDate(when, now)
	if err != nil {
		return models.Event{}, err
	}
	return models.Event{EventType: typ, Time: t}, nil
}

// List returns the leases the caller may see: its project's, or all for
// an admin.
func (s *Service) List(ctx context.Context, c Caller) ([]*View, error) {
	q := s.db.WithContext(ctx).Order("created_at, id")
	if !c.Admin {
		q = q.Where("project_id = ?", c.ProjectID)
	}
	var ls []models.Lease
	if err := q.Find(&ls).Error; err != nil {
		return nil, err
	}
	return s.views(ctx, s.db.DB, ls)
}

// Get returns one lease; another project's lease is a 403 (policy).
func (s *Service) Get(ctx context.Context, c Caller, id string) (*View, error) {
	var l models.Lease
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&l).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, notFound(id)
		}
		return nil, err
	}
	if err := c.check(&l, "blazar:leases:get"); err != nil {
		return nil, err
	}
	vs, err := s.views(ctx, s.db.DB, []models.Lease{l})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// UpdateKeys are the keys a lease update may carry.
var UpdateKeys = []string{"name", "start_date", "end_date", "before_end_date", "reservations"}

// UpdateRequest is a decoded PUT /v1/leases/{id} body.
type UpdateRequest map[string]any

// Update changes a lease: rename, move/extend/shorten its window, change
// its reservations' parameters. Everything runs in one transaction.
func (s *Service) Update(ctx context.Context, c Caller, id string, req UpdateRequest) (*View, error) {
	var unknown []string
	for k := range req {
		if !slices.Contains(UpdateKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, plugins.BadRequest("Unsupported parameter(s) for a lease update: %s (allowed: %s)", strings.Join(unknown, ", "), strings.Join(UpdateKeys, ", "))
	}
	var name *string
	if v, ok := req["name"]; ok {
		n, _, err := stringParam(v, "name", true)
		if err != nil {
			return nil, err
		}
		if len([]rune(n)) > 80 {
			return nil, plugins.BadRequest("Lease name is too long: %d characters, at most 80", len([]rune(n)))
		}
		name = &n
	}
	dateParam := func(k string) (*time.Time, error) {
		v, ok := req[k]
		if !ok || v == nil {
			return nil, nil
		}
		str, ok := v.(string)
		if !ok {
			return nil, plugins.MalformedParameter(k)
		}
		t, err := ParseDate(str, s.now())
		if err != nil {
			return nil, err
		}
		return &t, nil
	}
	newStartP, err := dateParam("start_date")
	if err != nil {
		return nil, err
	}
	newEndP, err := dateParam("end_date")
	if err != nil {
		return nil, err
	}
	beforeEndP, err := dateParam("before_end_date")
	if err != nil {
		return nil, err
	}
	resUpdates := map[string]plugins.Values{}
	if v, ok := req["reservations"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, plugins.MalformedParameter("reservations")
		}
		for _, x := range list {
			m, ok := x.(map[string]any)
			if !ok {
				return nil, plugins.MalformedParameter("reservations")
			}
			rid, _ := m["id"].(string)
			if rid == "" {
				return nil, plugins.MissingParameter("reservation ID")
			}
			vals := plugins.Values{}
			for k, x := range m {
				if k != "id" {
					vals[k] = x
				}
			}
			resUpdates[rid] = vals
		}
	}
	datesGiven := newStartP != nil || newEndP != nil || beforeEndP != nil

	eventsMoved := false
	err = s.tx(ctx, func(tx *plugins.Tx) error {
		eventsMoved = false
		l, err := lockLease(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := c.check(l, "blazar:leases:put"); err != nil {
			return err
		}
		if len(req) == 0 {
			return nil
		}
		if !CanTransition(l.Status, StatusUpdating) {
			return plugins.Conflict("Invalid lease status: lease %s is %s and cannot be updated now.", l.ID, l.Status)
		}
		now := tx.Now
		updates := map[string]any{"updated_at": now.Truncate(time.Second)}
		if name != nil {
			updates["name"] = *name
		}
		var ress []models.Reservation
		if err := tx.WithContext(ctx).Where("lease_id = ?", id).Order("created_at, id").Find(&ress).Error; err != nil {
			return err
		}
		var bad []string
		for rid, vals := range resUpdates {
			i := slices.IndexFunc(ress, func(r models.Reservation) bool { return r.ID == rid })
			if i < 0 {
				bad = append(bad, rid)
				continue
			}
			if rt, ok := vals["resource_type"]; ok {
				if rt != ress[i].ResourceType {
					return plugins.Conflict("Cannot change the resource type of reservation %s from %s", rid, ress[i].ResourceType)
				}
				delete(vals, "resource_type")
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return plugins.BadRequest("Please enter valid reservation IDs. Invalid reservation IDs are: %s", strings.Join(bad, ", "))
		}
		if !datesGiven && len(resUpdates) == 0 {
			return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", id).Updates(updates).Error
		}
		oldStart, oldEnd := l.StartDate.UTC(), l.EndDate.UTC()
		newStart, newEnd := oldStart, oldEnd
		if newStartP != nil {
			newStart = *newStartP
		}
		if newEndP != nil {
			newEnd = *newEndP
		}
		nowMin := now.Truncate(time.Minute)
		started := !now.Before(oldStart)
		if started && !newStart.Equal(oldStart) {
			return plugins.BadRequest("Cannot modify the start date of already started leases")
		}
		if !started && newStart.Before(nowMin) {
			return plugins.BadRequest("Start date must be later than current date")
		}
		if oldEnd.Before(now) {
			return plugins.BadRequest("Terminated leases can only be renamed")
		}
		if newEnd.Before(nowMin) || newEnd.Before(newStart) {
			return plugins.BadRequest("End date must be later than current and start date")
		}
		if beforeEndP != nil && (!beforeEndP.After(newStart) || !beforeEndP.Before(newEnd)) {
			return plugins.Errorf(http.StatusForbidden, "Datetime is out of lease limits")
		}
		old := pluginLease(l, c.Admin)
		nl := old
		nl.Start, nl.End = newStart, newEnd
		if len(s.cfg.Filters) > 0 {
			ec := EnforcementContext{UserID: c.UserID, ProjectID: c.ProjectID}
			cur := leaseValues(l.ID, l.Name, l.ProjectID, l.UserID, oldStart, oldEnd, nil)
			nv := cur
			nv.StartDate, nv.EndDate, nv.start, nv.end = FormatDate(newStart), FormatDate(newEnd), newStart, newEnd
			if name != nil {
				nv.Name = *name
			}
			for _, f := range s.cfg.Filters {
				if err := f.CheckUpdate(ctx, ec, cur, nv); err != nil {
					var pe *plugins.Error
					if errors.As(err, &pe) {
						pe.Status = http.StatusBadRequest
					}
					return err
				}
			}
		}
		for i := range ress {
			r := &ress[i]
			if r.Status == ResDeleted {
				continue
			}
			p, err := s.plugin(r.ResourceType)
			if err != nil {
				return err
			}
			vals := resUpdates[r.ID]
			if vals == nil {
				vals = plugins.Values{}
			}
			if err := p.Update(ctx, tx, old, nl, r, vals); err != nil {
				return err
			}
		}
		updates["start_date"], updates["end_date"] = newStart, newEnd
		var evs []models.Event
		if err := tx.WithContext(ctx).Where("lease_id = ?", id).Find(&evs).Error; err != nil {
			return err
		}
		for _, e := range evs {
			ev := map[string]any{}
			switch e.EventType {
			case EventStart:
				if !e.Time.Equal(newStart) {
					ev["time"] = newStart
				}
			case EventEnd:
				if !e.Time.Equal(newEnd) {
					ev["time"] = newEnd
				}
			case EventBeforeEnd:
				t := newEnd.Add(-oldEnd.Sub(e.Time.UTC()))
				if beforeEndP != nil {
					t = *beforeEndP
				}
				if t.Before(newStart) {
					t = newStart
				}
				if !t.Equal(e.Time.UTC()) {
					ev["time"] = t
					if e.Status == EventDone {
						ev["status"] = EventUndone
					}
				}
			}
			if len(ev) == 0 {
				continue
			}
			ev["updated_at"] = now.Truncate(time.Second)
			eventsMoved = true
			if err := tx.WithContext(ctx).Model(&models.Event{}).Where("id = ?", e.ID).Updates(ev).Error; err != nil {
				return err
			}
		}
		// A successful update recovers a lease left in ERROR.
		if l.Status == StatusError {
			if st, err := s.derived(ctx, tx.DB, id); err == nil {
				updates["status"] = st
			}
		}
		return tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", id).Updates(updates).Error
	})
	if err != nil {
		return nil, err
	}
	if eventsMoved {
		s.eventsChanged()
	}
	return s.view(ctx, s.db.DB, id)
}

// derived computes the lease status from its events and reservations.
func (s *Service) derived(ctx context.Context, g *gorm.DB, leaseID string) (string, error) {
	var evs []models.Event
	if err := g.WithContext(ctx).Where("lease_id = ? AND event_type IN ?", leaseID, []string{EventStart, EventEnd}).Find(&evs).Error; err != nil {
		return "", err
	}
	var start, end string
	for _, e := range evs {
		if e.EventType == EventStart {
			start = e.Status
		} else {
			end = e.Status
		}
	}
	var ress []models.Reservation
	if err := g.WithContext(ctx).Where("lease_id = ?", leaseID).Find(&ress).Error; err != nil {
		return "", err
	}
	all := true
	for _, r := range ress {
		if r.Status != ResActive {
			all = false
		}
	}
	return Derive(start, end, all), nil
}

// Delete ends a lease's reservations (plugin end actions) and removes the
// lease with everything it holds, in one transaction.
func (s *Service) Delete(ctx context.Context, c Caller, id string) error {
	var onEnd *LeaseValues
	err := s.tx(ctx, func(tx *plugins.Tx) error {
		onEnd = nil
		l, err := lockLease(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := c.check(l, "blazar:leases:delete"); err != nil {
			return err
		}
		if l.Status == StatusDeleting {
			return plugins.Conflict("Invalid lease status: lease %s is already being deleted.", id)
		}
		now := tx.Now
		if !now.Before(l.StartDate) && now.Before(l.EndDate) {
			lv := leaseValues(l.ID, l.Name, l.ProjectID, l.UserID, l.StartDate.UTC(), l.EndDate.UTC(), nil)
			onEnd = &lv
		}
		var ress []models.Reservation
		if err := tx.WithContext(ctx).Where("lease_id = ?", id).Find(&ress).Error; err != nil {
			return err
		}
		pl := pluginLease(l, c.Admin)
		for i := range ress {
			r := &ress[i]
			p, err := s.plugin(r.ResourceType)
			if err != nil {
				return err
			}
			if r.Status != ResDeleted {
				if err := p.OnEnd(ctx, tx, pl, r); err != nil {
					return err
				}
			}
			if err := p.Delete(ctx, tx, r); err != nil {
				return err
			}
		}
		for _, m := range []any{&models.Event{}, &models.Reservation{}} {
			if err := tx.WithContext(ctx).Where("lease_id = ?", id).Delete(m).Error; err != nil {
				return err
			}
		}
		return tx.WithContext(ctx).Where("id = ?", id).Delete(&models.Lease{}).Error
	})
	if err != nil {
		return err
	}
	if onEnd != nil {
		s.runOnEnd(ctx, *onEnd)
	}
	s.eventsChanged()
	return nil
}

// runOnEnd tells the enforcement filters a lease ended (errors only
// logged, as upstream).
func (s *Service) runOnEnd(ctx context.Context, lv LeaseValues) {
	ec := EnforcementContext{UserID: lv.UserID, ProjectID: lv.ProjectID}
	for _, f := range s.cfg.Filters {
		if err := f.OnEnd(ctx, ec, lv); err != nil {
			slog.WarnContext(ctx, "enforcement on_end failed", "lease", lv.ID, "err", err)
		}
	}
}

var _ = fmt.Sprintf
