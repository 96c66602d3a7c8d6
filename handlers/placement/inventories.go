package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerInventoryRoutes(v func(int) microversion.Version) {}
