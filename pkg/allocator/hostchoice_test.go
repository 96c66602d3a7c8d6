package allocator

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func sized(id string, mem, cpu, disk int64, tags ...string) Host {
	return Host{ID: id, MemoryMB: mem, VCPUs: cpu, DiskGB: disk, Tags: tags}
}

func TestSizeRanks(t *testing.T) {
	tests := []struct {
		name  string
		hosts []Host
		want  []int32
	}{
		{"empty", nil, nil},
		{"one profile", []Host{sized("1", 8, 2, 1), sized("2", 8, 2, 1)}, nil},
		{"small before big", []Host{sized("1", 64, 8, 10), sized("2", 8, 2, 10), sized("3", 64, 8, 10)}, []int32{1, 0, 1}},
		{"three sizes", []Host{sized("1", 32, 8, 1), sized("2", 8, 8, 1), sized("3", 16, 8, 1)}, []int32{2, 0, 1}},
		{
			// Neither of 1 and 2 holds the other's profile. The classes,
			// largest first: (32, 32), (32, 8), (16, 32). Host 2 loses a
			// fit of its own class only, host 1 one of (32, 8), which
			// comes first; host 3 loses one of every class.
			"incomparable", []Host{sized("1", 32, 8, 1), sized("2", 16, 32, 1), sized("3", 32, 32, 1)}, []int32{1, 0, 2},
		},
		{"unknown sizes first", []Host{sized("1", 8, 2, 1), {ID: "2"}}, []int32{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, SizeRanks(tt.hosts)); diff != "" {
				t.Errorf("SizeRanks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSizeRanksOrderFree: the ranks depend on the profiles, not on the
// hosts' order, and a host that holds another's profile never ranks
// before it.
func TestSizeRanksOrderFree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(rt, "n")
		hosts := make([]Host, n)
		for i := range hosts {
			hosts[i] = sized(strconv.Itoa(i), int64(rapid.IntRange(1, 4).Draw(rt, "mem")), int64(rapid.IntRange(1, 3).Draw(rt, "cpu")), int64(rapid.IntRange(1, 2).Draw(rt, "disk")))
		}
		perm := rapid.Permutation(hosts).Draw(rt, "perm")
		r1, r2 := SizeRanks(hosts), SizeRanks(perm)
		rank := func(r []int32, i int) int32 {
			if r == nil {
				return 0
			}
			return r[i]
		}
		byID := map[string]int32{}
		for i, h := range hosts {
			byID[h.ID] = rank(r1, i)
		}
		for i, h := range perm {
			if got := rank(r2, i); got != byID[h.ID] {
				rt.Fatalf("host %s: rank %d in one order, %d in another", h.ID, byID[h.ID], got)
			}
		}
		for i := range hosts {
			for j := range hosts {
				a, b := profileOf(&hosts[i]), profileOf(&hosts[j])
				if a != b && a.dominates(b) && rank(r1, i) <= rank(r1, j) {
					rt.Fatalf("host %v holds %v but ranks %d <= %d", a, b, rank(r1, i), rank(r1, j))
				}
			}
		}
	})
}

// TestChooseHostsKeepsBigHostsOpen: a request any host matches goes to
// the small hosts while they are free, whatever their ids and fits in
// time; a big host is used only when the small ones are busy.
func TestChooseHostsKeepsBigHostsOpen(t *testing.T) {
	hosts := []Host{
		sized("1", 1024, 64, 100), // big, idle, lowest id
		sized("2", 1024, 64, 100),
		sized("3", 128, 64, 100),
		sized("4", 128, 64, 100),
	}
	hosts[1].Busy = []Interval{iv(12, 20)} // big, tight fit in time
	dec, err := ChooseHosts(nil, hosts, HostRequest{Window: iv(10, 12), Min: 2, Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3", "4"}, dec.Chosen); diff != "" {
		t.Errorf("chosen (-want +got):\n%s", diff)
	}
	hosts[3].Busy = []Interval{iv(9, 11)}
	dec, err = ChooseHosts(nil, hosts, HostRequest{Window: iv(10, 12), Min: 2, Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Host 4 is busy: the big host with the tighter fit in time goes
	// with host 3.
	if diff := cmp.Diff([]string{"3", "2"}, dec.Chosen); diff != "" {
		t.Errorf("chosen (-want +got):\n%s", diff)
	}
}

// TestSpreadSpansDomains: a min=max=N reservation spans N failure domains
// whenever N domains have a free matching host (issue 14), whatever the
// sizes, fits in time and domains already used by the lease.
func TestSpreadSpansDomains(t *testing.T) {
	rules := &TagRules{LocationPrefixes: []string{"rack"}}
	rapid.Check(t, func(rt *rapid.T) {
		racks := rapid.IntRange(1, 6).Draw(rt, "racks")
		n := rapid.IntRange(1, 40).Draw(rt, "hosts")
		hosts := make([]Host, n)
		freeRacks := map[string]bool{}
		for i := range hosts {
			rack := "rack:r" + strconv.Itoa(rapid.IntRange(0, racks-1).Draw(rt, "rack"))
			hosts[i] = sized(strconv.Itoa(i+1), int64(rapid.SampledFrom([]int{128, 1024}).Draw(rt, "mem")), 64, 100, rack)
			if rapid.Bool().Draw(rt, "busy") {
				s := rapid.IntRange(0, 20).Draw(rt, "bs")
				hosts[i].Busy = []Interval{iv(s, s+rapid.IntRange(1, 6).Draw(rt, "bl"))}
			}
			if !overlaps(&hosts[i], at(10), at(12)) {
				freeRacks[rack] = true
			}
		}
		if len(freeRacks) == 0 {
			return
		}
		want := rapid.IntRange(1, len(freeRacks)).Draw(rt, "n")
		dec, err := ChooseHosts(rules, hosts, HostRequest{Window: iv(10, 12), Min: want, Max: want})
		if err != nil {
			rt.Fatal(err)
		}
		spanned := map[string]bool{}
		for _, id := range dec.Chosen {
			i, _ := strconv.Atoi(id)
			spanned[hosts[i-1].Tags[0]] = true
		}
		if len(spanned) != want {
			rt.Fatalf("chose %v over %d domains, want %d", dec.Chosen, len(spanned), want)
		}
	})
}

// TestUsedDomains: domains already holding the lease's hosts are used
// last.
func TestUsedDomains(t *testing.T) {
	rules := &TagRules{LocationPrefixes: []string{"rack"}}
	hosts := []Host{{ID: "1", Tags: []string{"rack:a"}}, {ID: "2", Tags: []string{"rack:b"}}, {ID: "3", Tags: []string{"rack:c"}}}
	dec, err := ChooseHosts(rules, hosts, HostRequest{Window: iv(1, 2), Min: 2, Max: 2, UsedDomains: []string{"rack:a", "rack:c", "rack:c"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2", "1"}, dec.Chosen); diff != "" {
		t.Errorf("chosen (-want +got):\n%s", diff)
	}
}
