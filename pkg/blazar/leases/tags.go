package leases

import (
	"encoding/json"
	"slices"

	"github.com/leasehold/leasehold/plugins"
)

// Lease tags (a Leasehold extension): the lease body's "tags", a list of
// strings set at creation and shown in lease bodies and listings ([]
// when none). The physical:host rules' exclusion tags
// ([physical:host] cluster_tags = htools:iextags:P) are the tags
// starting with P: host choice spreads leases that overlap in time and
// share one over failure domains (allocator.TagRules.WithExclusion).

// Tag limits: a tag is a short label, as Ganeti's tags are.
const (
	maxTags      = 32
	maxTagLength = 255
)

// parseTags reads the JSON value of "tags" (nil when absent or null):
// a list of non-empty strings, duplicates dropped, order kept.
func parseTags(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, plugins.BadRequest("tags must be a list of strings")
	}
	if len(list) > maxTags {
		return nil, plugins.BadRequest("Too many tags: %d, at most %d", len(list), maxTags)
	}
	var out []string
	for _, x := range list {
		s, ok := x.(string)
		if !ok || s == "" {
			return nil, plugins.BadRequest("tags must be a list of non-empty strings")
		}
		if n := len([]rune(s)); n > maxTagLength {
			return nil, plugins.BadRequest("Tag is too long: %d characters, at most %d", n, maxTagLength)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// encodeTags is the stored form of tags: NULL for none.
func encodeTags(tags []string) *string {
	if len(tags) == 0 {
		return nil
	}
	b, _ := json.Marshal(tags) // a []string always marshals
	s := string(b)
	return &s
}

// decodeTags reads the stored form; a NULL, empty or unreadable column
// is no tags (never []string(nil) in a view: the API shows []).
func decodeTags(s *string) []string {
	out := []string{}
	if s == nil || *s == "" {
		return out
	}
	if err := json.Unmarshal([]byte(*s), &out); err != nil || out == nil {
		return []string{}
	}
	return out
}
