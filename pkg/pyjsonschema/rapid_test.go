package pyjsonschema

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func genJSON(depth int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		choices := 6
		if depth <= 0 {
			choices = 4
		}
		switch rapid.IntRange(0, choices-1).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom([]string{"null", "true", "false"}).Draw(t, "lit")
		case 1:
			return rapid.SampledFrom([]string{"0", "-0", "1", "-17", "1.5", "1e3", "2.5E-3", "123456789012345678901234567890", "-0.0"}).Draw(t, "num")
		case 2:
			return fmt.Sprintf("%d", rapid.Int64().Draw(t, "int"))
		case 3:
			s := rapid.String().Draw(t, "str")
			return quoteJSON(s)
		case 4:
			n := rapid.IntRange(0, 5).Draw(t, "n")
			parts := make([]string, n)
			for i := range parts {
				parts[i] = genJSON(depth-1).Draw(t, "elem")
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			keys := rapid.SliceOfNDistinct(rapid.StringN(0, 6, -1), 0, 6, rapid.ID[string]).Draw(t, "keys")
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = quoteJSON(k) + ":" + genJSON(depth-1).Draw(t, "val")
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	})
}

func quoteJSON(s string) string {
	b, _ := String(s).MarshalJSON()
	return string(b)
}

// Decode then re-encode keeps member order (and everything else).
func TestRapidRoundTripOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := genJSON(3).Draw(t, "json")
		v, err := Decode([]byte(text))
		if err != nil {
			t.Fatalf("decode %s: %v", text, err)
		}
		enc, err := v.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		// Generated text is compact and has distinct keys, so only number
		// normalisation (-0 -> 0) may differ.
		if want := strings.ReplaceAll(text, "-0", "0"); strings.ReplaceAll(string(enc), "-0", "0") != want {
			t.Fatalf("round trip\n got %s\nwant %s", enc, text)
		}
		v2, err := Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !sameOrder(v, v2) {
			t.Fatalf("member order changed for %s", text)
		}
	})
}

func sameOrder(a, b Value) bool {
	if a.Kind() != b.Kind() || a.Len() != b.Len() {
		return false
	}
	switch a.Kind() {
	case ObjectKind:
		am, bm := a.Members(), b.Members()
		for i := range am {
			if am[i].Key != bm[i].Key || !sameOrder(am[i].Value, bm[i].Value) {
				return false
			}
		}
	case ArrayKind:
		for i := range a.Items() {
			if !sameOrder(a.Items()[i], b.Items()[i]) {
				return false
			}
		}
	}
	return true
}
