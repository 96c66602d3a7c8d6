package blazar

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Blazar's oslo.policy defaults (blazar/policies/*.py) with
// enforce_new_defaults and project scope, as upstream runs them now:
// reads need the reader role in the owning project, writes member, and
// the host and floating-IP administration is admin only. Keystone's
// implied roles apply: admin implies member, member implies reader.
//
// Rules are check strings in a small subset of oslo.policy: alternatives
// joined by " or ", each a conjunction joined by " and " of "rule:NAME",
// "role:NAME", "project_id:%(project_id)s", "is_admin:True", "@" (always)
// and "!" (never). Parentheses and "not" are not supported.
var defaultPolicyRules = map[string]string{
	"default":                 "rule:admin",
	"admin":                   "is_admin:True or role:admin",
	"project_member_api":      "role:member and project_id:%(project_id)s",
	"project_reader_api":      "role:reader and project_id:%(project_id)s",
	"project_member_or_admin": "rule:project_member_api or rule:admin",
	"project_reader_or_admin": "rule:project_reader_api or rule:admin",
	"admin_or_owner":          "rule:admin or project_id:%(project_id)s",

	"blazar:leases:get":    "rule:project_reader_or_admin",
	"blazar:leases:post":   "rule:project_member_or_admin",
	"blazar:leases:put":    "rule:project_member_or_admin",
	"blazar:leases:delete": "rule:project_member_or_admin",

	"blazar:oshosts:get":                        "rule:admin",
	"blazar:oshosts:post":                       "rule:admin",
	"blazar:oshosts:put":                        "rule:admin",
	"blazar:oshosts:delete":                     "rule:admin",
	"blazar:oshosts:get_allocations":            "rule:admin",
	"blazar:oshosts:get_resource_properties":    "rule:admin",
	"blazar:oshosts:update_resource_properties": "rule:admin",

	"blazar:floatingips:get":    "rule:project_reader_or_admin",
	"blazar:floatingips:post":   "rule:admin",
	"blazar:floatingips:delete": "rule:admin",
}

var (
	policyMu    sync.RWMutex
	policyRules = copyRules(defaultPolicyRules)
)

func copyRules(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ConfigurePolicy replaces the policy with the defaults plus overrides
// (rule name → check string, as in Blazar's policy.yaml). Check strings
// outside the supported subset are an error and change nothing.
func ConfigurePolicy(overrides map[string]string) error {
	rules := copyRules(defaultPolicyRules)
	for name, check := range overrides {
		if err := validateCheck(check); err != nil {
			return fmt.Errorf("policy %s: %w", name, err)
		}
		rules[name] = check
	}
	policyMu.Lock()
	policyRules = rules
	policyMu.Unlock()
	return nil
}

func validateCheck(check string) error {
	for _, alt := range splitTrim(check, " or ") {
		for _, atom := range splitTrim(alt, " and ") {
			switch {
			case atom == "@" || atom == "!" || atom == "is_admin:True" || atom == "project_id:%(project_id)s":
			case strings.HasPrefix(atom, "rule:") && len(atom) > 5:
			case strings.HasPrefix(atom, "role:") && len(atom) > 5:
			default:
				return fmt.Errorf("unsupported check %q", atom)
			}
		}
	}
	return nil
}

func splitTrim(s, sep string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return []string{"@"} // oslo.policy: an empty rule always passes
	}
	parts := strings.Split(s, sep)
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// impliedRoles: holding the key role also grants the listed ones.
var impliedRoles = map[string][]string{"admin": {"member", "reader"}, "member": {"reader"}}

func hasRole(id *auth.Identity, role string) bool {
	if id.HasRole(role) {
		return true
	}
	for holder, implied := range impliedRoles {
		for _, r := range implied {
			if strings.EqualFold(r, role) && hasRole(id, holder) {
				return true
			}
		}
	}
	return false
}

func evalCheck(rules map[string]string, check string, id *auth.Identity, target string, depth int) bool {
	if depth > 10 {
		return false
	}
	for _, alt := range splitTrim(check, " or ") {
		ok := true
		for _, atom := range splitTrim(alt, " and ") {
			if !evalAtom(rules, atom, id, target, depth) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func evalAtom(rules map[string]string, atom string, id *auth.Identity, target string, depth int) bool {
	switch {
	case atom == "@":
		return true
	case atom == "!":
		return false
	case atom == "is_admin:True":
		return id.IsAdmin()
	case atom == "project_id:%(project_id)s":
		return id.ProjectID != "" && id.ProjectID == target
	case strings.HasPrefix(atom, "role:"):
		return hasRole(id, atom[len("role:"):])
	case strings.HasPrefix(atom, "rule:"):
		sub, ok := rules[atom[len("rule:"):]]
		return ok && evalCheck(rules, sub, id, target, depth+1)
	}
	return false
}

// authorize checks the caller against policy rule for a target owned by
// targetProject ("" means the caller's own project). It returns the
// Blazar 403 "Policy doesn't allow … to be performed." when refused.
func authorize(ctx context.Context, rule, targetProject string) error {
	id := auth.FromContext(ctx)
	if id == nil {
		return errs.Forbiddenf("Policy doesn't allow %s to be performed.", rule)
	}
	if targetProject == "" {
		targetProject = id.ProjectID
	}
	policyMu.RLock()
	rules := policyRules
	policyMu.RUnlock()
	check, ok := rules[rule]
	if !ok {
		check = rules["default"]
	}
	if !evalCheck(rules, check, id, targetProject, 0) {
		return errs.Forbiddenf("Policy doesn't allow %s to be performed.", rule)
	}
	return nil
}

// Authorize is authorize for other packages (the dashboard-facing
// extensions, tests).
func Authorize(ctx context.Context, rule, targetProject string) error {
	return authorize(ctx, rule, targetProject)
}
