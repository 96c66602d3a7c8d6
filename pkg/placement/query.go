package placement

import (
	"math"
	"net/url"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/pkg/microversion"
)

// This file holds the parsers for the query-string syntax that
// GET /resource_providers and GET /allocation_candidates share: resources,
// required, member_of and in_tree (and their granular, suffixed forms).
// They reproduce placement.util / placement.lib of Placement 8.0.0,
// including the exact error messages, because the conformance suite
// asserts them. Every parser returns a BadRequest *errs.Error on bad input.

// Query is a parsed query string with WebOb's semantics: pairs are split
// on '&' and ';', '+' means space, a key without '=' has the value "", and
// repeated keys keep every value in order.
type Query struct {
	pairs []queryPair
}

type queryPair struct{ key, value string }

// ParseQuery parses a raw query string (r.URL.RawQuery) the way WebOb's
// Request.GET does. Bytes that are not valid UTF-8 after percent-decoding
// make WebOb raise UnicodeDecodeError; ParseQuery reports that as an
// error carrying Python's message, which Placement's query validation
// turns into "Invalid query string parameters: …".
func ParseQuery(raw string) (*Query, error) {
	q := &Query{}
	if raw == "" {
		return q, nil
	}
	raw = strings.ReplaceAll(raw, "+", " ")
	var firstErr error
	for _, s1 := range strings.Split(raw, "&") {
		for _, part := range strings.Split(s1, ";") {
			if part == "" {
				continue
			}
			k, v, _ := strings.Cut(part, "=")
			kd, err1 := pyUnquoteUTF8(k)
			vd, err2 := pyUnquoteUTF8(v)
			if firstErr == nil {
				if err1 != nil {
					firstErr = err1
				} else if err2 != nil {
					firstErr = err2
				}
			}
			q.pairs = append(q.pairs, queryPair{kd, vd})
		}
	}
	return q, firstErr
}

// QueryFromValues builds a Query from url.Values (for tests and callers
// that already hold parsed values). Keys are taken in sorted order.
func QueryFromValues(v url.Values) *Query {
	q := &Query{}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, val := range v[k] {
			q.pairs = append(q.pairs, queryPair{k, val})
		}
	}
	return q
}

// Keys returns the distinct keys in order of first appearance.
func (q *Query) Keys() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range q.pairs {
		if !seen[p.key] {
			seen[p.key] = true
			out = append(out, p.key)
		}
	}
	return out
}

// Has reports whether key is present.
func (q *Query) Has(key string) bool {
	for _, p := range q.pairs {
		if p.key == key {
			return true
		}
	}
	return false
}

// GetAll returns every value of key in order.
func (q *Query) GetAll(key string) []string {
	var out []string
	for _, p := range q.pairs {
		if p.key == key {
			out = append(out, p.value)
		}
	}
	return out
}

// Get returns the last value of key (what WebOb's MultiDict[key] and
// dict(req.GET) give) and whether it is present.
func (q *Query) Get(key string) (string, bool) {
	v, ok := "", false
	for _, p := range q.pairs {
		if p.key == key {
			v, ok = p.value, true
		}
	}
	return v, ok
}

// First returns the first value of key.
func (q *Query) First(key string) (string, bool) {
	for _, p := range q.pairs {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

// Items returns the (key, value) pairs in order, like MultiDict.items().
func (q *Query) Items() [][2]string {
	out := make([][2]string, len(q.pairs))
	for i, p := range q.pairs {
		out[i] = [2]string{p.key, p.value}
	}
	return out
}

// Len is the number of pairs.
func (q *Query) Len() int { return len(q.pairs) }

// ResourceAmount is one "CLASS:AMOUNT" of a resources parameter.
type ResourceAmount struct {
	Class  string
	Amount int64
}

// Resources is a parsed resources parameter: classes in order of first
// appearance, the last amount given for a class winning (a Python dict).
type Resources []ResourceAmount

// Map returns the amounts keyed by class.
func (rs Resources) Map() map[string]int64 {
	m := make(map[string]int64, len(rs))
	for _, r := range rs {
		m[r.Class] = r.Amount
	}
	return m
}

// Classes returns the class names in order.
func (rs Resources) Classes() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Class
	}
	return out
}

const resourcesForm = "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: "

// ParseResources parses "CLASS:AMOUNT,CLASS:AMOUNT" (util.
// normalize_resources_qs_param). Class names are not checked against the
// database here. Amounts beyond int64 are clamped to math.MaxInt64 (no
// inventory can satisfy them).
func ParseResources(qs string) (Resources, error) {
	if pyStrip(qs) == "" {
		return nil, BadRequest("%sempty string.", resourcesForm)
	}
	var out Resources
	idx := map[string]int{}
	for _, rt := range strings.Split(qs, ",") {
		parts := strings.Split(rt, ":")
		if len(parts) != 2 {
			return nil, BadRequest("%s%s.", resourcesForm, rt)
		}
		name, raw := parts[0], parts[1]
		n, ok := PyInt(raw)
		if !ok {
			return nil, BadRequest("Requested resource %s expected positive integer amount. Got: %s.", name, raw)
		}
		if n.Sign() < 1 {
			return nil, BadRequest("Requested resource %s requires amount >= 1. Got: %s.", name, n.String())
		}
		amount := int64(math.MaxInt64)
		if n.IsInt64() {
			amount = n.Int64()
		}
		if i, seen := idx[name]; seen {
			out[i].Amount = amount
			continue
		}
		idx[name] = len(out)
		out = append(out, ResourceAmount{Class: name, Amount: amount})
	}
	return out, nil
}

// RequiredTraits is a parsed required parameter: AnyOf is ANDed, each
// entry a set (sorted, unique) of traits of which a provider needs one;
// Forbidden are traits a provider must not have (sorted, unique).
type RequiredTraits struct {
	AnyOf     [][]string
	Forbidden []string
}

// Empty reports whether nothing was requested.
func (t RequiredTraits) Empty() bool { return len(t.AnyOf) == 0 && len(t.Forbidden) == 0 }

// ParseRequiredValue parses one value of a required parameter
// (util.normalize_traits_qs_param): "T1,!T2" or, when allowAnyTraits
// (1.39), "in:T1,T2". allowForbidden is microversion ≥ 1.22.
func ParseRequiredValue(val string, allowForbidden, allowAnyTraits bool) (RequiredTraits, error) {
	if strings.HasPrefix(val, "in:") {
		if !allowAnyTraits {
			return RequiredTraits{}, BadRequest("Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: %s", val)
		}
		set := map[string]bool{}
		for _, s := range strings.Split(val[3:], ",") {
			set[pyStrip(s)] = true
		}
		if set[""] {
			return RequiredTraits{}, BadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: %s", val)
		}
		for t := range set {
			if strings.HasPrefix(t, "!") {
				return RequiredTraits{}, BadRequest("Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: %s", val)
			}
		}
		return RequiredTraits{AnyOf: [][]string{sortedSet(set)}}, nil
	}
	var all []string
	for _, s := range strings.Split(val, ",") {
		all = append(all, pyStrip(s))
	}
	forbidden := map[string]bool{}
	empty := false
	for _, t := range all {
		if t == "" {
			empty = true
		}
		if strings.HasPrefix(t, "!") {
			f := strings.TrimLeft(t, "!")
			if f == "" {
				empty = true
			}
			forbidden[f] = true
		}
	}
	if empty {
		form := "HW_CPU_X86_VMX,CUSTOM_MAGIC"
		if allowForbidden {
			form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
		}
		return RequiredTraits{}, BadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: %s. Got an empty trait in: %s", form, val)
	}
	var out RequiredTraits
	for _, t := range all {
		if !strings.HasPrefix(t, "!") {
			out.AnyOf = append(out.AnyOf, []string{t})
		}
	}
	if len(forbidden) > 0 && !allowForbidden {
		return RequiredTraits{}, BadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s", val)
	}
	out.Forbidden = sortedSet(forbidden)
	return out, nil
}

// ParseRequired parses every value of a required parameter
// (util.normalize_traits_qs_params). Before 1.39 only the last value
// counts; from 1.39 the values are ANDed. Forbidden traits need 1.22.
func ParseRequired(values []string, mv microversion.Version) (RequiredTraits, error) {
	allowForbidden := mv.AtLeast(1, 22)
	allowAny := mv.AtLeast(1, 39)
	if !allowAny && len(values) > 1 {
		values = values[len(values)-1:]
	}
	var out RequiredTraits
	forbidden := map[string]bool{}
	for _, v := range values {
		rt, err := ParseRequiredValue(v, allowForbidden, allowAny)
		if err != nil {
			return RequiredTraits{}, err
		}
		out.AnyOf = append(out.AnyOf, rt.AnyOf...)
		for _, f := range rt.Forbidden {
			forbidden[f] = true
		}
	}
	out.Forbidden = sortedSet(forbidden)
	return out, nil
}

// ParseLegacyTraits parses a value in the pre-1.39 form only ("T1,!T2";
// no "in:"), returning the required and forbidden trait sets and the
// traits that are both (util.normalize_traits_qs_param_to_legacy_value +
// lib._fix_one_forbidden; used by root_required).
func ParseLegacyTraits(val string, allowForbidden bool) (required, forbidden, conflicts []string, err error) {
	rt, err := ParseRequiredValue(val, allowForbidden, false)
	if err != nil {
		return nil, nil, nil, err
	}
	req := map[string]bool{}
	for _, any := range rt.AnyOf {
		req[any[0]] = true
	}
	forb := map[string]bool{}
	for _, f := range rt.Forbidden {
		forb[f] = true
	}
	conf := map[string]bool{}
	for f := range forb {
		if req[f] {
			conf[f] = true
		}
	}
	// In the legacy set "!X" and "X" are distinct members, so a trait that
	// is both required and forbidden stays required.
	return sortedSet(req), sortedSet(forb), sortedSet(conf), nil
}

// MemberOf is a parsed member_of parameter: AnyOf is ANDed, each entry a
// set (sorted, unique) of aggregate uuids of which a provider must be in
// one; Forbidden are aggregates a provider must be in none of.
type MemberOf struct {
	AnyOf     [][]string
	Forbidden []string
}

// Empty reports whether nothing was requested.
func (m MemberOf) Empty() bool { return len(m.AnyOf) == 0 && len(m.Forbidden) == 0 }

// ParseMemberOfValue parses one member_of value
// (util.normalize_member_of_qs_param): a uuid, "!uuid", "in:u1,u2" or
// "!in:u1,u2". It returns the required and forbidden sets.
func ParseMemberOfValue(value string) (required, forbidden []string, err error) {
	if strings.Contains(value, ",") && !strings.HasPrefix(value, "in:") && !strings.HasPrefix(value, "!in:") {
		return nil, nil, BadRequest("Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: %s", value)
	}
	var list []string
	isForbidden := false
	switch {
	case strings.HasPrefix(value, "!in:"):
		list, isForbidden = strings.Split(value[4:], ","), true
	case strings.HasPrefix(value, "!"):
		list, isForbidden = []string{value[1:]}, true
	case strings.HasPrefix(value, "in:"):
		list = strings.Split(value[3:], ",")
	default:
		list = []string{value}
	}
	for _, u := range list {
		if !IsUUIDLike(u) {
			return nil, nil, BadRequest("Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: %s", u)
		}
	}
	set := map[string]bool{}
	for _, u := range list {
		set[u] = true
	}
	if isForbidden {
		return nil, sortedSet(set), nil
	}
	return sortedSet(set), nil, nil
}

// ParseMemberOf parses every value of member_of<suffix>
// (util.normalize_member_of_qs_params): several values need 1.24,
// forbidden ones 1.32.
func ParseMemberOf(values []string, suffix string, mv microversion.Version) (MemberOf, error) {
	if !mv.AtLeast(1, 24) && len(values) > 1 {
		return MemberOf{}, BadRequest("Multiple member_of%s parameters are not supported", suffix)
	}
	var out MemberOf
	forbidden := map[string]bool{}
	for _, v := range values {
		req, forb, err := ParseMemberOfValue(v)
		if err != nil {
			return MemberOf{}, err
		}
		if len(req) > 0 {
			out.AnyOf = append(out.AnyOf, req)
		}
		if len(forb) > 0 {
			if !mv.AtLeast(1, 32) {
				return MemberOf{}, BadRequest("Forbidden member_of%s parameters are not supported in the specified microversion", suffix)
			}
			for _, f := range forb {
				forbidden[f] = true
			}
		}
	}
	out.Forbidden = sortedSet(forbidden)
	return out, nil
}

// ParseInTree parses an in_tree value (util.normalize_in_tree_qs_params):
// a provider uuid, surrounding whitespace removed.
func ParseInTree(value string) (string, error) {
	ret := pyStrip(value)
	if !IsUUIDLike(ret) {
		return "", BadRequest("Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: %s", value)
	}
	return ret, nil
}

// IsUUIDLike is oslo_utils.uuidutils.is_uuid_like: after removing every
// "urn:" and "uuid:", surrounding braces and all hyphens, 32 hex digits
// remain. Upper case is accepted.
func IsUUIDLike(s string) bool {
	s = strings.ReplaceAll(s, "urn:", "")
	s = strings.ReplaceAll(s, "uuid:", "")
	s = strings.Trim(s, "{}")
	s = strings.ReplaceAll(s, "-", "")
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CanonicalUUID is str(uuid.UUID(s)) for a uuid-like s: lower case,
// hyphenated 8-4-4-4-12. Other input is returned unchanged.
func CanonicalUUID(s string) string {
	if !IsUUIDLike(s) {
		return s
	}
	h := strings.ReplaceAll(s, "urn:", "")
	h = strings.ReplaceAll(h, "uuid:", "")
	h = strings.ToLower(strings.ReplaceAll(strings.Trim(h, "{}"), "-", ""))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
