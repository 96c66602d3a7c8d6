package pyjsonschema

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
)

// verr is the internal form of a jsonschema ValidationError. Paths are kept
// reversed so that descend's appendleft is an append.
type verr struct {
	message        string
	validator      string
	validatorNone  bool // Python's validator is None (false schema)
	validatorSet   bool
	validatorValue Value
	instanceSet    bool
	instance       Value
	schema         *node
	pathRev        []any
	schemaPathRev  []any
	context        []*verr
}

// emitFn receives errors; returning false stops the iteration.
type emitFn func(*verr) bool

type kwFunc func(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool

type vctx struct {
	s *Schema
}

func newErr(format string, args ...any) *verr {
	return &verr{message: fmt.Sprintf(format, args...)}
}

// iter is Validator.iter_errors(instance) for the (sub)schema n.
func (c *vctx) iter(inst Value, n *node, emit emitFn) bool {
	if n.isBool {
		if n.boolv {
			return true
		}
		return emit(&verr{
			message:       "False schema does not allow " + inst.Repr(),
			validatorNone: true, validatorSet: true,
			instanceSet: true, instance: inst,
			schema: n,
		})
	}
	for _, k := range n.kws {
		if k.fn == nil {
			continue
		}
		k := k
		ok := k.fn(c, k, inst, n, func(e *verr) bool {
			if !e.validatorSet {
				e.validator, e.validatorValue, e.validatorSet = k.name, k.value, true
			}
			if !e.instanceSet {
				e.instance, e.instanceSet = inst, true
			}
			if e.schema == nil {
				e.schema = n
			}
			if k.name != "if" && k.name != "$ref" {
				e.schemaPathRev = append(e.schemaPathRev, k.name)
			}
			return emit(e)
		})
		if !ok {
			return false
		}
	}
	return true
}

// descend mirrors Validator.descend: path and schemaPath (nil for none) are
// prepended to the errors' relative paths.
func (c *vctx) descend(inst Value, n *node, path, schemaPath any, emit emitFn) bool {
	return c.iter(inst, n, func(e *verr) bool {
		if path != nil {
			e.pathRev = append(e.pathRev, path)
		}
		if schemaPath != nil {
			e.schemaPathRev = append(e.schemaPathRev, schemaPath)
		}
		return emit(e)
	})
}

func (c *vctx) collect(inst Value, n *node, schemaPath any) []*verr {
	var errs []*verr
	c.descend(inst, n, nil, schemaPath, func(e *verr) bool {
		errs = append(errs, e)
		return true
	})
	return errs
}

func (c *vctx) isValid(inst Value, n *node) bool {
	valid := true
	c.iter(inst, n, func(*verr) bool {
		valid = false
		return false
	})
	return valid
}

// isType is the Draft 2020-12 type checker.
func isType(v Value, t string) bool {
	switch t {
	case "array":
		return v.kind == ArrayKind
	case "boolean":
		return v.kind == BoolKind
	case "integer":
		if v.kind != NumberKind {
			return false
		}
		if v.num.isInt {
			return true
		}
		f := v.num.f
		return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f)
	case "null":
		return v.kind == NullKind
	case "number":
		return v.kind == NumberKind
	case "object":
		return v.kind == ObjectKind
	case "string":
		return v.kind == StringKind
	}
	return false
}

// ---- numbers and equality with Python semantics ----

func isNaN(v Value) bool { return v.kind == NumberKind && !v.num.isInt && math.IsNaN(v.num.f) }

func numRat(v Value) *big.Rat {
	if v.num.isInt {
		if v.num.small {
			return new(big.Rat).SetInt64(v.num.i)
		}
		return new(big.Rat).SetInt(v.num.big)
	}
	return new(big.Rat).SetFloat64(v.num.f)
}

// cmpNum compares two numbers exactly like Python compares int/float; ok is
// false when a NaN is involved. Booleans count as 0 and 1.
func cmpNum(a, b Value) (int, bool) {
	a, b = boolAsInt(a), boolAsInt(b)
	if a.num.isInt && b.num.isInt {
		if a.num.small && b.num.small {
			switch {
			case a.num.i < b.num.i:
				return -1, true
			case a.num.i > b.num.i:
				return 1, true
			}
			return 0, true
		}
		return numRat(a).Cmp(numRat(b)), true
	}
	if isNaN(a) || isNaN(b) {
		return 0, false
	}
	ai := !a.num.isInt && math.IsInf(a.num.f, 0)
	bi := !b.num.isInt && math.IsInf(b.num.f, 0)
	if ai || bi {
		fa, fb := a.num.f, b.num.f
		if !ai {
			fa = 0
		}
		if !bi {
			fb = 0
		}
		switch {
		case fa < fb:
			return -1, true
		case fa > fb:
			return 1, true
		}
		return 0, true
	}
	if !a.num.isInt && !b.num.isInt {
		switch {
		case a.num.f < b.num.f:
			return -1, true
		case a.num.f > b.num.f:
			return 1, true
		}
		return 0, true
	}
	return numRat(a).Cmp(numRat(b)), true
}

func boolAsInt(v Value) Value {
	if v.kind == BoolKind {
		if v.b {
			return Int(1)
		}
		return Int(0)
	}
	return v
}

func isNumeric(v Value) bool { return v.kind == NumberKind || v.kind == BoolKind }

// pyEq is Python's == on json.loads results (True == 1 == 1.0).
func pyEq(a, b Value) bool {
	if isNumeric(a) && isNumeric(b) {
		c, ok := cmpNum(a, b)
		return ok && c == 0
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case NullKind:
		return true
	case StringKind:
		return a.s == b.s
	case ArrayKind:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !pyEq(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	case ObjectKind:
		if len(a.obj.members) != len(b.obj.members) {
			return false
		}
		for _, m := range a.obj.members {
			o, ok := b.Get(m.Key)
			if !ok || !pyEq(m.Value, o) {
				return false
			}
		}
		return true
	}
	return false
}

// jsEqual is jsonschema._utils.equal (bools are distinct from numbers).
func jsEqual(a, b Value) bool {
	if a.kind == StringKind || b.kind == StringKind {
		return a.kind == b.kind && a.s == b.s
	}
	if a.kind == ArrayKind && b.kind == ArrayKind {
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !jsEqual(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	}
	if a.kind == ObjectKind && b.kind == ObjectKind {
		if len(a.obj.members) != len(b.obj.members) {
			return false
		}
		for _, m := range a.obj.members {
			o, ok := b.Get(m.Key)
			if !ok || !jsEqual(m.Value, o) {
				return false
			}
		}
		return true
	}
	if a.kind == BoolKind || b.kind == BoolKind {
		return a.kind == b.kind && a.b == b.b
	}
	return pyEq(a, b)
}

func pyLen(v Value) int {
	if v.kind == StringKind {
		return runeLen(v.s)
	}
	return v.Len()
}

// ---- keywords (jsonschema/_validators.py) ----

func kwType(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	for _, t := range k.types {
		if isType(inst, t) {
			return true
		}
	}
	reprs := make([]string, len(k.types))
	for i, t := range k.types {
		reprs[i] = pyStrRepr(t)
	}
	return emit(newErr("%s is not of type %s", inst.Repr(), strings.Join(reprs, ", ")))
}

func kwProperties(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, p := range k.named {
		if v, ok := inst.Get(p.name); ok {
			if !c.descend(v, p.n, p.name, p.name, emit) {
				return false
			}
		}
	}
	return true
}

func kwPatternProperties(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, p := range k.named {
		for _, m := range inst.obj.members {
			if p.re.MatchString(m.Key) {
				if !c.descend(m.Value, p.n, m.Key, p.name, emit) {
					return false
				}
			}
		}
	}
	return true
}

func kwAdditionalProperties(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	props, _ := n.raw.Get("properties")
	var extras []string
	for _, m := range inst.obj.members {
		if props.Has(m.Key) {
			continue
		}
		matched := false
		for _, p := range k.named {
			if p.re.MatchString(m.Key) {
				matched = true
				break
			}
		}
		if !matched {
			extras = append(extras, m.Key)
		}
	}
	if !k.sub.isBool {
		// Python iterates a set here (hash order); we use instance order.
		for _, e := range extras {
			v, _ := inst.Get(e)
			if !c.descend(v, k.sub, e, nil, emit) {
				return false
			}
		}
		return true
	}
	if k.sub.boolv || len(extras) == 0 {
		return true
	}
	sort.Strings(extras)
	reprs := make([]string, len(extras))
	for i, e := range extras {
		reprs[i] = pyStrRepr(e)
	}
	if pp, ok := n.raw.Get("patternProperties"); ok {
		verb := "does"
		if len(extras) > 1 {
			verb = "do"
		}
		var pats []string
		for _, m := range pp.Members() {
			pats = append(pats, m.Key)
		}
		sort.Strings(pats)
		for i := range pats {
			pats[i] = pyStrRepr(pats[i])
		}
		return emit(newErr("%s %s not match any of the regexes: %s", strings.Join(reprs, ", "), verb, strings.Join(pats, ", ")))
	}
	verb := "was"
	if len(extras) > 1 {
		verb = "were"
	}
	return emit(newErr("Additional properties are not allowed (%s %s unexpected)", strings.Join(reprs, ", "), verb))
}

func kwRequired(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, p := range k.strs {
		if !inst.Has(p) {
			if !emit(newErr("%s is a required property", pyStrRepr(p))) {
				return false
			}
		}
	}
	return true
}

func kwDependentRequired(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, p := range k.strs {
		if !inst.Has(p) {
			continue
		}
		for _, each := range k.deps[p] {
			if !inst.Has(each) {
				if !emit(newErr("%s is a dependency of %s", pyStrRepr(each), pyStrRepr(p))) {
					return false
				}
			}
		}
	}
	return true
}

func kwDependentSchemas(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, p := range k.named {
		if !inst.Has(p.name) {
			continue
		}
		if !c.descend(inst, p.n, nil, p.name, emit) {
			return false
		}
	}
	return true
}

func kwLimit(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	var want Kind
	var msg string
	less := strings.HasPrefix(k.name, "min")
	switch k.name {
	case "minProperties":
		want, msg = ObjectKind, "does not have enough properties"
	case "maxProperties":
		want, msg = ObjectKind, "has too many properties"
	case "minLength", "minItems":
		want, msg = StringKind, "is too short"
	case "maxLength", "maxItems":
		want, msg = StringKind, "is too long"
	}
	if k.name == "minItems" || k.name == "maxItems" {
		want = ArrayKind
	}
	if inst.kind != want {
		return true
	}
	cmp, _ := cmpNum(Int(int64(pyLen(inst))), k.value)
	if (less && cmp < 0) || (!less && cmp > 0) {
		return emit(newErr("%s %s", inst.Repr(), msg))
	}
	return true
}

func kwNumLimit(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != NumberKind {
		return true
	}
	cmp, ok := cmpNum(inst, k.value)
	if !ok {
		return true
	}
	ir, lr := inst.Repr(), k.value.Repr()
	switch k.name {
	case "minimum":
		if cmp < 0 {
			return emit(newErr("%s is less than the minimum of %s", ir, lr))
		}
	case "maximum":
		if cmp > 0 {
			return emit(newErr("%s is greater than the maximum of %s", ir, lr))
		}
	case "exclusiveMinimum":
		if cmp <= 0 {
			return emit(newErr("%s is less than or equal to the minimum of %s", ir, lr))
		}
	case "exclusiveMaximum":
		if cmp >= 0 {
			return emit(newErr("%s is greater than or equal to the maximum of %s", ir, lr))
		}
	}
	return true
}

func kwMultipleOf(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != NumberKind {
		return true
	}
	dB := k.value
	var failed bool
	if !dB.num.isInt {
		instF := inst.num.f
		if isNaN(inst) || math.IsInf(instF, 0) {
			failed = true // Python raises; treat as not a multiple
		} else {
			q := instF / dB.num.f
			if math.IsInf(q, 0) {
				r := new(big.Rat).Quo(numRat(inst), numRat(dB))
				failed = !r.IsInt()
			} else {
				failed = q != math.Trunc(q)
			}
		}
	} else if inst.num.isInt {
		var a, b big.Int
		a.Set(numRat(inst).Num())
		b.Set(numRat(dB).Num())
		failed = new(big.Int).Rem(&a, &b).Sign() != 0
	} else {
		f := inst.num.f
		failed = math.IsNaN(f) || math.IsInf(f, 0) || math.Mod(f, dB.num.f) != 0
	}
	if failed {
		return emit(newErr("%s is not a multiple of %s", inst.Repr(), dB.Repr()))
	}
	return true
}

func kwPattern(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind == StringKind && !k.re.MatchString(inst.s) {
		return emit(newErr("%s does not match %s", inst.Repr(), pyStrRepr(k.value.s)))
	}
	return true
}

func kwFormat(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if checkFormat(inst, k.value.s) {
		return true
	}
	return emit(newErr("%s is not a %s", inst.Repr(), pyStrRepr(k.value.s)))
}

func kwEnum(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	found := false
	if isNumeric(inst) && (pyEq(inst, Int(0)) || pyEq(inst, Int(1))) {
		for _, e := range k.value.arr {
			if inst.kind == BoolKind || e.kind == BoolKind {
				if inst.kind == e.kind && inst.b == e.b {
					found = true
				}
			} else if pyEq(inst, e) {
				found = true
			}
		}
	} else {
		for _, e := range k.value.arr {
			if pyEq(inst, e) {
				found = true
				break
			}
		}
	}
	if !found {
		return emit(newErr("%s is not one of %s", inst.Repr(), k.value.Repr()))
	}
	return true
}

func kwConst(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if !jsEqual(inst, k.value) {
		return emit(newErr("%s was expected", k.value.Repr()))
	}
	return true
}

func kwItems(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ArrayKind {
		return true
	}
	prefix := 0
	if p, ok := n.raw.Get("prefixItems"); ok {
		prefix = p.Len()
	}
	total := len(inst.arr)
	if k.sub.isBool && !k.sub.boolv {
		if total > prefix {
			return emit(newErr("Expected at most %d items, but found %d", prefix, total))
		}
		return true
	}
	for i := prefix; i < total; i++ {
		if !c.descend(inst.arr[i], k.sub, i, nil, emit) {
			return false
		}
	}
	return true
}

func kwPrefixItems(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ArrayKind {
		return true
	}
	for i, sub := range k.subs {
		if i >= len(inst.arr) {
			break
		}
		if !c.descend(inst.arr[i], sub, i, i, emit) {
			return false
		}
	}
	return true
}

func kwContains(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ArrayKind {
		return true
	}
	minC, maxC := Int(1), Int(int64(len(inst.arr)))
	if v, ok := n.raw.Get("minContains"); ok {
		minC = v
	}
	if v, ok := n.raw.Get("maxContains"); ok {
		maxC = v
	}
	matches := 0
	for _, e := range inst.arr {
		if c.isValid(e, k.sub) {
			matches++
			if cmp, _ := cmpNum(Int(int64(matches)), maxC); cmp > 0 {
				return emit(&verr{
					message:   fmt.Sprintf("Too many items match the given schema (expected at most %s)", maxC.Repr()),
					validator: "maxContains", validatorValue: maxC, validatorSet: true,
				})
			}
		}
	}
	if cmp, _ := cmpNum(Int(int64(matches)), minC); cmp < 0 {
		if matches == 0 {
			return emit(newErr("%s does not contain items matching the given schema", inst.Repr()))
		}
		return emit(&verr{
			message:   fmt.Sprintf("Too few items match the given schema (expected at least %s but only %d matched)", minC.Repr(), matches),
			validator: "minContains", validatorValue: minC, validatorSet: true,
		})
	}
	return true
}

func kwUniqueItems(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if !k.value.b || inst.kind != ArrayKind {
		return true
	}
	for i := 0; i < len(inst.arr); i++ {
		for j := i + 1; j < len(inst.arr); j++ {
			if jsEqual(inst.arr[i], inst.arr[j]) {
				return emit(newErr("%s has non-unique elements", inst.Repr()))
			}
		}
	}
	return true
}

func kwAllOf(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	for i, sub := range k.subs {
		if !c.descend(inst, sub, nil, i, emit) {
			return false
		}
	}
	return true
}

func kwAnyOf(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	var all []*verr
	for i, sub := range k.subs {
		errs := c.collect(inst, sub, i)
		if len(errs) == 0 {
			return true
		}
		all = append(all, errs...)
	}
	e := newErr("%s is not valid under any of the given schemas", inst.Repr())
	e.context = all
	return emit(e)
}

func kwOneOf(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	var all []*verr
	first := -1
	for i, sub := range k.subs {
		errs := c.collect(inst, sub, i)
		if len(errs) == 0 {
			first = i
			break
		}
		all = append(all, errs...)
	}
	if first < 0 {
		e := newErr("%s is not valid under any of the given schemas", inst.Repr())
		e.context = all
		return emit(e)
	}
	var more []string
	for i := first + 1; i < len(k.subs); i++ {
		if c.isValid(inst, k.subs[i]) {
			more = append(more, k.subs[i].raw.Repr())
		}
	}
	if len(more) > 0 {
		more = append(more, k.subs[first].raw.Repr())
		return emit(newErr("%s is valid under each of %s", inst.Repr(), strings.Join(more, ", ")))
	}
	return true
}

func kwNot(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if c.isValid(inst, k.sub) {
		return emit(newErr("%s should not be valid under %s", inst.Repr(), k.sub.raw.Repr()))
	}
	return true
}

func kwPropertyNames(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if inst.kind != ObjectKind {
		return true
	}
	for _, m := range inst.obj.members {
		if !c.descend(String(m.Key), k.sub, nil, nil, emit) {
			return false
		}
	}
	return true
}

func siblingNode(n *node, name string) *node {
	for _, k := range n.kws {
		if k.name == name {
			return k.sub
		}
	}
	return nil
}

func kwIf(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	if c.isValid(inst, k.sub) {
		if t := siblingNode(n, "then"); t != nil {
			return c.descend(inst, t, nil, "then", emit)
		}
	} else if e := siblingNode(n, "else"); e != nil {
		return c.descend(inst, e, nil, "else", emit)
	}
	return true
}

func kwRef(c *vctx, k *keyword, inst Value, n *node, emit emitFn) bool {
	return c.descend(inst, c.s.refs[k.ref], nil, nil, emit)
}
