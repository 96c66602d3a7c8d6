package policy

import (
	"strings"

	"github.com/leasehold/leasehold/pkg/auth"
)

// Credentials are the caller's policy values, what oslo.context's
// to_policy_values gives oslo.policy. Empty strings are unset (Python's
// None): a check against an unset field fails.
type Credentials struct {
	UserID          string
	UserDomainID    string
	ProjectID       string
	ProjectDomainID string
	// DomainID is set for a domain-scoped token.
	DomainID string
	// SystemScope is "all" for a system-scoped token.
	SystemScope string
	Roles       []string
	// IsAdmin is oslo.context's is_admin (the service's context_is_admin).
	IsAdmin        bool
	IsAdminProject bool
	// The service token's values, when a service token came along.
	ServiceUserID          string
	ServiceUserDomainID    string
	ServiceProjectID       string
	ServiceProjectDomainID string
	ServiceRoles           []string
}

// Target is what an action is about: flat keys (project_id, user_id, …)
// that %(key)s substitutes.
type Target map[string]string

// scope is the token's scope as oslo.policy names it.
func (c *Credentials) scope() string {
	switch {
	case c.SystemScope != "":
		return "system"
	case c.DomainID != "":
		return "domain"
	}
	return "project"
}

// value is the credential field a generic check's kind names, as the
// strings Python's str() gives (True/False for booleans); list fields
// give every element. ok is false for an unset or unknown field.
func (c *Credentials) value(field string) (vals []string, ok bool) {
	str := func(s string) ([]string, bool) { return []string{s}, s != "" }
	switch field {
	case "user_id":
		return str(c.UserID)
	case "user_domain_id":
		return str(c.UserDomainID)
	case "project_id":
		return str(c.ProjectID)
	case "project_domain_id":
		return str(c.ProjectDomainID)
	case "domain_id":
		return str(c.DomainID)
	case "system_scope":
		return str(c.SystemScope)
	case "roles":
		return c.Roles, true
	case "is_admin":
		return []string{pyBool(c.IsAdmin)}, true
	case "is_admin_project":
		return []string{pyBool(c.IsAdminProject)}, true
	case "service_user_id":
		return str(c.ServiceUserID)
	case "service_user_domain_id":
		return str(c.ServiceUserDomainID)
	case "service_project_id":
		return str(c.ServiceProjectID)
	case "service_project_domain_id":
		return str(c.ServiceProjectDomainID)
	case "service_roles":
		return c.ServiceRoles, true
	}
	return nil, false
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// maxDepth bounds rule:NAME recursion; New refuses cycles, so only a
// very deep chain of rules could reach it.
const maxDepth = 50

type evalCtx struct {
	rules  map[string]Expr
	creds  *Credentials
	roles  []string // creds.Roles with implied roles added
	target Target
	depth  int
}

// substitute expands %(key)s from the target; ok is false when a key is
// missing (oslo.policy's KeyError: the check fails).
func substitute(match string, target Target) (string, bool) {
	if !strings.Contains(match, "%") {
		return match, true
	}
	// The common form, a whole-value %(key)s, without the regexp.
	if strings.HasPrefix(match, "%(") && strings.HasSuffix(match, ")s") && strings.Count(match, "%") == 1 && strings.Count(match, ")") == 1 {
		v, found := target[match[2:len(match)-2]]
		return v, found
	}
	ok := true
	out := formatRE.ReplaceAllStringFunc(match, func(m string) string {
		if m == "%%" {
			return "%"
		}
		v, found := target[m[2:len(m)-2]]
		if !found {
			ok = false
		}
		return v
	})
	return out, ok
}

type trueExpr struct{}

func (trueExpr) eval(*evalCtx) bool         { return true }
func (trueExpr) refs(out []string) []string { return out }
func (trueExpr) String() string             { return "@" }

type falseExpr struct{}

func (falseExpr) eval(*evalCtx) bool         { return false }
func (falseExpr) refs(out []string) []string { return out }
func (falseExpr) String() string             { return "!" }

type andExpr []Expr

func (a andExpr) eval(c *evalCtx) bool {
	for _, e := range a {
		if !e.eval(c) {
			return false
		}
	}
	return true
}

func (a andExpr) refs(out []string) []string {
	for _, e := range a {
		out = e.refs(out)
	}
	return out
}

func (a andExpr) String() string { return join([]Expr(a), " and ") }

type orExpr []Expr

func (o orExpr) eval(c *evalCtx) bool {
	for _, e := range o {
		if e.eval(c) {
			return true
		}
	}
	return false
}

func (o orExpr) refs(out []string) []string {
	for _, e := range o {
		out = e.refs(out)
	}
	return out
}

func (o orExpr) String() string { return join([]Expr(o), " or ") }

func join(es []Expr, sep string) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return "(" + strings.Join(parts, sep) + ")"
}

type notExpr struct{ e Expr }

func (n notExpr) eval(c *evalCtx) bool       { return !n.e.eval(c) }
func (n notExpr) refs(out []string) []string { return n.e.refs(out) }
func (n notExpr) String() string             { return "not " + n.e.String() }

// ruleCheck is rule:NAME: the named rule's decision; an undefined rule
// fails (New reports undefined references before anything is asked).
type ruleCheck struct{ name string }

func (r ruleCheck) eval(c *evalCtx) bool {
	e, ok := c.rules[r.name]
	if !ok || c.depth >= maxDepth {
		return false
	}
	c.depth++
	ok = e.eval(c)
	c.depth--
	return ok
}

func (r ruleCheck) refs(out []string) []string { return append(out, r.name) }
func (r ruleCheck) String() string             { return "rule:" + r.name }

// roleCheck is role:NAME, case-insensitive.
type roleCheck struct{ match string }

func (r roleCheck) eval(c *evalCtx) bool {
	m, ok := substitute(r.match, c.target)
	if !ok {
		return false
	}
	for _, have := range c.roles {
		if strings.EqualFold(have, m) {
			return true
		}
	}
	return false
}

func (r roleCheck) refs(out []string) []string { return out }
func (r roleCheck) String() string             { return "role:" + r.match }

// genericCheck is KIND:MATCH for any other kind: MATCH (after
// substitution from the target) must equal the credential field KIND
// names (any element, for a list), or the Python literal KIND itself
// (True:%(user.enabled)s, 'member':%(role)s).
type genericCheck struct {
	kind, match string
	literal     string
	isLiteral   bool
}

func (g genericCheck) eval(c *evalCtx) bool {
	m, ok := substitute(g.match, c.target)
	if !ok {
		return false
	}
	if g.isLiteral {
		return m == g.literal
	}
	var vals []string
	if g.kind == "roles" {
		vals, ok = c.roles, true
	} else {
		vals, ok = c.creds.value(g.kind)
	}
	if !ok {
		return false
	}
	for _, v := range vals {
		if v == m {
			return true
		}
	}
	return false
}

func (g genericCheck) refs(out []string) []string { return out }
func (g genericCheck) String() string             { return g.kind + ":" + g.match }

// expandRoles adds the roles implied by the ones held (transitively),
// as Keystone's implied roles do in a token.
func expandRoles(roles []string, implied map[string][]string) []string {
	if len(implied) == 0 {
		return roles
	}
	out := append([]string(nil), roles...)
	seen := make(map[string]bool, len(roles))
	for _, r := range roles {
		seen[strings.ToLower(r)] = true
	}
	for i := 0; i < len(out); i++ {
		for _, r := range implied[strings.ToLower(out[i])] {
			if !seen[strings.ToLower(r)] {
				seen[strings.ToLower(r)] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// FromIdentity is the policy credentials of a request's identity: every
// value the token gave (no identity gives empty credentials). is_admin is
// the admin role (the services' context_is_admin).
func FromIdentity(id *auth.Identity) *Credentials {
	if id == nil {
		return &Credentials{}
	}
	return &Credentials{
		UserID: id.UserID, UserDomainID: id.UserDomainID,
		ProjectID: id.ProjectID, ProjectDomainID: id.ProjectDomainID,
		DomainID: id.DomainID, SystemScope: id.SystemScope, Roles: id.Roles,
		IsAdmin: id.IsAdmin(), IsAdminProject: id.IsAdminProject,
		ServiceUserID: id.ServiceUserID, ServiceProjectID: id.ServiceProjectID, ServiceRoles: id.ServiceRoles,
	}
}
