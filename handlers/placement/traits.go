package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerTraitRoutes(v func(int) microversion.Version) {}
