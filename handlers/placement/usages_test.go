package placement

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQueryPairs(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  [][2]string
	}{
		{"", nil},
		{"project_id=p", [][2]string{{"project_id", "p"}}},
		{"project_id=&user_id=u", [][2]string{{"project_id", ""}, {"user_id", "u"}}},
		{"a=1&a=2&&b", [][2]string{{"a", "1"}, {"a", "2"}, {"b", ""}}},
		{"consumer_type=A%5FB&x=a+b", [][2]string{{"consumer_type", "A_B"}, {"x", "a b"}}},
	} {
		r := httptest.NewRequest("GET", "/usages?"+tc.query, nil)
		got, err := queryPairs(r)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("queryPairs(%q) (-want +got):\n%s", tc.query, diff)
		}
	}
	r := httptest.NewRequest("GET", "/usages", nil)
	r.URL.RawQuery = "project_id=%zz"
	if _, err := queryPairs(r); err == nil {
		t.Error("bad escape: no error")
	}
}

// FuzzQueryPairs: whatever the query, pairs decode without panicking and
// agree with net/url on the values of each key.
func FuzzQueryPairs(f *testing.F) {
	for _, s := range []string{"project_id=p&user_id=u", "a=%41&a=", "&&=&", "x=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/usages", nil)
		r.URL.RawQuery = raw
		pairs, err := queryPairs(r)
		want, werr := url.ParseQuery(raw)
		if err != nil || werr != nil {
			return
		}
		got := url.Values{}
		for _, p := range pairs {
			got[p[0]] = append(got[p[0]], p[1])
		}
		if diff := cmp.Diff(want, got); diff != "" && len(want) > 0 {
			t.Fatalf("%q (-url.ParseQuery +queryPairs):\n%s", raw, diff)
		}
	})
}

func TestAmountDecode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true}, {"2.0", 2, true}, {"1e3", 1000, true}, {"-4", -4, true},
		{"1.5", 0, false}, {`"1"`, 0, false}, {"null", 0, false}, {"true", 0, false}, {"1e300", 0, false},
		{"99999999999999999999", 0, false},
	} {
		var a amount
		err := json.Unmarshal([]byte(tc.in), &a)
		if (err == nil) != tc.ok || (tc.ok && int64(a) != tc.want) {
			t.Errorf("amount %s = %d, %v; want %d ok=%v", tc.in, a, err, tc.want, tc.ok)
		}
	}
}

// FuzzAmountDecode: an amount decodes only to the integer its JSON
// number denotes.
func FuzzAmountDecode(f *testing.F) {
	for _, s := range []string{"1", "2.0", "-0", "1e2", "1.25", "null", "[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a amount
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			return
		}
		var f64 float64
		if err := json.Unmarshal([]byte(in), &f64); err != nil {
			t.Fatalf("%q decoded as amount %d but is not a number: %v", in, a, err)
		}
		if float64(int64(a)) != f64 && f64 == float64(int64(f64)) {
			t.Fatalf("%q decoded as %d, want %v", in, a, f64)
		}
	})
}
