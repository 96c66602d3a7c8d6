package placement

import (
	"net/http"

	"github.com/leasehold/leasehold/pkg/placement"
)

// parseProviderFilter reads the GET /resource_providers query string.
func (a *API) parseProviderFilter(r *http.Request) (placement.ProviderFilter, error) {
	q := r.URL.Query()
	f := placement.ProviderFilter{Name: q.Get("name"), UUID: q.Get("uuid")}
	if ctxVersion(r.Context()).AtLeast(1, 14) {
		f.InTree = q.Get("in_tree")
	}
	return f, nil
}
