package placement

import (
	"net/http"

	"github.com/leasehold/leasehold/pkg/placement"
)

// parseProviderFilter reads the GET /resource_providers query string as
// list_resource_providers does: the whole query is validated against the
// microversion's schema (unknown parameters, a bad uuid or in_tree → 400
// "Invalid query string parameters: …"), then member_of (1.3; several
// 1.24; forbidden 1.32), required (1.18; forbidden 1.22; in: and several
// 1.39) and resources (1.4) are parsed.
func (a *API) parseProviderFilter(r *http.Request) (placement.ProviderFilter, error) {
	mv := ctxVersion(r.Context())
	q, err := validateQuery(r, schemaListProviders(mv))
	if err != nil {
		return placement.ProviderFilter{}, err
	}
	var f placement.ProviderFilter
	if q.Has("member_of") {
		mo, err := placement.ParseMemberOf(q.GetAll("member_of"), "", mv)
		if err != nil {
			return f, err
		}
		f.MemberOf, f.ForbiddenAggs = mo.AnyOf, mo.Forbidden
	}
	if q.Has("required") {
		rt, err := placement.ParseRequired(q.GetAll("required"), mv)
		if err != nil {
			return f, err
		}
		f.RequiredTraits, f.ForbiddenTraits = rt.AnyOf, rt.Forbidden
	}
	f.UUID, _ = q.Get("uuid")
	f.Name, _ = q.Get("name")
	f.InTree, _ = q.Get("in_tree")
	if res, ok := q.Get("resources"); ok {
		rs, err := placement.ParseResources(res)
		if err != nil {
			return f, err
		}
		f.Resources = rs
	}
	return f, nil
}

// listProvidersError words the filter lookups' errors as
// list_resource_providers does.
func listProvidersError(err error) error {
	switch {
	case placement.IsNoSuchResourceClass(err):
		return placement.BadRequest("Invalid resource class in resources parameter: %s", errMsg(err))
	case isNoSuchTrait(err):
		return placement.BadRequest("Invalid trait(s) in \"required\" parameter: %s", errMsg(err))
	}
	return err
}

func isNoSuchTrait(err error) bool {
	return placement.IsNoSuchTrait(err)
}
