package pyjsonschema

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// The golden file is produced by the real Python jsonschema 4.10.3; see
// testdata/gen.py. To update it after adding cases:
//
//	cd pkg/pyjsonschema && PYTHONHASHSEED=0 /usr/bin/python3 testdata/gen.py > testdata/golden.json
type golden struct {
	Validate []struct {
		Name       string      `json:"name"`
		Schema     string      `json:"schema"`
		Instance   *string     `json:"instance"`
		Query      [][2]string `json:"query"`
		Error      *string     `json:"error"`
		Message    string      `json:"message"`
		All        []string    `json:"all_messages"`
		Validator  any         `json:"validator"`
		Path       []any       `json:"path"`
		SchemaPath []any       `json:"schema_path"`
	} `json:"validate"`
	Decode []struct {
		Hex     string  `json:"hex"`
		Error   *string `json:"error"`
		Repr    *string `json:"repr"`
		PFormat *string `json:"pformat"`
	} `json:"decode"`
}

// knownDecodeDivergences lists inputs (hex) where Go cannot match Python.
var knownDecodeDivergences = map[string]string{
	// a lone surrogate cannot live in a Go string; we decode it to U+FFFD
	hex.EncodeToString([]byte(`"\u0000\u001f\u007f\u0080\u00a0\u00ff\u0100\u2028\ud83d\ude00\ud800x\t\\"`)): "lone surrogate",
}

func loadGolden(t testing.TB) *golden {
	path := "testdata/golden.json"
	if p := os.Getenv("PYJSONSCHEMA_GOLDEN"); p != "" {
		path = p // extra golden files produced the same way, e.g. from other schemas
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func pathToJSON(p []any) string {
	out := make([]any, len(p))
	for i, x := range p {
		if n, ok := x.(int); ok {
			out[i] = float64(n)
		} else {
			out[i] = x
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func TestGoldenValidate(t *testing.T) {
	g := loadGolden(t)
	if len(g.Validate) < 80 {
		t.Fatalf("only %d cases", len(g.Validate))
	}
	for _, c := range g.Validate {
		t.Run(c.Name, func(t *testing.T) {
			s, err := Compile(c.Schema)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			var got *ValidationError
			if c.Instance != nil {
				v, err := Decode([]byte(*c.Instance))
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				got = s.Validate(v)
			} else {
				got = s.ValidateQuery(c.Query)
			}
			if c.Error == nil {
				if got != nil {
					t.Fatalf("expected valid, got:\n%s", got.Error())
				}
				return
			}
			if got == nil {
				t.Fatalf("expected error:\n%s", *c.Error)
			}
			if got.Error() != *c.Error {
				t.Errorf("str mismatch\n--- got:\n%s\n--- want:\n%s", got.Error(), *c.Error)
			}
			var inst Value
			if c.Instance != nil {
				inst, _ = Decode([]byte(*c.Instance))
			} else {
				inst = QueryValue(c.Query)
			}
			all := s.AllErrors(inst)
			if len(all) != len(c.All) {
				t.Errorf("iter_errors gave %d errors, want %d", len(all), len(c.All))
			} else {
				for i, e := range all {
					if e.Message != c.All[i] {
						t.Errorf("iter_errors[%d] = %q, want %q", i, e.Message, c.All[i])
					}
				}
			}
			if got.Message != c.Message {
				t.Errorf("message %q, want %q", got.Message, c.Message)
			}
			wantValidator, _ := c.Validator.(string)
			if got.Validator != wantValidator {
				t.Errorf("validator %q, want %v", got.Validator, c.Validator)
			}
			if a, b := pathToJSON(got.Path), pathToJSON(c.Path); a != b {
				t.Errorf("path %s, want %s", a, b)
			}
			if a, b := pathToJSON(got.SchemaPath), pathToJSON(c.SchemaPath); a != b {
				t.Errorf("schema path %s, want %s", a, b)
			}
		})
	}
}

func TestGoldenDecode(t *testing.T) {
	g := loadGolden(t)
	for _, c := range g.Decode {
		body, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		name := string(body)
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			if why, ok := knownDecodeDivergences[c.Hex]; ok {
				t.Skip("known divergence: " + why)
			}
			v, err := Decode(body)
			if c.Error != nil {
				if err == nil {
					t.Fatalf("expected error %q, got %s", *c.Error, v.Repr())
				}
				if err.Error() != *c.Error {
					t.Fatalf("error %q, want %q", err.Error(), *c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if got := v.Repr(); got != *c.Repr {
				t.Errorf("repr\n got %s\nwant %s", got, *c.Repr)
			}
			if got := pformat(v); got != *c.PFormat {
				t.Errorf("pformat\n got:\n%s\nwant:\n%s", got, *c.PFormat)
			}
		})
	}
}
