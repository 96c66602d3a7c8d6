package plugins

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Int reads an integer parameter: a JSON integer or an integer-like
// string (Blazar crashes on "2"; we accept it). ok is false when absent.
func (v Values) Int(key string) (n int, present bool, err error) {
	raw, ok := v[key]
	if !ok || raw == nil {
		return 0, ok, nil
	}
	switch x := raw.(type) {
	case json.Number:
		i, err := strconv.ParseInt(x.String(), 10, 64)
		if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			return 0, true, MalformedParameter(key)
		}
		return int(i), true, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			return 0, true, MalformedParameter(key)
		}
		return int(x), true, nil
	case int:
		return x, true, nil
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(x), 10, 32)
		if err != nil {
			return 0, true, MalformedParameter(key)
		}
		return int(i), true, nil
	}
	return 0, true, MalformedParameter(key)
}

// String reads a string parameter; ok is false when absent. A non-string
// value is a 400.
func (v Values) String(key string) (s string, present bool, err error) {
	raw, ok := v[key]
	if !ok {
		return "", false, nil
	}
	if raw == nil {
		return "", true, nil
	}
	s, isStr := raw.(string)
	if !isStr {
		return "", true, MalformedParameter(key)
	}
	return s, true, nil
}

// StringList reads a list of strings; ok is false when absent.
func (v Values) StringList(key string) (out []string, present bool, err error) {
	raw, ok := v[key]
	if !ok || raw == nil {
		return nil, ok, nil
	}
	if l, ok := raw.([]string); ok {
		return l, true, nil
	}
	list, isList := raw.([]any)
	if !isList {
		// The CLI sends required_floatingips=["a","b"] already decoded;
		// accept a JSON text too.
		if s, isStr := raw.(string); isStr {
			var l []string
			if json.Unmarshal([]byte(s), &l) == nil {
				return l, true, nil
			}
		}
		return nil, true, MalformedParameter(key)
	}
	for _, e := range list {
		s, isStr := e.(string)
		if !isStr {
			return nil, true, MalformedParameter(key)
		}
		out = append(out, s)
	}
	return out, true, nil
}
