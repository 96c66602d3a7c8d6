package leases

import (
	"context"
	"encoding/json"
	"log/slog"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/plugins"
)

// Trusts makes and removes the Keystone trusts of leases (Keystone mode;
// nil in noauth, where leases have no trust). A lease made with a token
// carries a trust from its creator to the service user for the lease's
// project; the calls made later for that project (server groups) use it.
type Trusts interface {
	// CreateTrust makes the trust of a new lease with the caller's token.
	// It is called before the lease's transaction, never inside it.
	CreateTrust(ctx context.Context, token, userID, projectID string, roles []string) (string, error)
	// DeleteTrustAsCaller removes a trust just made whose lease could not
	// be written, with the same token (a trust already gone is done).
	DeleteTrustAsCaller(ctx context.Context, token, id string) error
	// DeleteTrust removes the trust of a lease that ended or was deleted
	// (from the outbox; a trust already gone is done).
	DeleteTrust(ctx context.Context, id string) error
}

// KindDeleteTrust is the outbox action that deletes a lease's trust
// once the lease ended or was deleted.
const KindDeleteTrust = "identity.delete_trust"

type trustAction struct {
	TrustID string `json:"trust_id"`
}

// TrustHandlers are the outbox handlers of the trust actions over t.
func TrustHandlers(t Trusts) map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindDeleteTrust: func(ctx context.Context, payload json.RawMessage) error {
			var a trustAction
			if err := json.Unmarshal(payload, &a); err != nil || a.TrustID == "" {
				return outbox.Permanent(err)
			}
			return t.DeleteTrust(ctx, a.TrustID)
		},
	}
}

// trustDeletion is the outbox action deleting trust id. It names no
// lease: the lease is gone, or ended, and a Keystone outage while
// revoking its trust must not put it in ERROR (the row retries).
func trustDeletion(id string) outbox.Action {
	return outbox.Action{Kind: KindDeleteTrust, Key: "trust:" + id, Payload: trustAction{TrustID: id}}
}

// enqueueTrustDeletion records the deletion of a lease's trust (none
// when it has none).
func enqueueTrustDeletion(tx *plugins.Tx, trustID string) error {
	if trustID == "" {
		return nil
	}
	return tx.Enqueue(trustDeletion(trustID))
}

// createTrust makes the trust of the lease c is creating (before its
// transaction); "" when the service makes no trusts or c has no token.
func (s *Service) createTrust(ctx context.Context, c Caller) (string, error) {
	if s.cfg.Trusts == nil || c.Token == "" {
		return "", nil
	}
	return s.cfg.Trusts.CreateTrust(ctx, c.Token, c.UserID, c.ProjectID, c.Roles)
}

// dropTrust removes trust id whose lease was not written: with the
// caller's token at once, else through the outbox; if both fail, the
// trust id is logged as an error so an operator can remove it.
func (s *Service) dropTrust(ctx context.Context, c Caller, id string) {
	if id == "" {
		return
	}
	ctx = context.WithoutCancel(ctx) // the client leaving must not leak the trust
	err := s.cfg.Trusts.DeleteTrustAsCaller(ctx, c.Token, id)
	if err == nil {
		return
	}
	qerr := s.db.Write(ctx, func(g *gorm.DB) error { return outbox.Enqueue(g, trustDeletion(id)) })
	if qerr == nil {
		slog.WarnContext(ctx, "the trust of a lease that was not written could not be deleted at once; the outbox deletes it", "trust_id", id, "err", err)
		s.eventsChanged()
		return
	}
	slog.ErrorContext(ctx, "the trust of a lease that was not written is left in Keystone; delete it by hand", "trust_id", id, "err", err, "outbox_err", qerr)
}
