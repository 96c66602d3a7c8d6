package allocator

import (
	"sort"
	"strings"
)

// Cluster tag prefixes understood by the allocator. They are the ones of
// Ganeti's htools, so that a Ganeti cluster's tags work unchanged.
const (
	TagLocationPrefix        = "htools:nlocation:"
	TagExclusionPrefix       = "htools:iextags:"
	TagMigrationPrefix       = "htools:migration:"
	TagAllowMigrationPrefix  = "htools:allowmigration:"
	TagDesiredLocationPrefix = "htools:desiredlocation:"
)

// TagRules are the cluster-level tag rules: which host tags denote failure
// domains and migration classes, which instance tags are exclusion tags, and
// which migrations between classes are allowed.
//
// The zero value (and a nil *TagRules) has no rules.
type TagRules struct {
	// LocationPrefixes: a host tag "P:..." for P in this list names a failure
	// domain (Ganeti's htools:nlocation:P).
	LocationPrefixes []string
	// ExclusionPrefixes: an instance tag starting with P (no ':' appended) is
	// an exclusion tag (Ganeti's htools:iextags:P).
	ExclusionPrefixes []string
	// MigrationPrefixes: a host tag "P:..." is a migration class
	// (Ganeti's htools:migration:P).
	MigrationPrefixes []string
	// AllowMigration lists one-way migration permissions From -> To between
	// migration tags (Ganeti's htools:allowmigration:From::To).
	AllowMigration []MigrationRule
}

// MigrationRule allows instances to migrate from hosts tagged From to hosts
// tagged To.
type MigrationRule struct{ From, To string }

// ParseClusterTags extracts the tag rules from Ganeti-style cluster tags.
// Unknown tags are ignored. Allow-migration tags whose text after the prefix
// does not split into exactly two parts at "::" are ignored, as in htools.
func ParseClusterTags(tags []string) TagRules {
	var r TagRules
	for _, t := range tags {
		switch {
		case strings.HasPrefix(t, TagLocationPrefix):
			r.LocationPrefixes = append(r.LocationPrefixes, t[len(TagLocationPrefix):])
		case strings.HasPrefix(t, TagExclusionPrefix):
			r.ExclusionPrefixes = append(r.ExclusionPrefixes, t[len(TagExclusionPrefix):])
		case strings.HasPrefix(t, TagMigrationPrefix):
			r.MigrationPrefixes = append(r.MigrationPrefixes, t[len(TagMigrationPrefix):])
		case strings.HasPrefix(t, TagAllowMigrationPrefix):
			rest := t[len(TagAllowMigrationPrefix):]
			from, to, ok := strings.Cut(rest, "::")
			if !ok || strings.Contains(to, "::") {
				continue
			}
			r.AllowMigration = append(r.AllowMigration, MigrationRule{From: from, To: to})
		}
	}
	return r
}

// prefixedTags returns the tags that start with "P:" for some P in prefixes,
// sorted and deduplicated.
func prefixedTags(prefixes, tags []string) []string {
	if len(prefixes) == 0 || len(tags) == 0 {
		return nil
	}
	var out []string
	for _, t := range tags {
		for _, p := range prefixes {
			if len(t) > len(p) && t[len(p)] == ':' && strings.HasPrefix(t, p) {
				out = append(out, t)
				break
			}
		}
	}
	return sortedUnique(out)
}

// LocationTags returns the failure-domain tags among a host's tags.
func (r *TagRules) LocationTags(hostTags []string) []string {
	if r == nil {
		return nil
	}
	return prefixedTags(r.LocationPrefixes, hostTags)
}

// MigrationTags returns the migration-class tags among a host's tags.
func (r *TagRules) MigrationTags(hostTags []string) []string {
	if r == nil {
		return nil
	}
	return prefixedTags(r.MigrationPrefixes, hostTags)
}

// ReceivableMigrationTags returns the migration tags a host with the given
// tags can receive from: its own migration tags plus every From of an
// allow-migration rule whose To it carries (one step, not transitive).
func (r *TagRules) ReceivableMigrationTags(hostTags []string) []string {
	own := r.MigrationTags(hostTags)
	if r == nil || len(r.AllowMigration) == 0 {
		return own
	}
	out := append([]string(nil), own...)
	for _, rule := range r.AllowMigration {
		if containsSorted(own, rule.To) {
			out = append(out, rule.From)
		}
	}
	return sortedUnique(out)
}

// ExclusionTags returns the exclusion tags among an instance's tags, in
// their original order (duplicates kept, as htools does).
func (r *TagRules) ExclusionTags(instTags []string) []string {
	if r == nil || len(r.ExclusionPrefixes) == 0 {
		return nil
	}
	var out []string
	for _, t := range instTags {
		for _, p := range r.ExclusionPrefixes {
			if strings.HasPrefix(t, p) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// MigrationAllowed reports whether an instance may migrate from a host
// with migration tags srcMig to a host whose receivable tags are dstRecv
// (both sorted): every tag of the source must be receivable by the target.
func MigrationAllowed(srcMig, dstRecv []string) bool {
	for _, t := range srcMig {
		if !containsSorted(dstRecv, t) {
			return false
		}
	}
	return true
}

func sortedUnique(s []string) []string {
	if len(s) < 2 {
		return s
	}
	sort.Strings(s)
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

func containsSorted(s []string, v string) bool {
	i := sort.SearchStrings(s, v)
	return i < len(s) && s[i] == v
}
