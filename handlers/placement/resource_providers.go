package placement

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

func (a *API) registerResourceProviderRoutes(v func(int) microversion.Version) {
	a.route("GET", "/resource_providers", v(0), a.listResourceProviders)
	a.route("POST", "/resource_providers", v(0), a.createResourceProvider)
	a.route("GET", "/resource_providers/{uuid}", v(0), a.getResourceProvider)
	a.route("DELETE", "/resource_providers/{uuid}", v(0), a.deleteResourceProvider)
	a.route("PUT", "/resource_providers/{uuid}", v(0), a.updateResourceProvider)
}

type link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
}

// providerBodyV0 and providerBodyV14 are a provider as the API shows it
// before and from 1.14 (fields in the order the map encoding used to
// give: by name).
type providerBodyV0 struct {
	Generation int64  `json:"generation"`
	Links      []link `json:"links"`
	Name       string `json:"name"`
	UUID       string `json:"uuid"`
}

type providerBodyV14 struct {
	Generation         int64   `json:"generation"`
	Links              []link  `json:"links"`
	Name               string  `json:"name"`
	ParentProviderUUID *string `json:"parent_provider_uuid"`
	RootProviderUUID   string  `json:"root_provider_uuid"`
	UUID               string  `json:"uuid"`
}

// providerJSON renders a provider for microversion mv.
func providerJSON(r *http.Request, p *placement.Provider) any {
	mv := ctxVersion(r.Context())
	base := prefix(r) + "/resource_providers/" + p.UUID
	links := make([]link, 3, 6)
	links[0], links[1], links[2] = link{"self", base}, link{"inventories", base + "/inventories"}, link{"usages", base + "/usages"}
	if mv.AtLeast(1, 1) {
		links = append(links, link{"aggregates", base + "/aggregates"})
	}
	if mv.AtLeast(1, 6) {
		links = append(links, link{"traits", base + "/traits"})
	}
	if mv.AtLeast(1, 11) {
		links = append(links, link{"allocations", base + "/allocations"})
	}
	if mv.AtLeast(1, 14) {
		return &providerBodyV14{Generation: p.Generation, Links: links, Name: p.Name,
			ParentProviderUUID: p.ParentProviderUUID, RootProviderUUID: p.RootProviderUUID, UUID: p.UUID}
	}
	return &providerBodyV0{Generation: p.Generation, Links: links, Name: p.Name, UUID: p.UUID}
}

// authorizedProvider checks the caller may perform rule, then reads the
// provider the path's {uuid} names (a missing one escapes the handler, as
// upstream's lookup does).
func (a *API) authorizedProvider(r *http.Request, rule string) (*placement.Provider, error) {
	if err := a.policy.Authorize(r.Context(), rule, ""); err != nil {
		return nil, err
	}
	p, err := a.svc.GetProvider(r.Context(), chi.URLParam(r, "uuid"))
	if err != nil {
		return nil, escapedNotFound(err)
	}
	return p, nil
}

// getResourceProvider handles GET /resource_providers/{uuid}.
func (a *API) getResourceProvider(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	p, err := a.authorizedProvider(r, "placement:resource_providers:show")
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, providerJSON(r, p), latest(p.CreatedAt, p.UpdatedAt))
}

// listResourceProviders handles GET /resource_providers.
func (a *API) listResourceProviders(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:list", ""); err != nil {
		return err
	}
	f, err := a.parseProviderFilter(r)
	if err != nil {
		return err
	}
	ps, err := a.svc.ListProviders(r.Context(), f)
	if err != nil {
		return listProvidersError(err)
	}
	list := make([]any, 0, len(ps))
	var lm time.Time
	for i := range ps {
		list = append(list, providerJSON(r, &ps[i]))
		lm = latest(lm, ps[i].CreatedAt, ps[i].UpdatedAt)
	}
	return writeJSON(w, r, http.StatusOK, map[string]any{"resource_providers": list}, lm)
}

type providerBody struct {
	Name               string  `json:"name"`
	UUID               string  `json:"uuid"`
	ParentProviderUUID *string `json:"parent_provider_uuid"`
}

// createResourceProvider handles POST /resource_providers: 201 with a
// Location and no body before 1.20, 200 with the provider from 1.20.
func (a *API) createResourceProvider(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:create", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	var body providerBody
	raw, err := decodeBody(r, schemaCreateProvider(mv), &body)
	if err != nil {
		return err
	}
	var parent *string
	if _, ok := raw["parent_provider_uuid"]; ok {
		parent = body.ParentProviderUUID
	}
	if body.UUID != "" {
		// Upstream normalises with str(uuid.UUID(value)).
		body.UUID = placement.CanonicalUUID(body.UUID)
	}
	p, err := a.svc.CreateProvider(r.Context(), body.Name, body.UUID, parent)
	if err != nil {
		return err
	}
	w.Header().Set("Location", absURL(r, "/resource_providers/"+p.UUID))
	if mv.AtLeast(1, 20) {
		// Upstream always sends the cache headers here, whatever the
		// microversion below 1.15 would say (it cannot be below 1.20).
		return writeJSON(w, r, http.StatusOK, providerJSON(r, p), latest(p.CreatedAt, p.UpdatedAt))
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

// updateResourceProvider handles PUT /resource_providers/{uuid}.
func (a *API) updateResourceProvider(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	uuid := chi.URLParam(r, "uuid")
	if _, err := a.authorizedProvider(r, "placement:resource_providers:update"); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	var body providerBody
	raw, err := decodeBody(r, schemaUpdateProvider(mv), &body)
	if err != nil {
		return err
	}
	_, parentGiven := raw["parent_provider_uuid"]
	p, err := a.svc.UpdateProvider(r.Context(), uuid, body.Name, parentGiven, body.ParentProviderUUID, mv.AtLeast(1, 37))
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, providerJSON(r, p), p.UpdatedAt)
}

// deleteResourceProvider handles DELETE /resource_providers/{uuid}.
func (a *API) deleteResourceProvider(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:delete", ""); err != nil {
		return err
	}
	if err := a.svc.DeleteProvider(r.Context(), chi.URLParam(r, "uuid")); err != nil {
		return err
	}
	return noContent(w)
}
