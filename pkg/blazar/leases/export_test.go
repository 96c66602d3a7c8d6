package leases

// ListLoads is how many times s read the lease listing into its cache.
func ListLoads(s *Service) int64 { return s.listCache.loads.Load() }
