package placement

import (
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

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

// RequestGroup is one group of a resources/required/member_of/in_tree
// request (lib.RequestGroup). The unsuffixed group has Suffix "" and
// UseSameProvider false; granular groups (resources1, resources_ACCEL …)
// must be satisfied by one provider.
type RequestGroup struct {
	Suffix          string
	UseSameProvider bool
	Resources       Resources
	RequiredTraits  [][]string
	ForbiddenTraits []string
	MemberOf        [][]string
	ForbiddenAggs   []string
	InTree          string
}

var (
	groupKeyPattern     = regexp.MustCompile(`^(resources|required|member_of|in_tree)([1-9][0-9]*)?$`)
	groupKeyPattern1_33 = regexp.MustCompile(`^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?$`)
)

// ParseRequestGroups parses the request groups of a query
// (lib.RequestGroup.dict_from_request), running the same checks in the
// same order: per-key parsing as the keys come, then (≥1.36) the
// same_subtree rules or (<1.36) the orphan rules, then (≥1.22) the
// required/forbidden conflict check. sameSubtrees are the parsed
// same_subtree values (sets of suffixes). Groups are returned in order of
// first appearance.
func ParseRequestGroups(q *Query, mv microversion.Version, sameSubtrees [][]string) ([]*RequestGroup, error) {
	pattern := groupKeyPattern
	if mv.AtLeast(1, 33) {
		pattern = groupKeyPattern1_33
	}
	bySuffix := map[string]*RequestGroup{}
	var order []*RequestGroup
	for _, it := range q.Items() {
		key, val := it[0], it[1]
		m := pattern.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		prefix, suffix := m[1], m[2]
		g := bySuffix[suffix]
		if g == nil {
			g = &RequestGroup{Suffix: suffix, UseSameProvider: suffix != ""}
			bySuffix[suffix] = g
			order = append(order, g)
		}
		switch prefix {
		case "resources":
			rs, err := ParseResources(val)
			if err != nil {
				return nil, err
			}
			g.Resources = rs
		case "required":
			rt, err := ParseRequired(q.GetAll("required"+suffix), mv)
			if err != nil {
				return nil, err
			}
			g.RequiredTraits, g.ForbiddenTraits = rt.AnyOf, rt.Forbidden
		case "member_of":
			mo, err := ParseMemberOf(q.GetAll("member_of"+suffix), suffix, mv)
			if err != nil {
				return nil, err
			}
			g.MemberOf, g.ForbiddenAggs = mo.AnyOf, mo.Forbidden
		case "in_tree":
			t, err := ParseInTree(val)
			if err != nil {
				return nil, err
			}
			g.InTree = t
		}
	}
	if mv.AtLeast(1, 36) {
		resourceless := map[string]bool{}
		for _, g := range order {
			if len(g.Resources) == 0 {
				resourceless[g.Suffix] = true
			}
		}
		subtree := map[string]bool{}
		for _, s := range sameSubtrees {
			for _, x := range s {
				subtree[x] = true
			}
		}
		if len(resourceless) == len(order) {
			return nil, BadRequestCode(CodeQueryMissingValue, "There must be at least one resources or resources[$S] parameter.")
		}
		var bad []string
		for _, g := range order {
			if resourceless[g.Suffix] && !subtree[g.Suffix] {
				bad = append(bad, g.Suffix)
			}
		}
		if len(bad) > 0 {
			return nil, BadRequestCode(CodeQueryBadValue, "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - %s.", pyListRepr(bad))
		}
		bad = nil
		for _, s := range sameSubtrees {
			for _, x := range s {
				if bySuffix[x] == nil {
					bad = append(bad, x)
				}
			}
		}
		if len(bad) > 0 {
			var all []string
			for _, g := range order {
				all = append(all, g.Suffix)
			}
			return nil, BadRequestCode(CodeQueryBadValue, "Real suffixes should be specified in `same_subtree`: %s not found in %s.", pyListRepr(bad), pyListRepr(all))
		}
	} else {
		var orphans []string
		for _, g := range order {
			if len(g.RequiredTraits) > 0 && len(g.Resources) == 0 {
				orphans = append(orphans, "required"+g.Suffix)
			}
		}
		if len(orphans) > 0 {
			return nil, BadRequest("All traits parameters must be associated with resources.  Found the following orphaned traits keys: %s", strings.Join(orphans, ", "))
		}
		for _, g := range order {
			if len(g.Resources) == 0 && (len(g.MemberOf) > 0 || len(g.ForbiddenAggs) > 0) {
				orphans = append(orphans, "member_of"+g.Suffix)
			}
		}
		if len(orphans) > 0 {
			return nil, BadRequest("All member_of parameters must be associated with resources. Found the following orphaned member_of keys: %s", strings.Join(orphans, ", "))
		}
		for _, g := range order {
			if len(g.Resources) == 0 {
				return nil, BadRequest("All request groups must specify resources.")
			}
		}
		if len(order) == 0 {
			return nil, BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
		}
	}
	if mv.AtLeast(1, 22) {
		var conflicts []string
		for _, g := range order {
			forb := map[string]bool{}
			for _, f := range g.ForbiddenTraits {
				forb[f] = true
			}
			for _, any := range g.RequiredTraits {
				all := true
				for _, t := range any {
					if !forb[t] {
						all = false
						break
					}
				}
				if all {
					conflicts = append(conflicts, fmt.Sprintf("required%s: (%s)", g.Suffix, strings.Join(any, ", ")))
				}
			}
		}
		if len(conflicts) > 0 {
			sort.Strings(conflicts)
			return nil, BadRequest("Conflicting required and forbidden traits found in the following traits keys: %s", strings.Join(conflicts, ", "))
		}
	}
	return order, nil
}

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
