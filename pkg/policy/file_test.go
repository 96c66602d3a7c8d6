package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFile(t *testing.T) {
	for _, tt := range []struct {
		name, path, text string
		want             map[string]string // rule → printed check
		lines            map[string]int
	}{
		{"yaml", "p.yaml", "# comment\n\"admin\": \"role:admin\"\nowner: 'project_id:%(project_id)s'\nopen:\nempty: \"\"\n",
			map[string]string{"admin": "role:admin", "owner": "project_id:%(project_id)s", "open": "@", "empty": "@"},
			map[string]int{"admin": 2, "owner": 3, "open": 4}},
		{"yaml lists", "p.yaml", "a:\n  - [\"role:x\", \"project_id:%(project_id)s\"]\n  - role:y\nb: []\n",
			map[string]string{"a": "((role:x and project_id:%(project_id)s) or role:y)", "b": "@"},
			map[string]int{"a": 1, "b": 4}},
		{"json", "p.json", "{\n  \"a\": \"role:admin or role:x\",\n\n  \"b\": [[\"role:y\"], [\"role:z\", \"@\"]],\n  \"c\": null\n}\n",
			map[string]string{"a": "(role:admin or role:x)", "b": "(role:y or (role:z and @))", "c": "@"},
			map[string]int{"a": 2, "b": 4, "c": 5}},
		{"empty", "p.yaml", "", map[string]string{}, nil},
		{"comments only", "p.yaml", "# nothing\n", map[string]string{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFile(tt.path, []byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for name, r := range f.Rules {
				got[name] = r.Expr.String()
				if want, ok := tt.lines[name]; ok && r.Line != want {
					t.Errorf("%s at line %d, want %d", name, r.Line, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseFileErrors: every malformed file is refused with the file
// name and the line of the problem.
func TestParseFileErrors(t *testing.T) {
	for _, tt := range []struct {
		name, text, want string
	}{
		{"bad yaml", "a: \"role:x\"\nb: y: z\n", "line 2"},
		{"unterminated yaml", "a: x\n\n\nb: \"unterminated\n", "line 4"},
		// yaml.v3 names the line before a flow collection that is not
		// closed; a line is still given.
		{"unclosed yaml", "a: \"role:x\"\nb: [unclosed\n", "line "},
		{"yaml tab", "a: role:x\n\tb: role:y\n", "line 2"},
		{"not a mapping", "- role:x\n", "line 1: want a mapping"},
		{"bad check", "a: \"@\"\n\nb: \"role:x and\"\n", "line 3: rule \"b\""},
		{"bad check in a list", "a: \"@\"\nb:\n  - [\"role:x\", \"nokind\"]\n", "line 2: rule \"b\""},
		{"not a string", "a: \"@\"\nb: 1\n", "line 2: rule \"b\""},
		{"mapping value", "a:\n  b: c\n", "line 2: rule \"a\""},
		{"duplicate", "a: \"@\"\nb: \"!\"\na: \"!\"\n", "line 3: rule \"a\" already defined at line 1"},
		{"bad json", "{\n  \"a\": \"@\",\n  \"b\" \"!\"\n}\n", "line 3"},
		{"json trailing comma", "{\n  \"a\": \"@\",\n}\n", "line 3"},
		{"json bad check", "{\n  \"a\": \"@\",\n  \"b\": \"(role:x\"\n}\n", "line 3: rule \"b\""},
		{"json number", "{\"a\": 1}", "line 1: rule \"a\""},
		{"json truncated", "{\n\"a\": \"@\"\n", "line 3"},
		{"json trailing text", "{\"a\": \"@\"}\n{}", "line 2"},
		{"json nested list", "{\"a\": [[[\"role:x\"]]]}", "line 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFile("/etc/leasehold/policy.yaml", []byte(tt.text))
			if err == nil {
				t.Fatalf("parsed: %+v", f.Rules)
			}
			if !strings.HasPrefix(err.Error(), "policy file /etc/leasehold/policy.yaml: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want the file name and %q", err, tt.want)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	if f, err := LoadFile(""); f != nil || err != nil {
		t.Errorf("no file: %v, %v", f, err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(`{"blazar:leases:get": "rule:admin"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || f.Rules["blazar:leases:get"].Check != "rule:admin" {
		t.Errorf("loaded %+v", f)
	}
}
