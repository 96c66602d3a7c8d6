// Package plugins defines the one interface every Blazar resource type
// implements (physical:host in plugins/host, virtual:floatingip in
// plugins/floatingip; virtual:instance slots in later), and the helpers
// they share: the transaction handle, the error type with Blazar's HTTP
// status, parameter parsing and resource locks.
//
// The lease service (pkg/blazar/leases) owns the transaction: every plugin
// call of one API request or one lease event runs inside the same database
// transaction, so a failure leaves nothing behind.
package plugins

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
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
}

// Started reports whether the lease has started at now.
func (l Lease) Started(now time.Time) bool { return !now.Before(l.Start) }

// Values are a reservation's request values as decoded from JSON
// (numbers are json.Number).
type Values map[string]any

// Plugin is one reservable resource type.
type Plugin interface {
	// ResourceType is the Blazar resource_type this plugin serves.
	ResourceType() string
	// Validate checks the values of a new reservation before anything is
	// written and returns them normalised. Errors are *Error (4xx).
	Validate(v Values, lease Lease) (Values, error)
	// Reserve books the resources of a new reservation (res is already
	// inserted) and returns the id of the plugin row (resource_id).
	Reserve(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation, v Values) (string, error)
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

// Tx is the transaction a plugin call runs in. Plugins must do all their
// database work through it while it is open: using another connection
// from inside a write transaction can starve the pool (SQLite writers
// queue for the lock while holding connections).
type Tx struct {
	*gorm.DB
	Dialect db.Dialect
	Now     time.Time
	// Fresh is set when this attempt follows a forced Refresh of every
	// plugin's view (see Refresher and ErrStale).
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

// ExecSQL runs one statement in the transaction straight on its
// connection, without GORM's statement building (the hot paths), and
// returns the rows affected. It runs with the transaction's own context
// (see db.Write: a statement of a running write is never interrupted).
func (t *Tx) ExecSQL(q string, args ...any) (int64, error) {
	ctx := t.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := t.Statement.ConnPool.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QuerySQL runs a query in the transaction as ExecSQL runs a statement.
func (t *Tx) QuerySQL(q string, args ...any) (*sql.Rows, error) {
	ctx := t.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return t.Statement.ConnPool.QueryContext(ctx, q, args...)
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
// re-checks exactly what was chosen; a conflict there is ErrRetry (the
// attempt rolls back and the next one prepares again from the updated
// view). Correctness never depends on the choice: only on the lock and
// re-check.
type Preparer interface {
	// Prepare chooses the resources of a reservation with values v (as
	// Validate returned them) over lease's window; fresh is set when the
	// views were just force-refreshed (Tx.Fresh of the coming attempt).
	// earlier are this plugin's choices for the reservations before this
	// one in the same request: they are booked in the same transaction,
	// so this choice must leave their resources out. A refusal from a
	// view that may be stale is ErrStale.
	Prepare(ctx context.Context, lease Lease, v Values, fresh bool, earlier []any) (any, error)
	// ReservePrepared is Reserve with Prepare's choice.
	ReservePrepared(ctx context.Context, tx *Tx, lease Lease, res *models.Reservation, v Values, prepared any) (string, error)
}

// ErrStale tells the lease service that the plugin refused for lack of
// resources from a view that may be stale: roll back, Refresh(force) every
// plugin and run the request again (once) with Tx.Fresh set.
var ErrStale = errors.New("view may be stale, refresh and retry")

// ErrRetry tells the lease service that the transaction saw a conflict
// with a concurrent writer (a stale view of the allocations): it must roll
// back and run the whole request again.
var ErrRetry = errors.New("concurrent booking conflict, retry")

// LockResources locks the resources of ids in the transaction (see
// db.LockResources).
func LockResources(tx *Tx, resourceType string, ids []string) error {
	ctx := tx.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return db.LockResources(ctx, tx.DB, tx.Dialect, resourceType, ids)
}

// Error is a Blazar API error raised by a plugin or the lease service.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// HTTPStatus implements handlers/blazar.StatusError.
func (e *Error) HTTPStatus() int { return e.Status }

// Errorf returns an *Error with status.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error { return Errorf(http.StatusConflict, format, args...) }

// MissingParameter is Blazar's MissingParameter (400).
func MissingParameter(p string) *Error { return BadRequest("Missing parameter %s", p) }

// MalformedParameter is Blazar's MalformedParameter (400).
func MalformedParameter(p string) *Error { return BadRequest("Malformed parameter %s", p) }
