package placement

import (
	"context"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/placement"
)

// Policy decides whether the caller may perform a Placement action. The
// three modes reproduce Placement's defaults: legacy (deprecated rules:
// role admin for everything), secure (new defaults with scope checks) and
// open (every rule is "@", anyone). An oslo policy file comes with the
// Keystone issue; this type is the seam for it.
type Policy struct{ mode string }

// NewPolicy returns the policy for mode.
func NewPolicy(mode string) *Policy { return &Policy{mode: mode} }

// ruleKind is how a rule is checked in secure mode.
type ruleKind int

const (
	systemAdmin  ruleKind = iota // role:admin and system_scope:all
	systemReader                 // role:reader and system_scope:all
	usagesRule                   // system reader, or project reader of the target project
)

var rules = map[string]ruleKind{
	"placement:resource_providers:list":               systemReader,
	"placement:resource_providers:create":             systemAdmin,
	"placement:resource_providers:show":               systemReader,
	"placement:resource_providers:update":             systemAdmin,
	"placement:resource_providers:delete":             systemAdmin,
	"placement:resource_classes:list":                 systemReader,
	"placement:resource_classes:create":               systemAdmin,
	"placement:resource_classes:show":                 systemReader,
	"placement:resource_classes:update":               systemAdmin,
	"placement:resource_classes:delete":               systemAdmin,
	"placement:resource_providers:inventories:list":   systemReader,
	"placement:resource_providers:inventories:create": systemAdmin,
	"placement:resource_providers:inventories:show":   systemReader,
	"placement:resource_providers:inventories:update": systemAdmin,
	"placement:resource_providers:inventories:delete": systemAdmin,
	"placement:resource_providers:aggregates:list":    systemReader,
	"placement:resource_providers:aggregates:update":  systemAdmin,
	"placement:resource_providers:usages":             systemReader,
	"placement:usages":                                usagesRule,
	"placement:traits:list":                           systemReader,
	"placement:traits:show":                           systemReader,
	"placement:traits:update":                         systemAdmin,
	"placement:traits:delete":                         systemAdmin,
	"placement:resource_providers:traits:list":        systemReader,
	"placement:resource_providers:traits:update":      systemAdmin,
	"placement:resource_providers:traits:delete":      systemAdmin,
	"placement:allocations:manage":                    systemAdmin,
	"placement:allocations:list":                      systemReader,
	"placement:allocations:update":                    systemAdmin,
	"placement:allocations:delete":                    systemAdmin,
	"placement:resource_providers:allocations:list":   systemReader,
	"placement:allocation_candidates:list":            systemReader,
	"placement:reshaper:reshape":                      systemAdmin,
}

// Authorize returns a 403 error unless the caller in ctx may perform
// rule. targetProject is the project the action is about ("" if none).
// Upstream's PolicyNotAuthorized escapes the handler, so the error is
// rendered without Vary.
func (p *Policy) Authorize(ctx context.Context, rule, targetProject string) error {
	return escaped(p.authorize(ctx, rule, targetProject))
}

func (p *Policy) authorize(ctx context.Context, rule, targetProject string) error {
	id := auth.FromContext(ctx)
	if p.allowed(id, rule, targetProject) {
		return nil
	}
	if p.mode == "secure" && !id.IsSystem() {
		if kind, known := rules[rule]; known && kind != usagesRule {
			// enforce_scope: a project-scoped token on a system-only rule
			// is InvalidScope, which placement reports with the bare
			// action name.
			return placement.Forbidden("%s", rule)
		}
	}
	return placement.Forbidden("Policy does not allow %s to be performed.", rule)
}

// allowed evaluates rule. Secure mode is the new defaults with scope
// enforcement. Legacy mode (enforce_new_defaults=False) is the new
// default OR the deprecated "role:admin", without scope enforcement.
func (p *Policy) allowed(id *auth.Identity, rule, targetProject string) bool {
	kind, known := rules[rule]
	newDefault := func() bool {
		if !known {
			return id.IsAdmin()
		}
		switch kind {
		case systemAdmin:
			return id.HasRole("admin") && id.IsSystem()
		case systemReader:
			return id.HasRole("reader") && id.IsSystem()
		case usagesRule:
			if id.HasRole("reader") && id.IsSystem() {
				return true
			}
			return id.HasRole("reader") && id != nil && id.ProjectID != "" && id.ProjectID == targetProject
		}
		return false
	}
	switch p.mode {
	case "open":
		return true
	case "secure":
		if known && kind != usagesRule && !id.IsSystem() {
			return false
		}
		return newDefault()
	default: // legacy
		return newDefault() || id.IsAdmin()
	}
}
