package leases

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
)

func TestParseKind(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		typ     *string
		timeout any
		want    leaseKind
		err     string
	}{
		{name: "absent is SCHEDULE", want: leaseKind{typ: KindSchedule}},
		{name: "schedule", typ: str("SCHEDULE"), want: leaseKind{typ: KindSchedule}},
		{name: "lower case", typ: str("immediate"), want: leaseKind{typ: KindImmediate}},
		{name: "best-effort default timeout", typ: str("BEST-EFFORT"), want: leaseKind{typ: KindBestEffort, timeout: DefaultTimeout}},
		{name: "best-effort json number", typ: str("BEST-EFFORT"), timeout: json.Number("90"), want: leaseKind{typ: KindBestEffort, timeout: 90}},
		{name: "best-effort string", typ: str("BEST-EFFORT"), timeout: "120", want: leaseKind{typ: KindBestEffort, timeout: 120}},
		{name: "unknown", typ: str("SOON"), err: `Invalid lease_type "SOON"`},
		{name: "fractional timeout", typ: str("BEST-EFFORT"), timeout: json.Number("1.5"), err: "Invalid timeout"},
		{name: "negative timeout", typ: str("BEST-EFFORT"), timeout: json.Number("-3"), err: "Invalid timeout"},
		{name: "timeout of a boolean", typ: str("BEST-EFFORT"), timeout: true, err: "Invalid timeout"},
		{name: "timeout on schedule", timeout: json.Number("5"), err: "only for lease_type BEST-EFFORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKind(tc.typ, tc.timeout)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStartsNow(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	k := leaseKind{typ: KindImmediate}
	for _, s := range []*string{nil, ptr("now"), ptr("2030-01-02 03:04")} {
		if got, err := startsNow(k, s, now); err != nil || got != "now" {
			t.Errorf("startsNow(%v) = %q, %v", s, got, err)
		}
	}
	for _, s := range []string{"2030-01-02 03:05", "2030-01-02 03:03", "tomorrow"} {
		if _, err := startsNow(k, &s, now); err == nil {
			t.Errorf("startsNow(%q) accepted", s)
		}
	}
}

func ptr(s string) *string { return &s }

func TestClearingEvents(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := t0.Add(10 * time.Minute)
	evs := []models.Event{
		{EventType: EventStart, Time: t0},
		{EventType: EventEnd, Time: t0.Add(2 * time.Hour)},
		{EventType: EventBeforeEnd, Time: t0.Add(5 * time.Minute)},
		{EventType: "custom", Time: t0.Add(time.Minute)},
	}
	got := clearingEvents(evs, deadline)
	want := []models.Event{
		{EventType: EventStart, Time: deadline},
		{EventType: EventEnd, Time: t0.Add(2 * time.Hour)},
		{EventType: EventBeforeEnd, Time: deadline},
		{EventType: "custom", Time: t0.Add(time.Minute)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if !evs[0].Time.Equal(t0) {
		t.Error("clearingEvents changed its input")
	}
}

func TestKindTransitions(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{StatusInProgress, StatusActive, true},
		{StatusInProgress, StatusTimedOut, true},
		{StatusInProgress, StatusDeleting, true},
		{StatusInProgress, StatusUpdating, false},
		{StatusTimedOut, StatusDeleting, true},
		{StatusTimedOut, StatusUpdating, false},
		{StatusTimedOut, StatusStarting, false},
	} {
		if got := CanTransition(tc.from, tc.to); got != tc.ok {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	if IsStable(StatusInProgress) || !IsStable(StatusTimedOut) {
		t.Error("IN-PROGRESS must be transitional (its events wait) and TIMEDOUT stable")
	}
}
