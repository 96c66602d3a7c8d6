package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerAllocationCandidateRoutes(v func(int) microversion.Version) {}
