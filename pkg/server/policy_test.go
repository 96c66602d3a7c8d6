package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/policy"
)

// TestPolicyAtStartUp: [oslo_policy] policy_file reaches both APIs'
// enforcers, and a broken file stops New before the database is opened,
// naming the file and line.
func TestPolicyAtStartUp(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgFor := func(file string) *config.Config {
		c, err := config.Load(nil)
		if err != nil {
			t.Fatal(err)
		}
		// A database New must not reach: a broken policy fails first.
		c.Database = "sqlite:///" + filepath.Join(dir, "no-such-dir", "x.db")
		c.Auth = config.AuthNoAuth
		c.Placement.PolicyMode = "legacy"
		c.OsloPolicy = config.OsloPolicy{PolicyFile: file, EnforceNewDefaults: true}
		return c
	}
	good := write("policy.yaml", "\"blazar:oshosts:get\": \"role:operator\"\n\"placement:traits:list\": \"role:operator\"\n")
	b, p, _, err := buildPolicy(cfgFor(good))
	if err != nil {
		t.Fatal(err)
	}
	operator := &policy.Credentials{ProjectID: "p1", Roles: []string{"operator"}}
	if !b.Allowed("blazar:oshosts:get", operator, nil) || !p.Allowed("placement:traits:list", operator, nil) {
		t.Error("the policy file did not reach both APIs")
	}
	if b.Allowed("blazar:oshosts:post", operator, nil) || p.Allowed("placement:traits:update", operator, nil) {
		t.Error("rules the file does not name changed")
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad.yaml", "a: \"@\"\n\"blazar:leases:get\": \"role:x or\"\n", "bad.yaml: line 2"},
		{"bad.json", "{\n\"a\": \"@\",\n}\n", "bad.json: line 3"},
		{"undefined.yaml", "\"placement:usages\": \"rule:nonesuch\"\n", "undefined rule nonesuch"},
	} {
		path := write(tc.name, tc.text)
		_, err := New(context.Background(), cfgFor(path))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(context.Background(), cfgFor(filepath.Join(dir, "missing.yaml"))); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestPolicyFileOverHTTP: an override in the policy file changes what
// both APIs answer through the built server.
func TestPolicyFileOverHTTP(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Database = "sqlite:///" + filepath.Join(dir, "lh.db")
	c.Auth = config.AuthNoAuth
	c.Placement.PolicyMode = "legacy"
	ask := func(t *testing.T, s *Server, path, token string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("X-Auth-Token", token)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		name, file       string
		hosts, providers int
	}{
		{"defaults", "", http.StatusForbidden, http.StatusOK},
		{"overridden", "\"blazar:oshosts:get\": \"role:member\"\n\"placement:resource_providers:list\": \"!\"\n", http.StatusOK, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.OsloPolicy.PolicyFile = ""
			if tc.file != "" {
				c.OsloPolicy.PolicyFile = filepath.Join(dir, tc.name+".yaml")
				if err := os.WriteFile(c.OsloPolicy.PolicyFile, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := New(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.DB().Close() })
			if got := ask(t, s, "/v1/os-hosts", "m1:p1"); got != tc.hosts {
				t.Errorf("member GET /v1/os-hosts: %d, want %d", got, tc.hosts)
			}
			if got := ask(t, s, "/placement/resource_providers", "admin"); got != tc.providers {
				t.Errorf("admin GET /placement/resource_providers: %d, want %d", got, tc.providers)
			}
		})
	}
}
