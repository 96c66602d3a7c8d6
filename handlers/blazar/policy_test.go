package blazar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/policy"
)

// ctxWith is a request context as the router gives handlers: the
// identity and the enforcer.
func ctxWith(e *policy.Enforcer, id *auth.Identity) context.Context {
	ctx := withEnforcer(context.Background(), e)
	if id != nil {
		ctx = auth.WithIdentity(ctx, id)
	}
	return ctx
}

func TestAuthorize(t *testing.T) {
	admin := &auth.Identity{UserID: "a", ProjectID: "admin", Roles: []string{"admin"}}
	member := &auth.Identity{UserID: "u", ProjectID: "p1", Roles: []string{"member"}}
	reader := &auth.Identity{UserID: "r", ProjectID: "p1", Roles: []string{"reader"}}
	nobody := &auth.Identity{UserID: "n", ProjectID: "p1"}
	tests := []struct {
		id     *auth.Identity
		rule   string
		target string
		ok     bool
	}{
		{admin, "blazar:oshosts:get", "", true},
		{admin, "blazar:leases:delete", "p9", true},
		{member, "blazar:oshosts:get", "", false},
		{member, "blazar:oshosts:post", "", false},
		{member, "blazar:leases:post", "", true},
		{member, "blazar:leases:get", "p1", true},
		{member, "blazar:leases:get", "p2", false},
		{member, "blazar:floatingips:get", "", true},
		{member, "blazar:floatingips:post", "", false},
		{reader, "blazar:leases:get", "p1", true},
		{reader, "blazar:leases:put", "p1", false},
		{nobody, "blazar:leases:get", "p1", false},
		{member, "blazar:plugins:get", "", false}, // unregistered: default rule
		{admin, "blazar:plugins:get", "", true},
		{nil, "blazar:leases:get", "", false},
	}
	for _, tt := range tests {
		err := authorize(ctxWith(defaultEnforcer, tt.id), tt.rule, tt.target)
		if (err == nil) != tt.ok {
			t.Errorf("%v %s target %q: err = %v, want ok=%v", tt.id, tt.rule, tt.target, err, tt.ok)
		}
		if e := errs.As(err); err != nil && (e == nil || e.Kind != errs.Forbidden || e.Msg != "Policy doesn't allow "+tt.rule+" to be performed.") {
			t.Errorf("error %#v", err)
		}
	}
	// A context without an enforcer (not through the router) is refused.
	if err := authorize(auth.WithIdentity(context.Background(), admin), "blazar:oshosts:get", ""); err == nil {
		t.Error("no enforcer in context: allowed")
	}
}

// TestPolicyFileOverrides: a policy file changes Blazar's decisions
// through NewEnforcer, as [oslo_policy] policy_file does at start-up.
func TestPolicyFileOverrides(t *testing.T) {
	member := &auth.Identity{UserID: "u", ProjectID: "p1", Roles: []string{"member"}}
	load := func(t *testing.T, text string) (*policy.Enforcer, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := policy.LoadFile(path)
		if err != nil {
			return nil, err
		}
		return NewEnforcer(policy.Options{EnforceNewDefaults: true, File: f})
	}
	for _, tc := range []struct {
		name, file, rule, target string
		ok                       bool
	}{
		{"widen hosts", `"blazar:oshosts:get": "rule:admin or role:reader"`, "blazar:oshosts:get", "", true},
		{"not", `"blazar:oshosts:get": "not role:x"`, "blazar:oshosts:get", "", true},
		{"never", `"blazar:leases:get": "!"`, "blazar:leases:get", "p1", false},
		{"empty is always", `"blazar:leases:get": ""`, "blazar:leases:get", "p2", true},
		{"base rule", `"project_reader_api": "role:reader"`, "blazar:leases:get", "p2", true},
		{"placement rules ignored", `"placement:traits:list": "rule:system_reader_api"`, "blazar:leases:get", "p2", false},
		{"unchanged", `"blazar:oshosts:post": "rule:admin"`, "blazar:leases:post", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := load(t, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if err := authorize(ctxWith(e, member), tc.rule, tc.target); (err == nil) != tc.ok {
				t.Errorf("%s: %v, want ok=%v", tc.rule, err, tc.ok)
			}
		})
	}
	if _, err := load(t, `"blazar:leases:get": "rule:nonesuch"`); err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("undefined rule: %v", err)
	}
	if _, err := load(t, "\n\"blazar:leases:get\": \"role:a and\"\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad check: %v", err)
	}
}

// TestRouterCarriesPolicy: requests through the router are decided by
// the router's enforcer.
func TestRouterCarriesPolicy(t *testing.T) {
	f, err := policy.ParseFile("p.yaml", []byte(`"blazar:leases:get": "!"`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnforcer(policy.Options{EnforceNewDefaults: true, File: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		enf  *policy.Enforcer
		want int
	}{{defaultEnforcer, http.StatusOK}, {e, http.StatusForbidden}} {
		rt := NewRouterWithPolicy(tc.enf)
		rt.Handle(http.MethodGet, "/leases", func(w http.ResponseWriter, r *http.Request) error {
			if err := authorize(r.Context(), "blazar:leases:get", ""); err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, map[string]any{"leases": []any{}})
		})
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/leases", nil)
		req.Header.Set("X-Auth-Token", "admin")
		rt.Handler(NoAuth{}).ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
		}
	}
}

// TestDifferentialAgainstOldEvaluator: with the default configuration
// the engine decides every Blazar rule for every identity and target
// project exactly as the evaluator it replaced (kept below as the
// oracle).
func TestDifferentialAgainstOldEvaluator(t *testing.T) {
	ids := map[string]*auth.Identity{
		"admin":           {UserID: "admin", ProjectID: "admin", Roles: []string{"admin"}},
		"admin-expanded":  {UserID: "admin", ProjectID: "p1", Roles: []string{"admin", "member", "reader"}},
		"member p1":       {UserID: "m1", ProjectID: "p1", Roles: []string{"member"}},
		"member p1 +r":    {UserID: "m1", ProjectID: "p1", Roles: []string{"member", "reader"}},
		"reader p1":       {UserID: "r1", ProjectID: "p1", Roles: []string{"reader"}},
		"member p2":       {UserID: "m2", ProjectID: "p2", Roles: []string{"Member"}},
		"system admin":    {UserID: "sa", SystemScope: "all", Roles: []string{"admin", "member", "reader"}},
		"system reader":   {UserID: "sr", SystemScope: "all", Roles: []string{"reader"}},
		"no roles p1":     {UserID: "n1", ProjectID: "p1"},
		"no project":      {UserID: "np", Roles: []string{"member"}},
		"other role p1":   {UserID: "o1", ProjectID: "p1", Roles: []string{"observer"}},
		"nil (anonymous)": nil,
	}
	names := []string{"blazar:unregistered:action"}
	for _, r := range policy.BlazarRules() {
		names = append(names, r.Name)
	}
	n := 0
	for idName, id := range ids {
		for _, rule := range names {
			for _, target := range []string{"p1", "p2", ""} {
				want := oldAuthorize(id, rule, target) == nil
				got := authorize(ctxWith(defaultEnforcer, id), rule, target) == nil
				if got != want {
					t.Errorf("%s %s target %q: engine allowed=%v, old allowed=%v", idName, rule, target, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d decisions compared", n)
}

// The evaluator this package used before pkg/policy, verbatim but for
// names: the oracle of TestDifferentialAgainstOldEvaluator.

var oldPolicyRules = map[string]string{
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

func oldSplitTrim(s, sep string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return []string{"@"}
	}
	parts := strings.Split(s, sep)
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var oldImpliedRoles = map[string][]string{"admin": {"member", "reader"}, "member": {"reader"}}

func oldHasRole(id *auth.Identity, role string) bool {
	if id.HasRole(role) {
		return true
	}
	for holder, implied := range oldImpliedRoles {
		for _, r := range implied {
			if strings.EqualFold(r, role) && oldHasRole(id, holder) {
				return true
			}
		}
	}
	return false
}

func oldEvalCheck(rules map[string]string, check string, id *auth.Identity, target string, depth int) bool {
	if depth > 10 {
		return false
	}
	for _, alt := range oldSplitTrim(check, " or ") {
		ok := true
		for _, atom := range oldSplitTrim(alt, " and ") {
			if !oldEvalAtom(rules, atom, id, target, depth) {
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

func oldEvalAtom(rules map[string]string, atom string, id *auth.Identity, target string, depth int) bool {
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
		return oldHasRole(id, atom[len("role:"):])
	case strings.HasPrefix(atom, "rule:"):
		sub, ok := rules[atom[len("rule:"):]]
		return ok && oldEvalCheck(rules, sub, id, target, depth+1)
	}
	return false
}

func oldAuthorize(id *auth.Identity, rule, targetProject string) error {
	if id == nil {
		return fmt.Errorf("refused")
	}
	if targetProject == "" {
		targetProject = id.ProjectID
	}
	check, ok := oldPolicyRules[rule]
	if !ok {
		check = oldPolicyRules["default"]
	}
	if !oldEvalCheck(oldPolicyRules, check, id, targetProject, 0) {
		return fmt.Errorf("refused")
	}
	return nil
}

// TestHandlersAskRegisteredRules: every Blazar rule name in this
// package's handlers is a registered rule (a typo would fall back to the
// default rule silently).
func TestHandlersAskRegisteredRules(t *testing.T) {
	registered := map[string]bool{}
	for _, r := range policy.BlazarRules() {
		registered[r.Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ruleNameRE.FindAllStringSubmatch(string(src), -1) {
			asked++
			if !registered[m[1]] {
				t.Errorf("%s asks unregistered rule %q", f, m[1])
			}
		}
	}
	if asked < 15 {
		t.Errorf("found only %d rule names in the handlers", asked)
	}
}

var ruleNameRE = regexp.MustCompile(`"(blazar:[a-z_]+:[a-z_]+)"`)
