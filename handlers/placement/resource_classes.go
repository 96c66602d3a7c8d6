package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerResourceClassRoutes(v func(int) microversion.Version) {}
