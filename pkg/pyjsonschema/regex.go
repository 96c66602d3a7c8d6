package pyjsonschema

import (
	"regexp"
	"strings"
)

// compilePyRegex compiles a Python re pattern into an RE2 pattern with the
// same re.search semantics for the constructs Placement's schemas use.
// Translations: "$" (end or before a final newline) becomes (?:\n?\z), "\Z"
// becomes \z, \d \w \s become their Unicode forms, \uXXXX and \UXXXXXXXX
// become \x{...}, and "{,n}" becomes "{0,n}". Constructs RE2 lacks
// (lookaround, backreferences) make compilation fail.
func compilePyRegex(pat string) (*regexp.Regexp, error) {
	return regexp.Compile(translatePyRegex(pat))
}

const (
	pyWordClass  = `\p{L}\p{N}_`
	pySpaceClass = `\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`
)

func translatePyRegex(pat string) string {
	var b strings.Builder
	inClass := false
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs):
			n := rs[i+1]
			i++
			switch n {
			case 'd':
				b.WriteString(`\p{Nd}`)
			case 'D':
				b.WriteString(`\P{Nd}`)
			case 'w':
				if inClass {
					b.WriteString(pyWordClass)
				} else {
					b.WriteString("[" + pyWordClass + "]")
				}
			case 'W':
				if inClass {
					b.WriteString(`\W`)
				} else {
					b.WriteString("[^" + pyWordClass + "]")
				}
			case 's':
				if inClass {
					b.WriteString(pySpaceClass)
				} else {
					b.WriteString("[" + pySpaceClass + "]")
				}
			case 'S':
				if inClass {
					b.WriteString(`\S`)
				} else {
					b.WriteString("[^" + pySpaceClass + "]")
				}
			case 'Z':
				b.WriteString(`\z`)
			case 'u', 'U':
				w := 4
				if n == 'U' {
					w = 8
				}
				if i+w <= len(rs)-1 && isHexRunes(rs[i+1:i+1+w]) {
					b.WriteString(`\x{` + string(rs[i+1:i+1+w]) + `}`)
					i += w
				} else {
					b.WriteRune('\\')
					b.WriteRune(n)
				}
			default:
				b.WriteRune('\\')
				b.WriteRune(n)
			}
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteRune(c)
		case c == '[':
			inClass = true
			b.WriteRune(c)
			// a leading ']' (or '^]') is literal in Python and RE2
			if i+1 < len(rs) && rs[i+1] == '^' {
				i++
				b.WriteRune('^')
			}
			if i+1 < len(rs) && rs[i+1] == ']' {
				i++
				b.WriteString(`\]`)
			}
		case c == '$':
			b.WriteString(`(?:\n?\z)`)
		case c == '{' && i+1 < len(rs) && rs[i+1] == ',':
			j := i + 2
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				j++
			}
			if j > i+2 && j < len(rs) && rs[j] == '}' {
				b.WriteString("{0")
			} else {
				b.WriteString(`\{`)
			}
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

func isHexRunes(rs []rune) bool {
	for _, r := range rs {
		if hexVal(r) < 0 {
			return false
		}
	}
	return true
}
