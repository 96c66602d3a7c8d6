// Package plugins defines the one interface every Blazar resource type
// implements (physical:host in plugins/host, virtual:floatingip in
// plugins/floatingip), the registry that lists them, and what a plugin is
// given by the lease engine: the lease's window (Lease), the write
// transaction (Tx) and the request values (Values). Plugins never call
// back into the lease engine.
//
// The lease service (pkg/blazar/leases) owns the transaction: every plugin
// call of one API request or one lease event runs inside the same database
// transaction, so a failure leaves nothing behind. A plugin never calls an
// external service (Nova, …) itself: it records the call in the outbox in
// that transaction (Tx.Enqueue), and the outbox worker makes it after the
// commit.
package plugins

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// Lease is what a plugin sees of the lease it serves.
type Lease struct {
	ID        string
	ProjectID string
	UserID    string
	Start     time.Time
	End       time.Time
	Status    string
	// Admin is true when the caller acting on the lease is an admin
	// (property privacy); events run as admin.
	Admin bool
	// Tags are the lease's tags (a Leasehold extension); the host
	// plugin's rules name the exclusion tags among them.
	Tags []string
}

// Started reports whether the lease has started at now.
func (l Lease) Started(now time.Time) bool { return !now.Before(l.Start) }

// Values are a reservation's request values as decoded from JSON
// (numbers are json.Number), without resource_type.
type Values map[string]any

// Request is a new reservation's parameters as its plugin parsed and
// checked them.
type Request interface {
	// Fields are the plugin fields of the reservation as the API shows
	// them (merged into the reservation's JSON object).
	Fields() map[string]any
}

// Plugin is one reservable resource type.
type Plugin interface {
	// ResourceType is the Blazar resource_type this plugin serves.
	ResourceType() string
	// Parse reads and checks the values of a new reservation before
	// anything is written.
	Parse(v Values, lease Lease) (Request, error)
	// Reserve books the resources of a new reservation (res is already
	// inserted) and returns the id of the plugin row (resource_id).
	Reserve(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation, req Request) (string, error)
	// Update applies new lease dates (old → lease) and the reservation's
	// new values (v may be empty: only the dates changed).
	Update(ctx context.Context, tx *Tx, old, lease Lease, res *models.Reservation, v Values) error
	// OnStart, OnEnd and BeforeEnd are the lease event actions.
	OnStart(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation) error
	OnEnd(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation) error
	BeforeEnd(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation) error
	// Delete removes the plugin rows and allocations of a reservation.
	Delete(ctx context.Context, tx *Tx, res *models.Reservation) error
	// Describe returns the plugin fields merged into each reservation's
	// JSON, keyed by reservation id, in one query for all of them.
	Describe(ctx context.Context, tx *gorm.DB, res []*models.Reservation) (map[string]map[string]any, error)
}

// Refresher is implemented by plugins that keep a cached view (the host
// list and bookings, the floating-IP pool). The lease service calls
// Refresh before each transaction attempt, outside the transaction;
// force asks for a full reload.
type Refresher interface {
	Refresh(ctx context.Context, force bool) error
}

// Preparer is implemented by plugins that can choose the resources of a
// new reservation from their view before the write transaction: outside
// the single SQLite writer, concurrently with other requests. For each
// attempt the lease service calls Prepare after Refresh, then passes its
// result to ReservePrepared in that attempt's transaction, which locks and
// re-checks exactly what was chosen. Correctness never depends on the
// choice: only on the lock and re-check.
type Preparer interface {
	// Prepare chooses the resources of a reservation with request req
	// over lease's window; fresh is set when the views were just
	// force-refreshed (Tx.Fresh of the coming attempt). earlier are this
	// plugin's choices for the reservations before this one in the same
	// request: they are booked in the same transaction, so this choice
	// must leave their resources out. A refusal from a view that may be
	// stale is ErrStale.
	Prepare(ctx context.Context, lease Lease, req Request, fresh bool, earlier []any) (any, error)
	// ReservePrepared is Reserve with Prepare's choice.
	ReservePrepared(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation, req Request, prepared any) (string, error)
}

// ErrRetry tells the lease service that the transaction met a conflict it
// could not resolve inside it (a resource deleted or disabled since the
// view was taken): the attempt rolls back and the write runs again with
// refreshed views (db.WriteRetry).
var ErrRetry = db.ErrRetry

// ErrStale tells the lease service that the plugin refused for lack of
// resources from a view that may be stale: the attempt rolls back, every
// plugin's view is force-refreshed and the request runs again with
// Tx.Fresh set; a refusal on a fresh view is final.
var ErrStale = fmt.Errorf("view may be stale, refresh and retry: %w", db.ErrRetry)

// Registry lists the reservation types, by resource_type.
type Registry struct {
	byType map[string]Plugin
	all    []Plugin
}

// NewRegistry returns the registry of ps; two plugins of one resource
// type are an error.
func NewRegistry(ps ...Plugin) (*Registry, error) {
	r := &Registry{byType: map[string]Plugin{}}
	for _, p := range ps {
		rt := p.ResourceType()
		if _, dup := r.byType[rt]; dup {
			return nil, fmt.Errorf("plugins: two plugins for resource type %s", rt)
		}
		r.byType[rt] = p
		r.all = append(r.all, p)
	}
	return r, nil
}

// Get returns the plugin of resource type rt; an unknown type is a
// BadRequest naming the supported ones.
func (r *Registry) Get(rt string) (Plugin, error) {
	if p, ok := r.byType[rt]; ok {
		return p, nil
	}
	known := make([]string, 0, len(r.all))
	for _, p := range r.all {
		known = append(known, p.ResourceType())
	}
	sort.Strings(known)
	return nil, BadRequest("Unsupported resource type %s (supported: %s)", rt, strings.Join(known, ", "))
}

// Lookup returns the plugin of resource type rt, if registered.
func (r *Registry) Lookup(rt string) (Plugin, bool) {
	p, ok := r.byType[rt]
	return p, ok
}

// Refresh refreshes the view of every plugin that keeps one.
func (r *Registry) Refresh(ctx context.Context, force bool) error {
	for _, p := range r.all {
		if rf, ok := p.(Refresher); ok {
			if err := rf.Refresh(ctx, force); err != nil {
				return err
			}
		}
	}
	return nil
}

// Tx is the transaction a plugin call runs in. Plugins must do all their
// database work through it while it is open: using another connection
// from inside a write transaction can starve the pool (SQLite writers
// queue for the lock while holding connections).
type Tx struct {
	*gorm.DB
	Dialect db.Dialect
	Now     time.Time
	// Fresh is set when this attempt follows a forced Refresh of every
	// plugin's view (see ErrStale).
	Fresh       bool
	afterCommit []func()
}

// NewTx wraps an open transaction.
func NewTx(g *gorm.DB, dialect db.Dialect, now time.Time) *Tx {
	return &Tx{DB: g, Dialect: dialect, Now: now}
}

// AfterCommit registers f to run once the transaction has committed
// (cache updates); it is dropped on rollback.
func (t *Tx) AfterCommit(f func()) { t.afterCommit = append(t.afterCommit, f) }

// Committed runs the AfterCommit functions.
func (t *Tx) Committed() {
	for _, f := range t.afterCommit {
		f()
	}
	t.afterCommit = nil
}

func (t *Tx) ctx() context.Context {
	if ctx := t.Statement.Context; ctx != nil {
		return ctx
	}
	return context.Background()
}

// ExecSQL runs one statement in the transaction straight on its
// connection, without GORM's statement building (the hot paths), and
// returns the rows affected. It runs with the transaction's own context
// (see db.Write: a statement of a running write is never interrupted).
func (t *Tx) ExecSQL(q string, args ...any) (int64, error) {
	res, err := t.Statement.ConnPool.ExecContext(t.ctx(), q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QuerySQL runs a query in the transaction as ExecSQL runs a statement.
func (t *Tx) QuerySQL(q string, args ...any) (*sql.Rows, error) {
	return t.Statement.ConnPool.QueryContext(t.ctx(), q, args...)
}

// Enqueue records external actions in the transaction's outbox: they are
// carried out after the commit (never if it rolls back).
func (t *Tx) Enqueue(a ...outbox.Action) error { return outbox.Enqueue(t.DB, a...) }

// LockResources locks the resources of ids in the transaction (see
// db.LockResources).
func LockResources(tx *Tx, resourceType string, ids []string) error {
	return db.LockResources(tx.ctx(), tx.DB, tx.Dialect, resourceType, ids)
}

// BadRequest is a BadRequest error with Blazar's message.
func BadRequest(format string, args ...any) error { return errs.BadRequestf(format, args...) }

// Conflict is a Conflict error.
func Conflict(format string, args ...any) error { return errs.Conflictf(format, args...) }

// NotEnough is a NotEnoughResources error.
func NotEnough(format string, args ...any) error {
	return errs.New(errs.NotEnoughResources, format, args...)
}

// Forbidden is a Forbidden error.
func Forbidden(format string, args ...any) error { return errs.Forbiddenf(format, args...) }

// MissingParameter is Blazar's MissingParameter.
func MissingParameter(p string) error { return BadRequest("Missing parameter %s", p) }

// MalformedParameter is Blazar's MalformedParameter.
func MalformedParameter(p string) error { return BadRequest("Malformed parameter %s", p) }

// IsRetry reports whether err asks for the write to run again.
func IsRetry(err error) bool { return errors.Is(err, db.ErrRetry) }
