package leases

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/pkg/errs"
)

// slowStoredTime is ParseStoredTime without its fast path: the layouts
// through time.Parse only.
func slowStoredTime(s string) (time.Time, bool) {
	if i := strings.Index(s, " m="); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, "Z")
	for _, f := range storedLayouts {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// FuzzParseStoredTime: the hand-written fast path reads a date exactly as
// time.Parse with the driver's layouts does (same instant, in UTC), or
// both refuse it.
func FuzzParseStoredTime(f *testing.F) {
	for _, s := range []string{
		"2026-11-25 10:00:00", "2026-11-25 10:00:00.123456789+02:00", "2026-11-25T10:00:00Z", "2026-11-25 10:00:00.1234567891",
		"2026-02-29 10:00:00", "2024-02-29 23:59:59-23:59", "2026-11-25 10:00:00+24:00", "2026-11-25 10:00:00-00:60",
		"0000-01-01 00:00:00", "2026-11-25 10:00:00.+00:00", "2026-11-25 10:00", "2026-11-25",
		"2026-11-25 10:00:00 +0000 UTC", "2026-11-25 10:00:00.5 +0100 CET m=+0.000000001", "2026-11-25 10:00:60", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseStoredTime(s)
		want, ok := slowStoredTime(s)
		if (err == nil) != ok || !got.Equal(want) {
			t.Fatalf("ParseStoredTime(%q) = %v, %v; time.Parse reads %v, %v", s, got, err, want, ok)
		}
		if err == nil && got.Location() != time.UTC {
			t.Fatalf("ParseStoredTime(%q) = %v: not in UTC", s, got)
		}
		if fast, ok := parseFast(s); ok && (!fast.Equal(want) || fast.Location() != time.UTC) {
			t.Fatalf("parseFast(%q) = %v; time.Parse reads %v", s, fast, want)
		}
	})
}

// FuzzParseTags: any JSON value as a lease's tags is refused as a bad
// request or read as its distinct strings in the order given, each
// non-empty and at most maxTagLength characters, at most maxTags of them.
func FuzzParseTags(f *testing.F) {
	for _, s := range []string{
		`null`, `[]`, `["a","b","a"]`, `["", "x"]`, `[1]`, `"a"`, `{"a":1}`, `[null]`, `[["a"]]`,
		`["` + strings.Repeat("é", maxTagLength) + `"]`, `["` + strings.Repeat("x", maxTagLength+1) + `"]`,
		`[` + strings.Repeat(`"t",`, maxTags) + `"u"]`, `["\ud800", "\u0000"]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		got, err := parseTags(v)
		if err != nil {
			if e := errs.As(err); e == nil || e.Kind != errs.BadRequest {
				t.Fatalf("tags %s: error %v is not a bad request", s, err)
			}
			return
		}
		var want []string
		if list, ok := v.([]any); ok {
			for _, x := range list {
				if !slices.Contains(want, x.(string)) {
					want = append(want, x.(string))
				}
			}
		} else if v != nil {
			t.Fatalf("tags %s: accepted as %q", s, got)
		}
		if !slices.Equal(got, want) || len(got) > maxTags {
			t.Fatalf("tags %s: read as %q, want %q", s, got, want)
		}
		for _, tag := range got {
			if tag == "" || utf8.RuneCountInString(tag) > maxTagLength {
				t.Fatalf("tags %s: tag %q accepted", s, tag)
			}
		}
	})
}
