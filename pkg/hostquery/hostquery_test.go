package hostquery

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []Clause
	}{
		{``, nil},
		{`  `, nil},
		{`[]`, nil},
		{`[">=", "$vcpus", "4"]`, []Clause{{"vcpus", OpGe, []string{"4"}}}},
		{`["=", "$vcpus", "4"]`, []Clause{{"vcpus", OpEq, []string{"4"}}}},
		{`["and", ["==", "$a", "1"], ["<", "$b", "x"]]`, []Clause{{"a", OpEq, []string{"1"}}, {"b", OpLt, []string{"x"}}}},
		{`["and", ["!=", "$a", "1"]]`, []Clause{{"a", OpNe, []string{"1"}}}},
		{`["s==", "$cpu_arch", "x86_64"]`, []Clause{{"cpu_arch", OpSEq, []string{"x86_64"}}}},
		{`["<in>", "$cpu_info", "avx"]`, []Clause{{"cpu_info", OpIn, []string{"avx"}}}},
		{`["<or>", "$gpu", "a", "b"]`, []Clause{{"gpu", OpOr, []string{"a", "b"}}}},
		{`["and", ["s!=", "$a", "1"], ["s>=", "$b", "2"], ["s>", "$c", "3"], ["s<=", "$d", "4"], ["s<", "$e", "5"]]`,
			[]Clause{{"a", OpSNe, []string{"1"}}, {"b", OpSGe, []string{"2"}}, {"c", OpSGt, []string{"3"}}, {"d", OpSLe, []string{"4"}}, {"e", OpSLt, []string{"5"}}}},
		{`{"vcpus": ">= 4", "cpu_arch": "s== x86_64", "capabilities:cpu_info": "<in> avx", "gpu": "<or> a <or> b", "rack": "r1"}`,
			[]Clause{{"vcpus", OpGe, []string{"4"}}, {"cpu_arch", OpSEq, []string{"x86_64"}}, {"cpu_info", OpIn, []string{"avx"}}, {"gpu", OpOr, []string{"a", "b"}}, {"rack", OpSEq, []string{"r1"}}}},
		{`{"vcpus": "= 8"}`, []Clause{{"vcpus", OpGe, []string{"8"}}}},
		{`{"memory_mb": "== 22000", "x": "!= 1", "y": "<= 2", "z": "< 3", "w": "> 4"}`,
			[]Clause{{"memory_mb", OpEq, []string{"22000"}}, {"x", OpNe, []string{"1"}}, {"y", OpLe, []string{"2"}}, {"z", OpLt, []string{"3"}}, {"w", OpGt, []string{"4"}}}},
		{`{"version": "s== 2.1.0", "name": "fermi gpu"}`, []Clause{{"version", OpSEq, []string{"2.1.0"}}, {"name", OpSEq, []string{"fermi gpu"}}}},
		{`{"x": "<or> fpu"}`, []Clause{{"x", OpOr, []string{"fpu"}}}},
		{`{}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			q, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, q.Clauses); diff != "" {
				t.Errorf("Parse(%q) clauses (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, reason string
	}{
		{`[">=", "$vcpus", 4]`, "every element must be a string, got 4"},
		{`[">=", "vcpus", "4"]`, `the key "vcpus" must start with "$"`},
		{`[">=", "$", "4"]`, `the key "$" must start with "$"`},
		{`[">=", "$vcpus", ""]`, "the value for $vcpus must not be empty"},
		{`["~", "$vcpus", "4"]`, `unknown operator "~"`},
		{`["and"]`, `"and" needs at least one clause`},
		{`["and", [">=", "$a", "1"], "x"]`, `element 2 of "and" is not a list`},
		{`["and", ["and", [">=", "$a", "1"]]]`, "every element must be a string"},
		{`["or", [">=", "$a", "1"], [">=", "$b", "1"]]`, "every element must be a string"},
		{`[">=", "$vcpus"]`, "a clause is"},
		{`[">=", "$vcpus", "4", "5"]`, `operator ">=" takes exactly one value`},
		{`["<or>", "$gpu", "a", ""]`, "must not be empty"},
		{`[null, "$a", "1"]`, "every element must be a string, got null"},
		{`[`, "not valid JSON"},
		{`"x"`, "expected a JSON list"},
		{`42`, "expected a JSON list"},
		{`{"vcpus": 4}`, `the value of "vcpus" must be a string, got 4`},
		{`{"vcpus": ">="}`, `operator ">=" for vcpus needs a value`},
		{`{"gpu": "<or> a <or>"}`, "empty alternative"},
		{`{"gpu": ""}`, "must not be empty"},
		{`{"capabilities:": "x"}`, "empty key"},
		{`{"a": "1", "capabilities:a": "2"}`, `key "a" given twice`},
		{`{"a": "1"} x`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("Parse(%q) = %v, want *MalformedError", tt.in, err)
			}
			if !strings.HasPrefix(err.Error(), "Malformed requirements "+tt.in) || !strings.Contains(me.Reason, tt.reason) {
				t.Errorf("Parse(%q) error %q, want reason containing %q", tt.in, err, tt.reason)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, ``},
		{`["=", "$vcpus", "4"]`, `["==","$vcpus","4"]`},
		{`{"gpu": "<or> a <or> b", "cpu_info": "<in> a<b>"}`, `["and",["<or>","$gpu","a","b"],["<in>","$cpu_info","a<b>"]]`},
	}
	for _, tt := range tests {
		q, err := Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := q.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

type host map[string]string

func (h host) get(k string) (string, bool) { v, ok := h[k]; return v, ok }

func TestMatch(t *testing.T) {
	h := host{"vcpus": "2", "memory_mb": "8", "cpu_arch": "x86_64", "cpu_info": `{"features":["avx2"]}`, "gpu": "b", "rack": "r1", "version": "10"}
	tests := []struct {
		q      string
		ok     bool
		reason string
	}{
		{``, true, ""},
		{`[">=", "$vcpus", "2"]`, true, ""},
		{`[">=", "$vcpus", "4"]`, false, "vcpus >= 4 (host has 2)"},
		// numeric, unlike upstream's string comparison ("8" > "16").
		{`[">", "$memory_mb", "16"]`, false, "memory_mb > 16 (host has 8)"},
		{`["<", "$memory_mb", "16"]`, true, ""},
		{`["s>", "$memory_mb", "16"]`, true, ""},
		{`["==", "$vcpus", "2.0"]`, true, ""},
		{`["s==", "$vcpus", "2.0"]`, false, "vcpus s== 2.0 (host has 2)"},
		{`["!=", "$cpu_arch", "aarch64"]`, true, ""},
		{`[">=", "$cpu_arch", "x86"]`, true, ""}, // string comparison when not numbers
		{`["==", "$nope", "1"]`, false, "nope == 1 (host has no nope)"},
		{`["==", "$nope", "null"]`, true, ""},
		{`["!=", "$nope", "null"]`, false, "nope != null (host has no nope)"},
		{`["==", "$rack", "null"]`, false, "rack == null (host has r1)"},
		{`["!=", "$rack", "null"]`, true, ""},
		{`["<in>", "$cpu_info", "avx"]`, true, ""},
		{`["<in>", "$cpu_info", "sse9"]`, false, `cpu_info <in> sse9 (host has {"features":["avx2"]})`},
		{`["<or>", "$gpu", "a", "b"]`, true, ""},
		{`["<or>", "$gpu", "a", "c"]`, false, "gpu <or> a <or> c (host has b)"},
		{`{"vcpus": "= 2", "rack": "r1", "version": "s< 9"}`, true, ""},
		{`{"vcpus": "= 3"}`, false, "vcpus >= 3 (host has 2)"},
		{`["and", [">=", "$vcpus", "1"], ["s<=", "$version", "1"]]`, false, "version s<= 1 (host has 10)"},
		{`["<=", "$version", "9"]`, false, "version <= 9 (host has 10)"},
		{`["s>=", "$version", "1"]`, true, ""},
		{`["s<", "$version", "2"]`, true, ""},
		{`["s!=", "$version", "10"]`, false, "version s!= 10 (host has 10)"},
		{`[">=", "$vcpus", "NaN"]`, false, "vcpus >= NaN (host has 2)"}, // NaN is no number: string order, "2" < "N"
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			q, err := Parse(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			ok, reason := q.Match(h.get)
			if ok != tt.ok || reason != tt.reason {
				t.Errorf("Match = (%v, %q), want (%v, %q)", ok, reason, tt.ok, tt.reason)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	q, err := Parse(`["and", ["==", "$a", "1"], ["!=", "$b", "2"], [">", "$a", "0"]]`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, q.Keys()); diff != "" {
		t.Error(diff)
	}
	var nq *Query
	if !nq.Empty() || nq.Keys() != nil || nq.String() != "" {
		t.Error("nil query must be empty")
	}
	if ok, _ := nq.Match(host{}.get); !ok {
		t.Error("nil query must match")
	}
}
