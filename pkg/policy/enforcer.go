// Package policy is an oslo.policy engine: check strings (rule:, role:,
// generic field:value checks with %(key)s substitution, and/or/not,
// parentheses, @ and !), documented default rules with scope types and
// deprecated rules, policy files that override them, and the
// enforce_new_defaults / enforce_scope switches, with oslo.policy's
// semantics. The Blazar and Placement defaults are registered here (see
// BlazarRules and PlacementRules); each API builds one Enforcer from
// configuration at start-up and asks it by the upstream rule name.
//
// An Enforcer is immutable once built and safe for concurrent use.
package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Rule is a documented default rule, oslo.policy's DocumentedRuleDefault.
type Rule struct {
	Name        string
	Check       string
	Description string
	// Operations are the API calls the rule guards.
	Operations []Operation
	// ScopeTypes are the token scopes the rule is meant for (system,
	// domain, project); empty means any. With enforce_scope a token of
	// another scope is refused before the check string is evaluated.
	ScopeTypes []string
	// Deprecated is the rule this one replaced: until
	// enforce_new_defaults, either check passes.
	Deprecated *Deprecated
	// DeprecatedForRemoval marks a rule that will go away.
	DeprecatedForRemoval bool
	DeprecatedReason     string
	DeprecatedSince      string
}

// Operation is an API call a rule guards.
type Operation struct{ Method, Path string }

// Deprecated is oslo.policy's DeprecatedRule.
type Deprecated struct {
	Name, Check   string
	Reason, Since string
}

// Options are the [oslo_policy] settings and what the API adds.
type Options struct {
	// EnforceNewDefaults false makes a rule with a deprecated rule pass
	// when either its new or its deprecated check passes (unless the
	// policy file overrides it).
	EnforceNewDefaults bool
	// EnforceScope true refuses a token whose scope is not among the
	// asked rule's scope types.
	EnforceScope bool
	// ImpliedRoles: holding a key role also grants the listed roles
	// (Keystone's implied roles), for tokens that did not expand them.
	ImpliedRoles map[string][]string
	// File overrides and adds rules (nil: none).
	File *File
	// Foreign are another service's rules sharing the policy file: file
	// entries naming them are not this enforcer's, and a custom file rule
	// that none of this service's rules use may reference them.
	Foreign []Rule
	// DefaultRule names the rule used for an action with no rule of its
	// own (oslo.policy's policy_default_rule); "" or an undefined name
	// refuses such actions.
	DefaultRule string
}

// Decision is the outcome of Enforce.
type Decision int

const (
	// Allow: the check passed.
	Allow Decision = iota
	// Deny: the check failed.
	Deny
	// DenyScope: the token's scope is not among the rule's scope types
	// (oslo.policy's InvalidScope), with enforce_scope.
	DenyScope
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "deny (scope)"
}

// Enforcer decides actions by rule name.
type Enforcer struct {
	rules map[string]Expr
	// registered holds the default rules' names and their scope types
	// (copied: the enforcer does not change once built).
	registered   map[string][]string
	opts         Options
	ruleOrigin   map[string]string // name → where its check came from, for errors
	effectiveSrc map[string]string // name → effective check string
}

// New builds an enforcer for the defaults with opts. It fails when a
// check string does not parse, a rule references an undefined rule, or
// rules reference each other in a cycle.
func New(defaults []Rule, opts Options) (*Enforcer, error) {
	e := &Enforcer{
		rules:        map[string]Expr{},
		registered:   map[string][]string{},
		opts:         opts,
		ruleOrigin:   map[string]string{},
		effectiveSrc: map[string]string{},
	}
	// Keep a copy of the implied roles, keyed in lower case as roles match.
	implied := make(map[string][]string, len(opts.ImpliedRoles))
	for k, v := range opts.ImpliedRoles {
		implied[strings.ToLower(k)] = append(implied[strings.ToLower(k)], v...)
	}
	e.opts.ImpliedRoles = implied
	foreign := map[string]bool{}
	for _, r := range opts.Foreign {
		foreign[r.Name] = true
	}
	for _, r := range defaults {
		if _, dup := e.registered[r.Name]; dup {
			return nil, fmt.Errorf("policy: rule %s registered twice", r.Name)
		}
		e.registered[r.Name] = slices.Clone(r.ScopeTypes)
	}
	file := map[string]FileRule{}
	if opts.File != nil {
		for name, fr := range opts.File.Rules {
			if _, ours := e.registered[name]; foreign[name] && !ours {
				continue
			}
			file[name] = fr
			e.rules[name] = fr.Expr
			e.ruleOrigin[name] = fmt.Sprintf("%s line %d", opts.File.Path, fr.Line)
			e.effectiveSrc[name] = fr.Check
		}
	}
	for _, r := range defaults {
		if _, over := file[r.Name]; over {
			continue
		}
		expr, err := Parse(r.Check)
		if err != nil {
			return nil, fmt.Errorf("policy: default rule %s: %w", r.Name, err)
		}
		src := r.Check
		if d := r.Deprecated; d != nil {
			dep, err := Parse(d.Check)
			if err != nil {
				return nil, fmt.Errorf("policy: deprecated rule %s of %s: %w", d.Name, r.Name, err)
			}
			// The operator may still name the old rule in the policy
			// file: that override carries over to the new name.
			if fr, ok := file[d.Name]; ok && d.Name != r.Name && fr.Expr.String() != dep.String() && fr.Check != "rule:"+r.Name {
				expr, src = fr.Expr, fr.Check
			} else if !opts.EnforceNewDefaults && d.Check != r.Check {
				expr, src = orExpr{expr, dep}, "("+r.Check+") or ("+d.Check+")"
			}
		}
		e.rules[r.Name] = expr
		e.ruleOrigin[r.Name] = "default"
		e.effectiveSrc[r.Name] = src
	}
	if err := e.checkRefs(foreign); err != nil {
		return nil, err
	}
	return e, nil
}

// checkRefs reports the first (by name) reference to an undefined rule,
// then any cycle.
func (e *Enforcer) checkRefs(foreign map[string]bool) error {
	names := make([]string, 0, len(e.rules))
	for n := range e.rules {
		names = append(names, n)
	}
	sort.Strings(names)
	// A reference to a rule this enforcer lacks is an error when the
	// rule is one this service's rules reach, or when no other service
	// defines it either (a custom rule of the file that only the other
	// service uses may name that service's rules).
	reached := map[string]bool{}
	var reach func(n string)
	reach = func(n string) {
		if reached[n] {
			return
		}
		reached[n] = true
		if expr, ok := e.rules[n]; ok {
			for _, ref := range expr.refs(nil) {
				reach(ref)
			}
		}
	}
	for n := range e.registered {
		reach(n)
	}
	for _, n := range names {
		for _, ref := range e.rules[n].refs(nil) {
			if _, ok := e.rules[ref]; !ok && (reached[n] || !foreign[ref]) {
				return fmt.Errorf("policy: rule %s (%s) references undefined rule %s", n, e.ruleOrigin[n], ref)
			}
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case onPath:
			i := slices.Index(path, n)
			return fmt.Errorf("policy: rules reference each other in a cycle: %s", strings.Join(append(path[i:], n), " -> "))
		case done:
			return nil
		}
		state[n] = onPath
		expr, ok := e.rules[n]
		if ok {
			for _, ref := range expr.refs(nil) {
				if err := visit(ref, append(path, n)); err != nil {
					return err
				}
			}
		}
		state[n] = done
		return nil
	}
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return err
		}
	}
	return nil
}

// Enforce decides whether creds may perform the action rule on target.
// A registered rule is scope-checked first (with enforce_scope); a rule
// the enforcer does not know is decided by the default rule, if any.
func (e *Enforcer) Enforce(rule string, creds *Credentials, target Target) Decision {
	if creds == nil {
		return Deny
	}
	if scopes := e.registered[rule]; e.opts.EnforceScope && len(scopes) > 0 && !slices.Contains(scopes, creds.scope()) {
		return DenyScope
	}
	expr, ok := e.rules[rule]
	if !ok && e.opts.DefaultRule != "" {
		expr, ok = e.rules[e.opts.DefaultRule]
	}
	if !ok {
		return Deny
	}
	c := &evalCtx{rules: e.rules, creds: creds, roles: expandRoles(creds.Roles, e.opts.ImpliedRoles), target: target}
	if expr.eval(c) {
		return Allow
	}
	return Deny
}

// Allowed is Enforce(...) == Allow.
func (e *Enforcer) Allowed(rule string, creds *Credentials, target Target) bool {
	return e.Enforce(rule, creds, target) == Allow
}

// Effective returns the check string in force for rule (after policy
// file overrides and deprecated-rule handling) and whether it exists.
func (e *Enforcer) Effective(rule string) (string, bool) {
	s, ok := e.effectiveSrc[rule]
	return s, ok
}
