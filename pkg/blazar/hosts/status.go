package hosts

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/pkg/compute"
)

// SyncComputeStatus reads every host's status from the compute driver
// and records it on the registered hosts: a host the compute service
// reports down or disabled gets the extra capability compute.StatusKey
// (down or disabled) and is made not reservable, so no new reservation
// picks it (its current reservations keep it); when the service reports
// it up again the capability reads "up" and the host is reservable
// again. A host the service does not list is left alone, and so is the
// reservable flag of a host this never marked (an operator's choice).
// It returns how many hosts changed.
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
	for _, h := range all {
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
			slog.WarnContext(ctx, "the compute service reports a host down or disabled: not reservable until it is back", "host", h.HypervisorHostname, "id", h.ID, "status", st)
			reservable = false
		case st == compute.StatusUp && cur != "" && cur != compute.StatusUp:
			slog.InfoContext(ctx, "the compute service reports a host up again: reservable", "host", h.HypervisorHostname, "id", h.ID, "was", cur)
			reservable = true
		default:
			continue
		}
		if _, err := s.Update(ctx, h.ID, map[string]any{compute.StatusKey: st, "reservable": reservable}); err != nil {
			return changed, err
		}
		changed++
	}
	return changed, nil
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
