package allocator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The scavenger hunt (capacity-leasing seed): a BEST-EFFORT lease that
// finds too few free hosts now may free eligible hosts by migrating the
// other projects' instances off them. PlanScavenge decides, before
// anything is accepted, which hosts to clear and where each instance
// goes; it is pure and deterministic, and a refusal says why.

// ScavengeInstance is one movable instance (another project's) on a
// host.
type ScavengeInstance struct {
	ID string
	// Usage is the amount of each class of ScavengeInput.Classes the
	// instance holds on its host.
	Usage []int64
	// Tags are the instance's tags (exclusion tags: two instances sharing
	// one are never placed on one host).
	Tags []string
}

// ScavengeHost is one host of the cluster.
type ScavengeHost struct {
	ID   string
	Tags []string
	// Capacity and Used are per class of ScavengeInput.Classes (capacity
	// after reserved and allocation ratio; used by everything on the host,
	// the instances listed here included).
	Capacity, Used []int64
	// Eligible hosts match the lease's requirements and are free of
	// leases over its window: the lease may take them once clear.
	Eligible bool
	// Target hosts may receive moved instances (no lease holds them now or
	// later).
	Target bool
	// Instances are the movable instances on the host (other projects').
	Instances []ScavengeInstance
	// Pinned, when set, says why the host cannot be cleared (something
	// that cannot be moved holds it).
	Pinned string
}

// ScavengeInput is one planning problem.
type ScavengeInput struct {
	// Classes names the resource classes of every Capacity, Used and
	// Usage vector.
	Classes []string
	Hosts   []ScavengeHost
	// Min and Max bound the number of hosts the lease takes; the plan
	// takes the free eligible hosts first (up to Max) and clears only
	// what reaching Min needs.
	Min, Max int
	// Rules gives the migration and exclusion tags (may be nil).
	Rules *TagRules
	// NotEligible counts the hosts matching the request that leases hold
	// over the window (for the refusal's reason).
	NotEligible int
}

// ScavengeMove moves instance Instance from host From to host To.
type ScavengeMove struct{ Instance, From, To string }

// ScavengePlan is the outcome of PlanScavenge.
type ScavengePlan struct {
	// Hosts are the lease's hosts: the free ones first, then the ones to
	// clear (Clear), in the order chosen.
	Hosts []string
	Clear []string
	Moves []ScavengeMove
	// Explain has one line per host considered for clearing and not
	// cleared, with the reason.
	Explain []string
}

// ScavengeError is PlanScavenge's refusal: no complete plan exists that
// this planner finds. Reason is a sentence for the user.
type ScavengeError struct {
	Reason  string
	Explain []string
}

func (e *ScavengeError) Error() string { return e.Reason }

// placed is a move planned on the working state.
type placed struct {
	inst     *ScavengeInstance
	from, to int
}

// scavState is the working state of one planning run.
type scavState struct {
	in   *ScavengeInput
	used [][]int64
	// mig and recv are the hosts' migration and receivable tags; excl the
	// exclusion tags present on each host (instances staying or arriving).
	mig, recv [][]string
	excl      []map[string]int
	// taken hosts are the lease's (no instance may arrive); received
	// hosts got instances (they are no longer cleared).
	taken, received []bool
	// targets are the target host indexes, non-eligible ones first (they
	// do not use up hosts the lease could take), then by id.
	targets []int
}

// PlanScavenge plans a BEST-EFFORT lease: between Min and Max hosts among
// the eligible ones, the free ones taken first, then the ones cheapest to
// clear (fewest instances, then least to move, then id), each instance
// moved (largest first) to the target host that allows it (capacity,
// migration tags, exclusion tags) and is left with the least room
// (best fit, ties by id). A host is cleared only when every one of its
// instances finds a place; what it could not place is explained.
func PlanScavenge(in ScavengeInput) (ScavengePlan, error) {
	if in.Min < 1 || in.Max < in.Min {
		return ScavengePlan{}, fmt.Errorf("%w: min %d, max %d", ErrInvalidRequest, in.Min, in.Max)
	}
	st := newScavState(&in)
	var plan ScavengePlan
	var eligible, clearable []int
	for i := range in.Hosts {
		h := &in.Hosts[i]
		if !h.Eligible {
			continue
		}
		eligible = append(eligible, i)
		if h.Pinned == "" && len(h.Instances) == 0 && len(plan.Hosts) < in.Max {
			plan.Hosts = append(plan.Hosts, h.ID)
			st.taken[i] = true
			continue
		}
		clearable = append(clearable, i)
	}
	if len(eligible) < in.Min {
		return ScavengePlan{}, &ScavengeError{Reason: fmt.Sprintf(
			"Cannot clear hosts for the lease: blocked by leases (%d hosts match and are free of leases over the window, %d more are held by other leases, %d needed)",
			len(eligible), in.NotEligible, in.Min)}
	}
	slices.SortFunc(clearable, func(a, b int) int {
		ha, hb := &in.Hosts[a], &in.Hosts[b]
		return cmp.Or(cmp.Compare(len(ha.Instances), len(hb.Instances)),
			cmp.Compare(totalUsage(ha), totalUsage(hb)), strings.Compare(ha.ID, hb.ID))
	})
	// Reserve every candidate first: an instance never moves onto a host
	// the plan may still clear. Hosts not cleared are released as
	// targets again only if no other can be cleared (see below).
	for _, i := range clearable {
		st.taken[i] = true
	}
	for _, i := range clearable {
		if len(plan.Hosts) >= in.Min {
			st.taken[i] = false
			continue
		}
		h := &in.Hosts[i]
		if h.Pinned != "" {
			plan.Explain = append(plan.Explain, fmt.Sprintf("host %s: %s", h.ID, h.Pinned))
			st.taken[i] = false
			continue
		}
		if st.received[i] {
			plan.Explain = append(plan.Explain, fmt.Sprintf("host %s: receives moved instances", h.ID))
			st.taken[i] = false
			continue
		}
		moves, why := st.clear(i)
		if why != "" {
			plan.Explain = append(plan.Explain, fmt.Sprintf("host %s: %s", h.ID, why))
			st.taken[i] = false
			continue
		}
		for _, m := range moves {
			plan.Moves = append(plan.Moves, ScavengeMove{Instance: m.inst.ID, From: h.ID, To: in.Hosts[m.to].ID})
		}
		plan.Hosts = append(plan.Hosts, h.ID)
		plan.Clear = append(plan.Clear, h.ID)
	}
	if len(plan.Hosts) < in.Min {
		reason := fmt.Sprintf("Cannot clear enough hosts for the lease: %d free, %d of %d more could be cleared", len(plan.Hosts)-len(plan.Clear), len(plan.Clear), in.Min-(len(plan.Hosts)-len(plan.Clear)))
		if len(plan.Explain) > 0 {
			reason += "; " + strings.Join(firstN(plan.Explain, 5), "; ")
		}
		return ScavengePlan{}, &ScavengeError{Reason: reason, Explain: plan.Explain}
	}
	return plan, nil
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

func totalUsage(h *ScavengeHost) int64 {
	var t int64
	for _, inst := range h.Instances {
		for _, u := range inst.Usage {
			t += u
		}
	}
	return t
}

func newScavState(in *ScavengeInput) *scavState {
	n := len(in.Hosts)
	st := &scavState{in: in, used: make([][]int64, n), mig: make([][]string, n), recv: make([][]string, n),
		excl: make([]map[string]int, n), taken: make([]bool, n), received: make([]bool, n)}
	for i := range in.Hosts {
		h := &in.Hosts[i]
		st.used[i] = slices.Clone(h.Used)
		st.mig[i] = in.Rules.MigrationTags(h.Tags)
		st.recv[i] = in.Rules.ReceivableMigrationTags(h.Tags)
		for _, inst := range h.Instances {
			for _, t := range in.Rules.ExclusionTags(inst.Tags) {
				if st.excl[i] == nil {
					st.excl[i] = map[string]int{}
				}
				st.excl[i][t]++
			}
		}
		if h.Target {
			st.targets = append(st.targets, i)
		}
	}
	slices.SortFunc(st.targets, func(a, b int) int {
		ea, eb := in.Hosts[a].Eligible, in.Hosts[b].Eligible
		if ea != eb {
			if ea {
				return 1
			}
			return -1
		}
		return strings.Compare(in.Hosts[a].ID, in.Hosts[b].ID)
	})
	return st
}

// clear places every instance of host i, largest first, on the working
// state; on failure it undoes what it placed and says which instance had
// nowhere to go.
func (st *scavState) clear(i int) ([]placed, string) {
	h := &st.in.Hosts[i]
	order := make([]int, len(h.Instances))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(sum(h.Instances[b].Usage), sum(h.Instances[a].Usage)),
			strings.Compare(h.Instances[a].ID, h.Instances[b].ID))
	})
	var done []placed
	for _, k := range order {
		inst := &h.Instances[k]
		to, why := st.bestTarget(i, inst)
		if to < 0 {
			for j := len(done) - 1; j >= 0; j-- {
				st.unplace(done[j])
			}
			return nil, fmt.Sprintf("instance %s has nowhere to go (%s)", inst.ID, why)
		}
		p := placed{inst: inst, from: i, to: to}
		st.place(p)
		done = append(done, p)
	}
	return done, ""
}

func sum(v []int64) int64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return t
}

// bestTarget is the allowed target host with the least room left after
// taking inst (relative to capacity, summed over classes), or -1 and the
// commonest reason the targets refused.
func (st *scavState) bestTarget(from int, inst *ScavengeInstance) (int, string) {
	best, bestLeft := -1, 0.0
	var noRoom, noMig, noExcl int
	excl := st.in.Rules.ExclusionTags(inst.Tags)
	for _, t := range st.targets {
		if t == from || st.taken[t] {
			continue
		}
		if !MigrationAllowed(st.mig[from], st.recv[t]) {
			noMig++
			continue
		}
		if clashes(st.excl[t], excl) {
			noExcl++
			continue
		}
		left, ok := st.room(t, inst.Usage)
		if !ok {
			noRoom++
			continue
		}
		if best < 0 || left < bestLeft {
			best, bestLeft = t, left
		}
	}
	if best >= 0 {
		return best, ""
	}
	switch {
	case noRoom == 0 && noMig == 0 && noExcl == 0:
		return -1, "no other host may receive instances"
	case noRoom >= noMig && noRoom >= noExcl:
		return -1, fmt.Sprintf("no host has room for %s", st.describe(inst.Usage))
	case noMig >= noExcl:
		return -1, "no host with room is allowed by the migration tags"
	default:
		return -1, "every host with room holds an instance with the same exclusion tag"
	}
}

func clashes(have map[string]int, tags []string) bool {
	for _, t := range tags {
		if have[t] > 0 {
			return true
		}
	}
	return false
}

// room reports whether host t can take usage, and the fraction of its
// capacity left afterwards (summed over the classes it has).
func (st *scavState) room(t int, usage []int64) (float64, bool) {
	h := &st.in.Hosts[t]
	left := 0.0
	for c, u := range usage {
		if u == 0 {
			continue
		}
		if c >= len(h.Capacity) || h.Capacity[c] <= 0 {
			return 0, false
		}
		free := h.Capacity[c] - st.used[t][c] - u
		if free < 0 {
			return 0, false
		}
		left += float64(free) / float64(h.Capacity[c])
	}
	return left, true
}

func (st *scavState) describe(usage []int64) string {
	var parts []string
	for c, u := range usage {
		if u != 0 && c < len(st.in.Classes) {
			parts = append(parts, fmt.Sprintf("%s=%d", st.in.Classes[c], u))
		}
	}
	return strings.Join(parts, ",")
}

func (st *scavState) place(p placed) {
	for c, u := range p.inst.Usage {
		st.used[p.to][c] += u
		st.used[p.from][c] -= u
	}
	for _, t := range st.in.Rules.ExclusionTags(p.inst.Tags) {
		if st.excl[p.to] == nil {
			st.excl[p.to] = map[string]int{}
		}
		st.excl[p.to][t]++
		st.excl[p.from][t]--
	}
	st.received[p.to] = true
}

func (st *scavState) unplace(p placed) {
	for c, u := range p.inst.Usage {
		st.used[p.to][c] -= u
		st.used[p.from][c] += u
	}
	for _, t := range st.in.Rules.ExclusionTags(p.inst.Tags) {
		st.excl[p.to][t]--
		st.excl[p.from][t]++
	}
	// received stays set only if something else still arrived there.
	st.received[p.to] = false
	for c := range st.used[p.to] {
		if st.used[p.to][c] != st.in.Hosts[p.to].Used[c] {
			st.received[p.to] = true
			break
		}
	}
}
