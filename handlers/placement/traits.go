package placement

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/pyjsonschema"
)

func (a *API) registerTraitRoutes(v func(int) microversion.Version) {
	a.route("GET", "/traits", v(6), a.listTraits)
	a.route("GET", "/traits/{name}", v(6), a.getTrait)
	a.route("PUT", "/traits/{name}", v(6), a.putTrait)
	a.route("DELETE", "/traits/{name}", v(6), a.deleteTrait)
	a.route("GET", "/resource_providers/{uuid}/traits", v(6), a.listProviderTraits)
	a.route("PUT", "/resource_providers/{uuid}/traits", v(6), a.updateProviderTraits)
	a.route("DELETE", "/resource_providers/{uuid}/traits", v(6), a.deleteProviderTraits)
}

// traitNames returns the names and the newest timestamp (zero when no
// trait; the caller then uses now).
func traitNames(ts []placement.Trait) ([]string, time.Time) {
	names := make([]string, 0, len(ts))
	var lm time.Time
	for _, t := range ts {
		names = append(names, t.Name)
		lm = latest(lm, t.CreatedAt, t.UpdatedAt)
	}
	if lm.IsZero() {
		lm = timeNow()
	}
	return names, lm
}

// listTraits handles GET /traits (1.6): name=in:A,B or
// name=startswith:PFX, associated=true|false.
func (a *API) listTraits(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:traits:list", ""); err != nil {
		return err
	}
	q, err := validateQuery(r, schemaListTraits)
	if err != nil {
		return err
	}
	var f placement.TraitFilter
	if name, ok := q.Get("name"); ok {
		op, value, found := strings.Cut(name, ":")
		if !found {
			return placement.BadRequest("Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"%s\"", name)
		}
		switch op {
		case "in":
			f.NameIn = strings.Split(value, ",")
		case "startswith":
			f.Prefix = &value
		}
	}
	if assoc, ok := q.Get("associated"); ok {
		var b bool
		switch strings.ToLower(assoc) {
		case "true":
			b = true
		case "false":
		default:
			return placement.BadRequest("The query parameter \"associated\" only accepts \"true\" or \"false\"")
		}
		f.Associated = &b
	}
	ts, err := a.svc.ListTraits(r.Context(), f)
	if err != nil {
		return err
	}
	names, lm := traitNames(ts)
	return writeJSON(w, r, http.StatusOK, map[string]any{"traits": names}, lm)
}

// getTrait handles GET /traits/{name} (1.6): 204 if it exists.
func (a *API) getTrait(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:traits:show", ""); err != nil {
		return err
	}
	t, err := a.svc.GetTrait(r.Context(), chi.URLParam(r, "name"))
	if err != nil {
		return err
	}
	if ctxVersion(r.Context()).AtLeast(1, 15) {
		setCacheHeaders(w, t.CreatedAt)
	}
	return noContent(w)
}

// putTrait handles PUT /traits/{name} (1.6): creates a custom trait (201)
// or confirms it (204), with a Location.
func (a *API) putTrait(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:traits:update", ""); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	if !compileSchema(schemaCustomTrait).IsValid(pyjsonschema.String(name)) {
		return placement.BadRequest("The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"")
	}
	t, created, err := a.svc.EnsureTrait(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", absURL(r, "/traits/"+t.Name))
	if ctxVersion(r.Context()).AtLeast(1, 15) {
		setCacheHeaders(w, t.CreatedAt)
	}
	if created {
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	return noContent(w)
}

// deleteTrait handles DELETE /traits/{name} (1.6): custom traits no
// provider has.
func (a *API) deleteTrait(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:traits:delete", ""); err != nil {
		return err
	}
	if err := a.svc.DeleteTrait(r.Context(), chi.URLParam(r, "name")); err != nil {
		return err
	}
	return noContent(w)
}

// listProviderTraits handles GET /resource_providers/{uuid}/traits (1.6).
func (a *API) listProviderTraits(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:traits:list", ""); err != nil {
		return err
	}
	uuid := chi.URLParam(r, "uuid")
	p, ts, err := a.svc.ProviderTraits(r.Context(), uuid)
	if err != nil {
		return providerNotFound(err, uuid, ": ")
	}
	names, lm := traitNames(ts)
	return writeJSON(w, r, http.StatusOK, map[string]any{"traits": names, "resource_provider_generation": p.Generation}, lm)
}

// updateProviderTraits handles PUT /resource_providers/{uuid}/traits
// (1.6): {"traits": [...], "resource_provider_generation": g}.
func (a *API) updateProviderTraits(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:traits:update", ""); err != nil {
		return err
	}
	v, _, err := readJSONValue(r, schemaSetTraits)
	if err != nil {
		return err
	}
	gen := generationFromValue(v)
	tv, _ := v.Get("traits")
	var names []string
	for _, x := range tv.Items() {
		s, _ := x.AsString()
		names = append(names, s)
	}
	p, ts, err := a.svc.SetProviderTraits(r.Context(), chi.URLParam(r, "uuid"), gen, names)
	if err != nil {
		return escapedNotFound(err)
	}
	out, lm := traitNames(ts)
	return writeJSON(w, r, http.StatusOK, map[string]any{"traits": out, "resource_provider_generation": p.Generation}, lm)
}

// deleteProviderTraits handles DELETE /resource_providers/{uuid}/traits
// (1.6).
func (a *API) deleteProviderTraits(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:traits:delete", ""); err != nil {
		return err
	}
	if err := a.svc.DeleteProviderTraits(r.Context(), chi.URLParam(r, "uuid")); err != nil {
		return escapedNotFound(err)
	}
	return noContent(w)
}
