package placement

import (
	"bytes"
	"net/http"
	"strconv"
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
	rels := providerLinkRels(mv)
	links := make([]link, len(rels))
	for i, rel := range rels {
		links[i] = link{rel, base}
		if rel != "self" {
			links[i].Href += "/" + rel
		}
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
	var lm time.Time
	for i := range ps {
		lm = latest(lm, ps[i].CreatedAt, ps[i].UpdatedAt)
	}
	bp, _ := renderBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body := appendProviderList((*bp)[:0], prefix(r), ctxVersion(r.Context()), ps)
	h := w.Header()
	if ctxVersion(r.Context()).AtLeast(1, 15) {
		setCacheHeaders(w, lm)
	}
	h["Content-Type"] = contentTypeJSON
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // a failed write only means the client left
	if cap(body) <= maxPooledRender {
		*bp = body
		renderBufs.Put(bp)
	}
	return nil
}

// appendProviderList appends {"resource_providers": [...]} with each
// provider exactly as providerJSON encodes it (TestProviderListText
// holds the two to the same bytes): the listing of a thousand providers
// is several hundred KB, which encoding/json spends most of the
// request's time on.
func appendProviderList(b []byte, pfx string, mv microversion.Version, ps []placement.Provider) []byte {
	rels := providerLinkRels(mv)
	plainPfx := plainJSON(pfx)
	b = append(b, `{"resource_providers":[`...)
	for i := range ps {
		p := &ps[i]
		plainHref := plainPfx && plainJSON(p.UUID)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"generation":`...)
		b = strconv.AppendInt(b, p.Generation, 10)
		b = append(b, `,"links":[`...)
		for j, rel := range rels {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"rel":"`...)
			b = append(b, rel...)
			b = append(b, `","href":`...)
			if plainHref {
				b = append(b, '"')
				b = append(b, pfx...)
				b = append(b, "/resource_providers/"...)
				b = append(b, p.UUID...)
				if rel != "self" {
					b = append(b, '/')
					b = append(b, rel...)
				}
				b = append(b, "\"}"...)
				continue
			}
			href := pfx + "/resource_providers/" + p.UUID
			if rel != "self" {
				href += "/" + rel
			}
			b = appendJSONText(b, href)
			b = append(b, '}')
		}
		b = append(b, `],"name":`...)
		b = appendJSONText(b, p.Name)
		if mv.AtLeast(1, 14) {
			b = append(b, `,"parent_provider_uuid":`...)
			if p.ParentProviderUUID == nil {
				b = append(b, "null"...)
			} else {
				b = appendJSONText(b, *p.ParentProviderUUID)
			}
			b = append(b, `,"root_provider_uuid":`...)
			b = appendJSONText(b, p.RootProviderUUID)
		}
		b = append(b, `,"uuid":`...)
		b = appendJSONText(b, p.UUID)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// providerLinkRels are the link relations of a provider at mv, in order.
func providerLinkRels(mv microversion.Version) []string {
	rels := make([]string, 3, 6)
	rels[0], rels[1], rels[2] = "self", "inventories", "usages"
	if mv.AtLeast(1, 1) {
		rels = append(rels, "aggregates")
	}
	if mv.AtLeast(1, 6) {
		rels = append(rels, "traits")
	}
	if mv.AtLeast(1, 11) {
		rels = append(rels, "allocations")
	}
	return rels
}

// appendJSONText appends s as encodeJSON writes a string: printable
// ASCII without quote or backslash is copied, anything else goes through
// encoding/json itself (its escapes, U+2028/2029, invalid UTF-8).
func appendJSONText(b []byte, s string) []byte {
	if !plainJSON(s) {
		var buf bytes.Buffer
		_ = encodeJSON(&buf, s) // a string always encodes
		return append(b, buf.Bytes()...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON reports whether s is printable ASCII without quote or
// backslash: the same text inside JSON quotes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
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
