package placement

import (
	"slices"
	"testing"
)

// FuzzAcceptableOffers: any Accept header picks a subset of the offers,
// each at most once, never a panic (it chooses every error body's type).
func FuzzAcceptableOffers(f *testing.F) {
	for _, s := range []string{"", "*/*", "application/json", "text/html;q=0.1, application/json;q=0.9", "*/*;q=0",
		"text/*", "junk", ";", "a/b;c", "application/json;q=2", "text/html;level=1", "*/json", "TEXT/HTML;Q=0.5"} {
		f.Add(s)
	}
	offers := []string{"text/html", "application/json"}
	f.Fuzz(func(t *testing.T, accept string) {
		got := acceptableOffers(accept, offers)
		seen := map[string]bool{}
		for _, o := range got {
			if !slices.Contains(offers, o) || seen[o] {
				t.Fatalf("acceptableOffers(%q) = %q: not a subset of %q", accept, got, offers)
			}
			seen[o] = true
		}
		if accept == "*/*" && !slices.Equal(got, offers) {
			t.Fatalf("acceptableOffers(*/*) = %q, want %q", got, offers)
		}
	})
}
