package policy

import "testing"

// FuzzParse: Parse never panics, and whatever parses prints back to a
// string that parses to an expression deciding every probe the same way
// (and printing the same again).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "@", "!", "role:admin", "rule:admin or project_id:%(project_id)s",
		"not (role:a and role:b) or rule:r", "((role:x)) and not not @", "is_admin:True",
		"True:%(flag)s", "'x':%(k)s", "project_id:%% and user_id:%(user_id)s%%",
		"role:a AND role:b Or NOT role:c", "(role:a or", "role:a) and (", "x", "http:x",
	} {
		f.Add(s)
	}
	e, err := New([]Rule{
		{Name: "r", Check: "role:a or role:b"},
		{Name: "admin", Check: "is_admin:True"},
	}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	probes := []struct {
		creds  *Credentials
		target Target
	}{
		{&Credentials{}, Target{}},
		{&Credentials{ProjectID: "p", UserID: "u", Roles: []string{"a", "x"}, IsAdmin: true}, Target{"project_id": "p", "flag": "True", "k": "x", "user_id": "u%"}},
		{&Credentials{ProjectID: "q", Roles: []string{"b", "reader"}, SystemScope: "all"}, Target{"project_id": "p", "user_id": "u"}},
		{&Credentials{UserID: "u%", Roles: []string{"c", "admin"}}, Target{"project_id": "%", "flag": "False", "k": "'x'"}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		expr, err := Parse(s)
		if err != nil {
			return
		}
		printed := expr.String()
		again, err := Parse(printed)
		if err != nil {
			t.Fatalf("%q parsed, but its printed form %q does not: %v", s, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("%q printed %q, then %q", s, printed, again.String())
		}
		for _, p := range probes {
			if a, b := decide(e, expr, p.creds, p.target), decide(e, again, p.creds, p.target); a != b {
				t.Fatalf("%q (printed %q) decides %v, printed form %v, for %+v on %v", s, printed, a, b, p.creds, p.target)
			}
		}
	})
}
