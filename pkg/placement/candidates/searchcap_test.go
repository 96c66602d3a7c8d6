package candidates

import (
	"context"
	"fmt"
	"testing"
)

// treeOfThree is a root with n children each having VCPU, MEMORY_MB and
// DISK_GB: an unsuffixed group asking for the three classes has n³
// provider combinations in the one tree.
func treeOfThree(n int) *Snapshot {
	b := NewBuilder()
	for i, c := range []string{"VCPU", "MEMORY_MB", "DISK_GB"} {
		b.AddClass(int64(i+1), c)
	}
	b.AddProvider(1, "00000000-0000-4000-8000-000000000001", 0, 1)
	for c := 0; c < n; c++ {
		id := int64(c + 2)
		b.AddProvider(id, fmt.Sprintf("00000000-0000-4000-8000-%012d", id), 1, 1)
		for cls := int64(1); cls <= 3; cls++ {
			b.AddInventory(id, cls, 8, 0, 1, 8, 1, 1)
		}
	}
	return b.Build()
}

// TestSearchCap: whatever max_allocation_candidates says, SearchCap
// bounds the candidates generated, the combinations tried per group and
// the walk, and says so; what is returned is a subsequence of the full
// answer.
func TestSearchCap(t *testing.T) {
	three := func() *Request {
		return &Request{NestedAware: true, MaxCandidates: -1,
			Groups: []Group{{Resources: []Resource{{"VCPU", 1}, {"MEMORY_MB", 1}, {"DISK_GB", 1}}}}}
	}
	isolate9 := func() *Request {
		// 9 isolated groups over 8 single-unit children: nothing fits,
		// but the walk is long.
		r := wideRequest(9, 0)
		r.GroupPolicy = "isolate"
		return r
	}
	for _, tc := range []struct {
		name      string
		snap      *Snapshot
		req       func() *Request
		searchCap int
		max       int
		want      int
		capped    bool
		search    bool
	}{
		{"wide 8x8 uncapped", wideSnapshot(8), func() *Request { return wideRequest(8, 0) }, 0, -1, 40320, false, false},
		{"wide 8x8 under the cap", wideSnapshot(8), func() *Request { return wideRequest(8, 0) }, 1000000, -1, 40320, false, false},
		{"wide 9x9 capped", wideSnapshot(9), func() *Request { return wideRequest(9, 0) }, 5000, -1, 5000, true, true},
		{"max below the cap", wideSnapshot(9), func() *Request { return wideRequest(9, 0) }, 5000, 300, 300, true, false},
		{"max above the cap", wideSnapshot(9), func() *Request { return wideRequest(9, 0) }, 5000, 9000, 5000, true, true},
		{"combinations uncapped", treeOfThree(20), three, 0, -1, 8000, false, false},
		{"combinations capped", treeOfThree(20), three, 1000, -1, 1000, true, true},
		{"walk uncapped", wideSnapshot(8), isolate9, 0, -1, 0, false, false},
		{"walk capped", wideSnapshot(8), isolate9, 100, -1, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			req.SearchCap, req.MaxCandidates = tc.searchCap, tc.max
			res, err := tc.snap.Find(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Len() != tc.want || res.Capped != tc.capped || res.SearchCapped != tc.search {
				t.Fatalf("%d candidates, capped %v, search capped %v; want %d, %v, %v",
					res.Len(), res.Capped, res.SearchCapped, tc.want, tc.capped, tc.search)
			}
			if !tc.capped || res.Len() == 0 {
				return
			}
			full := tc.req()
			full.MaxCandidates = -1
			all, err := tc.snap.Find(context.Background(), full)
			if err != nil {
				t.Fatal(err)
			}
			// A subsequence of the full answer (a prefix when the
			// candidates, not a group's combinations, hit the cap).
			j := 0
			for i := 0; i < res.Len(); i++ {
				got := fmt.Sprint(res.Request(i))
				for j < all.Len() && fmt.Sprint(all.Request(j)) != got {
					j++
				}
				if j == all.Len() {
					t.Fatalf("candidate %d (%s) is not in the full answer after the ones before it", i, got)
				}
				j++
			}
		})
	}
}
