package leases

// ListLoads is how many times s read the lease listing into its cache.
func ListLoads(s *Service) int64 { return s.listCache.loads.Load() }

// RenderedLeases is how many lease objects s has rendered for its
// listings.
func RenderedLeases(s *Service) int64 { return s.frags.rendered.Load() }
