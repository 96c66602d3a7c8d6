package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerAggregateRoutes(v func(int) microversion.Version) {}
