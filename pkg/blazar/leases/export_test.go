package leases

import "context"

// ListLoads is how many times s read the lease listing into its cache.
func ListLoads(s *Service) int64 { return s.listCache.loads.Load() }

// PlanCreate runs everything a lease create reads and checks before its
// first database work, and returns its refusal.
func PlanCreate(s *Service, c Caller, req CreateRequest) error {
	_, err := s.planCreate(context.Background(), c, req)
	return err
}

// RenderedLeases is how many lease objects s has rendered for its
// listings.
func RenderedLeases(s *Service) int64 { return s.frags.rendered.Load() }

// CompactionsRun is how many compactions of the change log s's
// listings have started and finished.
func CompactionsRun(s *Service) int64 { return s.frags.compacted.Load() }
