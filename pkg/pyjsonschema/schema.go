package pyjsonschema

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	root *node
	raw  Value
	refs map[string]*node
}

// node is one (sub)schema: either a boolean schema or an object whose
// keywords are kept in document order.
type node struct {
	raw    Value
	isBool bool
	boolv  bool
	kws    []*keyword
}

type namedNode struct {
	name string
	re   *regexp.Regexp // patternProperties only
	n    *node
}

type keyword struct {
	name  string
	value Value
	fn    kwFunc

	sub   *node       // single subschema keywords
	subs  []*node     // allOf/anyOf/oneOf/prefixItems
	named []namedNode // properties/patternProperties/dependentSchemas
	re    *regexp.Regexp
	types []string
	strs  []string
	deps  map[string][]string
	ref   string
}

var simpleTypes = map[string]bool{"array": true, "boolean": true, "integer": true, "null": true, "number": true, "object": true, "string": true}

// MustCompile is like Compile but panics on error. Use it for the static
// schemas of the API.
func MustCompile(schemaJSON string) *Schema {
	s, err := Compile(schemaJSON)
	if err != nil {
		panic(err)
	}
	return s
}

// Compile parses a schema written as JSON text. Key order in the text is
// significant and preserved (Python dicts keep insertion order and
// iter_errors walks keywords, properties and patternProperties in that
// order). The schema is interpreted as Draft 2020-12, which is what
// jsonschema 4.10.3 uses for a schema without "$schema".
func Compile(schemaJSON string) (*Schema, error) {
	raw, err := Decode([]byte(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("pyjsonschema: schema is not JSON: %w", err)
	}
	return CompileValue(raw)
}

// CompileValue compiles an already decoded schema.
func CompileValue(raw Value) (*Schema, error) {
	if raw.kind == ObjectKind {
		if sv, ok := raw.Get("$schema"); ok {
			str, _ := sv.AsString()
			if !strings.Contains(str, "2020-12") {
				return nil, fmt.Errorf("pyjsonschema: only Draft 2020-12 semantics are implemented, got $schema %q", str)
			}
		}
	}
	s := &Schema{raw: raw, refs: map[string]*node{}}
	root, err := s.compile(raw, "#")
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

// Raw returns the decoded schema document.
func (s *Schema) Raw() Value { return s.raw }

func schemaErr(loc, format string, args ...any) error {
	return fmt.Errorf("pyjsonschema: invalid schema at %s: %s", loc, fmt.Sprintf(format, args...))
}

func isNonNegInt(v Value) bool {
	if v.kind != NumberKind || !isType(v, "integer") {
		return false
	}
	c, ok := cmpNum(v, Int(0))
	return ok && c >= 0
}

func (s *Schema) compile(raw Value, loc string) (*node, error) {
	switch raw.kind {
	case BoolKind:
		return &node{raw: raw, isBool: true, boolv: raw.b}, nil
	case ObjectKind:
	default:
		return nil, schemaErr(loc, "a schema must be an object or a boolean, got %s", raw.Repr())
	}
	n := &node{raw: raw}
	for _, m := range raw.obj.members {
		k := &keyword{name: m.Key, value: m.Value}
		kloc := loc + "/" + m.Key
		v := m.Value
		var err error
		sub := func() {
			k.sub, err = s.compile(v, kloc)
		}
		subList := func() {
			if v.kind != ArrayKind || (len(v.arr) == 0 && k.name != "prefixItems") {
				err = schemaErr(kloc, "must be a non-empty array of schemas")
				return
			}
			for i, e := range v.arr {
				var c *node
				if c, err = s.compile(e, kloc+"/"+strconv.Itoa(i)); err != nil {
					return
				}
				k.subs = append(k.subs, c)
			}
		}
		named := func(withRe bool) {
			if v.kind != ObjectKind {
				err = schemaErr(kloc, "must be an object")
				return
			}
			for _, pm := range v.obj.members {
				nn := namedNode{name: pm.Key}
				if withRe {
					if nn.re, err = compilePyRegex(pm.Key); err != nil {
						err = schemaErr(kloc, "unsupported regex %q: %v", pm.Key, err)
						return
					}
				}
				if nn.n, err = s.compile(pm.Value, kloc+"/"+pm.Key); err != nil {
					return
				}
				k.named = append(k.named, nn)
			}
		}
		nonNeg := func() {
			if !isNonNegInt(v) {
				err = schemaErr(kloc, "must be a non-negative integer")
			}
		}
		number := func() {
			if v.kind != NumberKind {
				err = schemaErr(kloc, "must be a number")
			}
		}
		switch m.Key {
		case "type":
			k.fn = kwType
			switch v.kind {
			case StringKind:
				k.types = []string{v.s}
			case ArrayKind:
				if len(v.arr) == 0 {
					err = schemaErr(kloc, "must not be empty")
				}
				for _, t := range v.arr {
					k.types = append(k.types, t.s)
					if t.kind != StringKind {
						err = schemaErr(kloc, "must be a type name or a list of them")
					}
				}
			default:
				err = schemaErr(kloc, "must be a type name or a list of them")
			}
			for _, t := range k.types {
				if !simpleTypes[t] {
					err = schemaErr(kloc, "unknown type %q", t)
				}
			}
		case "properties":
			k.fn = kwProperties
			named(false)
		case "patternProperties":
			k.fn = kwPatternProperties
			named(true)
		case "additionalProperties":
			k.fn = kwAdditionalProperties
			sub()
			// the patterns of the sibling patternProperties are needed
			if pp, ok := raw.Get("patternProperties"); ok && pp.kind == ObjectKind {
				for _, pm := range pp.obj.members {
					re, rerr := compilePyRegex(pm.Key)
					if rerr != nil {
						err = schemaErr(kloc, "unsupported regex %q: %v", pm.Key, rerr)
						break
					}
					k.named = append(k.named, namedNode{name: pm.Key, re: re})
				}
			}
		case "required":
			k.fn = kwRequired
			k.strs, err = stringList(v, kloc)
		case "dependentRequired":
			k.fn = kwDependentRequired
			if v.kind != ObjectKind {
				err = schemaErr(kloc, "must be an object")
				break
			}
			k.deps = map[string][]string{}
			for _, pm := range v.obj.members {
				k.strs = append(k.strs, pm.Key)
				if k.deps[pm.Key], err = stringList(pm.Value, kloc+"/"+pm.Key); err != nil {
					break
				}
			}
		case "dependentSchemas":
			k.fn = kwDependentSchemas
			named(false)
		case "minProperties", "maxProperties", "minLength", "maxLength", "minItems", "maxItems":
			k.fn = kwLimit
			nonNeg()
		case "minContains", "maxContains":
			nonNeg() // read by "contains"
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			k.fn = kwNumLimit
			number()
		case "multipleOf":
			k.fn = kwMultipleOf
			number()
			if c, ok := cmpNum(v, Int(0)); err == nil && (!ok || c <= 0) {
				err = schemaErr(kloc, "must be > 0")
			}
		case "pattern":
			k.fn = kwPattern
			if v.kind != StringKind {
				err = schemaErr(kloc, "must be a string")
				break
			}
			if k.re, err = compilePyRegex(v.s); err != nil {
				err = schemaErr(kloc, "unsupported regex %q: %v", v.s, err)
			}
		case "format":
			k.fn = kwFormat
			if v.kind != StringKind {
				err = schemaErr(kloc, "must be a string")
			}
		case "enum":
			k.fn = kwEnum
			if v.kind != ArrayKind {
				err = schemaErr(kloc, "must be an array")
			}
		case "const":
			k.fn = kwConst
		case "items":
			k.fn = kwItems
			sub()
		case "prefixItems":
			k.fn = kwPrefixItems
			subList()
		case "contains":
			k.fn = kwContains
			sub()
		case "uniqueItems":
			k.fn = kwUniqueItems
			if v.kind != BoolKind {
				err = schemaErr(kloc, "must be a boolean")
			}
		case "allOf", "anyOf", "oneOf":
			k.fn = map[string]kwFunc{"allOf": kwAllOf, "anyOf": kwAnyOf, "oneOf": kwOneOf}[m.Key]
			subList()
		case "not":
			k.fn = kwNot
			sub()
		case "propertyNames":
			k.fn = kwPropertyNames
			sub()
		case "if":
			k.fn = kwIf
			sub()
		case "then", "else":
			// not validators themselves; compiled for "if"
			sub()
		case "$ref":
			k.fn = kwRef
			if v.kind != StringKind {
				err = schemaErr(kloc, "must be a string")
				break
			}
			k.ref = v.s
			_, err = s.resolve(v.s, kloc)
		case "$dynamicRef", "additionalItems", "unevaluatedItems", "unevaluatedProperties":
			err = schemaErr(kloc, "keyword %q is not implemented", m.Key)
		case "$defs", "definitions":
			// compiled on demand by $ref
		}
		if err != nil {
			return nil, err
		}
		if k.fn != nil || k.sub != nil {
			n.kws = append(n.kws, k)
		}
	}
	return n, nil
}

func stringList(v Value, loc string) ([]string, error) {
	if v.kind != ArrayKind {
		return nil, schemaErr(loc, "must be an array of strings")
	}
	out := make([]string, 0, len(v.arr))
	for _, e := range v.arr {
		if e.kind != StringKind {
			return nil, schemaErr(loc, "must be an array of strings")
		}
		out = append(out, e.s)
	}
	return out, nil
}

// resolve compiles the target of a local $ref ("#" or "#/json/pointer").
func (s *Schema) resolve(ref, loc string) (*node, error) {
	if n, ok := s.refs[ref]; ok {
		return n, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, schemaErr(loc, "only local $ref is supported, got %q", ref)
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, schemaErr(loc, "bad $ref %q", ref)
	}
	target := s.raw
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return nil, schemaErr(loc, "unsupported $ref %q", ref)
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch target.kind {
			case ObjectKind:
				t, ok := target.Get(tok)
				if !ok {
					return nil, schemaErr(loc, "unresolvable $ref %q", ref)
				}
				target = t
			case ArrayKind:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(target.arr) {
					return nil, schemaErr(loc, "unresolvable $ref %q", ref)
				}
				target = target.arr[i]
			default:
				return nil, schemaErr(loc, "unresolvable $ref %q", ref)
			}
		}
	}
	placeholder := &node{}
	s.refs[ref] = placeholder
	n, err := s.compile(target, ref)
	if err != nil {
		delete(s.refs, ref)
		return nil, err
	}
	*placeholder = *n
	return placeholder, nil
}
