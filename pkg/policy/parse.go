package policy

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Expr is a parsed check string: a tree of checks joined by and, or and
// not. Its String form parses back to an equivalent tree.
type Expr interface {
	// eval decides the expression; rules resolves rule:NAME references.
	eval(c *evalCtx) bool
	// refs appends the names of the rules the expression references.
	refs(out []string) []string
	String() string
}

// Parse parses an oslo.policy check string. The empty string is "always"
// (as oslo.policy has it); "@" is always, "!" never; a check is
// KIND:MATCH where KIND is rule, role or a credential field (or a Python
// literal) and MATCH may use %(target_key)s substitution. not binds
// tighter than and, and tighter than or; parentheses group.
//
// Unlike oslo.policy, which logs and turns a check string it does not
// understand into "never", Parse reports the error, so that a broken
// policy file stops start-up instead of refusing requests later.
func Parse(s string) (Expr, error) {
	if s == "" {
		return trueExpr{}, nil
	}
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("check string %q is blank", s)
	}
	p := &parser{toks: toks}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %s in %q", p.toks[p.pos], s)
	}
	return e, nil
}

// ParseList parses the legacy list-of-lists form: the outer list is
// or-ed, each inner list and-ed; an empty outer list is always, a list
// of only empty lists never.
func ParseList(rule [][]string) (Expr, error) {
	if len(rule) == 0 {
		return trueExpr{}, nil
	}
	var alts []Expr
	for _, inner := range rule {
		if len(inner) == 0 {
			continue
		}
		var all []Expr
		for _, s := range inner {
			c, err := parseCheck(s)
			if err != nil {
				return nil, err
			}
			all = append(all, c)
		}
		if len(all) == 1 {
			alts = append(alts, all[0])
		} else {
			alts = append(alts, andExpr(all))
		}
	}
	switch len(alts) {
	case 0:
		return falseExpr{}, nil
	case 1:
		return alts[0], nil
	}
	return orExpr(alts), nil
}

type tokKind int

const (
	tokLParen tokKind = iota
	tokRParen
	tokAnd
	tokOr
	tokNot
	tokCheck
)

type token struct {
	kind tokKind
	text string
}

func (t token) String() string {
	if t.kind == tokCheck {
		return fmt.Sprintf("check %q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// tokenize splits s as oslo.policy does: on whitespace, with leading "("
// and trailing ")" of each word split off (a "(" or ")" inside a check,
// as in %(project_id)s, stays part of it).
func tokenize(s string) ([]token, error) {
	var toks []token
	for _, w := range strings.Fields(s) {
		clean := strings.TrimLeft(w, "(")
		for range len(w) - len(clean) {
			toks = append(toks, token{tokLParen, "("})
		}
		if clean == "" {
			continue
		}
		word := strings.TrimRight(clean, ")")
		trail := len(clean) - len(word)
		switch strings.ToLower(word) {
		case "and":
			toks = append(toks, token{tokAnd, word})
		case "or":
			toks = append(toks, token{tokOr, word})
		case "not":
			toks = append(toks, token{tokNot, word})
		case "":
		default:
			if len(clean) >= 2 && (clean[0] == '"' && clean[len(clean)-1] == '"' || clean[0] == '\'' && clean[len(clean)-1] == '\'') {
				return nil, fmt.Errorf("quoted string %s is not a check", clean)
			}
			toks = append(toks, token{tokCheck, word})
		}
		for range trail {
			toks = append(toks, token{tokRParen, ")"})
		}
	}
	return toks, nil
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

// or := and ("or" and)*
func (p *parser) or() (Expr, error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	alts := []Expr{first}
	for {
		t, ok := p.peek()
		if !ok || t.kind != tokOr {
			break
		}
		p.pos++
		e, err := p.and()
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return first, nil
	}
	return orExpr(alts), nil
}

// and := unary ("and" unary)*
func (p *parser) and() (Expr, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	all := []Expr{first}
	for {
		t, ok := p.peek()
		if !ok || t.kind != tokAnd {
			break
		}
		p.pos++
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	if len(all) == 1 {
		return first, nil
	}
	return andExpr(all), nil
}

// unary := "not" unary | "(" or ")" | check
func (p *parser) unary() (Expr, error) {
	t, ok := p.peek()
	if !ok {
		return nil, fmt.Errorf("check string ends where a check was expected")
	}
	p.pos++
	switch t.kind {
	case tokNot:
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notExpr{e}, nil
	case tokLParen:
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if t, ok := p.peek(); !ok || t.kind != tokRParen {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		return e, nil
	case tokCheck:
		return parseCheck(t.text)
	}
	return nil, fmt.Errorf("unexpected %s where a check was expected", t)
}

// formatRE matches Python's %-formatting items a match may hold:
// %(key)s substitutions and %% escapes.
var formatRE = regexp.MustCompile(`%\(([^)]*)\)s|%%`)

// parseCheck parses one check ("@", "!", KIND:MATCH).
func parseCheck(s string) (Expr, error) {
	switch s {
	case "@":
		return trueExpr{}, nil
	case "!":
		return falseExpr{}, nil
	}
	kind, match, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("check %q is not @, ! or KIND:MATCH", s)
	}
	if kind == "" {
		return nil, fmt.Errorf("check %q has no kind before ':'", s)
	}
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return nil, fmt.Errorf("check %q contains white space", s)
	}
	if strings.HasPrefix(s, "(") || strings.HasSuffix(s, ")") {
		// Only reachable from the list form: the text form splits these
		// off as parentheses, so such a check could not be written back.
		return nil, fmt.Errorf("check %q starts with ( or ends with )", s)
	}
	if rest := formatRE.ReplaceAllString(match, ""); strings.Contains(rest, "%") {
		return nil, fmt.Errorf("check %q: only %%(name)s and %%%% may follow %% in %q", s, match)
	}
	switch kind {
	case "rule":
		if match == "" {
			return nil, fmt.Errorf("check %q names no rule", s)
		}
		return ruleCheck{name: match}, nil
	case "role":
		return roleCheck{match: match}, nil
	case "http", "https":
		return nil, fmt.Errorf("check %q: remote %s checks are not supported", s, kind)
	}
	g := genericCheck{kind: kind, match: match}
	if lit, ok := pyLiteral(kind); ok {
		g.literal, g.isLiteral = lit, true
	}
	return g, nil
}

var pyIntRE = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// pyLiteral is the str() of the Python literal s, when s is one of the
// literals oslo.policy's generic check recognises on its left side
// (quoted strings without escapes, True, False, None, integers).
func pyLiteral(s string) (string, bool) {
	switch s {
	case "True", "False", "None":
		return s, true
	}
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		inner := s[1 : len(s)-1]
		if !strings.ContainsAny(inner, `'"\`) {
			return inner, true
		}
		return "", false
	}
	if pyIntRE.MatchString(s) {
		s = strings.TrimPrefix(s, "+")
		if s == "-0" {
			s = "0"
		}
		return s, true
	}
	return "", false
}
