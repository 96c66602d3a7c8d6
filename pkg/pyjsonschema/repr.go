package pyjsonschema

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyStrRepr returns Python 3's repr() of a str.
func pyStrRepr(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case pyIsPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyIsPrintable approximates str.isprintable for one character: everything
// but categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs (except space).
func pyIsPrintable(r rune) bool {
	return unicode.IsPrint(r)
}

// pyIsSpace is str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyFloatRepr returns Python's repr() of a float.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	k := strings.IndexByte(e, 'e')
	mant, exp := e[:k], e[k+1:]
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	if x < -4 || x >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if x < 0 {
			es, x = "-", -x
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, x)
	}
	decpt := x + 1
	var out string
	switch {
	case decpt <= 0:
		out = "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		out = digits[:decpt] + "." + digits[decpt:]
	}
	return sign + out
}

func numberRepr(v Value) string {
	if v.num.isInt {
		return v.s
	}
	return pyFloatRepr(v.num.f)
}

// writeRepr writes Python's repr() (dicts in insertion order).
func writeRepr(b *bytes.Buffer, v Value) { writeReprOpt(b, v, false) }

func writeReprOpt(b *bytes.Buffer, v Value, sorted bool) {
	switch v.kind {
	case NullKind:
		b.WriteString("None")
	case BoolKind:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case NumberKind:
		b.WriteString(numberRepr(v))
	case StringKind:
		b.WriteString(pyStrRepr(v.s))
	case ArrayKind:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprOpt(b, e, sorted)
		}
		b.WriteByte(']')
	case ObjectKind:
		ms := v.obj.members
		if sorted {
			ms = sortedMembers(ms)
		}
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyStrRepr(m.Key))
			b.WriteString(": ")
			writeReprOpt(b, m.Value, sorted)
		}
		b.WriteByte('}')
	}
}

func sortedMembers(ms []Member) []Member {
	out := append([]Member(nil), ms...)
	// Python compares str by code point; Go compares UTF-8 bytes, which
	// orders identically.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func reprSorted(v Value) string {
	var b bytes.Buffer
	writeReprOpt(&b, v, true)
	return b.String()
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// pformat is pprint.pformat(v, width=72) (sort_dicts=True).
func pformat(v Value) string {
	p := &printer{width: 72}
	p.format(v, 0, 0, 0)
	return p.b.String()
}

type printer struct {
	width int
	b     strings.Builder
}

func (p *printer) format(v Value, indent, allowance, level int) {
	maxWidth := p.width - indent - allowance
	rep, fits := reprSortedWithin(v, maxWidth)
	if !fits {
		switch v.kind {
		case ObjectKind:
			p.dict(v, indent, allowance, level+1)
			return
		case ArrayKind:
			p.list(v, indent, allowance, level+1)
			return
		case StringKind:
			p.str(v.s, indent, allowance, level+1)
			return
		}
	}
	if !fits {
		rep = reprSorted(v)
	}
	p.b.WriteString(rep)
}

// reprSortedWithin is reprSorted(v) and true when that is at most max
// runes long, else false, found without building the rest of the repr:
// format asks at every level, and a whole repr each time made a deeply
// nested value quadratic (a 5,000-deep JSON body took seconds to
// describe in a 400).
func reprSortedWithin(v Value, max int) (string, bool) {
	w := boundedRepr{max: max}
	w.write(v)
	if w.over {
		return "", false
	}
	return w.b.String(), true
}

// boundedRepr writes reprSorted's output until it passes max runes.
type boundedRepr struct {
	b    strings.Builder
	n    int
	max  int
	over bool
}

func (w *boundedRepr) put(s string) {
	if w.over {
		return
	}
	w.n += runeLen(s)
	if w.n > w.max {
		w.over = true
		return
	}
	w.b.WriteString(s)
}

func (w *boundedRepr) write(v Value) {
	switch v.kind {
	case ArrayKind:
		w.put("[")
		for i, e := range v.arr {
			if w.over {
				return
			}
			if i > 0 {
				w.put(", ")
			}
			w.write(e)
		}
		w.put("]")
	case ObjectKind:
		w.put("{")
		for i, m := range sortedMembers(v.obj.members) {
			if w.over {
				return
			}
			if i > 0 {
				w.put(", ")
			}
			w.put(pyStrRepr(m.Key))
			w.put(": ")
			w.write(m.Value)
		}
		w.put("}")
	default:
		if w.over {
			return
		}
		var b bytes.Buffer
		writeReprOpt(&b, v, true)
		w.put(b.String())
	}
}

func (p *printer) dict(v Value, indent, allowance, level int) {
	p.b.WriteByte('{')
	items := sortedMembers(v.obj.members)
	if len(items) > 0 {
		allowance++
		indent++
		for i, m := range items {
			last := i == len(items)-1
			rep := pyStrRepr(m.Key)
			p.b.WriteString(rep)
			p.b.WriteString(": ")
			a := 1
			if last {
				a = allowance
			}
			p.format(m.Value, indent+runeLen(rep)+2, a, level)
			if !last {
				p.delimNL(indent)
			}
		}
	}
	p.b.WriteByte('}')
}

// delimNL writes the separator between items: a comma, a newline and
// indent spaces (written, not built: a one-item container at a deep
// indent needs none, and building it at every level was quadratic).
func (p *printer) delimNL(indent int) {
	p.b.WriteString(",\n")
	for range indent {
		p.b.WriteByte(' ')
	}
}

func (p *printer) list(v Value, indent, allowance, level int) {
	p.b.WriteByte('[')
	allowance++
	indent++
	for i, e := range v.arr {
		last := i == len(v.arr)-1
		if i > 0 {
			p.delimNL(indent)
		}
		a := 1
		if last {
			a = allowance
		}
		p.format(e, indent, a, level)
	}
	p.b.WriteByte(']')
}

// pySplitLinesKeepEnds is str.splitlines(True).
func pySplitLinesKeepEnds(s string) []string {
	var out []string
	rs := []rune(s)
	start := 0
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\r':
			if i+1 < len(rs) && rs[i+1] == '\n' {
				i++
			}
		case '\n', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\x85', '\u2028', '\u2029':
		default:
			continue
		}
		out = append(out, string(rs[start:i+1]))
		start = i + 1
	}
	if start < len(rs) {
		out = append(out, string(rs[start:]))
	}
	return out
}

// splitWords is re.findall(r'\S*\s*', line) without the final empty match.
func splitWords(line string) []string {
	var parts []string
	rs := []rune(line)
	i := 0
	for i < len(rs) {
		j := i
		for j < len(rs) && !pyIsSpace(rs[j]) {
			j++
		}
		for j < len(rs) && pyIsSpace(rs[j]) {
			j++
		}
		parts = append(parts, string(rs[i:j]))
		i = j
	}
	return parts
}

func (p *printer) str(s string, indent, allowance, level int) {
	if s == "" {
		p.b.WriteString(pyStrRepr(s))
		return
	}
	var chunks []string
	lines := pySplitLinesKeepEnds(s)
	if level == 1 {
		indent++
		allowance++
	}
	maxWidth := p.width - indent
	maxWidth1 := maxWidth
	var rep string
	for i, line := range lines {
		rep = pyStrRepr(line)
		if i == len(lines)-1 {
			maxWidth1 -= allowance
		}
		if runeLen(rep) <= maxWidth1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := splitWords(line)
		maxWidth2 := maxWidth
		current := ""
		for j, part := range parts {
			candidate := current + part
			if j == len(parts)-1 && i == len(lines)-1 {
				maxWidth2 -= allowance
			}
			if runeLen(pyStrRepr(candidate)) > maxWidth2 {
				if current != "" {
					chunks = append(chunks, pyStrRepr(current))
				}
				current = part
			} else {
				current = candidate
			}
		}
		if current != "" {
			chunks = append(chunks, pyStrRepr(current))
		}
	}
	if len(chunks) == 1 {
		p.b.WriteString(rep)
		return
	}
	if level == 1 {
		p.b.WriteByte('(')
	}
	for i, c := range chunks {
		if i > 0 {
			p.b.WriteString("\n" + strings.Repeat(" ", indent))
		}
		p.b.WriteString(c)
	}
	if level == 1 {
		p.b.WriteByte(')')
	}
}
