package pyjsonschema

import (
	"net/netip"
	"strings"
	"time"
	"unicode"
)

// checkFormat is FormatChecker().check for the formats jsonschema 4.10.3
// checks on Debian 12 that matter here. Formats it does not know (or that
// this package does not implement: hostname, uri, iri, json-pointer, regex,
// time, color, ...) pass, which is what Python does for unknown formats.
func checkFormat(v Value, format string) bool {
	if v.kind != StringKind {
		return true
	}
	s := v.s
	switch format {
	case "uuid":
		return isPyUUID(s)
	case "email", "idn-email":
		return strings.Contains(s, "@")
	case "ipv4":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is4()
	case "ipv6":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is6() && a.Zone() == "" && !strings.Contains(s, "%")
	case "date":
		return isPyDate(s)
	}
	return true
}

// isPyUUID reproduces jsonschema's is_uuid: uuid.UUID(s) must succeed and
// s must have '-' at positions 8, 13, 18 and 23.
func isPyUUID(s string) bool {
	h := strings.ReplaceAll(s, "urn:", "")
	h = strings.ReplaceAll(h, "uuid:", "")
	h = strings.Trim(h, "{}")
	h = strings.ReplaceAll(h, "-", "")
	if runeLen(h) != 32 || !pyIntBase16(h) {
		return false
	}
	rs := []rune(s)
	for _, p := range []int{8, 13, 18, 23} {
		if p >= len(rs) || rs[p] != '-' {
			return false
		}
	}
	return true
}

// pyIntBase16 reports whether int(s, 16) succeeds: optional surrounding
// whitespace, sign, "0x" prefix, and single underscores between digits;
// Unicode decimal digits count as digits.
func pyIntBase16(s string) bool {
	rs := []rune(strings.TrimFunc(s, pyIsSpace))
	i := 0
	if i < len(rs) && (rs[i] == '+' || rs[i] == '-') {
		i++
	}
	prefixed := false
	if i+1 < len(rs) && rs[i] == '0' && (rs[i+1] == 'x' || rs[i+1] == 'X') {
		i += 2
		prefixed = true
	}
	digits := 0
	prevUnderscore := false
	for ; i < len(rs); i++ {
		r := rs[i]
		if r == '_' {
			if prevUnderscore || (digits == 0 && !prefixed) {
				return false
			}
			prevUnderscore = true
			continue
		}
		if hexVal(r) < 0 && !unicode.Is(unicode.Nd, r) {
			return false
		}
		prevUnderscore = false
		digits++
	}
	return digits > 0 && !prevUnderscore
}

// isPyDate approximates instance.isascii() and date.fromisoformat(instance)
// for the calendar forms YYYY-MM-DD and YYYYMMDD (ISO week dates, which
// Python 3.11 also accepts, are rejected here).
func isPyDate(s string) bool {
	for _, r := range s {
		if r > 0x7f {
			return false
		}
	}
	layout := "2006-01-02"
	if len(s) == 8 {
		layout = "20060102"
	}
	if len(s) != len(layout) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if layout[i] == '-' {
			if s[i] != '-' {
				return false
			}
		} else if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	if s[:4] == "0000" {
		return false
	}
	_, err := time.Parse(layout, s)
	return err == nil
}
