package placement

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/policy"
)

// TestDifferentialAgainstOldModes: in each mode the engine decides every
// Placement rule for every identity and target project exactly as the
// hand-written modes it replaced (kept below as the oracle), with the
// same message (bare rule name for a scope refusal).
func TestDifferentialAgainstOldModes(t *testing.T) {
	ids := map[string]*auth.Identity{
		"admin":              {UserID: "admin", ProjectID: "admin", Roles: []string{"admin"}},
		"project admin p1":   {UserID: "pa", ProjectID: "p1", Roles: []string{"admin", "member", "reader"}},
		"member p1":          {UserID: "m1", ProjectID: "p1", Roles: []string{"member", "reader"}},
		"member p1 no read":  {UserID: "m1", ProjectID: "p1", Roles: []string{"member"}},
		"reader p1":          {UserID: "r1", ProjectID: "p1", Roles: []string{"reader"}},
		"member p2":          {UserID: "m2", ProjectID: "p2", Roles: []string{"member", "reader"}},
		"system admin":       {UserID: "sa", SystemScope: "all", Roles: []string{"admin", "member", "reader"}},
		"system admin alone": {UserID: "sa", SystemScope: "all", Roles: []string{"ADMIN"}},
		"system reader":      {UserID: "sr", SystemScope: "all", Roles: []string{"reader"}},
		"no roles p1":        {UserID: "n1", ProjectID: "p1"},
		"no roles system":    {UserID: "ns", SystemScope: "all"},
		"nil (anonymous)":    nil,
	}
	var names []string
	for _, r := range policy.PlacementRules() {
		if strings.HasPrefix(r.Name, "placement:") {
			names = append(names, r.Name)
		}
	}
	n := 0
	for _, mode := range []string{"legacy", "secure", "open"} {
		p := NewPolicy(mode)
		old := &oldPolicy{mode: mode}
		for idName, id := range ids {
			ctx := context.Background()
			if id != nil {
				ctx = auth.WithIdentity(ctx, id)
			}
			for _, rule := range names {
				for _, target := range []string{"p1", "p2", ""} {
					got, want := p.authorize(ctx, rule, target), old.authorize(ctx, rule, target)
					if msg(got) != msg(want) {
						t.Errorf("%s %s %s target %q: engine %q, old %q", mode, idName, rule, target, msg(got), msg(want))
					}
					n++
				}
			}
		}
	}
	t.Logf("%d decisions compared", n)
}

func msg(err error) string {
	if err == nil {
		return "allowed"
	}
	e := errs.As(err)
	if e == nil {
		return "not an *errs.Error: " + err.Error()
	}
	return e.Kind.String() + ": " + e.Msg
}

func TestNewEnforcerModes(t *testing.T) {
	if _, err := NewEnforcer("strict", policy.Options{}); err == nil {
		t.Error("unknown mode accepted")
	}
	// A policy file applies in legacy and secure mode, not in open mode.
	f, err := policy.ParseFile("p.yaml", []byte("placement:traits:list: \"!\"\nblazar:leases:get: \"@\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	admin := &policy.Credentials{ProjectID: "admin", Roles: []string{"admin"}}
	for mode, want := range map[string]policy.Decision{"legacy": policy.Deny, "open": policy.Allow} {
		e, err := NewEnforcer(mode, policy.Options{File: f})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Enforce("placement:traits:list", admin, nil); got != want {
			t.Errorf("%s: %v, want %v", mode, got, want)
		}
		if got := e.Enforce("placement:traits:show", admin, nil); got != policy.Allow {
			t.Errorf("%s: traits:show %v", mode, got)
		}
	}
	// A Blazar rule in the shared file is not Placement's.
	e, err := NewEnforcer("legacy", policy.Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Effective("blazar:leases:get"); ok {
		t.Error("Placement took a Blazar rule from the file")
	}
}

// oldPolicy is the Placement policy this package used before pkg/policy,
// verbatim but for names: the oracle of TestDifferentialAgainstOldModes.
type oldPolicy struct{ mode string }

type oldRuleKind int

const (
	oldSystemAdmin oldRuleKind = iota
	oldSystemReader
	oldUsagesRule
)

var oldRules = map[string]oldRuleKind{
	"placement:resource_providers:list":               oldSystemReader,
	"placement:resource_providers:create":             oldSystemAdmin,
	"placement:resource_providers:show":               oldSystemReader,
	"placement:resource_providers:update":             oldSystemAdmin,
	"placement:resource_providers:delete":             oldSystemAdmin,
	"placement:resource_classes:list":                 oldSystemReader,
	"placement:resource_classes:create":               oldSystemAdmin,
	"placement:resource_classes:show":                 oldSystemReader,
	"placement:resource_classes:update":               oldSystemAdmin,
	"placement:resource_classes:delete":               oldSystemAdmin,
	"placement:resource_providers:inventories:list":   oldSystemReader,
	"placement:resource_providers:inventories:create": oldSystemAdmin,
	"placement:resource_providers:inventories:show":   oldSystemReader,
	"placement:resource_providers:inventories:update": oldSystemAdmin,
	"placement:resource_providers:inventories:delete": oldSystemAdmin,
	"placement:resource_providers:aggregates:list":    oldSystemReader,
	"placement:resource_providers:aggregates:update":  oldSystemAdmin,
	"placement:resource_providers:usages":             oldSystemReader,
	"placement:usages":                                oldUsagesRule,
	"placement:traits:list":                           oldSystemReader,
	"placement:traits:show":                           oldSystemReader,
	"placement:traits:update":                         oldSystemAdmin,
	"placement:traits:delete":                         oldSystemAdmin,
	"placement:resource_providers:traits:list":        oldSystemReader,
	"placement:resource_providers:traits:update":      oldSystemAdmin,
	"placement:resource_providers:traits:delete":      oldSystemAdmin,
	"placement:allocations:manage":                    oldSystemAdmin,
	"placement:allocations:list":                      oldSystemReader,
	"placement:allocations:update":                    oldSystemAdmin,
	"placement:allocations:delete":                    oldSystemAdmin,
	"placement:resource_providers:allocations:list":   oldSystemReader,
	"placement:allocation_candidates:list":            oldSystemReader,
	"placement:reshaper:reshape":                      oldSystemAdmin,
}

func (p *oldPolicy) authorize(ctx context.Context, rule, targetProject string) error {
	id := auth.FromContext(ctx)
	if p.allowed(id, rule, targetProject) {
		return nil
	}
	if p.mode == "secure" && !id.IsSystem() {
		if kind, known := oldRules[rule]; known && kind != oldUsagesRule {
			return errOf(errs.Forbidden, rule)
		}
	}
	return errOf(errs.Forbidden, "Policy does not allow "+rule+" to be performed.")
}

func (p *oldPolicy) allowed(id *auth.Identity, rule, targetProject string) bool {
	kind, known := oldRules[rule]
	newDefault := func() bool {
		if !known {
			return id.IsAdmin()
		}
		switch kind {
		case oldSystemAdmin:
			return id.HasRole("admin") && id.IsSystem()
		case oldSystemReader:
			return id.HasRole("reader") && id.IsSystem()
		case oldUsagesRule:
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
		if known && kind != oldUsagesRule && !id.IsSystem() {
			return false
		}
		return newDefault()
	default:
		return newDefault() || id.IsAdmin()
	}
}

// TestHandlersAskRegisteredRules: every Placement rule name in this
// package's handlers is a registered rule (a typo would be refused
// silently).
func TestHandlersAskRegisteredRules(t *testing.T) {
	registered := map[string]bool{}
	for _, r := range policy.PlacementRules() {
		registered[r.Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ruleNameRE.FindAllStringSubmatch(string(src), -1) {
			asked[m[1]] = true
			if !registered[m[1]] {
				t.Errorf("%s asks unregistered rule %q", f, m[1])
			}
		}
	}
	// Every placement:* rule has a handler asking it.
	for name := range registered {
		if strings.HasPrefix(name, "placement:") && !asked[name] {
			t.Errorf("no handler asks %s", name)
		}
	}
}

var ruleNameRE = regexp.MustCompile(`"(placement:[a-z_:]+)"`)
