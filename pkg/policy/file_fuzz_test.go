package policy

import (
	"strings"
	"testing"
)

// FuzzParseFile: a policy file (YAML or JSON) of any content parses or
// is refused with an error naming the file, never a panic; every rule of
// a parsed file has a check tree.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		`"blazar:leases:get": "rule:admin_or_owner"` + "\n" + `"admin_or_owner": "role:admin or project_id:%(project_id)s"`,
		`{"a": "role:admin", "b": [["role:x", "role:y"], ["@"]], "c": ""}`,
		"a:\nb: !\n",
		"a: [[1, 2]]\n",
		"a: 'not (role:x and'\n",
		"{",
		"- a\n- b\n",
		"a: |\n  role:admin\n  or role:member\n",
		"a: &x role:r\nb: *x\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		file, err := ParseFile("fuzz.yaml", []byte(data))
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for name, r := range file.Rules {
			if r.Expr == nil {
				t.Fatalf("rule %q parsed without a check tree", name)
			}
		}
	})
}
