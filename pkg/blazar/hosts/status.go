package hosts

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// SyncComputeStatus reads every host's status from the compute driver
// and records it on the registered hosts: a host the compute service
// reports down or disabled gets the extra capability compute.StatusKey
// (down or disabled) and is made not reservable, so no new reservation
// picks it, and its current and future reservations are healed as for
// PUT reservable=false (moved to equivalent free hosts, flagged
// resources_changed, or missing_resources when none is free; the lease
// degraded). When the service reports it up again the capability reads
// "up" and the host is reservable again. A host the service does not
// list is left alone, and so is the reservable flag of a host this
// never marked (an operator's choice). It returns how many hosts
// changed.
//
// A host still down on a later round is healed again: healing that
// failed (a database error, a crash between the mark and the healing)
// is retried, and one that succeeded left nothing to move, so the retry
// costs one query. One host's failure does not stop the others; the
// first error is returned.
func (s *Service) SyncComputeStatus(ctx context.Context) (int, error) {
	statuses, err := s.driver.HostStatuses(ctx)
	if err != nil || statuses == nil {
		return 0, err
	}
	all, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	changed := 0
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for i := range all {
		h := &all[i]
		st, ok := statuses[h.ServiceName]
		if !ok {
			if st, ok = statuses[h.HypervisorHostname]; !ok {
				continue
			}
		}
		cur := h.ExtraCapabilities[compute.StatusKey]
		var reservable bool
		switch {
		case st != compute.StatusUp && cur != st:
			slog.WarnContext(ctx, "the compute service reports a host down or disabled: not reservable until it is back, its reservations healed", "host", h.HypervisorHostname, "id", h.ID, "status", st)
			reservable = false
		case st != compute.StatusUp:
			// Marked on an earlier round: heal what is left, if anything.
			if err := s.heal(ctx, h); err != nil {
				slog.WarnContext(ctx, "could not heal the reservations of a host the compute service reports down", "host", h.HypervisorHostname, "id", h.ID, "error", err)
				keep(err)
			}
			continue
		case cur != "" && cur != compute.StatusUp:
			slog.InfoContext(ctx, "the compute service reports a host up again: reservable", "host", h.HypervisorHostname, "id", h.ID, "was", cur)
			reservable = true
		default:
			continue
		}
		// Update heals a host made not reservable (heal.go). The mark is
		// committed before the healing: a failed healing is retried on
		// the next round (above).
		if _, err := s.Update(ctx, h.ID, map[string]any{compute.StatusKey: st, "reservable": reservable}); err != nil {
			if errs.Is(err, errs.NotFound) {
				continue // deleted meanwhile
			}
			slog.WarnContext(ctx, "could not record a host's status from the compute service or heal its reservations", "host", h.HypervisorHostname, "id", h.ID, "error", err)
			keep(err)
			continue
		}
		changed++
	}
	return changed, firstErr
}

// RunComputeStatusSync runs SyncComputeStatus every interval until ctx
// ends (a failed round is logged and the next one tries again).
func (s *Service) RunComputeStatusSync(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, interval)
		if _, err := s.SyncComputeStatus(rctx); err != nil && ctx.Err() == nil {
			slog.WarnContext(ctx, "could not read the hosts' status from the compute service", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
