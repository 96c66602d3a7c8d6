package placement

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/pkg/microversion"
)

// RequestGroup is one group of a resources/required/member_of/in_tree
// request (lib.RequestGroup). The unsuffixed group has Suffix "" and
// UseSameProvider false; granular groups (resources1, resources_ACCEL …)
// must be satisfied by one provider.
type RequestGroup struct {
	Suffix          string
	UseSameProvider bool
	Resources       Resources
	RequiredTraits  [][]string
	ForbiddenTraits []string
	MemberOf        [][]string
	ForbiddenAggs   []string
	InTree          string
}

var (
	groupKeyPattern     = regexp.MustCompile(`^(resources|required|member_of|in_tree)([1-9][0-9]*)?$`)
	groupKeyPattern1_33 = regexp.MustCompile(`^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?$`)
)

// ParseRequestGroups parses the request groups of a query
// (lib.RequestGroup.dict_from_request), running the same checks in the
// same order: per-key parsing as the keys come, then (≥1.36) the
// same_subtree rules or (<1.36) the orphan rules, then (≥1.22) the
// required/forbidden conflict check. sameSubtrees are the parsed
// same_subtree values (sets of suffixes). Groups are returned in order of
// first appearance.
func ParseRequestGroups(q *Query, mv microversion.Version, sameSubtrees [][]string) ([]*RequestGroup, error) {
	pattern := groupKeyPattern
	if mv.AtLeast(1, 33) {
		pattern = groupKeyPattern1_33
	}
	bySuffix := map[string]*RequestGroup{}
	var order []*RequestGroup
	for _, it := range q.Items() {
		key, val := it[0], it[1]
		m := pattern.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		prefix, suffix := m[1], m[2]
		g := bySuffix[suffix]
		if g == nil {
			g = &RequestGroup{Suffix: suffix, UseSameProvider: suffix != ""}
			bySuffix[suffix] = g
			order = append(order, g)
		}
		switch prefix {
		case "resources":
			rs, err := ParseResources(val)
			if err != nil {
				return nil, err
			}
			g.Resources = rs
		case "required":
			rt, err := ParseRequired(q.GetAll("required"+suffix), mv)
			if err != nil {
				return nil, err
			}
			g.RequiredTraits, g.ForbiddenTraits = rt.AnyOf, rt.Forbidden
		case "member_of":
			mo, err := ParseMemberOf(q.GetAll("member_of"+suffix), suffix, mv)
			if err != nil {
				return nil, err
			}
			g.MemberOf, g.ForbiddenAggs = mo.AnyOf, mo.Forbidden
		case "in_tree":
			t, err := ParseInTree(val)
			if err != nil {
				return nil, err
			}
			g.InTree = t
		}
	}
	if mv.AtLeast(1, 36) {
		resourceless := map[string]bool{}
		for _, g := range order {
			if len(g.Resources) == 0 {
				resourceless[g.Suffix] = true
			}
		}
		subtree := map[string]bool{}
		for _, s := range sameSubtrees {
			for _, x := range s {
				subtree[x] = true
			}
		}
		if len(resourceless) == len(order) {
			return nil, BadRequestCode(CodeQueryMissingValue, "There must be at least one resources or resources[$S] parameter.")
		}
		var bad []string
		for _, g := range order {
			if resourceless[g.Suffix] && !subtree[g.Suffix] {
				bad = append(bad, g.Suffix)
			}
		}
		if len(bad) > 0 {
			return nil, BadRequestCode(CodeQueryBadValue, "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - %s.", pyListRepr(bad))
		}
		bad = nil
		for _, s := range sameSubtrees {
			for _, x := range s {
				if bySuffix[x] == nil {
					bad = append(bad, x)
				}
			}
		}
		if len(bad) > 0 {
			var all []string
			for _, g := range order {
				all = append(all, g.Suffix)
			}
			return nil, BadRequestCode(CodeQueryBadValue, "Real suffixes should be specified in `same_subtree`: %s not found in %s.", pyListRepr(bad), pyListRepr(all))
		}
	} else {
		var orphans []string
		for _, g := range order {
			if len(g.RequiredTraits) > 0 && len(g.Resources) == 0 {
				orphans = append(orphans, "required"+g.Suffix)
			}
		}
		if len(orphans) > 0 {
			return nil, BadRequest("All traits parameters must be associated with resources.  Found the following orphaned traits keys: %s", strings.Join(orphans, ", "))
		}
		for _, g := range order {
			if len(g.Resources) == 0 && (len(g.MemberOf) > 0 || len(g.ForbiddenAggs) > 0) {
				orphans = append(orphans, "member_of"+g.Suffix)
			}
		}
		if len(orphans) > 0 {
			return nil, BadRequest("All member_of parameters must be associated with resources. Found the following orphaned member_of keys: %s", strings.Join(orphans, ", "))
		}
		for _, g := range order {
			if len(g.Resources) == 0 {
				return nil, BadRequest("All request groups must specify resources.")
			}
		}
		if len(order) == 0 {
			return nil, BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
		}
	}
	if mv.AtLeast(1, 22) {
		var conflicts []string
		for _, g := range order {
			forb := map[string]bool{}
			for _, f := range g.ForbiddenTraits {
				forb[f] = true
			}
			for _, any := range g.RequiredTraits {
				all := true
				for _, t := range any {
					if !forb[t] {
						all = false
						break
					}
				}
				if all {
					conflicts = append(conflicts, fmt.Sprintf("required%s: (%s)", g.Suffix, strings.Join(any, ", ")))
				}
			}
		}
		if len(conflicts) > 0 {
			sort.Strings(conflicts)
			return nil, BadRequest("Conflicting required and forbidden traits found in the following traits keys: %s", strings.Join(conflicts, ", "))
		}
	}
	return order, nil
}
