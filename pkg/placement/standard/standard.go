// Package standard holds the standard resource classes and traits that
// every Placement deployment knows (os-resource-classes 1.1.0 and
// os-traits 2.9.0, the versions Placement 8.0.0 ships with). The lists are
// facts about the API, kept as data files.
package standard

import (
	_ "embed"
	"strings"
)

//go:embed standard-resource-classes.txt
var classesTxt string

//go:embed standard-traits.txt
var traitsTxt string

// ResourceClasses returns the standard classes in their canonical order
// (the order GET /resource_classes lists them in).
func ResourceClasses() []string { return lines(classesTxt) }

// Traits returns the standard traits.
func Traits() []string { return lines(traitsTxt) }

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
