package leases

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDate(t *testing.T) {
	now := time.Date(2026, 11, 21, 5, 8, 17, 659066000, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"now", time.Date(2026, 11, 21, 5, 8, 0, 0, time.UTC), true},
		{"2017-12-26 12:00", time.Date(2017, 12, 26, 12, 0, 0, 0, time.UTC), true},
		{"2017-12-26 12:00:42", time.Date(2017, 12, 26, 12, 0, 42, 0, time.UTC), true},
		{"2030-02-30 12:00", time.Time{}, false},
		{"2017-12-26T12:00", time.Time{}, false},
		{"2017-12-26 12:00:00.000000", time.Time{}, false},
		{"Now", time.Time{}, false},
		{"", time.Time{}, false},
		{"2017-12-26", time.Time{}, false},
	} {
		got, err := ParseDate(tc.in, now)
		if (err == nil) != tc.ok {
			t.Errorf("ParseDate(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !strings.HasSuffix(err.Error(), " is an invalid date. Required format: %Y-%m-%d %H:%M") {
				t.Errorf("ParseDate(%q) message %q", tc.in, err)
			}
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseDate(%q) (-want +got): %s", tc.in, diff)
		}
	}
}

func TestFormats(t *testing.T) {
	tm := time.Date(2017, 12, 26, 12, 0, 0, 0, time.UTC)
	if got := FormatDate(tm); got != "2017-12-26T12:00:00.000000" {
		t.Errorf("FormatDate = %q", got)
	}
	// created_at/updated_at as Python's isoformat(' '): microseconds,
	// left out when zero.
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{tm.Add(1500 * time.Millisecond), "2017-12-26 12:00:01.500000"},
		{tm.Add(time.Second + 1234567*time.Nanosecond), "2017-12-26 12:00:01.001234"},
		{tm.Add(time.Second), "2017-12-26 12:00:01"},
		{tm.Add(999 * time.Nanosecond), "2017-12-26 12:00:00"},
	} {
		if got := FormatStamp(tc.in); got != tc.want {
			t.Errorf("FormatStamp(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseDate: never panics; anything accepted renders back to a date
// that parses to the same instant; "now" aside, results are whole
// seconds in UTC.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"now", "2017-12-26 12:00", "2017-12-26 12:00:00", "2030-02-30 12:00", "9999-12-31 23:59", " 2017-12-26 12:00 "} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 21, 5, 8, 17, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDate(s, now)
		if err != nil {
			return
		}
		if d.Location() != time.UTC || d.Nanosecond() != 0 {
			t.Fatalf("ParseDate(%q) = %v: not whole seconds in UTC", s, d)
		}
		back, err := ParseDate(d.Format("2006-01-02 15:04:05"), now)
		if err != nil || !back.Equal(d) {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
	})
}

func TestStatusMachine(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{StatusPending, StatusStarting, true},
		{StatusPending, StatusTerminating, false},
		{StatusActive, StatusTerminating, true},
		{StatusActive, StatusStarting, false},
		{StatusTerminated, StatusUpdating, true},
		{StatusTerminated, StatusStarting, false},
		{StatusError, StatusTerminating, true},
		{StatusStarting, StatusUpdating, false},
		{StatusDeleting, StatusDeleting, false},
		{StatusDeleting, StatusError, true},
		{StatusUpdating, StatusActive, true},
		{StatusCreating, StatusPending, true},
	} {
		if got := CanTransition(tc.from, tc.to); got != tc.ok {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		start, end string
		all        bool
		want       string
	}{
		{EventUndone, EventUndone, false, StatusPending},
		{EventDone, EventUndone, true, StatusActive},
		{EventDone, EventUndone, false, StatusError},
		{EventDone, EventDone, false, StatusTerminated},
		{EventError, EventUndone, true, StatusError},
		{EventUndone, EventDone, true, StatusError},
		{EventInProgress, EventUndone, true, StatusError},
	} {
		if got := Derive(tc.start, tc.end, tc.all); got != tc.want {
			t.Errorf("Derive(%s, %s, %v) = %s, want %s", tc.start, tc.end, tc.all, got, tc.want)
		}
	}
	if !ReservationCanTransition(ResPending, ResActive) || ReservationCanTransition(ResDeleted, ResActive) || ReservationCanTransition(ResActive, ResPending) {
		t.Error("reservation status machine")
	}
}
