package placement

import (
	"math/big"
	"regexp"
	"strings"
	"testing"
)

var asciiInt = regexp.MustCompile(`^[+-]?[0-9]+$`)

// FuzzPyInt: PyInt (the Content-Length and integer-query parser) never
// panics, reads every plain ASCII integer as big.Int does, and whatever
// it reads prints back to the same number.
func FuzzPyInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "+7", " 12 ", "1_000", "1__0", "_1", "1_", "١٢٣", "0x10", "1e3", "", "-", " \u2003 5\u3000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := PyInt(s)
		if asciiInt.MatchString(s) {
			want, _ := new(big.Int).SetString(strings.TrimPrefix(s, "+"), 10)
			if !ok || n.Cmp(want) != 0 {
				t.Fatalf("PyInt(%q) = %v, %v; want %v", s, n, ok, want)
			}
		}
		if !ok {
			return
		}
		again, ok := PyInt(n.String())
		if !ok || again.Cmp(n) != 0 {
			t.Fatalf("PyInt(%q) = %v, but PyInt(%q) = %v, %v", s, n, n.String(), again, ok)
		}
	})
}
