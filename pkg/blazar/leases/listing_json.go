package leases

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/models"
)

// appendJSON appends the listing as encoding/json writes l.views().
func (l *listing) appendJSON(b []byte) ([]byte, error) {
	b = slices.Grow(b, l.sizeHint())
	b = append(b, '[')
	var keys keyOrder
	var err error
	for i := range l.leases {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = l.appendLease(b, &l.leases[i], &keys); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// sizeHint is a generous estimate of the rendered listing: one
// allocation for the whole of it.
func (l *listing) sizeHint() int { return 2 + 400*len(l.leases) + 560*l.nRes + 280*l.nEv }

// appendLease appends one lease object of the listing.
func (l *listing) appendLease(b []byte, x *listedLease, keys *keyOrder) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = AppendString(b, x.l.ID)
	b = append(b, `,"name":`...)
	b = AppendString(b, x.l.Name)
	b = append(b, `,"user_id":`...)
	b = AppendString(b, x.l.UserID)
	b = append(b, `,"project_id":`...)
	b = AppendString(b, x.l.ProjectID)
	b = append(b, `,"start_date":`...)
	b = AppendDate(b, x.l.StartDate)
	b = append(b, `,"end_date":`...)
	b = AppendDate(b, x.l.EndDate)
	b = append(b, `,"trust_id":`...)
	if x.l.TrustID == "" {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, x.l.TrustID)
	}
	b = append(b, `,"status":`...)
	b = AppendString(b, x.l.Status)
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, x.l.Degraded)
	b = append(b, `,"lease_type":`...)
	b = AppendString(b, leaseType(x.l.LeaseType))
	if x.l.Timeout != nil {
		b = append(b, `,"timeout":`...)
		b = strconv.AppendInt(b, int64(*x.l.Timeout), 10)
	}
	b = append(b, `,"tags":[`...)
	for j, tag := range decodeTags(x.l.Tags) {
		if j > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, tag)
	}
	b = append(b, ']')
	b = append(b, `,"created_at":`...)
	b = AppendStamp(b, x.l.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendStampPtr(b, x.l.UpdatedAt)
	b = append(b, `,"reservations":[`...)
	for j, r := range x.ress {
		if j > 0 {
			b = append(b, ',')
		}
		if b, err = appendReservation(b, r, l.extra[r.ID], keys); err != nil {
			return nil, err
		}
	}
	b = append(b, `],"events":[`...)
	for j, e := range x.evs {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = AppendString(b, e.ID)
		b = append(b, `,"lease_id":`...)
		b = AppendString(b, e.LeaseID)
		b = append(b, `,"event_type":`...)
		b = AppendString(b, e.EventType)
		b = append(b, `,"time":`...)
		b = AppendDate(b, e.Time)
		b = append(b, `,"status":`...)
		b = AppendString(b, e.Status)
		b = append(b, `,"created_at":`...)
		b = AppendStamp(b, e.CreatedAt)
		b = append(b, `,"updated_at":`...)
		b = appendStampPtr(b, e.UpdatedAt)
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// The keys reservationView sets, sorted as encoding/json writes a map.
var resBaseKeys = []string{"created_at", "id", "lease_id", "missing_resources", "resource_id",
	"resource_type", "resources_changed", "status", "updated_at"}

// resKey is one key of a reservation object: a field of the reservation
// row (base ≥ 0, an index in resBaseKeys) or a plugin field (base < 0).
type resKey struct {
	enc  []byte // "key":
	name string
	base int
}

// keyOrder is the sorted key list of the last set of plugin field names
// seen: every reservation of one plugin has the same names, so the keys
// are sorted once per run of a plugin rather than once per reservation.
type keyOrder struct {
	extra map[string]bool
	keys  []resKey
}

func (o *keyOrder) of(extra map[string]any) []resKey {
	if o.keys != nil && len(extra) == len(o.extra) {
		same := true
		for k := range extra {
			if !o.extra[k] {
				same = false
				break
			}
		}
		if same {
			return o.keys
		}
	}
	o.extra = make(map[string]bool, len(extra))
	names := make([]string, 0, len(resBaseKeys)+len(extra))
	for k := range extra {
		o.extra[k] = true
		names = append(names, k)
	}
	for _, k := range resBaseKeys {
		if !o.extra[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	o.keys = make([]resKey, len(names))
	for i, k := range names {
		o.keys[i] = resKey{enc: append(AppendString(nil, k), ':'), name: k, base: -1}
		if !o.extra[k] {
			o.keys[i].base = slices.Index(resBaseKeys, k)
		}
	}
	return o.keys
}

func appendReservation(b []byte, r *models.Reservation, extra map[string]any, o *keyOrder) ([]byte, error) {
	b = append(b, '{')
	for i, k := range o.of(extra) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, k.enc...)
		switch k.base {
		case -1:
			var err error
			if b, err = appendAny(b, extra[k.name]); err != nil {
				return nil, err
			}
		case 0:
			b = AppendStamp(b, r.CreatedAt)
		case 1:
			b = AppendString(b, r.ID)
		case 2:
			b = AppendString(b, r.LeaseID)
		case 3:
			b = strconv.AppendBool(b, r.MissingResources)
		case 4:
			b = AppendString(b, r.ResourceID)
		case 5:
			b = AppendString(b, r.ResourceType)
		case 6:
			b = strconv.AppendBool(b, r.ResourcesChanged)
		case 7:
			b = AppendString(b, r.Status)
		case 8:
			b = appendStampPtr(b, r.UpdatedAt)
		}
	}
	return append(b, '}'), nil
}

// appendAny appends a plugin field value: the types plugins use directly,
// anything else through encoding/json.
func appendAny(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case []string:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, s)
		}
		return append(b, ']'), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// jsonPlain marks the bytes encoding/json writes unchanged inside a
// string: printable ASCII but the quote, the backslash and the HTML
// characters it escapes.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s quoted as encoding/json writes it (HTML
// characters escaped, invalid UTF-8 replaced): ASCII directly, a string
// with any other byte through encoding/json itself.
func AppendString(b []byte, s string) []byte {
	i := 0
	for i < len(s) && jsonPlain[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	for j := i; j < len(s); j++ {
		if s[j] >= 0x80 {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if jsonPlain[c] {
			b = append(b, c)
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default: // other control characters and <, >, &
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// AppendDate appends FormatDate(t) as a JSON string.
func AppendDate(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1 || y > 9999 {
		return AppendString(b, FormatDate(t))
	}
	b = appendDateTime(append(b, '"'), y, int(mo), d, t, 'T')
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, '"')
}

// AppendStamp appends FormatStamp(t) as a JSON string.
func AppendStamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1 || y > 9999 {
		return AppendString(b, FormatStamp(t))
	}
	b = appendDateTime(append(b, '"'), y, int(mo), d, t, ' ')
	if us := t.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		b = appendDigits(b, us, 6)
	}
	return append(b, '"')
}

func appendStampPtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return AppendStamp(b, *t)
}

// appendDateTime appends "YYYY-MM-DD<sep>HH:MM:SS".
func appendDateTime(b []byte, y, mo, d int, t time.Time, sep byte) []byte {
	h, mi, s := t.Clock()
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, mo, 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, sep)
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	return appendDigits(b, s, 2)
}

// appendDigits appends n (≥ 0) zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[:width]...)
}

// TimeCol scans a date column selected with TimeExpr: a time.Time (MySQL),
// the stored text (SQLite) or NULL.
type TimeCol struct {
	T     time.Time
	Valid bool
	// Raw is the stored text on SQLite (what it sorts by), else "".
	Raw string
}

// Scan implements sql.Scanner.
func (c *TimeCol) Scan(src any) error {
	var err error
	switch v := src.(type) {
	case nil:
		*c = TimeCol{}
		return nil
	case time.Time:
		c.T, c.Valid, c.Raw = v.UTC(), true, ""
		return nil
	case string:
		c.Raw = v
		c.T, err = ParseStoredTime(v)
	case []byte:
		c.Raw = string(v)
		c.T, err = ParseStoredTime(c.Raw)
	default:
		return fmt.Errorf("cannot scan %T into a date", src)
	}
	c.Valid = err == nil
	return err
}

// Ptr is the time, or nil for NULL.
func (c TimeCol) Ptr() *time.Time {
	if !c.Valid {
		return nil
	}
	t := c.T
	return &t
}

// storedLayouts are the layouts the SQLite driver (modernc.org/sqlite)
// reads dates in, the first being the one it writes with
// _time_format=sqlite; the last is time.Time.String's.
var storedLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
	"2006-01-02 15:04:05.999999999 -0700 MST",
}

// ParseStoredTime reads a date as SQLite stores it, in UTC:
// "YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]" directly, the other layouts
// the driver accepts through time.Parse.
func ParseStoredTime(s string) (time.Time, error) {
	if t, ok := parseFast(s); ok {
		return t, nil
	}
	if i := strings.Index(s, " m="); i > 0 {
		s = s[:i] // a monotonic clock reading written by time.Time.String
	}
	s = strings.TrimSuffix(s, "Z")
	for _, f := range storedLayouts {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot read %q as a date", s)
}

func parseFast(s string) (time.Time, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if d > daysIn(time.Month(mo), y) {
		return time.Time{}, false
	}
	i, ns := 19, 0
	if i < len(s) && s[i] == '.' {
		i++
		digits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if digits < 9 {
				ns = ns*10 + int(s[i]-'0')
				digits++
			} else {
				return time.Time{}, false
			}
			i++
		}
		if digits == 0 {
			return time.Time{}, false
		}
		for ; digits < 9; digits++ {
			ns *= 10
		}
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC)
	switch rest := s[i:]; {
	case rest == "" || rest == "Z":
		return t, true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(i+1, 2), num(i+4, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		off := time.Duration(oh)*time.Hour + time.Duration(om)*time.Minute
		if rest[0] == '+' {
			off = -off
		}
		return t.Add(off), true
	}
	return time.Time{}, false
}

func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Str scans a text column into *P (NULL as "").
type Str struct{ P *string }

// Scan implements sql.Scanner.
func (s Str) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*s.P = v
	case []byte:
		*s.P = string(v)
	case nil:
		*s.P = ""
	default:
		return fmt.Errorf("cannot scan %T into a string", src)
	}
	return nil
}
