package placement

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/pyjsonschema"
)

func (a *API) registerUsageRoutes(v func(int) microversion.Version) {
	a.route("GET", "/resource_providers/{uuid}/usages", v(0), a.getProviderUsages)
	a.route("GET", "/usages", v(9), a.getTotalUsages)
}

// GET /usages query schemas (upstream's, in its key order).
var (
	schemaUsagesV1_9 = pyjsonschema.MustCompile(`{"type": "object", "properties": {` +
		`"project_id": {"type": "string", "minLength": 1, "maxLength": 255}, ` +
		`"user_id": {"type": "string", "minLength": 1, "maxLength": 255}}, ` +
		`"required": ["project_id"], "additionalProperties": false}`)
	schemaUsagesV1_38 = pyjsonschema.MustCompile(`{"type": "object", "properties": {` +
		`"project_id": {"type": "string", "minLength": 1, "maxLength": 255}, ` +
		`"user_id": {"type": "string", "minLength": 1, "maxLength": 255}, ` +
		`"consumer_type": {"type": "string", "pattern": "^[A-Z0-9_]+$|^all|^unknown$", "minLength": 1, "maxLength": 255}}, ` +
		`"required": ["project_id"], "additionalProperties": false}`)
)

// queryPairs returns the query string's (key, value) pairs in request
// order, blank values kept, as webob's parse_qsl does.
func queryPairs(r *http.Request) ([][2]string, error) {
	var out [][2]string
	for _, part := range strings.Split(r.URL.RawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		ku, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		vu, err := url.QueryUnescape(v)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]string{ku, vu})
	}
	return out, nil
}

// getProviderUsages handles GET /resource_providers/{uuid}/usages.
func (a *API) getProviderUsages(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:usages", ""); err != nil {
		return err
	}
	u, err := a.svc.GetProviderUsages(r.Context(), chi.URLParam(r, "uuid"))
	if err != nil {
		return err
	}
	// Usage is "now": upstream dates it with the current time.
	return writeJSON(w, r, http.StatusOK, map[string]any{
		"resource_provider_generation": u.ProviderGeneration, "usages": u.Usages,
	}, time.Now())
}

// getTotalUsages handles GET /usages (1.9+).
func (a *API) getTotalUsages(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	params, err := queryPairs(r)
	if err != nil {
		return placement.BadRequest("Invalid query string parameters: %s", err)
	}
	var f placement.UsageFilter
	consumerType := ""
	for _, p := range params {
		switch p[0] {
		case "project_id":
			f.ProjectID = p[1]
		case "user_id":
			f.UserID = p[1]
		case "consumer_type":
			consumerType = p[1]
		}
	}
	if err := a.policy.Authorize(r.Context(), "placement:usages", f.ProjectID); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	schema := schemaUsagesV1_9
	if mv.AtLeast(1, 38) {
		schema = schemaUsagesV1_38
	}
	if verr := schema.ValidateQuery(params); verr != nil {
		return placement.BadRequest("Invalid query string parameters: %s", verr.Error())
	}
	if !mv.AtLeast(1, 38) {
		usages, err := a.svc.TotalUsages(r.Context(), f)
		if err != nil {
			return err
		}
		return writeJSON(w, r, http.StatusOK, map[string]any{"usages": usages}, time.Now())
	}
	groups, err := a.svc.UsagesByConsumerType(r.Context(), f, consumerType)
	if err != nil {
		return err
	}
	out := make(map[string]map[string]int64, len(groups))
	for name, g := range groups {
		m := make(map[string]int64, len(g.Resources)+1)
		for rc, n := range g.Resources {
			m[rc] = n
		}
		m["consumer_count"] = g.ConsumerCount
		out[name] = m
	}
	return writeJSON(w, r, http.StatusOK, map[string]any{"usages": out}, time.Now())
}
