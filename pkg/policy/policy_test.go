package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rulesForTest are the rules rule:NAME checks in the table tests reach.
var rulesForTest = map[string]string{
	"admin":      "role:admin",
	"owner":      "project_id:%(project_id)s",
	"admin_or_o": "rule:admin or rule:owner",
	"never":      "!",
}

func enforcerForTest(t *testing.T, extra map[string]string) *Enforcer {
	t.Helper()
	var defaults []Rule
	for name, check := range rulesForTest {
		defaults = append(defaults, Rule{Name: name, Check: check})
	}
	for name, check := range extra {
		defaults = append(defaults, Rule{Name: name, Check: check})
	}
	e, err := New(defaults, Options{EnforceNewDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestParseAndEvaluate(t *testing.T) {
	member := &Credentials{UserID: "u1", ProjectID: "p1", Roles: []string{"Member", "reader"}}
	admin := &Credentials{UserID: "a", ProjectID: "admin", Roles: []string{"admin"}, IsAdmin: true}
	system := &Credentials{UserID: "s", SystemScope: "all", Roles: []string{"reader"}, IsAdminProject: true}
	p1 := Target{"project_id": "p1", "user_id": "u1", "flag": "True", "n": "10", "weird": "%"}
	p2 := Target{"project_id": "p2", "user_id": "u2"}
	tests := []struct {
		check  string
		creds  *Credentials
		target Target
		want   bool
	}{
		{"", member, p1, true},
		{"@", member, p1, true},
		{"!", admin, p1, false},
		{"role:member", member, p1, true}, // case-insensitive
		{"role:MEMBER", member, p1, true},
		{"role:admin", member, p1, false},
		{"role:%(missing)s", member, p1, false},
		{"project_id:%(project_id)s", member, p1, true},
		{"project_id:%(project_id)s", member, p2, false},
		{"project_id:%(missing)s", member, p1, false},
		{"project_id:%(project_id)s", system, Target{"project_id": ""}, false}, // unset credential
		{"user_id:%(user_id)s and project_id:%(project_id)s", member, p1, true},
		{"is_admin:True", admin, p1, true},
		{"is_admin:True", member, p1, false},
		{"is_admin:False", member, p1, true},
		{"is_admin_project:True", system, p1, true},
		{"system_scope:all", system, p1, true},
		{"system_scope:all", member, p1, false},
		{"roles:reader", member, p1, true},
		{"domain_id:d", member, p1, false},
		{"no_such_field:x", member, p1, false},
		{"True:%(flag)s", member, p1, true},
		{"'True':%(flag)s", member, p1, true},
		{"False:%(flag)s", member, p1, false},
		{"10:%(n)s", member, p1, true},
		{"+10:%(n)s", member, p1, true},
		{"'x':x", member, p1, true},
		{"\"x\":y", member, p1, false},
		{"project_id:p1%%", member, p1, false},
		{"project_id:'p1'", member, p1, false}, // the right side is not a literal (oslo.policy)
		// Precedence: not > and > or.
		{"role:admin or role:member and project_id:%(project_id)s", member, p2, false},
		{"role:admin or role:member and project_id:%(project_id)s", admin, p2, true},
		{"(role:admin or role:member) and project_id:%(project_id)s", admin, p2, false},
		{"role:member and project_id:%(project_id)s or role:admin", member, p2, false},
		{"not role:admin and role:member", member, p1, true},
		{"not role:admin and role:member", admin, p1, false},
		{"not (role:admin or role:member)", member, p1, false},
		{"not not role:member", member, p1, true},
		{"not role:member or role:reader", member, p1, true},
		{"((role:member))", member, p1, true},
		{"(role:admin or (role:member and not project_id:%(project_id)s))", member, p2, true},
		{"role:member AND project_id:%(project_id)s OR !", member, p1, true},
		// Rules.
		{"rule:admin", admin, p1, true},
		{"rule:admin_or_o", member, p1, true},
		{"rule:admin_or_o", member, p2, false},
		{"rule:never or rule:owner", member, p1, true},
		{"not rule:never", member, p1, true},
	}
	e := enforcerForTest(t, nil)
	for _, tt := range tests {
		expr, err := Parse(tt.check)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.check, err)
			continue
		}
		if got := decide(e, expr, tt.creds, tt.target); got != tt.want {
			t.Errorf("%q for %+v on %v = %v, want %v", tt.check, tt.creds, tt.target, got, tt.want)
		}
		// The printed form means the same.
		again, err := Parse(expr.String())
		if err != nil {
			t.Errorf("Parse(%q) (printed from %q): %v", expr.String(), tt.check, err)
		} else if got := decide(e, again, tt.creds, tt.target); got != tt.want {
			t.Errorf("printed %q of %q = %v, want %v", expr.String(), tt.check, got, tt.want)
		}
	}
}

func decide(e *Enforcer, expr Expr, creds *Credentials, target Target) bool {
	return expr.eval(&evalCtx{rules: e.rules, creds: creds, roles: expandRoles(creds.Roles, e.opts.ImpliedRoles), target: target})
}

func TestParseErrors(t *testing.T) {
	for _, check := range []string{
		" ", "role:a and", "and role:a", "role:a or or role:b", "(role:a", "role:a)", "()",
		"not", "role:a not role:b", "justaword", ":x", "'quoted'", "rule:", "http://x/y",
		"project_id:%(x)d", "project_id:50%", "role:a role:b", "(role:a) (role:b)",
	} {
		if expr, err := Parse(check); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", check, expr)
		}
	}
}

func TestPrintedForm(t *testing.T) {
	for check, want := range map[string]string{
		"":                                "@",
		"role:a or role:b and role:c":     "(role:a or (role:b and role:c))",
		"not role:a and (role:b or !)":    "(not role:a and (role:b or !))",
		"rule:x":                          "rule:x",
		"project_id:%(project_id)s":       "project_id:%(project_id)s",
		"(((role:a)))":                    "role:a",
		"role:a and role:b and not not @": "(role:a and role:b and not not @)",
	} {
		expr, err := Parse(check)
		if err != nil {
			t.Fatal(err)
		}
		if got := expr.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", check, got, want)
		}
	}
}

func TestParseList(t *testing.T) {
	member := &Credentials{ProjectID: "p1", Roles: []string{"member"}}
	e := enforcerForTest(t, nil)
	for _, tt := range []struct {
		list [][]string
		want bool
	}{
		{nil, true},             // [] is always
		{[][]string{{}}, false}, // only empty alternatives: never
		{[][]string{{"role:member"}}, true},
		{[][]string{{"role:admin"}, {"role:member", "project_id:%(project_id)s"}}, true},
		{[][]string{{"role:admin"}, {"role:member", "project_id:p2"}}, false},
	} {
		expr, err := ParseList(tt.list)
		if err != nil {
			t.Fatal(err)
		}
		if got := decide(e, expr, member, Target{"project_id": "p1"}); got != tt.want {
			t.Errorf("%v = %v, want %v", tt.list, got, tt.want)
		}
	}
	for _, bad := range [][][]string{{{"role:a b"}}, {{"and"}}, {{"(role:a"}}, {{"x"}}} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted", bad)
		}
	}
}

func TestImpliedRoles(t *testing.T) {
	e, err := New([]Rule{{Name: "r", Check: "role:reader"}, {Name: "m", Check: "role:member"}},
		Options{ImpliedRoles: map[string][]string{"admin": {"member"}, "member": {"reader"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		roles []string
		rule  string
		want  bool
	}{
		{[]string{"Admin"}, "r", true}, // transitively
		{[]string{"admin"}, "m", true},
		{[]string{"member"}, "r", true},
		{[]string{"reader"}, "m", false},
		{nil, "r", false},
	} {
		if got := e.Allowed(tt.rule, &Credentials{Roles: tt.roles}, nil); got != tt.want {
			t.Errorf("%v %s = %v, want %v", tt.roles, tt.rule, got, tt.want)
		}
	}
}

// TestDeprecatedRulesAndScope: enforce_new_defaults and enforce_scope as
// oslo.policy applies them.
func TestDeprecatedRulesAndScope(t *testing.T) {
	old := &Deprecated{Name: "old_rule", Check: "role:admin"}
	defaults := []Rule{
		{Name: "new_rule", Check: "role:reader and system_scope:all", Deprecated: old, ScopeTypes: []string{"system"}},
		{Name: "both", Check: "rule:new_rule", ScopeTypes: []string{"system", "project"}},
		{Name: "same", Check: "role:admin", Deprecated: &Deprecated{Name: "same_old", Check: "role:admin"}},
	}
	projectAdmin := &Credentials{ProjectID: "p", Roles: []string{"admin"}}
	systemReader := &Credentials{SystemScope: "all", Roles: []string{"reader"}}
	domainReader := &Credentials{DomainID: "d", Roles: []string{"reader"}}
	for _, tt := range []struct {
		name        string
		opts        Options
		file        string
		rule        string
		creds       *Credentials
		want        Decision
		wantEffects string
	}{
		{"legacy: old check passes", Options{}, "", "new_rule", projectAdmin, Allow, "(role:reader and system_scope:all) or (role:admin)"},
		{"legacy: new check passes", Options{}, "", "new_rule", systemReader, Allow, ""},
		{"new defaults: old check no longer", Options{EnforceNewDefaults: true}, "", "new_rule", projectAdmin, Deny, "role:reader and system_scope:all"},
		{"scope: project token on system rule", Options{EnforceNewDefaults: true, EnforceScope: true}, "", "new_rule", projectAdmin, DenyScope, ""},
		{"scope: domain token on system rule", Options{EnforceScope: true}, "", "new_rule", domainReader, DenyScope, ""},
		{"scope: system token", Options{EnforceNewDefaults: true, EnforceScope: true}, "", "new_rule", systemReader, Allow, ""},
		{"scope: sub-rules are not scope-checked", Options{EnforceScope: true}, "", "both", projectAdmin, Allow, ""},
		{"file override wins over deprecation", Options{}, `new_rule: "role:nobody"`, "new_rule", projectAdmin, Deny, "role:nobody"},
		{"old name in file carries over", Options{EnforceNewDefaults: true}, `old_rule: "role:observer"`, "new_rule",
			&Credentials{Roles: []string{"observer"}}, Allow, "role:observer"},
		{"old name in file equal to the old default", Options{EnforceNewDefaults: true}, `old_rule: "role:admin"`, "new_rule", projectAdmin, Deny, ""},
		{"old name in file pointing at the new", Options{EnforceNewDefaults: true}, `{"old_rule": "rule:new_rule", "x": "@"}`, "new_rule", systemReader, Allow, "role:reader and system_scope:all"},
		{"same check: nothing to add", Options{}, "", "same", projectAdmin, Allow, "role:admin"},
		{"unknown rule without a default rule", Options{}, "", "nonesuch", projectAdmin, Deny, ""},
		{"unknown rule with a default rule", Options{DefaultRule: "same"}, "", "nonesuch", projectAdmin, Allow, ""},
		{"file-only rule", Options{}, `extra: "role:admin"`, "extra", projectAdmin, Allow, "role:admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if tt.file != "" {
				f, err := ParseFile("test.yaml", []byte(tt.file))
				if err != nil {
					t.Fatal(err)
				}
				opts.File = f
			}
			e, err := New(defaults, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Enforce(tt.rule, tt.creds, nil); got != tt.want {
				t.Errorf("Enforce = %v, want %v", got, tt.want)
			}
			if tt.wantEffects != "" {
				if got, _ := e.Effective(tt.rule); got != tt.wantEffects {
					t.Errorf("Effective = %q, want %q", got, tt.wantEffects)
				}
			}
		})
	}
	if e, _ := New(defaults, Options{}); e.Enforce("new_rule", nil, nil) != Deny {
		t.Error("nil credentials allowed")
	}
}

func TestNewRefusesBrokenRules(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rules   []Rule
		file    string
		foreign []Rule
		want    string
	}{
		{"unknown rule in a default", []Rule{{Name: "a", Check: "rule:b"}}, "", nil, "rule a (default) references undefined rule b"},
		{"unknown rule in the file", []Rule{{Name: "a", Check: "@"}}, "\n\na: rule:zz\n", nil, "rule a (test.yaml line 3) references undefined rule zz"},
		{"cycle", []Rule{{Name: "a", Check: "rule:b"}, {Name: "b", Check: "role:x or rule:a"}}, "", nil, "cycle: a -> b -> a"},
		{"self cycle from the file", []Rule{{Name: "a", Check: "@"}}, "a: not rule:a", nil, "cycle: a -> a"},
		{"bad default", []Rule{{Name: "a", Check: "role:x and"}}, "", nil, "default rule a"},
		{"duplicate", []Rule{{Name: "a", Check: "@"}, {Name: "a", Check: "!"}}, "", nil, "twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Foreign: tt.foreign}
			if tt.file != "" {
				f, err := ParseFile("test.yaml", []byte(tt.file))
				if err != nil {
					t.Fatal(err)
				}
				opts.File = f
			}
			_, err := New(tt.rules, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// References to a foreign service's rules are not undefined; file
	// entries for them are left to that service.
	f, err := ParseFile("test.yaml", []byte("custom: rule:theirs\ntheirs: rule:nothing_here\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New([]Rule{{Name: "a", Check: "@"}}, Options{File: f, Foreign: []Rule{{Name: "theirs", Check: "@"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Effective("theirs"); ok {
		t.Error("took the foreign rule from the file")
	}
	if e.Allowed("custom", &Credentials{}, nil) {
		t.Error("a reference to a rule this enforcer does not hold passed")
	}
	// But not from a rule this service uses: that would never pass.
	f, err = ParseFile("test.yaml", []byte("mine: rule:custom\ncustom: rule:theirs\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New([]Rule{{Name: "mine", Check: "@"}}, Options{File: f, Foreign: []Rule{{Name: "theirs", Check: "@"}}}); err == nil ||
		!strings.Contains(err.Error(), "rule custom (test.yaml line 2) references undefined rule theirs") {
		t.Errorf("reached foreign reference: %v", err)
	}
}

func TestDefaultsLoad(t *testing.T) {
	for name, rules := range map[string][]Rule{"blazar": BlazarRules(), "placement": PlacementRules()} {
		for _, newDefaults := range []bool{false, true} {
			if _, err := New(rules, Options{EnforceNewDefaults: newDefaults}); err != nil {
				t.Errorf("%s (enforce_new_defaults=%v): %v", name, newDefaults, err)
			}
		}
		seen := map[string]bool{}
		for _, r := range rules {
			if r.Description == "" || seen[r.Name] {
				t.Errorf("%s: rule %q has no description or is listed twice", name, r.Name)
			}
			seen[r.Name] = true
			if strings.Contains(r.Name, ":") && len(r.Operations) == 0 {
				t.Errorf("%s: API rule %q has no operations", name, r.Name)
			}
		}
	}
	// Every API rule of each service.
	count := func(rules []Rule, prefix string) int {
		n := 0
		for _, r := range rules {
			if strings.HasPrefix(r.Name, prefix) {
				n++
			}
		}
		return n
	}
	got := []int{count(BlazarRules(), "blazar:leases:"), count(BlazarRules(), "blazar:oshosts:"),
		count(BlazarRules(), "blazar:floatingips:"), count(PlacementRules(), "placement:")}
	if diff := cmp.Diff([]int{4, 7, 3, 33}, got); diff != "" {
		t.Errorf("rule counts (-want +got):\n%s", diff)
	}
}
