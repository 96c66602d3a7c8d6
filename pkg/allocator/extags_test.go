package allocator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestExclusionHosts(t *testing.T) {
	rules := ParseClusterTags([]string{"htools:iextags:svc:", "htools:nlocation:rack"})
	books := []TaggedBooking{
		{HostID: "1", Window: iv(0, 10), Tags: []string{"svc:db"}},
		{HostID: "2", Window: iv(0, 10), Tags: []string{"svc:web"}},
		{HostID: "3", Window: iv(20, 30), Tags: []string{"svc:db"}},
		{HostID: "4", Window: iv(5, 15), Tags: []string{"db"}}, // not an exclusion tag
		{HostID: "5", Window: iv(9, 11), Tags: []string{"other", "svc:db"}},
		{HostID: "1", Window: iv(0, 10), Tags: []string{"svc:db"}}, // second reservation, same host
	}
	tests := []struct {
		name  string
		rules *TagRules
		tags  []string
		win   Interval
		want  []string
	}{
		{name: "shared tag, overlapping", rules: &rules, tags: []string{"svc:db"}, win: iv(8, 12), want: []string{"1", "5"}},
		{name: "touching windows do not overlap", rules: &rules, tags: []string{"svc:db"}, win: iv(10, 20), want: []string{"5"}},
		{name: "other tag", rules: &rules, tags: []string{"svc:web"}, win: iv(8, 12), want: []string{"2"}},
		{name: "non-exclusion tag", rules: &rules, tags: []string{"db"}, win: iv(8, 12), want: nil},
		{name: "no tags", rules: &rules, win: iv(8, 12), want: nil},
		{name: "nil rules", tags: []string{"svc:db"}, win: iv(8, 12), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rules.ExclusionHosts(tt.tags, tt.win, books)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExclusionHosts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChooseHostsExclusionSpread(t *testing.T) {
	rules := ParseClusterTags([]string{"htools:iextags:svc:", "htools:nlocation:rack"})
	hosts := []Host{
		{ID: "1", Tags: []string{"rack:a"}},
		{ID: "2", Tags: []string{"rack:a"}},
		{ID: "3", Tags: []string{"rack:b"}},
		{ID: "4", Tags: []string{"rack:b"}},
		{ID: "5", Tags: []string{"rack:c"}},
		{ID: "6", Tags: []string{"rack:c"}},
	}
	busy := func(ids ...string) []Host {
		out := slices.Clone(hosts)
		for i := range out {
			if slices.Contains(ids, out[i].ID) {
				out[i].Busy = []Interval{iv(0, 24)}
			}
		}
		return out
	}
	tests := []struct {
		name  string
		hosts []Host
		books []TaggedBooking
		tags  []string
		min   int
		max   int
		want  []string
	}{
		{
			name:  "no other lease: best fit by id",
			hosts: hosts, tags: []string{"svc:db"}, min: 1, max: 1, want: []string{"1"},
		},
		{
			name:  "a db lease on rack a: rack b",
			hosts: busy("1"), books: []TaggedBooking{{HostID: "1", Window: iv(0, 24), Tags: []string{"svc:db"}}},
			tags: []string{"svc:db"}, min: 1, max: 1, want: []string{"3"},
		},
		{
			name:  "a web lease on rack a does not push a db lease away",
			hosts: busy("1"), books: []TaggedBooking{{HostID: "1", Window: iv(0, 24), Tags: []string{"svc:web"}}},
			tags: []string{"svc:db"}, min: 1, max: 1, want: []string{"2"},
		},
		{
			name:  "db leases on racks a and b: rack c",
			hosts: busy("1", "3"),
			books: []TaggedBooking{
				{HostID: "1", Window: iv(0, 24), Tags: []string{"svc:db"}},
				{HostID: "3", Window: iv(0, 24), Tags: []string{"svc:db"}},
			},
			tags: []string{"svc:db", "x"}, min: 1, max: 1, want: []string{"5"},
		},
		{
			name:  "two hosts over the racks left free of db",
			hosts: busy("1"), books: []TaggedBooking{{HostID: "1", Window: iv(0, 24), Tags: []string{"svc:db"}}},
			tags: []string{"svc:db"}, min: 2, max: 2, want: []string{"3", "5"},
		},
		{
			name:  "soft: every rack holds db, still chosen",
			hosts: busy("1", "3", "5"),
			books: []TaggedBooking{
				{HostID: "1", Window: iv(0, 24), Tags: []string{"svc:db"}},
				{HostID: "3", Window: iv(0, 24), Tags: []string{"svc:db"}},
				{HostID: "5", Window: iv(0, 24), Tags: []string{"svc:db"}},
			},
			tags: []string{"svc:db"}, min: 1, max: 1, want: []string{"2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := HostRequest{Window: iv(10, 12), Min: tt.min, Max: tt.max}
			req = rules.WithExclusion(req, tt.tags, tt.books, rules.LocationDomainsOf(tt.hosts))
			dec, err := ChooseHosts(&rules, tt.hosts, req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, dec.Chosen); diff != "" {
				t.Errorf("chosen (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExclusionProperty replays random leases one by one, each booking
// the hosts ChooseHosts picks with its exclusion tag applied. Invariants:
// no host ever holds two overlapping leases sharing an exclusion tag, and
// a lease lands in a rack already holding an overlapping lease with its
// tag only when every rack free of them had no free host left (the
// choice had no choice).
func TestExclusionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rules := ParseClusterTags([]string{"htools:iextags:svc:", "htools:nlocation:rack"})
		nRacks := rapid.IntRange(1, 4).Draw(t, "racks")
		nHosts := rapid.IntRange(1, 10).Draw(t, "hosts")
		hosts := make([]Host, nHosts)
		for i := range hosts {
			hosts[i] = Host{ID: fmt.Sprint(i + 1), Tags: []string{fmt.Sprintf("rack:%d", rapid.IntRange(0, nRacks-1).Draw(t, "rack"))}}
		}
		rackOf := func(id string) string { return rules.LocationTags(hosts[indexOfHost(hosts, id)].Tags)[0] }
		var books []TaggedBooking
		nLeases := rapid.IntRange(1, 12).Draw(t, "leases")
		for l := 0; l < nLeases; l++ {
			s := rapid.IntRange(0, 20).Draw(t, "start")
			win := iv(s, s+rapid.IntRange(1, 6).Draw(t, "len"))
			tags := []string{fmt.Sprintf("svc:%d", rapid.IntRange(0, 2).Draw(t, "svc"))}
			req := rules.WithExclusion(HostRequest{Window: win, Min: 1, Max: 1}, tags, books, rules.LocationDomainsOf(hosts))
			dec, err := ChooseHosts(&rules, hosts, req)
			if err != nil {
				continue // no free host at all
			}
			id := dec.Chosen[0]
			conflict := rules.ExclusionHosts(tags, win, books)
			bad := map[string]bool{}
			for _, c := range conflict {
				if c == id {
					t.Fatalf("lease %d with %v put on host %s, which holds an overlapping lease with the same tag", l, tags, id)
				}
				bad[rackOf(c)] = true
			}
			if bad[rackOf(id)] {
				// Only allowed when no free host sits in a rack without a conflict.
				for i := range hosts {
					if !bad[rackOf(hosts[i].ID)] && freeOver(&hosts[i], win) {
						t.Fatalf("lease %d with %v put in %s next to a conflicting lease while host %s in %s was free",
							l, tags, rackOf(id), hosts[i].ID, rackOf(hosts[i].ID))
					}
				}
			}
			i := indexOfHost(hosts, id)
			hosts[i].Busy = append(hosts[i].Busy, win)
			books = append(books, TaggedBooking{HostID: id, Window: win, Tags: tags})
		}
	})
}

func indexOfHost(hosts []Host, id string) int {
	return slices.IndexFunc(hosts, func(h Host) bool { return h.ID == id })
}

func freeOver(h *Host, win Interval) bool {
	for _, b := range h.Busy {
		if b.Start.Before(win.End) && win.Start.Before(b.End) {
			return false
		}
	}
	return true
}
