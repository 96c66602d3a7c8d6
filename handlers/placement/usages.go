package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerUsageRoutes(v func(int) microversion.Version) {}
