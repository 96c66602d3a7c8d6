package pyjsonschema

import (
	"errors"
	"reflect"
	"testing"
)

func TestContextErrorParentAndAbsolutePath(t *testing.T) {
	s := MustCompile(`{"properties": {"p": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}}}`)
	v, err := Decode([]byte(`{"p": "bad"}`))
	if err != nil {
		t.Fatal(err)
	}
	e := s.Validate(v)
	if e == nil || e.Validator != "format" {
		t.Fatalf("got %v", e)
	}
	if len(e.Path) != 0 || !reflect.DeepEqual(e.SchemaPath, []any{0, "format"}) {
		t.Fatalf("relative paths %v %v", e.Path, e.SchemaPath)
	}
	if !reflect.DeepEqual(e.AbsolutePath, []any{"p"}) || !reflect.DeepEqual(e.AbsoluteSchemaPath, []any{"properties", "p", "anyOf", 0, "format"}) {
		t.Fatalf("absolute paths %v %v", e.AbsolutePath, e.AbsoluteSchemaPath)
	}
	if e.Parent == nil || e.Parent.Validator != "anyOf" {
		t.Fatalf("parent %v", e.Parent)
	}
}

func TestDecodeAndValidate(t *testing.T) {
	s := MustCompile(`{"type": "object", "required": ["name"]}`)
	_, err := s.DecodeAndValidate([]byte(`{"name": `))
	var de *DecodeError
	if !errors.As(err, &de) || de.Error() != "Expecting value: line 1 column 10 (char 9)" {
		t.Fatalf("got %v", err)
	}
	_, err = s.DecodeAndValidate([]byte(`{}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Message != "'name' is a required property" {
		t.Fatalf("got %v", err)
	}
	v, err := s.DecodeAndValidate([]byte(`{"name": "x", "n": 1.0}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Name string  `json:"name"`
		N    float64 `json:"n"`
	}
	if err := v.Unmarshal(&out); err != nil || out.Name != "x" || out.N != 1 {
		t.Fatalf("unmarshal %+v %v", out, err)
	}
	if v.String() != `{"name":"x","n":1.0}` {
		t.Fatalf("String() = %s", v)
	}
}

func TestValidateQueryLastValueWins(t *testing.T) {
	s := MustCompile(`{"type": "object", "properties": {"limit": {"type": "string", "pattern": "^[1-9][0-9]*$"}}, "additionalProperties": false}`)
	if e := s.ValidateQuery([][2]string{{"limit", "x"}, {"limit", "5"}}); e != nil {
		t.Fatalf("unexpected %v", e)
	}
	e := s.ValidateQuery([][2]string{{"limit", "5"}, {"limit", "0"}})
	if e == nil || e.Message != "'0' does not match '^[1-9][0-9]*$'" {
		t.Fatalf("got %v", e)
	}
	q := QueryValue([][2]string{{"b", "1"}, {"a", "2"}, {"b", "3"}})
	if q.Repr() != "{'b': '3', 'a': '2'}" {
		t.Fatalf("query value %s", q.Repr())
	}
}

func TestCompileRejects(t *testing.T) {
	for _, s := range []string{
		`{"type": "integr"}`,
		`{"pattern": "(?=a)"}`,
		`{"$ref": "http://example.com/x"}`,
		`{"unevaluatedProperties": false}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#"}`,
		`{"minLength": -1}`,
		`[1]`,
	} {
		if _, err := Compile(s); err == nil {
			t.Errorf("Compile(%s) succeeded", s)
		}
	}
}
