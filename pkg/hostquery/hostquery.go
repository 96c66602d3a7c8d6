// Package hostquery implements the host requirement language used by
// Blazar host reservations (hypervisor_properties and resource_properties)
// and by Leasehold's extension for Nova's extra-spec operators.
//
// # Accepted input
//
// Parse accepts two forms.
//
// (a) Blazar's JSON query string:
//
//	""  or  "[]"                                    no constraint
//	[op, "$key", "value"]                            one clause
//	["and", [op, "$k", "v"], [op, "$k", "v"], ...]   a conjunction
//
// with op one of == = != >= <= > < ("=" is normalised to "=="). Every
// element is a string, the key starts with "$" and the value is not
// empty, exactly as upstream's convert_requirements checks it. As an
// extension the same array form accepts Nova's extra-spec operators
// s== s!= s>= s> s<= s< <in> and <or>; "<or>" takes one or more values:
// ["<or>", "$gpu", "a100", "h100"].
//
// (b) Nova's extra-spec object form (ComputeCapabilitiesFilter):
//
//	{"vcpus": ">= 4", "cpu_arch": "s== x86_64",
//	 "capabilities:cpu_info": "<in> avx", "gpu": "<or> a <or> b", "rack": "r1"}
//
// Keys may carry the "capabilities:" scope, which is dropped. A value
// without an operator means "s==" with the whole value; "=" means "at
// least, as a number" (the same as ">=").
//
// Anything else is an error whose message starts with "Malformed
// requirements", like Blazar's MalformedRequirements; the API maps it to
// 400.
//
// # Matching
//
// Match evaluates every clause against a lookup function (a host's fields
// and extra capabilities). A missing key never matches. The Blazar
// operators (== != >= <= > <) and "=" compare as numbers when both sides
// parse as finite numbers, and as strings otherwise.
//
// This differs from upstream Blazar, which compares values as Python
// strings, so that upstream [">=", "$memory", "16"] is false for a host
// with memory "8" ("8" > "16" lexicographically). Leasehold compares 8 and
// 16 as numbers. Use the s-operators for an explicit string comparison.
//
// Blazar turns the literal value "null" on a computehosts column into SQL
// NULL; here "== null" matches a key that is absent (a NULL column or a
// missing capability) and "!= null" one that is present.
//
// The s-operators compare strings bytewise (the same order as Python's
// code-point order for UTF-8), "<in>" is a substring test on the host's
// value and "<or>" matches when the host's value equals any of the values.
//
// String renders a Query in the canonical array form, which Parse reads
// back to an equal Query.
package hostquery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Op is a comparison operator.
type Op string

// The operators. OpEq..OpLt are Blazar's (numeric when both sides are
// numbers); the S-ops, OpIn and OpOr are Nova's extra-spec operators.
const (
	OpEq  Op = "=="
	OpNe  Op = "!="
	OpGe  Op = ">="
	OpLe  Op = "<="
	OpGt  Op = ">"
	OpLt  Op = "<"
	OpSEq Op = "s=="
	OpSNe Op = "s!="
	OpSGe Op = "s>="
	OpSGt Op = "s>"
	OpSLe Op = "s<="
	OpSLt Op = "s<"
	OpIn  Op = "<in>"
	OpOr  Op = "<or>"
)

var blazarOps = map[string]Op{"==": OpEq, "=": OpEq, "!=": OpNe, ">=": OpGe, "<=": OpLe, ">": OpGt, "<": OpLt}

var extOps = map[string]Op{
	"s==": OpSEq, "s!=": OpSNe, "s>=": OpSGe, "s>": OpSGt, "s<=": OpSLe, "s<": OpSLt,
	"<in>": OpIn, "<or>": OpOr,
}

// Clause is one comparison: the host's value of Key against Values (one
// value, or one or more for OpOr).
type Clause struct {
	Key    string
	Op     Op
	Values []string
}

// String renders the clause for people: "vcpus >= 4", "gpu <or> a <or> b".
func (c Clause) String() string {
	if c.Op == OpOr {
		var b strings.Builder
		b.WriteString(c.Key)
		for _, v := range c.Values {
			b.WriteString(" <or> ")
			b.WriteString(v)
		}
		return b.String()
	}
	return c.Key + " " + string(c.Op) + " " + strings.Join(c.Values, " ")
}

// Query is a conjunction of clauses; an empty Query matches every host.
type Query struct {
	Clauses []Clause
}

// Empty reports whether the query has no constraint.
func (q *Query) Empty() bool { return q == nil || len(q.Clauses) == 0 }

// Keys returns the distinct keys the query names, in clause order.
func (q *Query) Keys() []string {
	if q == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range q.Clauses {
		if !seen[c.Key] {
			seen[c.Key] = true
			out = append(out, c.Key)
		}
	}
	return out
}

// MalformedError is returned by Parse for input that is not a valid
// requirement.
type MalformedError struct {
	Input  string
	Reason string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("Malformed requirements %s: %s", e.Input, e.Reason)
}

func malformed(input, format string, args ...any) error {
	return &MalformedError{Input: input, Reason: fmt.Sprintf(format, args...)}
}

// Parse reads a requirement in Blazar's array form or Nova's object form.
func Parse(s string) (*Query, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return &Query{}, nil
	}
	if !json.Valid([]byte(t)) {
		return nil, malformed(s, "not valid JSON")
	}
	switch t[0] {
	case '[':
		return parseArray(s, t)
	case '{':
		return parseObject(s, t)
	}
	return nil, malformed(s, "expected a JSON list such as [\">=\", \"$vcpus\", \"4\"] or an extra-spec object")
}

func parseArray(orig, t string) (*Query, error) {
	var top []json.RawMessage
	if err := json.Unmarshal([]byte(t), &top); err != nil {
		return nil, malformed(orig, "expected a JSON list")
	}
	if len(top) == 0 {
		return &Query{}, nil
	}
	var head string
	if err := json.Unmarshal(top[0], &head); err == nil && head == "and" {
		if len(top) < 2 {
			return nil, malformed(orig, "\"and\" needs at least one clause")
		}
		q := &Query{}
		for i, raw := range top[1:] {
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return nil, malformed(orig, "element %d of \"and\" is not a list", i+1)
			}
			c, err := parseClause(orig, elems)
			if err != nil {
				return nil, err
			}
			q.Clauses = append(q.Clauses, c)
		}
		return q, nil
	}
	c, err := parseClause(orig, top)
	if err != nil {
		return nil, err
	}
	return &Query{Clauses: []Clause{c}}, nil
}

func parseClause(orig string, elems []json.RawMessage) (Clause, error) {
	strs := make([]string, len(elems))
	for i, raw := range elems {
		if err := json.Unmarshal(raw, &strs[i]); err != nil || !isJSONString(raw) {
			return Clause{}, malformed(orig, "every element must be a string, got %s", compact(raw))
		}
	}
	if len(strs) < 3 {
		return Clause{}, malformed(orig, "a clause is [operator, \"$key\", \"value\"]")
	}
	op, ok := blazarOps[strs[0]]
	if !ok {
		op, ok = extOps[strs[0]]
	}
	if !ok {
		return Clause{}, malformed(orig, "unknown operator %q", strs[0])
	}
	if len(strs) > 3 && op != OpOr {
		return Clause{}, malformed(orig, "operator %q takes exactly one value", strs[0])
	}
	key := strs[1]
	if len(key) < 2 || key[0] != '$' {
		return Clause{}, malformed(orig, "the key %q must start with \"$\"", key)
	}
	vals := strs[2:]
	for _, v := range vals {
		if v == "" {
			return Clause{}, malformed(orig, "the value for %s must not be empty", key)
		}
	}
	return Clause{Key: key[1:], Op: op, Values: append([]string(nil), vals...)}, nil
}

func isJSONString(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) > 0 && r[0] == '"'
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func parseObject(orig, t string) (*Query, error) {
	dec := json.NewDecoder(strings.NewReader(t))
	if _, err := dec.Token(); err != nil { // {
		return nil, malformed(orig, "expected a JSON object")
	}
	q := &Query{}
	seen := map[string]bool{}
	for dec.More() {
		tk, err := dec.Token()
		if err != nil {
			return nil, malformed(orig, "expected a JSON object")
		}
		rawKey, _ := tk.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed(orig, "expected a JSON object")
		}
		var spec string
		if !isJSONString(raw) || json.Unmarshal(raw, &spec) != nil {
			return nil, malformed(orig, "the value of %q must be a string, got %s", rawKey, compact(raw))
		}
		key := strings.TrimPrefix(rawKey, "capabilities:")
		if key == "" {
			return nil, malformed(orig, "empty key %q", rawKey)
		}
		if seen[key] {
			return nil, malformed(orig, "key %q given twice", key)
		}
		seen[key] = true
		c, err := parseSpec(orig, key, spec)
		if err != nil {
			return nil, err
		}
		q.Clauses = append(q.Clauses, c)
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, malformed(orig, "expected a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed(orig, "trailing data after the object")
	}
	return q, nil
}

// parseSpec reads one Nova extra-spec value: "<op> value" or a bare value.
func parseSpec(orig, key, spec string) (Clause, error) {
	s := strings.TrimSpace(spec)
	word, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	var op Op
	switch {
	case word == "=":
		op = OpGe // Nova: "=" is "equal to or greater than as a number"
	case word == "<or>":
		op = OpOr
	default:
		if o, ok := blazarOps[word]; ok {
			op = o
		} else if o, ok := extOps[word]; ok {
			op = o
		}
	}
	if op == "" {
		if s == "" {
			return Clause{}, malformed(orig, "the value for %s must not be empty", key)
		}
		return Clause{Key: key, Op: OpSEq, Values: []string{s}}, nil
	}
	if op == OpOr {
		var vals []string
		for _, part := range strings.Split(rest, "<or>") {
			v := strings.TrimSpace(part)
			if v == "" {
				return Clause{}, malformed(orig, "empty alternative in %q for %s", spec, key)
			}
			vals = append(vals, v)
		}
		return Clause{Key: key, Op: OpOr, Values: vals}, nil
	}
	if rest == "" {
		return Clause{}, malformed(orig, "operator %q for %s needs a value", word, key)
	}
	return Clause{Key: key, Op: op, Values: []string{rest}}, nil
}

// String renders q in the canonical array form: "" for no constraint,
// [op, "$key", "value"] for one clause, ["and", ...] otherwise.
func (q *Query) String() string {
	if q.Empty() {
		return ""
	}
	clause := func(c Clause) []string {
		return append([]string{string(c.Op), "$" + c.Key}, c.Values...)
	}
	var v any
	if len(q.Clauses) == 1 {
		v = clause(q.Clauses[0])
	} else {
		all := []any{"and"}
		for _, c := range q.Clauses {
			all = append(all, clause(c))
		}
		v = all
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings only: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// Match reports whether every clause holds for the values get returns.
// When a clause fails, reason names it and the host's value, for example
// "vcpus >= 4 (host has 2)" or "gpu s== a100 (host has no gpu)".
func (q *Query) Match(get func(key string) (string, bool)) (ok bool, reason string) {
	if q == nil {
		return true, ""
	}
	for _, c := range q.Clauses {
		v, present := get(c.Key)
		if isNull(c) {
			if (c.Op == OpEq) != present {
				continue
			}
			if present {
				return false, fmt.Sprintf("%s (host has %s)", c, v)
			}
			return false, fmt.Sprintf("%s (host has no %s)", c, c.Key)
		}
		if !present {
			return false, fmt.Sprintf("%s (host has no %s)", c, c.Key)
		}
		if !c.holds(v) {
			return false, fmt.Sprintf("%s (host has %s)", c, v)
		}
	}
	return true, ""
}

func isNull(c Clause) bool {
	return (c.Op == OpEq || c.Op == OpNe) && len(c.Values) == 1 && c.Values[0] == "null"
}

func number(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// compare returns -1, 0 or 1, numerically when both parse as numbers.
func compare(a, b string) int {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(a, b)
}

func (c Clause) holds(v string) bool {
	want := c.Values[0]
	switch c.Op {
	case OpEq:
		return compare(v, want) == 0
	case OpNe:
		return compare(v, want) != 0
	case OpGe:
		return compare(v, want) >= 0
	case OpLe:
		return compare(v, want) <= 0
	case OpGt:
		return compare(v, want) > 0
	case OpLt:
		return compare(v, want) < 0
	case OpSEq:
		return v == want
	case OpSNe:
		return v != want
	case OpSGe:
		return v >= want
	case OpSGt:
		return v > want
	case OpSLe:
		return v <= want
	case OpSLt:
		return v < want
	case OpIn:
		return strings.Contains(v, want)
	case OpOr:
		for _, w := range c.Values {
			if v == w {
				return true
			}
		}
		return false
	}
	return false
}
