package blazar

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/errs"
)

func registerPropertyRoutes(rt *Router, h *hostHandlers) {
	rt.Handle(http.MethodGet, "/os-hosts/properties", h.properties)
	rt.Handle(http.MethodPatch, "/os-hosts/properties/{property_name}", h.updateProperty)
}

// properties serves GET /v1/os-hosts/properties?detail=&all=: private
// properties only with all and an admin caller.
func (h *hostHandlers) properties(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:get_resource_properties", ""); err != nil {
		return err
	}
	detail := queryFlag(r, "detail")
	all := queryFlag(r, "all") && isAdmin(r)
	props, err := h.svc.Properties(r.Context(), all)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(props))
	for i, p := range props {
		if detail {
			out[i] = map[string]any{"property": p.Name, "private": p.Private, "values": p.Values}
		} else {
			out[i] = map[string]any{"property": p.Name}
		}
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"resource_properties": out})
}

func propertyView(p *hosts.Property) map[string]any {
	return map[string]any{
		"id": p.ID, "resource_type": p.ResourceType, "property_name": p.Name, "private": p.Private,
		"created_at": stamp(p.CreatedAt), "updated_at": stampPtr(p.UpdatedAt),
	}
}

// updateProperty serves PATCH /v1/os-hosts/properties/{name} with
// {"private": bool}, the only attribute that can change.
func (h *hostHandlers) updateProperty(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:update_resource_properties", ""); err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	var extra []string
	for k := range body {
		if k != "private" {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return errs.BadRequestf("Only `private` can be updated on a resource property; got `%s`", extra[0])
	}
	raw, ok := body["private"]
	if !ok {
		return errs.BadRequestf("Missing parameter `private`")
	}
	var private bool
	if err := json.Unmarshal(raw, &private); err != nil {
		return errs.BadRequestf("Malformed parameter `private`: it must be true or false")
	}
	p, err := h.svc.SetPropertyPrivate(r.Context(), chi.URLParam(r, "property_name"), private)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"resource_property": propertyView(p)})
}
