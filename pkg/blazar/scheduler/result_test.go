package scheduler

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// TestResultJSON: Result's own encoder writes exactly what encoding/json
// writes for the same value (nil and empty lists and maps, HTML
// characters, control characters, non-ASCII and invalid UTF-8 included).
func TestResultJSON(t *testing.T) {
	str := rapid.OneOf(
		rapid.StringMatching(`[a-z0-9.-]{0,12}`),
		rapid.String(),
		rapid.SampledFrom([]string{"", "a<b", "a>b", "a&b", "<b>&amp;</b>", "a\"b", "b\\c", "tab\there\n", "\x00", "\x7f",
			"\u2028\u2029", "\xff\xfe", "é"}),
	)
	rapid.Check(t, func(t *rapid.T) {
		var r Result
		if rapid.Bool().Draw(t, "hosts nil") {
			r.Hosts = nil
		} else {
			r.Hosts = rapid.SliceOf(str).Draw(t, "hosts")
		}
		if !rapid.Bool().Draw(t, "rejected nil") {
			r.Rejected = rapid.MapOf(str, str).Draw(t, "rejected")
		}
		type plain Result // no MarshalJSON: encoding/json's own way
		want, err := json.Marshal(plain(r))
		if err != nil {
			t.Fatal(err)
		}
		direct, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(direct, want) {
			t.Fatalf("MarshalJSON wrote\n%s\nwant\n%s", direct, want)
		}
		for _, v := range []any{r, &r} {
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%s\nwant\n%s", got, want)
			}
		}
	})
}
