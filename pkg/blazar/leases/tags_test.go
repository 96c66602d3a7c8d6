package leases

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTags(t *testing.T) {
	long := strings.Repeat("x", maxTagLength+1)
	many := make([]any, maxTags+1)
	for i := range many {
		many[i] = "t"
	}
	for _, tc := range []struct {
		name string
		in   any
		want []string
		err  string
	}{
		{name: "absent", in: nil, want: nil},
		{name: "empty", in: []any{}, want: nil},
		{name: "kept in order, duplicates dropped", in: []any{"svc:db", "web", "svc:db"}, want: []string{"svc:db", "web"}},
		{name: "not a list", in: "db", err: "list of strings"},
		{name: "not strings", in: []any{"db", 3.0}, err: "non-empty strings"},
		{name: "empty string", in: []any{""}, err: "non-empty strings"},
		{name: "too long", in: []any{long}, err: "too long"},
		{name: "too many", in: many, err: "Too many tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTags(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTagsStoredForm(t *testing.T) {
	for _, tags := range [][]string{{"a"}, {"svc:db", `quote"d`, "ünï"}} {
		if got := decodeTags(encodeTags(tags)); !cmp.Equal(got, tags) {
			t.Errorf("round trip of %q = %q", tags, got)
		}
	}
	if encodeTags(nil) != nil {
		t.Error("no tags are not stored as NULL")
	}
	bad := "{"
	for _, s := range []*string{nil, new(string), &bad} {
		if got := decodeTags(s); got == nil || len(got) != 0 {
			t.Errorf("decodeTags(%v) = %#v, want []", s, got)
		}
	}
}
