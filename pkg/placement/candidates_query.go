package placement

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
	"github.com/leasehold/leasehold/pkg/pyjsonschema"
)

// This file parses GET /allocation_candidates query strings: the
// query-string schema per microversion, the request-wide parameters
// (limit, group_policy, root_required, same_subtree: lib.RequestWideParams)
// and the request groups (ParseRequestGroups in query.go), in upstream's
// order so the first error reported is upstream's.

// Query-string schemas of handlers/allocation_candidate.py, as JSON text
// in the key order Python builds them (the order decides which error
// jsonschema reports first).
const (
	acLimitSchema = `"limit": {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1}`
	acGroupPolicy = `"group_policy": {"type": "string", "enum": ["none", "isolate"]}`
)

func acPatterns(groupPat string, withInTree bool) string {
	kinds := []string{"resources", "required", "member_of"}
	if withInTree {
		kinds = append(kinds, "in_tree")
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, `"^`+k+`(`+groupPat+`)?$": {"type": "string"}`)
	}
	return `{` + strings.Join(parts, ", ") + `}`
}

var acSchemas = func() map[int]*pyjsonschema.Schema {
	const g25, g33 = `[1-9][0-9]*`, `[a-zA-Z0-9_-]{1,64}`
	granular := func(props, patterns string) string {
		return `{"type": "object", "properties": {` + props + `}, "additionalProperties": false, "patternProperties": ` + patterns + `}`
	}
	rr := `"root_required": {"type": ["string"]}`
	ss := `"same_subtree": {"type": ["string"]}`
	return map[int]*pyjsonschema.Schema{
		10: pyjsonschema.MustCompile(`{"type": "object", "properties": {"resources": {"type": "string"}}, "required": ["resources"], "additionalProperties": false}`),
		16: pyjsonschema.MustCompile(`{"type": "object", "properties": {"resources": {"type": "string"}, ` + acLimitSchema + `}, "required": ["resources"], "additionalProperties": false}`),
		17: pyjsonschema.MustCompile(`{"type": "object", "properties": {"resources": {"type": "string"}, ` + acLimitSchema + `, "required": {"type": ["string"]}}, "required": ["resources"], "additionalProperties": false}`),
		21: pyjsonschema.MustCompile(`{"type": "object", "properties": {"resources": {"type": "string"}, ` + acLimitSchema + `, "required": {"type": ["string"]}, "member_of": {"type": ["string"]}}, "required": ["resources"], "additionalProperties": false}`),
		25: pyjsonschema.MustCompile(granular(acLimitSchema+`, `+acGroupPolicy, acPatterns(g25, false))),
		31: pyjsonschema.MustCompile(granular(acLimitSchema+`, `+acGroupPolicy, acPatterns(g25, true))),
		33: pyjsonschema.MustCompile(granular(acLimitSchema+`, `+acGroupPolicy, acPatterns(g33, true))),
		35: pyjsonschema.MustCompile(granular(acLimitSchema+`, `+acGroupPolicy+`, `+rr, acPatterns(g33, true))),
		36: pyjsonschema.MustCompile(granular(acLimitSchema+`, `+acGroupPolicy+`, `+rr+`, `+ss, acPatterns(g33, true))),
	}
}()

// candidatesSchema picks the schema for mv (_get_schema).
func candidatesSchema(mv microversion.Version) *pyjsonschema.Schema {
	for _, m := range []int{36, 35, 33, 31, 25, 21, 17, 16} {
		if mv.AtLeast(1, m) {
			return acSchemas[m]
		}
	}
	return acSchemas[10]
}

// ParseCandidatesQuery parses and validates the raw query string of
// GET /allocation_candidates at microversion mv into an engine request.
// Errors are *errs.Error BadRequests with upstream's messages. Unknown resource
// classes and traits are reported later by the engine, as upstream does.
func ParseCandidatesQuery(raw string, mv microversion.Version) (*candidates.Request, error) {
	q, qerr := ParseQuery(raw)
	if qerr != nil {
		return nil, BadRequest("Invalid query string parameters: %s", qerr.Error())
	}
	if verr := candidatesSchema(mv).ValidateQuery(q.Items()); verr != nil {
		return nil, BadRequest("Invalid query string parameters: %s", verr.Error())
	}
	req := &candidates.Request{NestedAware: mv.AtLeast(1, 29)}
	// lib.RequestWideParams.from_request
	if v, ok := q.First("limit"); ok {
		n, err := strconv.Atoi(v)
		if errors.Is(err, strconv.ErrRange) && len(v) > 0 && v[0] != '-' {
			// Python's int() has no range: such a limit limits nothing.
			n, err = math.MaxInt, nil
		}
		if err != nil || n < 1 {
			// The schema only guarantees the last value; upstream int()s
			// the first one and fails with a 500 when it is not a number.
			return nil, BadRequest("Invalid query string parameters: %s is not a valid limit", pyStrRepr(v))
		}
		req.Limit = n
	}
	groupPolicy, hasPolicy := q.First("group_policy")
	req.GroupPolicy = groupPolicy
	if rr := q.GetAll("root_required"); len(rr) > 0 {
		if len(rr) > 1 {
			return nil, BadRequestCode(CodeQueryDuplicateKey, "Query parameter 'root_required' may be specified only once.")
		}
		required, forbidden, conflicts, err := ParseLegacyTraits(rr[0], true)
		if err != nil {
			return nil, err
		}
		if len(conflicts) > 0 {
			return nil, BadRequestCode(CodeQueryBadValue, "Conflicting required and forbidden traits found in root_required: %s", strings.Join(conflicts, ", "))
		}
		req.RootRequired, req.RootForbidden = required, forbidden
	}
	for _, v := range q.GetAll("same_subtree") {
		set := map[string]bool{}
		var suffixes []string
		for _, s := range strings.Split(v, ",") {
			s = pyStrip(s)
			if !set[s] {
				set[s] = true
				suffixes = append(suffixes, s)
			}
		}
		if set[""] {
			return nil, BadRequestCode(CodeQueryBadValue, "Empty string (unsuffixed group) can not be specified in `same_subtree` ")
		}
		req.SameSubtrees = append(req.SameSubtrees, suffixes)
	}
	groups, err := ParseRequestGroups(q, mv, req.SameSubtrees)
	if err != nil {
		return nil, err
	}
	granular := 0
	for _, g := range groups {
		if g.UseSameProvider {
			granular++
		}
		eg := candidates.Group{
			Suffix: g.Suffix, UseSameProvider: g.UseSameProvider,
			RequiredTraits: g.RequiredTraits, ForbiddenTraits: g.ForbiddenTraits,
			MemberOf: g.MemberOf, ForbiddenAggs: g.ForbiddenAggs, InTree: g.InTree,
		}
		for _, r := range g.Resources {
			eg.Resources = append(eg.Resources, candidates.Resource{Class: r.Class, Amount: r.Amount})
		}
		req.Groups = append(req.Groups, eg)
	}
	if (!hasPolicy || groupPolicy == "") && granular > 1 {
		return nil, BadRequest(`The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.`)
	}
	return req, nil
}
