package allocator

import (
	"cmp"
	"slices"
)

// Size ranks: the lost-allocations idea of Ganeti's partitioned
// allocation (seed ganeti-partitioned-allocation) applied to whole-host
// reservations. A host's capacity profile is (MemoryMB, VCPUs, DiskGB).
// The profiles present in a view are the size classes, ordered largest
// first. Reserving a host loses, for every class whose profile the host
// dominates (at least as much of every resource), one host that a future
// request of that class could have used; a host's loss vector is that 0/1
// vector, largest class first. Comparing loss vectors lexicographically
// prefers a host that takes nothing away from bigger classes: a small
// request goes to a small host while one fits, and the big hosts stay
// open for the requests only they can serve.

// maxExactProfiles bounds the number of distinct profiles for which
// SizeRanks compares dominance vectors (quadratic in the profiles); above
// it, profiles are ranked by size alone (memory, then vCPUs, then disk),
// which agrees with the vectors whenever the profiles are totally ordered.
const maxExactProfiles = 512

type profile struct{ mem, cpu, disk int64 }

func profileOf(h *Host) profile { return profile{h.MemoryMB, h.VCPUs, h.DiskGB} }

func (a profile) dominates(b profile) bool {
	return a.mem >= b.mem && a.cpu >= b.cpu && a.disk >= b.disk
}

// largestFirst orders profiles by memory, vCPUs, then disk, descending.
func largestFirst(a, b profile) int {
	if c := cmp.Compare(b.mem, a.mem); c != 0 {
		return c
	}
	if c := cmp.Compare(b.cpu, a.cpu); c != 0 {
		return c
	}
	return cmp.Compare(b.disk, a.disk)
}

// SizeRanks returns each host's size rank: 0 for the hosts whose loss
// vector (see above) is smallest, then 1, and so on; hosts with the same
// profile share a rank. It returns nil when every host has the same
// profile (every rank 0). Pure and deterministic: the ranks depend only on
// the multiset of profiles, not on the hosts' order.
func SizeRanks(hosts []Host) []int32 {
	if len(hosts) == 0 {
		return nil
	}
	first := profileOf(&hosts[0])
	same := true
	for i := 1; i < len(hosts) && same; i++ {
		same = profileOf(&hosts[i]) == first
	}
	if same {
		return nil
	}
	pos := map[profile]int{}
	var profs []profile
	for i := range hosts {
		p := profileOf(&hosts[i])
		if _, ok := pos[p]; !ok {
			pos[p] = len(profs)
			profs = append(profs, p)
		}
	}
	slices.SortFunc(profs, largestFirst)
	order := make([]int, len(profs)) // indexes into profs, best (least loss) first
	for i := range order {
		order[i] = i
	}
	if len(profs) <= maxExactProfiles {
		// vec[i][q]: profile i dominates class q (classes largest first).
		vec := make([][]bool, len(profs))
		for i, p := range profs {
			vec[i] = make([]bool, len(profs))
			for q, c := range profs {
				vec[i][q] = p.dominates(c)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int {
			for q := range profs {
				if vec[a][q] != vec[b][q] {
					if vec[b][q] {
						return -1 // a loses nothing of class q, b does
					}
					return 1
				}
			}
			return 0
		})
	} else {
		slices.Reverse(order) // smallest profile first
	}
	rankOf := make(map[profile]int32, len(profs))
	for r, i := range order {
		rankOf[profs[i]] = int32(r)
	}
	out := make([]int32, len(hosts))
	for i := range hosts {
		out[i] = rankOf[profileOf(&hosts[i])]
	}
	return out
}
