package blazar

import (
	"context"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/policy"
)

// PolicyOptions are the enforcer options for Blazar's rules: Blazar's
// default rule for unregistered actions, Keystone's implied roles, and
// Placement's rules as the other user of the policy file, on top of base
// (the [oslo_policy] settings and policy file).
func PolicyOptions(base policy.Options) policy.Options {
	base.DefaultRule = policy.BlazarDefaultRule
	base.ImpliedRoles = policy.BlazarImpliedRoles()
	base.Foreign = policy.PlacementRules()
	return base
}

// NewEnforcer builds Blazar's enforcer from the [oslo_policy] settings
// and policy file in base, with the ownership extension's rules.
func NewEnforcer(base policy.Options) (*policy.Enforcer, error) {
	return policy.New(append(policy.BlazarRules(), policy.OwnershipRules()...), PolicyOptions(base))
}

// defaultEnforcer is Blazar's defaults with new defaults enforced and no
// scope enforcement (how Blazar has always decided here); NewRouter uses
// it. It is built once and never changes.
var defaultEnforcer = func() *policy.Enforcer {
	e, err := NewEnforcer(policy.Options{EnforceNewDefaults: true})
	if err != nil {
		panic(err) // the built-in defaults are tested to load
	}
	return e
}()

type enforcerKey struct{}

// withEnforcer returns ctx carrying the router's enforcer for authorize.
func withEnforcer(ctx context.Context, e *policy.Enforcer) context.Context {
	return context.WithValue(ctx, enforcerKey{}, e)
}

// Credentials are the policy values of id (policy.FromIdentity).
func Credentials(id *auth.Identity) *policy.Credentials { return policy.FromIdentity(id) }

// authorize checks the caller against policy rule for a target owned by
// targetProject ("" means the caller's own project), with the enforcer
// the router put in ctx. It returns the Blazar 403 "Policy doesn't allow
// … to be performed." when refused, whether by the check or the scope.
func authorize(ctx context.Context, rule, targetProject string) error {
	e, _ := ctx.Value(enforcerKey{}).(*policy.Enforcer)
	id := auth.FromContext(ctx)
	if e == nil || id == nil {
		return errs.Forbiddenf("Policy doesn't allow %s to be performed.", rule)
	}
	if targetProject == "" {
		targetProject = id.ProjectID
	}
	if !e.Allowed(rule, Credentials(id), policy.Target{"project_id": targetProject}) {
		return errs.Forbiddenf("Policy doesn't allow %s to be performed.", rule)
	}
	return nil
}

// Authorize is authorize for other packages (the dashboard-facing
// extensions, tests).
func Authorize(ctx context.Context, rule, targetProject string) error {
	return authorize(ctx, rule, targetProject)
}
