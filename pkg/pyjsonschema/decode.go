package pyjsonschema

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeError is a JSON decoding failure worded exactly as Python's
// json.loads(body.decode("utf-8")) words it (str(exc)), e.g.
// "Expecting value: line 1 column 1 (char 0)" or
// "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte".
type DecodeError struct {
	Msg string // the message without position, e.g. "Expecting value"
	Pos int    // position in code points (-1 for non-positional errors)
	str string
}

func (e *DecodeError) Error() string { return e.str }

// maxIntDigits is CPython's default sys.get_int_max_str_digits().
const maxIntDigits = 4300

// Decode parses JSON text the way Placement does (oslo jsonutils.loads, i.e.
// bytes decoded as strict UTF-8, then json.loads): it accepts Python's
// extensions NaN, Infinity and -Infinity, keeps the first position and last
// value of duplicate keys, and reports errors with Python's messages.
// Lone UTF-16 surrogates (\ud800) decode to U+FFFD.
func Decode(data []byte) (Value, error) {
	if err := checkUTF8(data); err != nil {
		return Value{}, err
	}
	d := &decoder{s: []rune(string(data))}
	if len(d.s) > 0 && d.s[0] == '\ufeff' {
		return Value{}, d.errAt("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0)
	}
	idx := d.ws(0)
	v, end, err := d.scan(idx, 0)
	if err != nil {
		return Value{}, err
	}
	end = d.ws(end)
	if end != len(d.s) {
		return Value{}, d.errAt("Extra data", end)
	}
	return v, nil
}

// checkUTF8 reproduces bytes.decode("utf-8") errors.
func checkUTF8(b []byte) error {
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			i++
			continue
		}
		var n int
		lo, hi := byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			n = 2
		case c >= 0xE0 && c <= 0xEF:
			n = 3
			if c == 0xE0 {
				lo = 0xA0
			} else if c == 0xED {
				hi = 0x9F
			}
		case c >= 0xF0 && c <= 0xF4:
			n = 4
			if c == 0xF0 {
				lo = 0x90
			} else if c == 0xF4 {
				hi = 0x8F
			}
		default:
			return utf8Err(b, i, i+1, "invalid start byte")
		}
		for k := 1; k < n; k++ {
			if i+k >= len(b) {
				return utf8Err(b, i, len(b), "unexpected end of data")
			}
			cb := b[i+k]
			l, h := byte(0x80), byte(0xBF)
			if k == 1 {
				l, h = lo, hi
			}
			if cb < l || cb > h {
				return utf8Err(b, i, i+k, "invalid continuation byte")
			}
		}
		i += n
	}
	return nil
}

func utf8Err(b []byte, start, end int, reason string) error {
	var s string
	if end-start == 1 {
		s = fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: %s", b[start], start, reason)
	} else {
		s = fmt.Sprintf("'utf-8' codec can't decode bytes in position %d-%d: %s", start, end-1, reason)
	}
	return &DecodeError{Msg: s, Pos: -1, str: s}
}

type decoder struct {
	s []rune
}

const maxDepth = 10000

func (d *decoder) errAt(msg string, pos int) error {
	line := 1
	last := -1
	for i := 0; i < pos && i < len(d.s); i++ {
		if d.s[i] == '\n' {
			line++
			last = i
		}
	}
	col := pos - last
	return &DecodeError{Msg: msg, Pos: pos, str: fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, pos)}
}

func (d *decoder) ws(i int) int {
	for i < len(d.s) {
		switch d.s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (d *decoder) hasPrefix(i int, lit string) bool {
	for _, r := range lit {
		if i >= len(d.s) || d.s[i] != r {
			return false
		}
		i++
	}
	return true
}

func (d *decoder) scan(i int, depth int) (Value, int, error) {
	if i >= len(d.s) {
		return Value{}, 0, d.errAt("Expecting value", i)
	}
	if depth > maxDepth {
		// CPython raises RecursionError here; it is not a ValueError, so
		// Placement would answer 500. We report a decode error instead.
		return Value{}, 0, &DecodeError{Msg: "maximum recursion depth exceeded", Pos: i, str: "maximum recursion depth exceeded while decoding a JSON array from a unicode string"}
	}
	switch c := d.s[i]; {
	case c == '"':
		s, end, err := d.str(i + 1)
		if err != nil {
			return Value{}, 0, err
		}
		return String(s), end, nil
	case c == '{':
		return d.object(i+1, depth)
	case c == '[':
		return d.array(i+1, depth)
	case c == 'n' && d.hasPrefix(i, "null"):
		return Value{}, i + 4, nil
	case c == 't' && d.hasPrefix(i, "true"):
		return Bool(true), i + 4, nil
	case c == 'f' && d.hasPrefix(i, "false"):
		return Bool(false), i + 5, nil
	case c == 'N' && d.hasPrefix(i, "NaN"):
		return Value{kind: NumberKind, s: "NaN", num: &number{f: math.NaN()}}, i + 3, nil
	case c == 'I' && d.hasPrefix(i, "Infinity"):
		return Value{kind: NumberKind, s: "Infinity", num: &number{f: math.Inf(1)}}, i + 8, nil
	case c == '-' && d.hasPrefix(i, "-Infinity"):
		return Value{kind: NumberKind, s: "-Infinity", num: &number{f: math.Inf(-1)}}, i + 9, nil
	}
	return d.number(i)
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

func (d *decoder) number(start int) (Value, int, error) {
	i := start
	n := len(d.s)
	if i < n && d.s[i] == '-' {
		i++
	}
	switch {
	case i < n && d.s[i] >= '1' && d.s[i] <= '9':
		for i < n && isDigit(d.s[i]) {
			i++
		}
	case i < n && d.s[i] == '0':
		i++
	default:
		return Value{}, 0, d.errAt("Expecting value", start)
	}
	isInt := true
	if i+1 < n && d.s[i] == '.' && isDigit(d.s[i+1]) {
		isInt = false
		i += 2
		for i < n && isDigit(d.s[i]) {
			i++
		}
	}
	if i < n && (d.s[i] == 'e' || d.s[i] == 'E') {
		e := i
		i++
		if i < n && (d.s[i] == '+' || d.s[i] == '-') {
			i++
		}
		ds := i
		for i < n && isDigit(d.s[i]) {
			i++
		}
		if i > ds {
			isInt = false
		} else {
			i = e
		}
	}
	lit := string(d.s[start:i])
	if isInt {
		v, err := parseInt(lit)
		if err != nil {
			return Value{}, 0, err
		}
		return v, i, nil
	}
	f, _ := strconv.ParseFloat(lit, 64) // overflow gives ±Inf like Python
	return Value{kind: NumberKind, s: lit, num: &number{f: f}}, i, nil
}

func parseInt(lit string) (Value, error) {
	digits := strings.TrimPrefix(lit, "-")
	if len(digits) > maxIntDigits {
		msg := fmt.Sprintf("Exceeds the limit (%d digits) for integer string conversion: value has %d digits; use sys.set_int_max_str_digits() to increase the limit", maxIntDigits, len(digits))
		return Value{}, &DecodeError{Msg: msg, Pos: -1, str: msg}
	}
	if lit == "-0" {
		lit = "0"
	}
	num := &number{isInt: true}
	if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
		num.small, num.i, num.f = true, i, float64(i)
	} else {
		num.big, _ = new(big.Int).SetString(lit, 10)
		num.f, _ = new(big.Float).SetInt(num.big).Float64()
	}
	return Value{kind: NumberKind, s: lit, num: num}, nil
}

func hexVal(r rune) int {
	switch {
	case r >= '0' && r <= '9':
		return int(r - '0')
	case r >= 'a' && r <= 'f':
		return int(r-'a') + 10
	case r >= 'A' && r <= 'F':
		return int(r-'A') + 10
	}
	return -1
}

// str scans a string whose opening quote is at begin-1.
func (d *decoder) str(begin int) (string, int, error) {
	var b strings.Builder
	n := len(d.s)
	i := begin
	for {
		if i >= n {
			return "", 0, d.errAt("Unterminated string starting at", begin-1)
		}
		c := d.s[i]
		if c == '"' {
			return b.String(), i + 1, nil
		}
		if c < 0x20 {
			return "", 0, d.errAt("Invalid control character at", i)
		}
		if c != '\\' {
			b.WriteRune(c)
			i++
			continue
		}
		i++
		if i >= n {
			return "", 0, d.errAt("Unterminated string starting at", begin-1)
		}
		c = d.s[i]
		if c != 'u' {
			var r rune
			switch c {
			case '"', '\\', '/':
				r = c
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return "", 0, d.errAt("Invalid \\escape", i-1)
			}
			b.WriteRune(r)
			i++
			continue
		}
		u, ok := d.hex4(i + 1)
		if !ok {
			return "", 0, d.errAt("Invalid \\uXXXX escape", i)
		}
		i += 5
		if u >= 0xd800 && u <= 0xdbff && i+1 < n && d.s[i] == '\\' && d.s[i+1] == 'u' {
			u2, ok := d.hex4(i + 2)
			if !ok {
				return "", 0, d.errAt("Invalid \\uXXXX escape", i+1)
			}
			if u2 >= 0xdc00 && u2 <= 0xdfff {
				u = 0x10000 + ((u - 0xd800) << 10) | (u2 - 0xdc00)
				i += 6
			}
		}
		if u >= 0xd800 && u <= 0xdfff {
			u = utf8.RuneError
		}
		b.WriteRune(rune(u))
	}
}

func (d *decoder) hex4(i int) (int, bool) {
	if i+4 > len(d.s) {
		return 0, false
	}
	u := 0
	for k := 0; k < 4; k++ {
		h := hexVal(d.s[i+k])
		if h < 0 {
			return 0, false
		}
		u = u<<4 | h
	}
	return u, true
}

func (d *decoder) object(i int, depth int) (Value, int, error) {
	o := &object{}
	n := len(d.s)
	i = d.ws(i)
	if i >= n || d.s[i] != '}' {
		for {
			if i >= n || d.s[i] != '"' {
				return Value{}, 0, d.errAt("Expecting property name enclosed in double quotes", i)
			}
			key, end, err := d.str(i + 1)
			if err != nil {
				return Value{}, 0, err
			}
			i = d.ws(end)
			if i >= n || d.s[i] != ':' {
				return Value{}, 0, d.errAt("Expecting ':' delimiter", i)
			}
			i = d.ws(i + 1)
			v, end, err := d.scan(i, depth+1)
			if err != nil {
				return Value{}, 0, err
			}
			o.set(key, v)
			i = d.ws(end)
			if i < n && d.s[i] == '}' {
				break
			}
			if i >= n || d.s[i] != ',' {
				return Value{}, 0, d.errAt("Expecting ',' delimiter", i)
			}
			i = d.ws(i + 1)
		}
	}
	return Value{kind: ObjectKind, obj: o}, i + 1, nil
}

func (d *decoder) array(i int, depth int) (Value, int, error) {
	items := []Value{}
	n := len(d.s)
	i = d.ws(i)
	if i >= n || d.s[i] != ']' {
		for {
			v, end, err := d.scan(i, depth+1)
			if err != nil {
				return Value{}, 0, err
			}
			items = append(items, v)
			i = d.ws(end)
			if i < n && d.s[i] == ']' {
				break
			}
			if i >= n || d.s[i] != ',' {
				return Value{}, 0, d.errAt("Expecting ',' delimiter", i)
			}
			i = d.ws(i + 1)
		}
	}
	return Value{kind: ArrayKind, arr: items}, i + 1, nil
}
