package placement

import (
	"strings"
	"testing"
	"time"
)

// slowSQLiteTime is parseSQLiteTime without its fast path: the driver's
// layouts through time.Parse only.
func slowSQLiteTime(s string) (time.Time, bool) {
	s = strings.TrimSuffix(s, "Z")
	for _, l := range sqliteTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// FuzzParseSQLiteTime: parseTimeFast reads a time exactly as time.Parse
// with the driver's layouts does (same instant and zone offset), or
// refuses it; parseSQLiteTime as a whole agrees with time.Parse.
func FuzzParseSQLiteTime(f *testing.F) {
	for _, s := range []string{
		"2026-11-25 10:00:00+00:00", "2026-11-25 10:00:00.5+01:00", "2026-11-25 10:00:00.123456789-02:30",
		"2026-11-25 10:00:00.1234567891+00:00", "2026-11-25T10:00:00Z", "2026-11-25 10:00:00", "2026-11-25",
		"2026-02-30 10:00:00+00:00", "2026-11-25 10:00:00.+00:00", "2026-11-25 24:00:00+00:00", "2026-11-25 10:00:00-00:00",
		"2026-11-25 10:00:00+24:00", "2026-11-25 10:00:00+00:60", "0000-01-01 00:00:00+00:00", "1732528800", "",
		"0000-01-01 00:00:00+70:00", // an offset hour time.Parse refuses, once read by the fast path
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, ok := slowSQLiteTime(s)
		same := func(got time.Time) bool {
			_, gotOff := got.Zone()
			_, wantOff := want.Zone()
			return got.Equal(want) && gotOff == wantOff
		}
		if fast, fastOK := parseTimeFast(s); fastOK && (!ok || !same(fast)) {
			t.Fatalf("parseTimeFast(%q) = %v; time.Parse reads %v, %v", s, fast, want, ok)
		}
		if got, gotOK := parseSQLiteTime(s); gotOK != ok || !same(got) {
			t.Fatalf("parseSQLiteTime(%q) = %v, %v; time.Parse reads %v, %v", s, got, gotOK, want, ok)
		}
	})
}
