package placement

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
)

func (a *API) registerAggregateRoutes(v func(int) microversion.Version) {
	// Upstream checks Accept / Content-Type before the microversion here,
	// so the handlers do the version check themselves.
	a.route("GET", "/resource_providers/{uuid}/aggregates", v(0), a.getAggregates)
	a.route("PUT", "/resource_providers/{uuid}/aggregates", v(0), a.setAggregates)
}

// sendAggregates writes {"aggregates": [...]} plus, from 1.19,
// resource_provider_generation. Associations carry no timestamp:
// Last-Modified is now.
func sendAggregates(w http.ResponseWriter, r *http.Request, aggs []string, gen int64) error {
	if aggs == nil {
		aggs = []string{}
	}
	body := map[string]any{"aggregates": aggs}
	if ctxVersion(r.Context()).AtLeast(1, 19) {
		body["resource_provider_generation"] = gen
	}
	return writeJSON(w, r, http.StatusOK, body, timeNow())
}

// getAggregates handles GET /resource_providers/{uuid}/aggregates (1.1).
func (a *API) getAggregates(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if !ctxVersion(r.Context()).AtLeast(1, 1) {
		return errOf(errs.NotFound, "")
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:aggregates:list", ""); err != nil {
		return err
	}
	p, aggs, err := a.svc.ProviderAggregates(r.Context(), chi.URLParam(r, "uuid"))
	if err != nil {
		return escapedNotFound(err)
	}
	return sendAggregates(w, r, aggs, p.Generation)
}

// setAggregates handles PUT /resource_providers/{uuid}/aggregates (1.1):
// before 1.19 the body is the list of aggregate uuids and the generation
// is untouched; from 1.19 it is {"aggregates", "resource_provider_generation"},
// compared (409 placement.concurrent_update) and bumped.
func (a *API) setAggregates(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	if !ctxVersion(r.Context()).AtLeast(1, 1) {
		return errOf(errs.NotFound, "")
	}
	withGen := ctxVersion(r.Context()).AtLeast(1, 19)
	uuid := chi.URLParam(r, "uuid")
	if _, err := a.authorizedProvider(r, "placement:resource_providers:aggregates:update"); err != nil {
		return err
	}
	schema := schemaAggregateList
	if withGen {
		schema = schemaPutAggregates1_19
	}
	v, _, err := readJSONValue(r, schema)
	if err != nil {
		return err
	}
	list := v
	var gen *int64
	if withGen {
		g := generationFromValue(v)
		gen = &g
		list, _ = v.Get("aggregates")
	}
	aggs := []string{}
	for _, x := range list.Items() {
		s, _ := x.AsString()
		aggs = append(aggs, s)
	}
	p, err := a.svc.SetProviderAggregates(r.Context(), uuid, gen, aggs)
	if err != nil {
		return escapedNotFound(err)
	}
	return sendAggregates(w, r, aggs, p.Generation)
}
