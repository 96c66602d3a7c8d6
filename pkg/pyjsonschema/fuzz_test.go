package pyjsonschema

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func FuzzDecode(f *testing.F) {
	g := loadGolden(f)
	for _, c := range g.Decode {
		if b, err := hex.DecodeString(c.Hex); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err != nil {
			_ = err.Error()
			return
		}
		_ = v.Repr()
		_ = pformat(v)
		_ = v.Interface()
		enc, err := v.MarshalJSON()
		if err != nil {
			return // NaN/Infinity
		}
		v2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %q: %v", enc, err)
		}
		enc2, err := v2.MarshalJSON()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip: %q != %q (%v)", enc, enc2, err)
		}
		if v.Repr() != v2.Repr() {
			t.Fatalf("repr changed: %s vs %s", v.Repr(), v2.Repr())
		}
	})
}

func FuzzValidate(f *testing.F) {
	g := loadGolden(f)
	for i, c := range g.Validate {
		if c.Instance != nil && i%3 == 0 {
			f.Add(c.Schema, *c.Instance)
		}
	}
	f.Add(`{"anyOf":[{"oneOf":[{"type":"integer"},{"minimum":1}]},{"not":{"const":1}}]}`, `[1,{"a":1.0e400}]`)
	f.Fuzz(func(t *testing.T, schema, instance string) {
		s, err := Compile(schema)
		if err != nil {
			return
		}
		v, err := Decode([]byte(instance))
		if err != nil {
			return
		}
		e := s.Validate(v)
		if (e == nil) != s.IsValid(v) {
			t.Fatalf("Validate and IsValid disagree")
		}
		if e != nil {
			if e.Error() == "" || e.Message == "" {
				t.Fatalf("empty error")
			}
		}
	})
}
