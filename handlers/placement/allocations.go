package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerAllocationRoutes(v func(int) microversion.Version) {}
