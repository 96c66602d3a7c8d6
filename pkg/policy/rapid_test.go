package policy

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// node is a generated check-string tree with its own evaluator, written
// independently of the parser: the reference for precedence.
type node struct {
	op   string // "and", "or", "not", or "" for a leaf
	kids []*node
	role string // leaf: role:<role>
}

func (n *node) eval(roles map[string]bool) bool {
	switch n.op {
	case "and":
		return n.kids[0].eval(roles) && n.kids[1].eval(roles)
	case "or":
		return n.kids[0].eval(roles) || n.kids[1].eval(roles)
	case "not":
		return !n.kids[0].eval(roles)
	}
	return roles[n.role]
}

// prec is how tightly an operator binds in oslo.policy: not > and > or.
func prec(op string) int {
	switch op {
	case "or":
		return 1
	case "and":
		return 2
	case "not":
		return 3
	}
	return 4
}

// render writes n with only the parentheses precedence needs (and now
// and then a redundant pair), keywords in random case. and/or are
// associative, so a child of the same operator needs none.
func render(t *rapid.T, n *node, parent int) string {
	var s string
	switch n.op {
	case "":
		s = "role:" + n.role
	case "not":
		s = kw(t, "not") + " " + render(t, n.kids[0], prec("not"))
	default:
		p := prec(n.op)
		s = render(t, n.kids[0], p) + " " + kw(t, n.op) + " " + render(t, n.kids[1], p)
	}
	if prec(n.op) < parent || rapid.IntRange(0, 9).Draw(t, "extra parens") == 0 {
		s = "(" + s + ")"
	}
	return s
}

func kw(t *rapid.T, op string) string {
	switch rapid.IntRange(0, 2).Draw(t, "case") {
	case 1:
		return strings.ToUpper(op)
	case 2:
		return strings.ToUpper(op[:1]) + op[1:]
	}
	return op
}

func genNode(depth int) *rapid.Generator[*node] {
	return rapid.Custom(func(t *rapid.T) *node {
		if depth == 0 || rapid.IntRange(0, 3).Draw(t, "leaf?") == 0 {
			return &node{role: rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "role")}
		}
		op := rapid.SampledFrom([]string{"and", "or", "not"}).Draw(t, "op")
		n := &node{op: op, kids: []*node{genNode(depth-1).Draw(t, "left")}}
		if op != "not" {
			n.kids = append(n.kids, genNode(depth-1).Draw(t, "right"))
		}
		return n
	})
}

// TestParsePrecedenceProperty: a tree written with only the parentheses
// oslo.policy's precedence needs parses to an expression that decides
// every role set as the tree does.
func TestParsePrecedenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tree := genNode(5).Draw(t, "tree")
		text := render(t, tree, 0)
		expr, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		for mask := range 16 {
			roles := map[string]bool{}
			var list []string
			for i, r := range []string{"a", "b", "c", "d"} {
				if mask&(1<<i) != 0 {
					roles[r] = true
					list = append(list, r)
				}
			}
			got := expr.eval(&evalCtx{creds: &Credentials{Roles: list}, roles: list})
			if want := tree.eval(roles); got != want {
				t.Fatalf("%q with roles %v: %v, want %v (parsed as %s)", text, list, got, want, expr)
			}
		}
	})
}
