package pyjsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The kinds of Value. The zero Value is Null.
const (
	NullKind Kind = iota
	BoolKind
	NumberKind
	StringKind
	ArrayKind
	ObjectKind
)

func (k Kind) String() string {
	switch k {
	case NullKind:
		return "null"
	case BoolKind:
		return "boolean"
	case NumberKind:
		return "number"
	case StringKind:
		return "string"
	case ArrayKind:
		return "array"
	case ObjectKind:
		return "object"
	}
	return "invalid"
}

// Value is a decoded JSON value as Python's json module would produce it:
// objects keep member order (first occurrence of a key, last value wins, like
// a dict built from the pairs) and numbers remember whether they are Python
// ints (written without fraction or exponent) or floats. The zero Value is
// JSON null.
type Value struct {
	kind Kind
	b    bool
	s    string // string content; for numbers the literal as written
	num  *number
	arr  []Value
	obj  *object
}

// Member is one name/value pair of a JSON object.
type Member struct {
	Key   string
	Value Value
}

type object struct {
	members []Member
	index   map[string]int // built when the object is large
}

type number struct {
	isInt bool
	small bool     // int fits in int64
	i     int64    // when small
	big   *big.Int // when isInt && !small
	f     float64  // float value (also set, possibly rounded, for ints)
}

// Null returns JSON null.
func Null() Value { return Value{} }

// Bool returns a JSON boolean.
func Bool(b bool) Value { return Value{kind: BoolKind, b: b} }

// String returns a JSON string.
func String(s string) Value { return Value{kind: StringKind, s: s} }

// Int returns a JSON integer (a Python int).
func Int(i int64) Value {
	return Value{kind: NumberKind, s: strconv.FormatInt(i, 10), num: &number{isInt: true, small: true, i: i, f: float64(i)}}
}

// Float returns a JSON number that is a Python float.
func Float(f float64) Value {
	return Value{kind: NumberKind, s: pyFloatRepr(f), num: &number{f: f}}
}

// Array returns a JSON array.
func Array(items ...Value) Value {
	if items == nil {
		items = []Value{}
	}
	return Value{kind: ArrayKind, arr: items}
}

// Object returns a JSON object. Duplicate keys behave like Python's dict:
// the first position is kept and the last value wins.
func Object(members ...Member) Value {
	o := &object{}
	for _, m := range members {
		o.set(m.Key, m.Value)
	}
	return Value{kind: ObjectKind, obj: o}
}

func (o *object) lookup(key string) int {
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range o.members {
		if o.members[i].Key == key {
			return i
		}
	}
	return -1
}

func (o *object) set(key string, v Value) {
	if i := o.lookup(key); i >= 0 {
		o.members[i].Value = v
		return
	}
	o.members = append(o.members, Member{Key: key, Value: v})
	if o.index != nil {
		o.index[key] = len(o.members) - 1
	} else if len(o.members) > 16 {
		o.index = make(map[string]int, len(o.members)*2)
		for i, m := range o.members {
			o.index[m.Key] = i
		}
	}
}

// Kind reports the JSON type of v.
func (v Value) Kind() Kind { return v.kind }

// IsNull reports whether v is JSON null.
func (v Value) IsNull() bool { return v.kind == NullKind }

// AsBool returns the boolean and whether v is a boolean.
func (v Value) AsBool() (bool, bool) { return v.b, v.kind == BoolKind }

// AsString returns the string content and whether v is a string.
func (v Value) AsString() (string, bool) { return v.s, v.kind == StringKind }

// IsInteger reports whether v is a number written as an integer (a Python
// int). Note that JSON Schema's "integer" type also accepts floats such as
// 1.0; see MatchesType.
func (v Value) IsInteger() bool { return v.kind == NumberKind && v.num.isInt }

// AsInt64 returns v as an int64 if v is a Python int that fits, or a float
// with an integral value that fits.
func (v Value) AsInt64() (int64, bool) {
	if v.kind != NumberKind {
		return 0, false
	}
	if v.num.isInt {
		return v.num.i, v.num.small
	}
	f := v.num.f
	if f == math.Trunc(f) && f >= -9.223372036854775808e18 && f < 9.223372036854775808e18 {
		return int64(f), true
	}
	return 0, false
}

// AsFloat64 returns v as a float64 (ints may lose precision) and whether v is
// a number.
func (v Value) AsFloat64() (float64, bool) {
	if v.kind != NumberKind {
		return 0, false
	}
	return v.num.f, true
}

// NumberLiteral returns the number as written in the JSON text (or
// constructed), and whether v is a number.
func (v Value) NumberLiteral() (string, bool) { return v.s, v.kind == NumberKind }

// Len returns the number of elements of an array or members of an object.
func (v Value) Len() int {
	switch v.kind {
	case ArrayKind:
		return len(v.arr)
	case ObjectKind:
		return len(v.obj.members)
	}
	return 0
}

// Items returns the elements of an array (nil otherwise). Do not modify.
func (v Value) Items() []Value {
	if v.kind != ArrayKind {
		return nil
	}
	return v.arr
}

// Members returns the members of an object in order (nil otherwise). Do not
// modify.
func (v Value) Members() []Member {
	if v.kind != ObjectKind {
		return nil
	}
	return v.obj.members
}

// Get returns the value of an object member.
func (v Value) Get(key string) (Value, bool) {
	if v.kind != ObjectKind {
		return Value{}, false
	}
	if i := v.obj.lookup(key); i >= 0 {
		return v.obj.members[i].Value, true
	}
	return Value{}, false
}

// Has reports whether v is an object with the member key.
func (v Value) Has(key string) bool {
	_, ok := v.Get(key)
	return ok
}

// Repr returns Python's repr() of the value as json.loads would build it.
func (v Value) Repr() string {
	var b bytes.Buffer
	writeRepr(&b, v)
	return b.String()
}

// Interface converts v to plain Go values: nil, bool, string, json.Number,
// []any and map[string]any (member order is lost).
func (v Value) Interface() any {
	switch v.kind {
	case BoolKind:
		return v.b
	case NumberKind:
		return json.Number(v.s)
	case StringKind:
		return v.s
	case ArrayKind:
		out := make([]any, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.Interface()
		}
		return out
	case ObjectKind:
		out := make(map[string]any, len(v.obj.members))
		for _, m := range v.obj.members {
			out[m.Key] = m.Value.Interface()
		}
		return out
	}
	return nil
}

// ErrNonFinite is returned when encoding NaN or an infinity, which Python's
// json module accepts but JSON (and encoding/json) does not.
var ErrNonFinite = errors.New("pyjsonschema: NaN or Infinity cannot be encoded as JSON")

// MarshalJSON encodes v as compact JSON, preserving member order and number
// literals.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := v.encode(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (v Value) encode(b *bytes.Buffer) error {
	switch v.kind {
	case NullKind:
		b.WriteString("null")
	case BoolKind:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case NumberKind:
		if !v.num.isInt && (math.IsInf(v.num.f, 0) || math.IsNaN(v.num.f)) && !isNumberLiteral(v.s) {
			return ErrNonFinite
		}
		b.WriteString(v.s)
	case StringKind:
		enc, _ := json.Marshal(v.s)
		b.Write(enc)
	case ArrayKind:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := e.encode(b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case ObjectKind:
		b.WriteByte('{')
		for i, m := range v.obj.members {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, _ := json.Marshal(m.Key)
			b.Write(enc)
			b.WriteByte(':')
			if err := m.Value.encode(b); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	}
	return nil
}

func isNumberLiteral(s string) bool {
	return s != "" && s != "NaN" && s != "Infinity" && s != "-Infinity" && s != "nan" && s != "inf" && s != "-inf"
}

// Unmarshal decodes v into the Go value pointed to by target using
// encoding/json (member order is irrelevant there).
func (v Value) Unmarshal(target any) error {
	data, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, target)
}

// FromInterface converts plain Go values (as produced by encoding/json into
// an any, or Interface) into a Value. Map keys are sorted since Go maps have
// no order.
func FromInterface(x any) (Value, error) {
	data, err := json.Marshal(x)
	if err != nil {
		return Value{}, err
	}
	return Decode(data)
}

// String returns v as compact JSON (Python's repr for NaN and infinities),
// for logging and debugging.
func (v Value) String() string {
	b, err := v.MarshalJSON()
	if err != nil {
		return v.Repr()
	}
	return string(b)
}
