package leases

import (
	"strings"
	"testing"
	"time"
)

// TestParseDateRange: dates whose Unix nanoseconds an int64 cannot hold
// (the allocator's and the interval index's unit) are refused with a
// 400 that names the accepted span, not stored to wrap around later.
func TestParseDateRange(t *testing.T) {
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2261-12-31 23:59", true},
		{"2261-12-31 23:59:59", true},
		{"1678-01-01 00:00", true},
		{"2262-01-01 00:00", false},
		{"2262-04-12 00:00", false},
		{"9999-12-31 23:59", false},
		{"1677-12-31 23:59", false},
		{"0001-01-01 00:00", false},
	} {
		d, err := ParseDate(tc.in, now)
		if tc.ok {
			if err != nil {
				t.Errorf("ParseDate(%q): %v", tc.in, err)
			} else if time.Unix(0, d.UnixNano()).UTC() != d {
				t.Errorf("ParseDate(%q) = %v does not survive Unix nanoseconds", tc.in, d)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseDate(%q) = %v, want an error", tc.in, d)
		} else if !strings.Contains(err.Error(), "1678-01-01 00:00 to 2261-12-31 23:59") {
			t.Errorf("ParseDate(%q): %v; want the accepted span named", tc.in, err)
		}
	}
	// The span's ends leave 90 days of room in nanoseconds both ways.
	room := 90 * 24 * time.Hour
	if MaxDate.Add(room).UnixNano() < MaxDate.UnixNano() || MinDate.Add(-room).UnixNano() > MinDate.UnixNano() {
		t.Error("MinDate/MaxDate leave no room for offsets in Unix nanoseconds")
	}
}
