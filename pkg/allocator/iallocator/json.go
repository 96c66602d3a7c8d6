package iallocator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// member is one key/value of a JSON object, in document order.
type member struct {
	Key   string
	Value json.RawMessage
}

// orderedObject splits a JSON object into its members, keeping their
// order (hail's node order is its tie-break order, so a Go map would lose
// information). raw must be valid JSON (it comes out of a decoded
// document), so a structural scan is enough: no value is decoded here.
func orderedObject(raw json.RawMessage, what string) ([]member, error) {
	b := bytes.TrimSpace(raw)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("%s: expected a JSON object", what)
	}
	var out []member
	seen := map[string]bool{}
	i := 1
	skipWS := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	for {
		skipWS()
		if i >= len(b)-1 {
			break
		}
		if b[i] == ',' {
			i++
			skipWS()
		}
		if b[i] != '"' {
			return nil, fmt.Errorf("%s: expected a key", what)
		}
		kEnd := scanString(b, i)
		if kEnd < 0 {
			return nil, fmt.Errorf("%s: bad key", what)
		}
		var key string
		if bytes.IndexByte(b[i:kEnd], '\\') >= 0 {
			if err := json.Unmarshal(b[i:kEnd], &key); err != nil {
				return nil, fmt.Errorf("%s: %v", what, err)
			}
		} else {
			key = string(b[i+1 : kEnd-1])
		}
		i = kEnd
		skipWS()
		if i >= len(b) || b[i] != ':' {
			return nil, fmt.Errorf("%s: expected ':'", what)
		}
		i++
		skipWS()
		vEnd := scanValue(b, i)
		if vEnd < 0 {
			return nil, fmt.Errorf("%s: bad value for key %q", what, key)
		}
		if seen[key] {
			return nil, fmt.Errorf("%s: duplicate key %q", what, key)
		}
		seen[key] = true
		out = append(out, member{key, json.RawMessage(b[i:vEnd])})
		i = vEnd
	}
	return out, nil
}

// scanString returns the index just past the JSON string starting at i.
func scanString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// scanValue returns the index just past the JSON value starting at i.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := scanString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// obj is a decoded JSON object with typed, error-reporting accessors in
// the style of htools' tryFromObj.
type obj struct {
	m    map[string]json.RawMessage
	desc string
}

func newObj(raw json.RawMessage, desc string) (*obj, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: expected a JSON object", desc)
	}
	return &obj{m: m, desc: desc}, nil
}

func (o *obj) has(key string) bool {
	v, ok := o.m[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

func (o *obj) missing(key string) error {
	return fmt.Errorf("%s: key '%s' not found", o.desc, key)
}

func (o *obj) raw(key string) (json.RawMessage, error) {
	v, ok := o.m[key]
	if !ok {
		return nil, o.missing(key)
	}
	return v, nil
}

func (o *obj) decode(key string, v any) error {
	r, err := o.raw(key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r, v); err != nil {
		return fmt.Errorf("%s, key '%s': %v", o.desc, key, err)
	}
	return nil
}

func (o *obj) str(key string) (string, error) {
	var s string
	err := o.decode(key, &s)
	return s, err
}

func (o *obj) boolean(key string) (bool, error) {
	var b bool
	err := o.decode(key, &b)
	return b, err
}

func (o *obj) strs(key string) ([]string, error) {
	var s []string
	err := o.decode(key, &s)
	if err == nil && s == nil {
		s = []string{}
	}
	return s, err
}

func (o *obj) float(key string) (float64, error) {
	var n json.Number
	if err := o.decode(key, &n); err != nil {
		return 0, err
	}
	f, err := n.Float64()
	if err != nil {
		return 0, fmt.Errorf("%s, key '%s': %v", o.desc, key, err)
	}
	return f, nil
}

func (o *obj) integer(key string) (int, error) {
	var n json.Number
	if err := o.decode(key, &n); err != nil {
		return 0, err
	}
	return toInt(n, o.desc, key)
}

func toInt(n json.Number, desc, key string) (int, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i > math.MaxInt32*1024*1024 || i < -math.MaxInt32*1024*1024 {
			return 0, fmt.Errorf("%s, key '%s': number out of range", desc, key)
		}
		return int(i), nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%s, key '%s': expected an integer, got %s", desc, key, n)
	}
	return int(f), nil
}

// jsonString encodes s as Haskell's Text.JSON does: only '"', '\\' and
// control characters are escaped; everything else is written as is.
func jsonString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20:
			switch r {
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&15])
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
