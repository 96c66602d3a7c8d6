package pyjsonschema

import (
	"strconv"
	"strings"
)

// ValidationError mirrors jsonschema.exceptions.ValidationError.
type ValidationError struct {
	// Message is error.message, e.g. "'resources' is a required property".
	Message string
	// Validator is the failing keyword ("" when Python's is None, which
	// only happens for the false schema).
	Validator      string
	ValidatorValue Value
	// Path and SchemaPath are relative_path and relative_schema_path
	// (what str() shows). For an error picked from an anyOf/oneOf context
	// they are relative to the parent error; see AbsolutePath.
	Path       []any // elements are string (keys) or int (indices)
	SchemaPath []any
	// AbsolutePath and AbsoluteSchemaPath include the parents' paths.
	AbsolutePath       []any
	AbsoluteSchemaPath []any
	Instance           Value
	Schema             Value // the (sub)schema holding the failing keyword
	Context            []*ValidationError
	Parent             *ValidationError
}

// Error returns exactly Python's str(ValidationError).
func (e *ValidationError) Error() string {
	validator := "None"
	if e.Validator != "" {
		validator = pyStrRepr(e.Validator)
	}
	sp := e.SchemaPath
	if len(sp) > 0 {
		sp = sp[:len(sp)-1]
	}
	var b strings.Builder
	b.WriteString(e.Message)
	b.WriteString("\n\nFailed validating ")
	b.WriteString(validator)
	b.WriteString(" in ")
	b.WriteString(formatAsIndex("schema", sp))
	b.WriteString(":\n    ")
	b.WriteString(indentLines(pformat(e.Schema)))
	b.WriteString("\n\nOn ")
	b.WriteString(formatAsIndex("instance", e.Path))
	b.WriteString(":\n    ")
	b.WriteString(indentLines(pformat(e.Instance)))
	return dedentLike(b.String())
}

// dedentLike applies the parts of textwrap.dedent/rstrip that can matter:
// whitespace-only lines become empty and trailing whitespace is removed.
func dedentLike(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimLeft(l, " \t") == "" {
			lines[i] = ""
		}
	}
	return strings.TrimRight(strings.Join(lines, "\n"), " \t\n\r\x0b\x0c")
}

func indentLines(s string) string {
	return strings.ReplaceAll(s, "\n", "\n    ")
}

// formatAsIndex is jsonschema._utils.format_as_index.
func formatAsIndex(container string, indices []any) string {
	if len(indices) == 0 {
		return container
	}
	var b strings.Builder
	b.WriteString(container)
	for _, ix := range indices {
		b.WriteByte('[')
		switch x := ix.(type) {
		case string:
			b.WriteString(pyStrRepr(x))
		case int:
			b.WriteString(strconv.Itoa(x))
		}
		b.WriteByte(']')
	}
	return b.String()
}

// ---- best_match ----

type relevanceKey [3]int

// relevance is jsonschema.exceptions.relevance:
// (-len(path), validator not in weak, validator in strong, not matches_type).
func relevance(e *verr) relevanceKey {
	weak := e.validator == "anyOf" || e.validator == "oneOf"
	k := relevanceKey{-len(e.pathRev), 1, 0}
	if weak && !e.validatorNone {
		k[1] = 0
	}
	if !matchesType(e) {
		k[2] = 1
	}
	return k
}

func (a relevanceKey) less(b relevanceKey) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func matchesType(e *verr) bool {
	if e.schema == nil || e.schema.isBool {
		return false
	}
	t, ok := e.schema.raw.Get("type")
	if !ok {
		return false
	}
	if t.kind == StringKind {
		return isType(e.instance, t.s)
	}
	for _, x := range t.arr {
		if isType(e.instance, x.s) {
			return true
		}
	}
	return false
}

// bestMatch is jsonschema.exceptions.best_match. It returns the chosen error
// and its parents (outermost first).
func bestMatch(errs []*verr) (*verr, []*verr) {
	if len(errs) == 0 {
		return nil, nil
	}
	best := errs[0]
	bk := relevance(best)
	for _, e := range errs[1:] {
		if k := relevance(e); bk.less(k) {
			best, bk = e, k
		}
	}
	var parents []*verr
	for len(best.context) > 0 {
		// heapq.nsmallest(2, context, key): stable, so the first minimal
		// element; stop if at least two share the minimal key.
		min := best.context[0]
		mk := relevance(min)
		count := 1
		for _, e := range best.context[1:] {
			k := relevance(e)
			switch {
			case k.less(mk):
				min, mk, count = e, k, 1
			case k == mk:
				count++
			}
		}
		if count >= 2 {
			return best, parents
		}
		parents = append(parents, best)
		best = min
	}
	return best, parents
}

func reversed(xs []any) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return out
}

func (e *verr) export(parent *ValidationError) *ValidationError {
	out := &ValidationError{
		Message:        e.message,
		Validator:      e.validator,
		ValidatorValue: e.validatorValue,
		Path:           reversed(e.pathRev),
		SchemaPath:     reversed(e.schemaPathRev),
		Instance:       e.instance,
		Parent:         parent,
	}
	if e.validatorNone {
		out.Validator = ""
	}
	if e.schema != nil {
		out.Schema = e.schema.raw
	}
	if parent != nil {
		out.AbsolutePath = append(append([]any{}, parent.AbsolutePath...), out.Path...)
		out.AbsoluteSchemaPath = append(append([]any{}, parent.AbsoluteSchemaPath...), out.SchemaPath...)
	} else {
		out.AbsolutePath, out.AbsoluteSchemaPath = out.Path, out.SchemaPath
	}
	for _, c := range e.context {
		out.Context = append(out.Context, c.export(out))
	}
	return out
}

// ---- entry points ----

// Validate is jsonschema.validate(instance, schema,
// format_checker=FormatChecker()): it returns nil when v is valid, else the
// error best_match picks.
func (s *Schema) Validate(v Value) *ValidationError {
	errs := s.iterErrors(v)
	if len(errs) == 0 {
		return nil
	}
	return s.pick(errs)
}

func (s *Schema) pick(errs []*verr) *ValidationError {
	best, parents := bestMatch(errs)
	if len(parents) == 0 {
		return best.export(nil)
	}
	// Export the outermost parent (with its whole context tree) and walk
	// down to the twin of best, so Parent and Absolute* are populated.
	cur, curV := parents[0].export(nil), parents[0]
	for _, next := range append(parents[1:len(parents):len(parents)], best) {
		for i, c := range curV.context {
			if c == next {
				cur = cur.Context[i]
				break
			}
		}
		curV = next
	}
	return cur
}

// iterErrors returns every error iter_errors yields, in order.
func (s *Schema) iterErrors(v Value) []*verr {
	c := &vctx{s: s}
	var errs []*verr
	c.iter(v, s.root, func(e *verr) bool {
		errs = append(errs, e)
		return true
	})
	return errs
}

// AllErrors returns every error iter_errors yields, in order.
func (s *Schema) AllErrors(v Value) []*ValidationError {
	var out []*ValidationError
	for _, e := range s.iterErrors(v) {
		out = append(out, e.export(nil))
	}
	return out
}

// IsValid reports whether v is valid.
func (s *Schema) IsValid(v Value) bool {
	return (&vctx{s: s}).isValid(v, s.root)
}

// ValidateQuery validates a query string the way Placement does:
// jsonschema.validate(dict(req.GET), ...). params are the (key, value) pairs
// in request order; for a repeated key the last value wins and the key keeps
// its first position.
func (s *Schema) ValidateQuery(params [][2]string) *ValidationError {
	return s.Validate(QueryValue(params))
}

// QueryValue builds the object dict(req.GET) would give for params.
func QueryValue(params [][2]string) Value {
	o := &object{}
	for _, p := range params {
		o.set(p[0], String(p[1]))
	}
	return Value{kind: ObjectKind, obj: o}
}

// DecodeAndValidate mirrors Placement's util.extract_json: it decodes body
// and validates it. The error is a *DecodeError (render it as
// "Malformed JSON: %s") or a *ValidationError (render it as
// "JSON does not validate: %s").
func (s *Schema) DecodeAndValidate(body []byte) (Value, error) {
	v, err := Decode(body)
	if err != nil {
		return Value{}, err
	}
	if verr := s.Validate(v); verr != nil {
		return v, verr
	}
	return v, nil
}
