// Package leases is the Blazar lease engine: create, list, show, update
// and delete leases, and the start/end/before-end actions the event
// manager (pkg/blazar/events) runs. Resource types are plugins
// (plugins.Registry); every request and every event action is ONE
// database transaction, so a failure leaves nothing half-written, and no
// external service is called inside it (plugins record such calls in the
// outbox).
//
// No double booking: plugins choose resources from a possibly cached view,
// then lock exactly the chosen resources inside the write transaction and
// re-check them with an indexed query (see plugins/host). For a new
// lease, plugins that implement plugins.Preparer choose before each
// attempt's transaction (in the caller's goroutine, not in the SQLite
// writer), and only the lock, the re-check and the inserts run inside it.
// A booking that loses a race re-plans inside the transaction; what it
// cannot resolve there (plugins.ErrRetry, plugins.ErrStale, a lock
// conflict) makes db.WriteRetry — the one retry layer — run the request
// again with refreshed views. MySQL/MariaDB write transactions run at READ
// COMMITTED so that re-check sees every booking committed by the previous
// holder of the lock; on SQLite every write goes through db.Write's
// group-commit writer and processes are serialised by the database lock
// (BEGIN IMMEDIATE).
package leases

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/notify"
	"github.com/leasehold/leasehold/plugins"
)

// Config tunes the service.
type Config struct {
	// MinutesBeforeEndLease places before_end_lease when no
	// before_end_date is given; 0 disables it.
	MinutesBeforeEndLease int
	// Filters are the enforcement filters.
	Filters []Filter
	// Notifier, when enabled, has every create, update, delete and lease
	// event record its usage notification in the outbox, in the same
	// transaction (nil: none).
	Notifier *notify.Notifier
	// Trusts, when set (Keystone mode), makes each new lease's Keystone
	// trust and removes it when the lease ends or is deleted (trusts.go).
	Trusts Trusts
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
	// Token and Roles are the caller's Keystone token and roles, with
	// which a new lease's trust is made ("" in noauth: no trust).
	Token string
	Roles []string
}

// Service is the lease engine.
type Service struct {
	db      *db.DB
	plugins *plugins.Registry
	cfg     Config
	now     func() time.Time
	// notify is called after a commit that created or moved events.
	notify func()
	// listCache is the last lease listing rendered (listing_cache.go).
	listCache listCache
	// frags are the leases' rendered objects (listing_frags.go).
	frags fragCache
}

// New returns the service. now is the clock (time.Now in production);
// eventsChanged (may be nil) is called after every commit that created or
// moved events or recorded outbox actions (the wake-up of the event
// manager and the outbox worker).
func New(d *db.DB, reg *plugins.Registry, cfg Config, now func() time.Time, eventsChanged func()) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: d, plugins: reg, cfg: cfg, now: func() time.Time { return now().UTC() }, notify: eventsChanged}
}

func (s *Service) eventsChanged() {
	if s.notify != nil {
		s.notify()
	}
}

// Now is the service clock.
func (s *Service) Now() time.Time { return s.now() }

// DB is the database.
func (s *Service) DB() *db.DB { return s.db }

// attempt is what one try of a write knows: whether the plugins' views
// were just force-refreshed.
type attempt struct{ fresh bool }

// write runs fn as one write transaction through db.WriteRetry, the one
// retry layer. Before every attempt (outside the transaction) the
// plugins' views are refreshed — in full after a stale refusal
// (plugins.ErrStale), which sets attempt.fresh — and prepare (may be nil)
// runs: the work that needs only the views, done concurrently by the
// callers rather than one after another in the SQLite writer. A prepare
// refusing from a stale view is judged once more on a fresh one.
func (s *Service) write(ctx context.Context, prepare func(ctx context.Context, a attempt) error, fn func(tx *plugins.Tx, a attempt) error) error {
	var opts []*sql.TxOptions
	if s.db.Dialect == db.MySQL {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	var a attempt
	var ptx *plugins.Tx
	before := func(ctx context.Context, at db.Attempt) error {
		force := errors.Is(at.Prev, plugins.ErrStale)
		a.fresh = a.fresh || force
		for {
			if err := s.plugins.Refresh(ctx, force); err != nil {
				return err
			}
			if prepare == nil {
				return nil
			}
			err := prepare(ctx, a)
			if errors.Is(err, plugins.ErrStale) && !a.fresh {
				a.fresh, force = true, true
				continue
			}
			return err
		}
	}
	err := s.db.WriteRetry(ctx, before, func(g *gorm.DB) error {
		// On SQLite fn may run again alone if the batch it shared
		// failed: only the last run's tx counts.
		ptx = plugins.NewTx(g, s.db.Dialect, s.now())
		ptx.Fresh = a.fresh
		return fn(ptx, a)
	}, opts...)
	if err == nil {
		ptx.Committed()
		return nil
	}
	if plugins.IsRetry(err) && ctx.Err() == nil {
		return errs.Wrap(errs.Conflict, err, "Too many concurrent bookings of the same resources; try again.")
	}
	return err
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
	return errs.NotFoundf("Object with {'lease_id': '%s'} not found", id)
}

// Forbidden is the policy refusal for another project's lease.
func Forbidden(rule string) error {
	return errs.Forbiddenf("Policy doesn't allow %s to be performed.", rule)
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
	return plugins.Lease{ID: l.ID, ProjectID: l.ProjectID, UserID: l.UserID, Start: l.StartDate.UTC(), End: l.EndDate.UTC(), Status: l.Status, Admin: admin,
		Tags: decodeTags(l.Tags)}
}

// reservations loads a lease's reservations in creation order.
func reservations(ctx context.Context, g *gorm.DB, leaseID string) ([]models.Reservation, error) {
	var ress []models.Reservation
	err := g.WithContext(ctx).Where("lease_id = ?", leaseID).Order("created_at, id").Find(&ress).Error
	return ress, err
}

// eachLive calls fn with the plugin of every reservation in ress whose
// status passes keep.
func (s *Service) eachLive(ress []models.Reservation, keep func(status string) bool, fn func(p plugins.Plugin, r *models.Reservation) error) error {
	for i := range ress {
		r := &ress[i]
		if !keep(r.Status) {
			continue
		}
		p, err := s.plugins.Get(r.ResourceType)
		if err != nil {
			return err
		}
		if err := fn(p, r); err != nil {
			return err
		}
	}
	return nil
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
	ress, err := reservations(ctx, g, leaseID)
	if err != nil {
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
