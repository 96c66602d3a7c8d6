package allocator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// AllocResult is the answer to an allocation, in hail's terms.
type AllocResult struct {
	// Info is hail's info text, without the "Request successful: " or
	// "Request failed: " prefix.
	Info string
	// Placement is the chosen placement (nil on failure).
	Placement *Placement
	// Group is the chosen group's index (-1 on failure).
	Group int
	// Solutions holds the per-group outcomes, for explanations.
	Solutions []GroupSolution
}

// Nodes returns the chosen node names, primary first.
func (r *AllocResult) Nodes(c *Cluster) []string {
	if r.Placement == nil {
		return nil
	}
	out := []string{c.Nodes[r.Placement.P].Name}
	if r.Placement.S >= 0 {
		out = append(out, c.Nodes[r.Placement.S].Name)
	}
	return out
}

// GroupSolution is one group's outcome.
type GroupSolution struct {
	Group int
	Sol   *Solution // nil if Err
	Err   error
}

// ErrAllocation is wrapped by allocation failures that fail the whole
// request (hail's "Request failed").
var ErrAllocation = errors.New("allocation failed")

type reqError struct{ msg string }

func (e *reqError) Error() string { return e.msg }
func (e *reqError) Unwrap() error { return ErrAllocation }

func failf(format string, a ...any) error { return &reqError{msg: fmt.Sprintf(format, a...)} }

// FindGroup finds a group by name or UUID; exactly one must match.
func (c *Cluster) FindGroup(name string) (int, error) {
	found, n := -1, 0
	for i := range c.Groups {
		if c.Groups[i].Name == name || c.Groups[i].UUID == name {
			found = i
			n++
		}
	}
	if n != 1 {
		return -1, failf("Wrong number of elems found with name %s", name)
	}
	return found, nil
}

func hasRequiredNetworks(g *Group, inst *Instance) bool {
	for _, n := range inst.NICNetworks {
		if n != "" && !slices.Contains(g.Networks, n) {
			return false
		}
	}
	return true
}

// Allocate places a new instance the way hail does: the dedicated metric
// if every node of the relevant groups is dedicated, else the cluster
// metric with the global N+1 check. A non-nil error is a failure of the
// whole request (its message is hail's); a result without Placement is an
// ordinary "no valid allocation" answer whose Info explains why.
func (c *Cluster) Allocate(req *AllocRequest, opts Options) (*AllocResult, error) {
	inst := req.Inst
	if opts.RestrictTo == nil {
		opts.RestrictTo = req.RestrictTo
	}
	var ded bool
	if req.GroupName != nil {
		ded = c.isDedicatedName(*req.GroupName)
	} else {
		ded = c.IsDedicated(-1)
	}
	if req.GroupName != nil {
		return c.allocInGroup(*req.GroupName, &inst, req.RequiredNodes, &opts, ded)
	}
	return c.allocMG(&inst, req.RequiredNodes, &opts, ded, nil)
}

func (c *Cluster) allocInGroup(name string, inst *Instance, count int, opts *Options, ded bool) (*AllocResult, error) {
	g, err := c.FindGroup(name)
	if err != nil {
		return nil, err
	}
	grp := &c.Groups[g]
	if !hasRequiredNetworks(grp, inst) {
		return nil, failf("The group %s is not connected to a network required by instance %s", grp.Name, inst.Name)
	}
	sc := c.groupScope(g)
	cands := c.onlineCandidates(sc.nodes, opts.RestrictTo)
	sol, err := c.tryAlloc(sc, cands, inst, count, opts, ded)
	if err != nil {
		return nil, failf("%s", err.Error())
	}
	res := &AllocResult{Group: -1, Solutions: []GroupSolution{{Group: g, Sol: sol}}}
	res.Info = groupDesc(grp, sol.describe(c))
	if sol.Best != nil {
		res.Placement, res.Group = sol.Best, g
	}
	return res, nil
}

// allocMG is tryMGAlloc / findMGAllocation: try every group, pick by
// (alloc policy, metric), ties to the later group.
func (c *Cluster) allocMG(inst *Instance, count int, opts *Options, ded bool, allowed []int) (*AllocResult, error) {
	var msgs []string
	var sols []GroupSolution
	groups := c.groupsWithNodes()
	allGroups := slices.Clone(groups)
	if allowed != nil {
		groups = slices.DeleteFunc(groups, func(g int) bool { return !slices.Contains(allowed, g) })
	}
	full := c.fullScope()
	var valid []int
	for _, g := range groups {
		if !ded && !hasRequiredNetworks(&c.Groups[g], inst) {
			msgs = append(msgs, fmt.Sprintf("group %s is not connected to a network required by instance %s", c.Groups[g].Name, inst.Name))
			continue
		}
		valid = append(valid, g)
	}
	for _, g := range valid {
		grp := &c.Groups[g]
		gs := GroupSolution{Group: g}
		if ded && !hasRequiredNetworks(grp, inst) {
			gs.Err = fmt.Errorf("The group %s is not connected to a network required by instance %s", grp.Name, inst.Name)
		} else {
			statScope := full
			gsc := c.groupScope(g)
			if ded {
				statScope = gsc
			}
			cands := c.onlineCandidates(gsc.nodes, opts.RestrictTo)
			gs.Sol, gs.Err = c.tryAlloc(statScope, cands, inst, count, opts, ded)
		}
		sols = append(sols, gs)
		if gs.Err != nil {
			msgs = append(msgs, fmt.Sprintf("Group %s: error %s", grp.Name, gs.Err))
		} else {
			msgs = append(msgs, groupDesc(grp, gs.Sol.describe(c)))
		}
	}
	// filterMGResults (reversed) then a stable sort by (policy, metric).
	var good []GroupSolution
	for _, gs := range sols {
		if gs.Err != nil || gs.Sol.Best == nil || c.Groups[gs.Group].AllocPolicy == AllocUnallocable {
			continue
		}
		good = append(good, gs)
	}
	slices.Reverse(good)
	slices.SortStableFunc(good, func(a, b GroupSolution) int {
		pa, pb := c.Groups[a.Group].AllocPolicy, c.Groups[b.Group].AllocPolicy
		if pa != pb {
			return int(pa) - int(pb)
		}
		switch {
		case a.Sol.Best.less(b.Sol.Best):
			return -1
		case b.Sol.Best.less(a.Sol.Best):
			return 1
		}
		return 0
	})
	if len(good) == 0 {
		if len(groups) == 0 {
			var b strings.Builder
			b.WriteString("no groups for evacuation: allowed groups was ")
			if allowed == nil {
				b.WriteString("Nothing")
			} else {
				b.WriteString("Just [")
				for i, g := range allowed {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprint(&b, g)
				}
				b.WriteString("]")
			}
			b.WriteString(", all groups: [")
			for i, g := range allGroups {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(c.Groups[g].haskellShow())
			}
			b.WriteString("]")
			return nil, failf("%s", b.String())
		}
		return nil, failf("%s", strings.Join(msgs, ", "))
	}
	best := good[0]
	return &AllocResult{
		Info:      strings.Join(append([]string{"Selected group: " + c.Groups[best.Group].Name}, msgs...), ", "),
		Placement: best.Sol.Best,
		Group:     best.Group,
		Solutions: sols,
	}, nil
}

// MultiResult is the answer to a multi-allocation.
type MultiResult struct {
	Allocated []MultiAllocated
	Failed    []MultiFailed
}

// MultiAllocated is one allocated instance.
type MultiAllocated struct {
	Name  string
	Nodes []string
}

// MultiFailed is one instance that could not be allocated.
type MultiFailed struct {
	Name, Info string
}

// MultiAllocate allocates several instances one after the other (hail's
// allocList), each seeing the previous placements. The cluster is
// modified.
func (c *Cluster) MultiAllocate(reqs []AllocRequest, opts Options) (*MultiResult, error) {
	var names []string
	for k := range reqs {
		if g := reqs[k].GroupName; g != nil && !slices.Contains(names, *g) {
			names = append(names, *g)
		}
	}
	var ded bool
	if len(names) == 1 {
		ded = c.isDedicatedName(names[0])
	} else {
		ded = c.IsDedicated(-1)
	}
	orig := c.Clone()
	res := &MultiResult{}
	for k := range reqs {
		r := &reqs[k]
		inst := r.Inst
		o := opts
		var ar *AllocResult
		var err error
		if r.GroupName != nil {
			target := c
			if ded {
				// hail's dedicated multi-allocation evaluates a named
				// group against the original cluster state.
				target = orig
			}
			ar, err = target.allocInGroup(*r.GroupName, &inst, r.RequiredNodes, &o, ded)
			if err == nil && ar.Placement != nil && target == orig {
				// As in hail, the node states then restart from the
				// original cluster plus this placement.
				c.Nodes = slices.Clone(orig.Nodes)
				c.version++
				c.n1 = nil
			}
		} else {
			ar, err = c.allocMG(&inst, r.RequiredNodes, &o, ded, nil)
		}
		if err != nil {
			return nil, err
		}
		if ar.Placement == nil {
			info := ar.Info
			if ded && r.GroupName != nil && len(ar.Solutions) == 1 {
				// hail's dedicated path keeps the bare description here
				info = ar.Solutions[0].Sol.describe(target(c, orig, ded, r))
			}
			res.Failed = append(res.Failed, MultiFailed{Name: inst.Name, Info: info})
			continue
		}
		if ded && r.GroupName == nil {
			// hail keeps only the chosen group's nodes from here on
			c.keepOnlyGroup(ar.Group)
		}
		names := ar.Nodes(target(c, orig, ded, r))
		c.Apply(ar.Placement)
		res.Allocated = append(res.Allocated, MultiAllocated{Name: inst.Name, Nodes: names})
	}
	return res, nil
}

// isDedicatedName is Dedicated.isDedicated for a group given by name (only
// the name is compared, as in htools).
func (c *Cluster) isDedicatedName(name string) bool {
	for i := range c.Nodes {
		if c.Groups[c.Nodes[i].Group].Name == name && !c.Nodes[i].ExclStorage {
			return false
		}
	}
	return true
}

func target(c, orig *Cluster, ded bool, r *AllocRequest) *Cluster {
	if ded && r.GroupName != nil {
		return orig
	}
	return c
}

// Explain words an allocation outcome for users: one line per group with
// the number of candidates rejected for each reason.
func (r *AllocResult) Explain(c *Cluster) []string {
	var out []string
	for _, gs := range r.Solutions {
		g := c.Groups[gs.Group].Name
		if gs.Err != nil {
			out = append(out, fmt.Sprintf("group %s: %v", g, gs.Err))
			continue
		}
		var parts []string
		for m := FailMem; m <= FailInternal; m++ {
			if n := gs.Sol.Fails[m]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d rejected: %s", n, m.Reason()))
			}
		}
		line := fmt.Sprintf("group %s: %d feasible candidates", g, gs.Sol.Allocs)
		if len(parts) > 0 {
			line += "; " + strings.Join(parts, "; ")
		}
		out = append(out, line)
	}
	return out
}
