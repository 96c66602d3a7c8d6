package candidates

import (
	"context"
	"testing"
)

// TestSearchCost: Result.Generated counts the candidates the search made
// before Limit cut them, and Steps grows with the walk and stops with
// SearchCap.
func TestSearchCost(t *testing.T) {
	find := func(t *testing.T, s *Snapshot, req *Request) *Result {
		t.Helper()
		res, err := s.Find(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	full := find(t, wideSnapshot(6), wideRequest(6, 0))
	if full.Generated != 720 || full.Len() != 720 || full.Steps <= 0 {
		t.Errorf("6 groups over 6 providers: generated %d, returned %d, steps %d; want 720, 720, > 0", full.Generated, full.Len(), full.Steps)
	}
	// Randomized, the whole answer is made, then shuffled and cut.
	limited := wideRequest(6, 10)
	limited.Randomize = true
	if res := find(t, wideSnapshot(6), limited); res.Generated != 720 || res.Len() != 10 || res.Steps != full.Steps {
		t.Errorf("limit 10, randomized: generated %d, returned %d, steps %d; want 720, 10, %d", res.Generated, res.Len(), res.Steps, full.Steps)
	}
	// Not randomized, the walk stops at the limit.
	if res := find(t, wideSnapshot(6), wideRequest(6, 10)); res.Generated != 10 || res.Steps >= full.Steps {
		t.Errorf("limit 10: generated %d, steps %d; want 10 and fewer than %d", res.Generated, res.Steps, full.Steps)
	}
	// A walk that emits nothing still costs steps; SearchCap bounds them.
	walk := func(searchCap int) *Result {
		r := wideRequest(9, 0)
		r.GroupPolicy, r.SearchCap = "isolate", searchCap
		return find(t, wideSnapshot(8), r)
	}
	uncapped, capped := walk(0), walk(100)
	if uncapped.Generated != 0 || capped.Generated != 0 || capped.Steps <= 0 || capped.Steps > 16*100+1024 || uncapped.Steps <= capped.Steps {
		t.Errorf("isolated walk: uncapped %d steps (%d made), capped %d steps (%d made)", uncapped.Steps, uncapped.Generated, capped.Steps, capped.Generated)
	}
}
