package placement

import (
	"fmt"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyUnquoteUTF8 percent-decodes s like urllib's unquote_to_bytes (a bad
// escape is kept literally) and decodes the bytes as strict UTF-8.
func pyUnquoteUTF8(s string) (string, error) {
	if !strings.Contains(s, "%") {
		if !utf8.ValidString(s) {
			return strings.ToValidUTF8(s, "\uFFFD"), utf8DecodeError([]byte(s))
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, c)
	}
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD"), utf8DecodeError(b)
	}
	return string(b), nil
}

// utf8DecodeError renders Python's UnicodeDecodeError message for b.
func utf8DecodeError(b []byte) error {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			reason := "invalid start byte"
			c := b[i]
			switch {
			case c >= 0x80 && c < 0xc2, c > 0xf4:
				reason = "invalid start byte"
			default:
				// A valid lead byte followed by a bad or missing
				// continuation.
				need := 1
				if c >= 0xe0 {
					need = 2
				}
				if c >= 0xf0 {
					need = 3
				}
				j := i + 1
				for ; j < len(b) && j <= i+need; j++ {
					if b[j]&0xc0 != 0x80 {
						break
					}
				}
				if j >= len(b) && j-i <= need {
					if j-i > 1 {
						return fmt.Errorf("'utf-8' codec can't decode bytes in position %d-%d: unexpected end of data", i, len(b)-1)
					}
					return fmt.Errorf("'utf-8' codec can't decode byte 0x%02x in position %d: unexpected end of data", c, i)
				}
				reason = "invalid continuation byte"
				if j-i > 1 {
					return fmt.Errorf("'utf-8' codec can't decode bytes in position %d-%d: %s", i, j-1, reason)
				}
			}
			return fmt.Errorf("'utf-8' codec can't decode byte 0x%02x in position %d: %s", c, i, reason)
		}
		i += n
	}
	return fmt.Errorf("'utf-8' codec can't decode")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// PyInt parses s as Python's int(str) does: surrounding whitespace,
// an optional sign, decimal digits of any script, single underscores
// between digits. (int() skips ASCII " \t\n\v\f\r" and Unicode White_Space,
// which is unicode.IsSpace; unlike str.strip it keeps \x1c-\x1f.)
func PyInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	if s == "" {
		return nil, false
	}
	neg := false
	switch s[0] {
	case '+':
		s = s[1:]
	case '-':
		neg = true
		s = s[1:]
	}
	if s == "" {
		return nil, false
	}
	var digits strings.Builder
	prevUnderscore, any := false, false
	for i, r := range s {
		if r == '_' {
			if i == 0 || prevUnderscore {
				return nil, false
			}
			prevUnderscore = true
			continue
		}
		d, ok := decimalValue(r)
		if !ok {
			return nil, false
		}
		digits.WriteByte(byte('0' + d))
		prevUnderscore, any = false, true
	}
	if prevUnderscore || !any {
		return nil, false
	}
	n, ok := new(big.Int).SetString(digits.String(), 10)
	if !ok {
		return nil, false
	}
	if neg {
		n.Neg(n)
	}
	return n, true
}

// decimalValue returns the value of a Unicode decimal digit (category Nd).
func decimalValue(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	// Every Nd range of the Unicode tables is a run of whole 0..9 blocks.
	for _, rg := range unicode.Nd.R16 {
		if uint16(r) >= rg.Lo && uint16(r) <= rg.Hi && r <= 0xFFFF {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if uint32(r) >= rg.Lo && uint32(r) <= rg.Hi {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	return 0, false
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyListRepr renders a list of strings as Python's repr does
// (['a', 'b']) for the plain ASCII names used as group suffixes.
func pyListRepr(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyStrRepr(s))
	}
	b.WriteByte(']')
	return b.String()
}

// pyStrRepr is repr(str) for printable text: single quotes unless the
// text holds a single quote and no double quote.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}
