package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sync"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/pyjsonschema"
)

// Request bodies and query strings are validated as Placement does, with
// Python's jsonschema (reproduced by pkg/pyjsonschema, error text and
// all). Schemas are written as JSON text in upstream's key order (Python
// dicts keep insertion order, and that order decides which error is
// reported) and compiled once per distinct text.

// compiledSchemas caches *pyjsonschema.Schema by schema text.
var compiledSchemas sync.Map

// compileSchema returns the compiled schema for text, compiling it on
// first use. A schema that does not compile is a programming error.
func compileSchema(text string) *pyjsonschema.Schema {
	if s, ok := compiledSchemas.Load(text); ok {
		return s.(*pyjsonschema.Schema)
	}
	s, err := pyjsonschema.Compile(text)
	if err != nil {
		panic(fmt.Sprintf("placement: bad schema: %v\n%s", err, text))
	}
	actual, _ := compiledSchemas.LoadOrStore(text, s)
	return actual.(*pyjsonschema.Schema)
}

// readJSONValue reads the body under Placement's content rules, parses it
// as Python's json does ("Malformed JSON: …") and validates it against
// schema ("JSON does not validate: …"; util.extract_json).
func readJSONValue(r *http.Request, schema string) (pyjsonschema.Value, []byte, error) {
	body, err := readBody(r)
	if err != nil {
		return pyjsonschema.Value{}, nil, err
	}
	v, err := validateJSONBytes(body, schema)
	return v, body, err
}

// validateJSONBytes is util.extract_json on an already read body.
func validateJSONBytes(body []byte, schema string) (pyjsonschema.Value, error) {
	v, err := pyjsonschema.Decode(body)
	if err != nil {
		return v, errOf(errs.BadRequest, "Malformed JSON: "+err.Error())
	}
	sch := compileSchema(schema)
	checked := v
	if fixed, changed := uuidFormatFix(sch.Raw(), v); changed {
		checked = fixed
	}
	if verr := sch.Validate(checked); verr != nil {
		return v, errOf(errs.BadRequest, "JSON does not validate: "+verr.Error())
	}
	if verr := uuidFormatViolation(sch.Raw(), v, nil, nil); verr != nil {
		return v, errOf(errs.BadRequest, "JSON does not validate: "+verr.Error())
	}
	return v, nil
}

// decodeBody reads a JSON body under Placement's content rules, validates
// it against schema and decodes it into dst (numbers may be integral
// floats such as 1.0, which JSON Schema's "integer" accepts). It also
// returns the top-level members, so callers can tell an absent key from a
// null one.
func decodeBody(r *http.Request, schema string, dst any) (map[string]json.RawMessage, error) {
	v, body, err := readJSONValue(r, schema)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw) // may be a non-object; schema decided
	if dst != nil && plainNumbers(v) {
		// Every number is a plain integer or decimal literal that Go
		// reads as Python does: decode the body itself (the common case,
		// and a third of the work of re-encoding it).
		if err := json.Unmarshal(body, dst); err == nil {
			return raw, nil
		}
		// Let the general path report the error, from a clean dst.
		reflect.ValueOf(dst).Elem().SetZero()
	}
	if dst != nil {
		// Re-encode the validated value: integral floats become integers
		// where dst wants them, duplicate keys are already resolved.
		norm, err := json.Marshal(normalizeNumbers(v.Interface()))
		if err != nil {
			return nil, errOf(errs.BadRequest, "JSON does not validate: "+err.Error())
		}
		dec := json.NewDecoder(bytes.NewReader(norm))
		if err := dec.Decode(dst); err != nil {
			return nil, errOf(errs.BadRequest, "JSON does not validate: "+err.Error())
		}
	}
	return raw, nil
}

// plainNumbers reports whether normalizeNumbers would leave every number
// in v as it is (no integral float literal such as 1.0 or 1e3).
func plainNumbers(v pyjsonschema.Value) bool {
	switch v.Kind() {
	case pyjsonschema.NumberKind:
		lit, _ := v.NumberLiteral()
		n := json.Number(lit)
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return !(err == nil && f == float64(int64(f)) && f >= -9.2e18 && f <= 9.2e18)
	case pyjsonschema.ArrayKind:
		for _, e := range v.Items() {
			if !plainNumbers(e) {
				return false
			}
		}
	case pyjsonschema.ObjectKind:
		for _, m := range v.Members() {
			if !plainNumbers(m.Value) {
				return false
			}
		}
	}
	return true
}

// normalizeNumbers rewrites integral float literals (1.0, 1e3) as integers
// so that they decode into Go integer fields, as Python accepts them.
func normalizeNumbers(x any) any {
	switch t := x.(type) {
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return t
		}
		if f, err := t.Float64(); err == nil && f == float64(int64(f)) && f >= -9.2e18 && f <= 9.2e18 {
			return json.Number(fmt.Sprintf("%d", int64(f)))
		}
		return t
	case []any:
		for i := range t {
			t[i] = normalizeNumbers(t[i])
		}
		return t
	case map[string]any:
		for k := range t {
			t[k] = normalizeNumbers(t[k])
		}
		return t
	}
	return x
}

// validateQuery parses the query string as WebOb does and validates
// dict(req.GET) against schema (util.validate_query_params): failures,
// including undecodable bytes, are 400 "Invalid query string parameters:
// …".
func validateQuery(r *http.Request, schema string) (*placement.Query, error) {
	q, err := placement.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errOf(errs.BadRequest, "Invalid query string parameters: "+err.Error())
	}
	sch := compileSchema(schema)
	inst := pyjsonschema.QueryValue(q.Items())
	if fixed, changed := uuidFormatFix(sch.Raw(), inst); changed {
		inst = fixed
	}
	if verr := sch.Validate(inst); verr != nil {
		return nil, errOf(errs.BadRequest, "Invalid query string parameters: "+verr.Error())
	}
	if verr := uuidFormatViolation(sch.Raw(), pyjsonschema.QueryValue(q.Items()), nil, nil); verr != nil {
		return nil, errOf(errs.BadRequest, "Invalid query string parameters: "+verr.Error())
	}
	return q, nil
}

// ---- resource providers (placement/schemas/resource_provider.py) ----

const (
	schemaPostProvider = `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "uuid": {"type": "string", "format": "uuid"}}, "required": ["name"], "additionalProperties": false}`
	schemaPutProvider = `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200}},
 "required": ["name"], "additionalProperties": false}`
	schemaPostProvider1_14 = `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "uuid": {"type": "string", "format": "uuid"},
 "parent_provider_uuid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
 "required": ["name"], "additionalProperties": false}`
	schemaPutProvider1_14 = `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "parent_provider_uuid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
 "required": ["name"], "additionalProperties": false}`
)

func schemaCreateProvider(mv microversion.Version) string {
	if mv.AtLeast(1, 14) {
		return schemaPostProvider1_14
	}
	return schemaPostProvider
}

func schemaUpdateProvider(mv microversion.Version) string {
	if mv.AtLeast(1, 14) {
		return schemaPutProvider1_14
	}
	return schemaPutProvider
}

// schemaListProviders is GET_RPS_SCHEMA_1_x: the query parameters each
// microversion allows.
func schemaListProviders(mv microversion.Version) string {
	props := `"name": {"type": "string"}, "uuid": {"type": "string", "format": "uuid"}`
	if mv.AtLeast(1, 3) {
		props += `, "member_of": {"type": "string"}`
	}
	if mv.AtLeast(1, 4) {
		props += `, "resources": {"type": "string"}`
	}
	if mv.AtLeast(1, 14) {
		props += `, "in_tree": {"type": "string", "format": "uuid"}`
	}
	if mv.AtLeast(1, 18) {
		props += `, "required": {"type": "string"}`
	}
	return `{"type": "object", "properties": {` + props + `}, "additionalProperties": false}`
}

// ---- inventories (placement/schemas/inventory.py) ----

// inventoryProps are BASE_INVENTORY_SCHEMA's properties.
const inventoryProps = `"resource_provider_generation": {"type": "integer"},
 "total": {"type": "integer", "maximum": 2147483647, "minimum": 1},
 "reserved": {"type": "integer", "maximum": 2147483647, "minimum": 0},
 "min_unit": {"type": "integer", "maximum": 2147483647, "minimum": 1},
 "max_unit": {"type": "integer", "maximum": 2147483647, "minimum": 1},
 "step_size": {"type": "integer", "maximum": 2147483647, "minimum": 1},
 "allocation_ratio": {"type": "number", "maximum": 3.40282e+38}`

const (
	// schemaPutInventory is BASE_INVENTORY_SCHEMA (PUT …/inventories/{rc}).
	schemaPutInventory = `{"type": "object", "properties": {` + inventoryProps + `},
 "required": ["total", "resource_provider_generation"], "additionalProperties": false}`
	// schemaPostInventory is POST_INVENTORY_SCHEMA.
	schemaPostInventory = `{"type": "object", "properties": {` + inventoryProps + `,
 "resource_class": {"type": "string", "pattern": "^[A-Z0-9_]+$"}},
 "required": ["total", "resource_class"], "additionalProperties": false}`
	// schemaPutInventories is PUT_INVENTORY_SCHEMA.
	schemaPutInventories = `{"type": "object", "properties": {"resource_provider_generation": {"type": "integer"},
 "inventories": {"type": "object", "patternProperties": {"^[A-Z0-9_]+$": {"type": "object", "properties": {` + inventoryProps + `},
 "required": ["total"], "additionalProperties": false}}}},
 "required": ["resource_provider_generation", "inventories"], "additionalProperties": false}`
)

// ---- resource classes (placement/schemas/resource_class.py) ----

const schemaResourceClass = `{"type": "object", "properties": {"name": {"type": "string",
 "pattern": "^CUSTOM_[A-Z0-9_]+$", "maxLength": 255}}, "required": ["name"], "additionalProperties": false}`

// ---- traits (placement/schemas/trait.py) ----

const (
	schemaCustomTrait = `{"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^CUSTOM_[A-Z0-9_]+$"}`
	schemaSetTraits   = `{"type": "object", "properties": {"traits": {"type": "array",
 "items": {"type": "string", "minLength": 1, "maxLength": 255}},
 "resource_provider_generation": {"type": "integer"}},
 "required": ["traits", "resource_provider_generation"], "additionalProperties": false}`
	schemaListTraits = `{"type": "object", "properties": {"name": {"type": "string"},
 "associated": {"type": "string"}}, "additionalProperties": false}`
)

// ---- aggregates (placement/schemas/aggregate.py) ----

const (
	schemaAggregateList     = `{"type": "array", "items": {"type": "string", "format": "uuid"}, "uniqueItems": true}`
	schemaPutAggregates1_19 = `{"type": "object", "properties": {"aggregates": ` + schemaAggregateList + `,
 "resource_provider_generation": {"type": "integer"}},
 "required": ["aggregates", "resource_provider_generation"], "additionalProperties": false}`
)

// ---- the "uuid" format ----
//
// Placement registers its own "uuid" format check
// (oslo_utils.uuidutils.is_uuid_like: any 32 hex digits, hyphens
// anywhere, braces, "urn:uuid:") over jsonschema's built-in one (hyphens
// at 8, 13, 18 and 23), which is what pyjsonschema implements. Before
// validation, strings in "format": "uuid" positions that Placement accepts
// but the built-in check would reject are replaced by their canonical
// form, so the verdict is Placement's. The original value is what callers
// get.

// uuidFormatFix returns inst with such strings canonicalised (and whether
// anything changed), following properties, patternProperties,
// additionalProperties, items and the anyOf/oneOf/allOf branches of
// schema.
func uuidFormatFix(schema, inst pyjsonschema.Value) (pyjsonschema.Value, bool) {
	if schema.Kind() != pyjsonschema.ObjectKind {
		return inst, false
	}
	changed := false
	if f, ok := schema.Get("format"); ok {
		if name, _ := f.AsString(); name == "uuid" {
			if s, ok := inst.AsString(); ok && placement.IsUUIDLike(s) && !isHyphenatedUUID(s) {
				inst, changed = pyjsonschema.String(placement.CanonicalUUID(s)), true
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		if branches, ok := schema.Get(kw); ok {
			for _, b := range branches.Items() {
				if v, c := uuidFormatFix(b, inst); c {
					inst, changed = v, true
				}
			}
		}
	}
	switch inst.Kind() {
	case pyjsonschema.ObjectKind:
		props, _ := schema.Get("properties")
		pats, _ := schema.Get("patternProperties")
		addl, hasAddl := schema.Get("additionalProperties")
		members := inst.Members()
		var out []pyjsonschema.Member
		for i, m := range members {
			nv, c := m.Value, false
			matched := false
			if sub, ok := props.Get(m.Key); ok {
				matched = true
				if v, cc := uuidFormatFix(sub, nv); cc {
					nv, c = v, true
				}
			}
			for _, pm := range pats.Members() {
				re, err := compilePyRegexp(pm.Key)
				if err != nil || !re.MatchString(m.Key) {
					continue
				}
				matched = true
				if v, cc := uuidFormatFix(pm.Value, nv); cc {
					nv, c = v, true
				}
			}
			if !matched && hasAddl {
				if v, cc := uuidFormatFix(addl, nv); cc {
					nv, c = v, true
				}
			}
			if c {
				if out == nil {
					out = append([]pyjsonschema.Member{}, members...)
				}
				out[i].Value = nv
			}
		}
		if out != nil {
			inst, changed = pyjsonschema.Object(out...), true
		}
	case pyjsonschema.ArrayKind:
		if items, ok := schema.Get("items"); ok {
			elems := inst.Items()
			var out []pyjsonschema.Value
			for i, e := range elems {
				if v, c := uuidFormatFix(items, e); c {
					if out == nil {
						out = append([]pyjsonschema.Value{}, elems...)
					}
					out[i] = v
				}
			}
			if out != nil {
				inst, changed = pyjsonschema.Array(out...), true
			}
		}
	}
	return inst, changed
}

// isHyphenatedUUID reports the 8-4-4-4-12 form jsonschema's own check
// wants (for a string that is already uuid-like).
func isHyphenatedUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if s[i] == '-' || s[i] > 0x7f {
				return false
			}
		}
	}
	return true
}

var pyRegexps sync.Map

// compilePyRegexp compiles the (simple, RE2-compatible) patterns of the
// schemas, cached.
func compilePyRegexp(p string) (*regexp.Regexp, error) {
	if re, ok := pyRegexps.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	pyRegexps.Store(p, re)
	return re, nil
}

// uuidFormatViolation finds, in an instance the validator accepted, a
// string in a "format": "uuid" position that Placement's check rejects
// (jsonschema's built-in one accepts a few such strings, e.g. with a
// leading "+" or "0x") and builds the error Python would report for it:
// the format error, or the anyOf error when the format sits in an anyOf
// branch no other branch satisfies.
func uuidFormatViolation(schema, inst pyjsonschema.Value, ipath, spath []any) *pyjsonschema.ValidationError {
	if schema.Kind() != pyjsonschema.ObjectKind {
		return nil
	}
	if f, ok := schema.Get("format"); ok {
		if name, _ := f.AsString(); name == "uuid" {
			if s, ok := inst.AsString(); ok && !placement.IsUUIDLike(s) {
				return &pyjsonschema.ValidationError{
					Message: inst.Repr() + " is not a 'uuid'", Validator: "format", ValidatorValue: f,
					Path: ipath, SchemaPath: appendPath(spath, "format"), AbsolutePath: ipath,
					AbsoluteSchemaPath: appendPath(spath, "format"), Instance: inst, Schema: schema,
				}
			}
		}
	}
	if branches, ok := schema.Get("anyOf"); ok {
		items := branches.Items()
		for i, b := range items {
			// best_match descends into the anyOf's context and picks the
			// branch whose type matches the instance: the format error,
			// with paths relative to the anyOf.
			berr := uuidFormatViolation(b, inst, nil, []any{i})
			if berr == nil {
				continue
			}
			others := false
			for j, o := range items {
				if j != i {
					if cs, err := pyjsonschema.CompileValue(o); err == nil && cs.IsValid(inst) {
						others = true
					}
				}
			}
			if !others {
				berr.AbsolutePath = appendPath(ipath, berr.Path...)
				berr.AbsoluteSchemaPath = appendPath(appendPath(spath, "anyOf"), berr.SchemaPath...)
				return berr
			}
		}
	}
	switch inst.Kind() {
	case pyjsonschema.ObjectKind:
		props, _ := schema.Get("properties")
		pats, _ := schema.Get("patternProperties")
		for _, m := range inst.Members() {
			if sub, ok := props.Get(m.Key); ok {
				if e := uuidFormatViolation(sub, m.Value, appendPath(ipath, m.Key), appendPath(spath, "properties", m.Key)); e != nil {
					return e
				}
			}
			for _, pm := range pats.Members() {
				if re, err := compilePyRegexp(pm.Key); err == nil && re.MatchString(m.Key) {
					if e := uuidFormatViolation(pm.Value, m.Value, appendPath(ipath, m.Key), appendPath(spath, "patternProperties", pm.Key)); e != nil {
						return e
					}
				}
			}
		}
	case pyjsonschema.ArrayKind:
		if items, ok := schema.Get("items"); ok {
			for i, e := range inst.Items() {
				if v := uuidFormatViolation(items, e, appendPath(ipath, i), appendPath(spath, "items")); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

func appendPath(p []any, more ...any) []any {
	return append(append([]any{}, p...), more...)
}
