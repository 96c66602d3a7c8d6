package leases

import (
	"strings"
	"time"

	"github.com/leasehold/leasehold/plugins"
)

// Output formats the clients parse strictly.
const (
	// DateFormat is used for lease start/end dates, event times and
	// allocation dates: "2017-12-26T12:00:00.000000".
	DateFormat = "2006-01-02T15:04:05.000000"
	// StampFormat is used for created_at/updated_at with microseconds,
	// as Python's isoformat(' ') writes them: "2017-12-27 10:00:00.123456"
	// (FormatStamp leaves the fraction out when it is zero).
	StampFormat = "2006-01-02 15:04:05.000000"
)

// inputFormats are the accepted input dates: Blazar's "%Y-%m-%d %H:%M" and,
// as a harmless extension, the same with seconds.
var inputFormats = []string{"2006-01-02 15:04", "2006-01-02 15:04:05"}

// The dates a lease may carry: [MinDate, MaxDate). The allocator and
// the host plugin's interval index compute in Unix nanoseconds, which
// an int64 holds only from 1677-09-21 to 2262-04-11; a date beyond
// wrapped around and broke their window arithmetic (found by the HTTP
// fuzzer: a lease moved to [now, 9999-12-31 23:59] got a 409 "Too many
// concurrent bookings" on an idle server). Whole years inside that
// span, leaving over 90 days at either end for cleaning times and
// notice periods.
var (
	MinDate = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxDate = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ParseDate reads a lease date as the API takes it: "YYYY-MM-DD HH:MM"
// (UTC), the same with seconds, or "now" (now truncated to the minute).
// A bad value, or one outside [MinDate, MaxDate), is Blazar's
// InvalidDate (400).
func ParseDate(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now.UTC().Truncate(time.Minute), nil
	}
	t := strings.TrimSpace(s)
	for _, f := range inputFormats {
		if len(t) != len(f) {
			continue
		}
		if d, err := time.ParseInLocation(f, t, time.UTC); err == nil {
			if d.Before(MinDate) || !d.Before(MaxDate) {
				return time.Time{}, plugins.BadRequest("%s is an invalid date: dates must be from %s to %s",
					s, MinDate.Format(inputFormats[0]), MaxDate.Add(-time.Minute).Format(inputFormats[0]))
			}
			return d, nil
		}
	}
	return time.Time{}, plugins.BadRequest("%s is an invalid date. Required format: %%Y-%%m-%%d %%H:%%M", s)
}

// Stamp is a created_at/updated_at value: t in UTC to the microsecond,
// as stored.
func Stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// FormatDate renders a lease/event date.
func FormatDate(t time.Time) string { return t.UTC().Format(DateFormat) }

// FormatStamp renders created_at/updated_at as Python's isoformat(' '):
// six fractional digits, or none when the microseconds are zero.
func FormatStamp(t time.Time) string {
	t = Stamp(t)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format(StampFormat)
}
