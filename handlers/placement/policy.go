package placement

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/policy"
)

// Policy decides whether the caller may perform a Placement action, by
// asking one policy.Enforcer built from Placement's default rules.
type Policy struct{ enf *policy.Enforcer }

// NewEnforcer builds Placement's enforcer for a policy mode on top of
// base (the [oslo_policy] policy file; its enforce_* switches are
// replaced by the mode's):
//
//   - legacy: enforce_new_defaults and enforce_scope false, so each rule
//     is its secure-RBAC default or the deprecated "role:admin" (how
//     Placement 8.0.0 runs by default, and the conformance suite's
//     LegacyRBACPolicyFixture);
//   - secure: both true, the new defaults with scope checks
//     (SecureRBACPolicyFixture);
//   - open: every rule that guards an action is "@" (OpenPolicyFixture);
//     the policy file is not read.
func NewEnforcer(mode string, base policy.Options) (*policy.Enforcer, error) {
	base.ImpliedRoles = nil // Placement matches the token's roles as given
	base.DefaultRule = ""   // an unregistered action is refused
	base.Foreign = append(policy.BlazarRules(), policy.OwnershipRules()...)
	switch mode {
	case "legacy":
		base.EnforceNewDefaults, base.EnforceScope = false, false
	case "secure":
		base.EnforceNewDefaults, base.EnforceScope = true, true
	case "open":
		base.EnforceNewDefaults, base.EnforceScope = true, false
		base.File = openFile()
	default:
		return nil, fmt.Errorf("placement policy mode %q: want legacy, secure or open", mode)
	}
	return policy.New(policy.PlacementRules(), base)
}

// openFile overrides every Placement rule but admin_api (which no action
// asks) with "@", as upstream's OpenPolicyFixture does.
func openFile() *policy.File {
	f := &policy.File{Path: "(placement policy_mode open)", Rules: map[string]policy.FileRule{}}
	always, _ := policy.Parse("@")
	for _, r := range policy.PlacementRules() {
		if r.Name != "admin_api" {
			f.Rules[r.Name] = policy.FileRule{Check: "@", Expr: always}
		}
	}
	return f
}

// NewPolicy returns the policy for mode with Placement's defaults and no
// policy file. It panics on an unknown mode (config validates it).
func NewPolicy(mode string) *Policy {
	enf, err := NewEnforcer(mode, policy.Options{})
	if err != nil {
		panic(err)
	}
	return &Policy{enf: enf}
}

// PolicyFor returns the policy deciding by enf.
func PolicyFor(enf *policy.Enforcer) *Policy { return &Policy{enf: enf} }

// Credentials are the policy values of id (policy.FromIdentity).
func Credentials(id *auth.Identity) *policy.Credentials { return policy.FromIdentity(id) }

// Authorize returns a 403 error unless the caller in ctx may perform
// rule. targetProject is the project the action is about ("" if none).
// Upstream's PolicyNotAuthorized escapes the handler, so the error is
// rendered without Vary.
func (p *Policy) Authorize(ctx context.Context, rule, targetProject string) error {
	return escaped(p.authorize(ctx, rule, targetProject))
}

func (p *Policy) authorize(ctx context.Context, rule, targetProject string) error {
	id := auth.FromContext(ctx)
	target := policy.Target{"project_id": targetProject}
	switch p.enf.Enforce(rule, Credentials(id), target) {
	case policy.Allow:
		return nil
	case policy.DenyScope:
		// enforce_scope: a token of the wrong scope is InvalidScope,
		// which placement reports with the bare action name.
		return placement.Forbidden("%s", rule)
	}
	return placement.Forbidden("Policy does not allow %s to be performed.", rule)
}
