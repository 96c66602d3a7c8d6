// Package outbox carries out external calls (the compute driver, Nova
// aggregates and flavors, server clean-up, notifications) after the
// database transaction that decided them has committed, never inside it.
//
// A write transaction calls Enqueue with the actions it implies; they are
// rows of the outbox table written in that same transaction, so they
// exist exactly when the decision does. A Worker (one per process, any
// number of processes on one database) claims due rows, runs their
// handler outside any transaction and completes or fails the row.
//
// Exactly one run at a time: a worker claims a row with a conditional
// UPDATE (PENDING → CLAIMED, claimed_by, claimed_at, attempts+1) that
// names the attempt count it read; only the worker whose UPDATE changed
// the row runs it. Completing (deleting) or failing the row is again
// conditional on that claim (status, claimed_by, attempts), so a worker
// whose claim was taken back cannot overwrite the newer run's outcome. A
// claim older than Config.ClaimTimeout belongs to a dead process and is
// taken back by any worker; a live worker bounds every handler call by
// Config.HandlerTimeout (less than ClaimTimeout) so its claims never get
// that old.
//
// At least once, not exactly once, for the effect: a process killed
// after a handler's call but before the row is completed leaves the
// claim to expire, and the action runs again elsewhere. Handlers must be
// idempotent.
//
// Order: rows with one Key run one at a time in id order. A row is
// claimable only when no row of the same key with a lower id is PENDING
// (waiting, or retrying after a failure) or CLAIMED. A FAILED row does not
// block the rows after it: the failure is the lease's business
// (Config.OnFailure marks it degraded or in error in the same commit),
// and blocking would stall every later action of the key until an
// operator stepped in. Ids follow commit order within a key because
// Enqueue serialises the transactions that enqueue for one key (on MySQL
// a row lock per key held to commit; SQLite runs one write transaction at
// a time).
//
// Outcomes: a success deletes the row (done rows are not kept: the table
// holds only work in flight, and the effect is what the handler made);
// OnSuccess runs in that transaction, which also claims the key's next
// due row. A failure keeps the row PENDING with attempts and last_error
// until its next attempt after Config.Backoff (OnFailure, final=false);
// a Permanent error, an unknown kind or the last of MaxAttempts makes it
// FAILED (OnFailure, final=true), kept until an operator calls Retry or
// Discard. An expired claim counts as a failed attempt, due again at
// once.
//
// Times: claims and retries use the worker's clock; ClaimTimeout must
// exceed HandlerTimeout plus the clock skew between processes.
package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Row statuses. A row that succeeded is deleted; a row waiting for its
// next attempt after a failure is PENDING with Attempts > 0 and NextAt
// set.
const (
	StatusPending = "PENDING"
	StatusClaimed = "CLAIMED"
	StatusFailed  = "FAILED"
)

// Column limits (the migration's sizes).
const (
	maxKind    = 128
	maxKey     = 255
	maxLeaseID = 36
	// maxLastError bounds the stored error text.
	maxLastError = 4000
)

// MaxPayload is the largest encoded payload Enqueue takes (a MySQL TEXT
// column).
const MaxPayload = 65535

// lockType names the per-key locks in blazar_resource_locks.
const lockType = "outbox_key"

// Action is one external call to make after the transaction commits.
type Action struct {
	// Kind names the handler, e.g. "compute.reserve_hosts".
	Kind string
	// Key orders actions, e.g. "reservation:<id>": actions with one key
	// run one at a time in enqueue order (a later one waits while an
	// earlier one is pending, running or retrying); different keys run
	// independently. Required.
	Key string
	// LeaseID is optional: the lease whose degraded flag shows this
	// action failing (passed back in Record to the hooks).
	LeaseID string
	// Payload is JSON-encoded into the row and handed to the handler.
	Payload any
}

// Handler carries out one action. It runs outside any transaction, with
// a context bounded by Config.HandlerTimeout.
//
// Handlers must be idempotent: a process killed after the call but
// before the row is completed makes the call run again (after the claim
// times out), and so does a completion that fails to commit. Look the
// effect up before making it (is the host already in the aggregate?),
// or use a request id the remote side deduplicates on.
//
// A nil error completes the row. Any other error is retried after
// Config.Backoff, up to Config.MaxAttempts; wrap it with Permanent when
// retrying cannot help.
type Handler func(ctx context.Context, payload json.RawMessage) error

// permanentError marks a handler error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks a handler error that retrying cannot fix: the row
// fails at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or an error it wraps) was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Record is one outbox row as the hooks and List see it.
type Record struct {
	ID      int64
	Kind    string
	Key     string
	LeaseID string
	Payload json.RawMessage
	// Attempts counts the runs started (claims), the current one
	// included.
	Attempts int
	// LastError is the latest failure ("" before any).
	LastError string
	// Status is StatusPending, StatusClaimed or StatusFailed.
	Status string
	// NextAt is when a PENDING row is due again after a failure (nil:
	// due at once).
	NextAt *time.Time
	// ClaimedBy and ClaimedAt name the worker running a CLAIMED row.
	ClaimedBy string
	ClaimedAt *time.Time
	CreatedAt time.Time
	UpdatedAt *time.Time
}

func recordOf(m *models.OutboxAction) Record {
	return Record{
		ID: m.ID, Kind: m.Kind, Key: m.OrderKey, LeaseID: m.LeaseID, Payload: json.RawMessage(m.Payload),
		Attempts: m.Attempts, LastError: m.LastError, Status: m.Status, NextAt: utcPtr(m.NextAt),
		ClaimedBy: m.ClaimedBy, ClaimedAt: utcPtr(m.ClaimedAt), CreatedAt: m.CreatedAt.UTC(), UpdatedAt: utcPtr(m.UpdatedAt),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Enqueue records a in tx, the caller's open write transaction (inside
// db.Write on SQLite and MySQL): the actions exist if and only if the
// transaction commits. Nothing runs until then; call the worker's Notify
// after the commit to have them run at once rather than at the next
// poll.
//
// On MySQL, Enqueue also takes a row lock per key (in
// blazar_resource_locks) held until commit, so two transactions
// enqueueing for one key commit in the order of their rows' ids and the
// worker cannot see a later row before an earlier one. Call it after the
// transaction's other locks (and once per transaction, with all its
// actions), so lock order stays the same everywhere.
func Enqueue(tx *gorm.DB, a ...Action) error {
	if len(a) == 0 {
		return nil
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	rows := make([]models.OutboxAction, len(a))
	var keys []string
	for i, act := range a {
		if err := validate(act); err != nil {
			return err
		}
		payload, err := json.Marshal(act.Payload)
		if err != nil {
			return fmt.Errorf("outbox: encode payload of %s for %s: %w", act.Kind, act.Key, err)
		}
		if len(payload) > MaxPayload {
			return fmt.Errorf("outbox: payload of %s for %s is %d bytes, more than %d", act.Kind, act.Key, len(payload), MaxPayload)
		}
		rows[i] = models.OutboxAction{
			Kind: act.Kind, OrderKey: act.Key, LeaseID: act.LeaseID, Payload: string(payload),
			Status: StatusPending, CreatedAt: now,
		}
		keys = append(keys, keyLockID(act.Key))
	}
	ctx := tx.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if tx.Dialector.Name() == "mysql" {
		if err := db.LockResources(ctx, tx, db.MySQL, lockType, keys); err != nil {
			return fmt.Errorf("outbox: lock keys: %w", err)
		}
	}
	if err := tx.WithContext(ctx).Create(&rows).Error; err != nil {
		return fmt.Errorf("outbox: enqueue: %w", err)
	}
	return nil
}

func validate(a Action) error {
	switch {
	case a.Kind == "":
		return errors.New("outbox: action without a kind")
	case a.Key == "":
		return fmt.Errorf("outbox: action %s without an ordering key", a.Kind)
	case len(a.Kind) > maxKind:
		return fmt.Errorf("outbox: kind %.40q… is longer than %d bytes", a.Kind, maxKind)
	case len(a.Key) > maxKey:
		return fmt.Errorf("outbox: key %.40q… is longer than %d bytes", a.Key, maxKey)
	case len(a.LeaseID) > maxLeaseID:
		return fmt.Errorf("outbox: lease id %q is longer than %d bytes", a.LeaseID, maxLeaseID)
	}
	return nil
}

// keyLockID fits any key into the lock table's 36-byte resource id; a
// collision only serialises two keys' enqueues, which is harmless.
func keyLockID(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:16])
}

// List returns the outbox rows with one of the given statuses (all rows
// when none is given), in id order: for operators (FAILED rows stay
// until someone looks) and tests.
func List(ctx context.Context, d *db.DB, status ...string) ([]Record, error) {
	q := d.WithContext(ctx).Order("id")
	if len(status) > 0 {
		q = q.Where("status IN ?", status)
	}
	var rows []models.OutboxAction
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	out := make([]Record, len(rows))
	for i := range rows {
		out[i] = recordOf(&rows[i])
	}
	return out, nil
}

// Retry puts a FAILED row back to PENDING for the operator (the cause
// fixed): due at once, attempts from zero, the last error kept until the
// next run. The row keeps its id, so it runs before any PENDING row of
// its key enqueued after it; rows of the key that already ran while it
// was FAILED stay run (a FAILED row does not block). A row that is not
// FAILED is a NotFound error (pkg/errs).
func Retry(ctx context.Context, d *db.DB, id int64) error {
	return changeFailed(ctx, d, id, "UPDATE outbox SET status = 'PENDING', attempts = 0, next_at = NULL, updated_at = ? WHERE id = ? AND status = 'FAILED'",
		time.Now().UTC().Truncate(time.Microsecond), id)
}

// Discard deletes a FAILED row for the operator (the action is given up
// or was carried out by hand). A row that is not FAILED is a NotFound
// error (pkg/errs).
func Discard(ctx context.Context, d *db.DB, id int64) error {
	return changeFailed(ctx, d, id, "DELETE FROM outbox WHERE id = ? AND status = 'FAILED'", id)
}

func changeFailed(ctx context.Context, d *db.DB, id int64, stmt string, args ...any) error {
	var n int64
	err := d.Write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(stmt, args...)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("outbox: row %d: %w", id, err)
	}
	if n != 1 {
		return errs.NotFoundf("outbox row %d is not FAILED (or does not exist)", id)
	}
	return nil
}
