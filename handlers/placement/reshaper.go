package placement

import "github.com/leasehold/leasehold/pkg/microversion"

func (a *API) registerReshaperRoutes(v func(int) microversion.Version) {}
