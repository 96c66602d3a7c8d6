package hostquery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``, `[]`, `[">=", "$vcpus", "4"]`, `["and", ["==", "$a", "1"], ["<", "$b", "x"]]`,
		`["<or>", "$gpu", "a", "b"]`, `{"vcpus": ">= 4", "capabilities:x": "<or> a <or> b", "r": "r1"}`,
		`[">=", "$vcpus", 4]`, `{"a": "= 1"}`, `["and"]`, `{"a":"<in> <b>"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			return
		}
		text := q.String()
		q2, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but Parse(String()=%q): %v", s, text, err)
		}
		if diff := cmp.Diff(q, q2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip of %q via %q (-first +second):\n%s", s, text, diff)
		}
		if q2.String() != text {
			t.Fatalf("String not stable: %q then %q", text, q2.String())
		}
		q.Match(func(string) (string, bool) { return "1", true })
	})
}

var allOps = []Op{OpEq, OpNe, OpGe, OpLe, OpGt, OpLt, OpSEq, OpSNe, OpSGe, OpSGt, OpSLe, OpSLt, OpIn, OpOr}

func genQuery() *rapid.Generator[*Query] {
	return rapid.Custom(func(t *rapid.T) *Query {
		n := rapid.IntRange(0, 4).Draw(t, "n")
		q := &Query{}
		for i := 0; i < n; i++ {
			op := rapid.SampledFrom(allOps).Draw(t, "op")
			nv := 1
			if op == OpOr {
				nv = rapid.IntRange(1, 3).Draw(t, "nv")
			}
			c := Clause{Key: rapid.StringN(1, 8, -1).Draw(t, "key"), Op: op}
			for j := 0; j < nv; j++ {
				c.Values = append(c.Values, rapid.StringN(1, 6, -1).Draw(t, "v"))
			}
			q.Clauses = append(q.Clauses, c)
		}
		return q
	})
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := genQuery().Draw(t, "q")
		got, err := Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(%q): %v", q.String(), err)
		}
		if diff := cmp.Diff(q, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip via %q:\n%s", q.String(), diff)
		}
	})
}

// Complementary operators never both match, and exactly one matches when
// the key is present and the value is not the "null" literal.
func TestComplementProperty(t *testing.T) {
	pairs := [][2]Op{{OpEq, OpNe}, {OpGe, OpLt}, {OpLe, OpGt}, {OpSEq, OpSNe}, {OpSGe, OpSLt}, {OpSLe, OpSGt}}
	num := rapid.SampledFrom([]string{"1", "2", "8", "16", "16.0", "-3", "1e3", "abc", "x86_64", "10"})
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SampledFrom(pairs).Draw(t, "pair")
		hv, want := num.Draw(t, "host"), num.Draw(t, "want")
		get := func(string) (string, bool) { return hv, true }
		a, _ := (&Query{Clauses: []Clause{{"k", p[0], []string{want}}}}).Match(get)
		b, _ := (&Query{Clauses: []Clause{{"k", p[1], []string{want}}}}).Match(get)
		if a == b {
			t.Fatalf("%s and %s both %v for host %q want %q", p[0], p[1], a, hv, want)
		}
	})
}

// A conjunction matches iff every single clause matches; a failing one
// is named in the reason.
func TestConjunctionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := genQuery().Draw(t, "q")
		vals := map[string]string{}
		for _, c := range q.Clauses {
			if rapid.Bool().Draw(t, "present") {
				vals[c.Key] = rapid.SampledFrom(append([]string{"1", "z"}, c.Values...)).Draw(t, "hv")
			}
		}
		get := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
		ok, reason := q.Match(get)
		all := true
		for _, c := range q.Clauses {
			if one, _ := (&Query{Clauses: []Clause{c}}).Match(get); !one {
				all = false
			}
		}
		if ok != all {
			t.Fatalf("Match = %v, clauses all = %v", ok, all)
		}
		if ok != (reason == "") {
			t.Fatalf("ok=%v with reason %q", ok, reason)
		}
	})
}
