package allocator

import (
	"fmt"
	"slices"
	"strings"
)

// EvacMode is the node-evacuation mode.
type EvacMode uint8

// Evacuation modes (IAllocator's "primary-only", "secondary-only", "all").
const (
	EvacPrimary EvacMode = iota
	EvacSecondary
	EvacAll
)

// ParseEvacMode parses an IAllocator evac_mode.
func ParseEvacMode(s string) (EvacMode, error) {
	switch s {
	case "primary-only":
		return EvacPrimary, nil
	case "secondary-only":
		return EvacSecondary, nil
	case "all":
		return EvacAll, nil
	}
	return 0, fmt.Errorf("Invalid string value for type EvacMode: %q", s)
}

// OpKind is the kind of a Ganeti opcode in an evacuation plan.
type OpKind uint8

// Opcode kinds.
const (
	OpMigrate      OpKind = iota // OP_INSTANCE_MIGRATE (failover of a DRBD or shared instance)
	OpFailover                   // OP_INSTANCE_FAILOVER (forthcoming instances)
	OpReplaceDisks               // OP_INSTANCE_REPLACE_DISKS, new secondary
)

// Op is one step of a move, as a Ganeti opcode.
type Op struct {
	Kind     OpKind
	Instance string
	Node     string // target (migrate to any node) or new secondary; "" = none
}

// Moved is an instance the evacuation moved.
type Moved struct {
	Instance string
	Group    string
	Nodes    []string
}

// EvacFailed is an instance the evacuation could not move.
type EvacFailed struct {
	Instance, Reason string
}

// EvacResult is the plan of an evacuation or group change.
type EvacResult struct {
	Moved  []Moved
	Failed []EvacFailed
	Jobs   [][]Op
}

type moveKind uint8

const (
	mvFailover moveKind = iota
	mvFailoverToAny
	mvReplaceSecondary
)

type move struct {
	kind moveKind
	node int
}

func (s *state) apply(idx int, m move, force bool) FailMode {
	switch m.kind {
	case mvFailover:
		return s.moveFailover(idx, force)
	case mvFailoverToAny:
		return s.moveFailoverToAny(idx, m.node, force)
	default:
		return s.moveReplaceSecondary(idx, m.node, force)
	}
}

func (c *Cluster) moveOps(s *state, idx int, m move) []Op {
	inst := s.inst(idx)
	fail := Op{Kind: OpMigrate, Instance: inst.Name}
	if inst.Forthcoming {
		fail.Kind = OpFailover
	}
	switch m.kind {
	case mvFailover:
		return []Op{fail}
	case mvFailoverToAny:
		fail.Node = c.Nodes[m.node].Name
		return []Op{fail}
	default:
		return []Op{{Kind: OpReplaceDisks, Instance: inst.Name, Node: c.Nodes[m.node].Name}}
	}
}

// groupScore is compCVNodes over the nodes of group g in state s.
func (s *state) groupScore(g int) float64 {
	var ptrs []*Node
	for i := range s.c.Nodes {
		if n := s.node(i); n.Group == g {
			ptrs = append(ptrs, n)
		}
	}
	return computeStats(ptrs).Score()
}

// evacOneNodeOnly moves a mirrored instance's "other" node (secondary for
// DRBD, primary for shared storage) to the best of avail.
func (c *Cluster) evacOneNodeOnly(s *state, idx int, g int, avail []int, force bool) (*state, []Op, error) {
	inst := s.inst(idx)
	var kind moveKind
	switch inst.Template.mirror() {
	case mirrorNone:
		return nil, nil, fmt.Errorf("Can't relocate/evacuate non-mirrored instances")
	case mirrorInternal:
		kind = mvReplaceSecondary
	default:
		kind = mvFailoverToAny
	}
	var best *state
	var bestNode int
	bestScore := 0.0
	msg := ""
	for _, t := range avail {
		w := s.fork()
		if f := w.apply(idx, move{kind, t}, force); f != FailNone {
			if best == nil {
				msg += " Node " + c.Nodes[t].Name + " failed: " + f.String() + ";"
			}
			continue
		}
		sc := w.groupScore(g)
		if best == nil || !(bestScore < sc) {
			best, bestScore, bestNode = w, sc, t
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("Can't find any good node: %s", msg)
	}
	return best, c.moveOps(best, idx, move{kind, bestNode}), nil
}

// evacDrbdAll moves both nodes of a DRBD instance to the best pair.
func (c *Cluster) evacDrbdAll(s *state, idx int, g int, avail []int, force bool) (*state, []Op, error) {
	var best *state
	var bestOps []Op
	bestScore := 0.0
	lastErr := "no nodes available"
	for _, p := range avail {
		for _, sn := range avail {
			if p == sn {
				continue
			}
			w := s.fork()
			var ops []Op
			step := func(m move, what string) error {
				if f := w.apply(idx, m, force); f != FailNone {
					return fmt.Errorf("%s: %s", what, f)
				}
				ops = append(ops, c.moveOps(w, idx, m)...)
				return nil
			}
			var err error
			if w.node(w.inst(idx).PNode).Offline {
				err = step(move{kind: mvFailover}, "Failing over to the secondary")
			}
			if err == nil {
				err = step(move{mvReplaceSecondary, p}, "Changing secondary to new primary")
			}
			if err == nil {
				err = step(move{kind: mvFailover}, "Failing over to new primary")
			}
			if err == nil {
				err = step(move{mvReplaceSecondary, sn}, "Changing secondary to final secondary")
			}
			if err != nil {
				if best == nil {
					lastErr = "Allocation failed: " + err.Error()
				}
				continue
			}
			sc := w.groupScore(g)
			if best == nil || !(bestScore < sc) {
				best, bestScore, bestOps = w, sc, ops
			}
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("Can't find any good nodes for relocation: %s", lastErr)
	}
	return best, bestOps, nil
}

// nodeEvacInstance moves one instance according to mode.
func (c *Cluster) nodeEvacInstance(s *state, idx int, mode EvacMode, g int, avail []int, force bool) (*state, []Op, error) {
	inst := s.inst(idx)
	switch inst.Template {
	case DTPlain:
		return nil, nil, fmt.Errorf("Instances of type plain cannot be relocated")
	case DTFile:
		return nil, nil, fmt.Errorf("Instances of type file cannot be relocated")
	case DTDrbd:
		switch mode {
		case EvacPrimary:
			w := s.fork()
			if f := w.apply(idx, move{kind: mvFailover}, force); f != FailNone {
				return nil, nil, fmt.Errorf("%s", f)
			}
			return w, c.moveOps(w, idx, move{kind: mvFailover}), nil
		case EvacSecondary:
			return c.evacOneNodeOnly(s, idx, g, avail, force)
		default:
			return c.evacDrbdAll(s, idx, g, avail, force)
		}
	}
	if mode == EvacSecondary {
		return nil, nil, fmt.Errorf("Instances with disk template '%s' can't execute change secondary", inst.Template)
	}
	return c.evacOneNodeOnly(s, idx, g, avail, force)
}

func (c *Cluster) allNodeNames(s *state, idx int) []string {
	inst := s.inst(idx)
	out := []string{c.Nodes[inst.PNode].Name}
	if inst.SNode >= 0 {
		out = append(out, c.Nodes[inst.SNode].Name)
	}
	return out
}

// commitState makes a state the cluster's own.
func (c *Cluster) commitState(s *state) {
	for i, n := range s.nodes {
		c.Nodes[i] = n
	}
	for i, v := range s.insts {
		if i < len(c.Instances) {
			c.Instances[i] = v
		}
	}
	c.version++
	c.n1 = nil
}

// FindInstance returns an instance's index by name.
func (c *Cluster) FindInstance(name string) (int, error) {
	for i := range c.Instances {
		if c.Instances[i].Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("Wrong number of elems found with name %s", name)
}

// NodeEvacuate plans the evacuation of the given instances (htools'
// tryNodeEvac): each instance in turn, on the state left by the previous.
func (c *Cluster) NodeEvacuate(idxs []int, mode EvacMode, opts Options) *EvacResult {
	excl := map[int]bool{}
	for _, idx := range idxs {
		in := &c.Instances[idx]
		if mode != EvacSecondary {
			excl[in.PNode] = true
		}
		if mode != EvacPrimary && in.Template == DTDrbd && in.SNode >= 0 {
			excl[in.SNode] = true
		}
	}
	for i := range c.Nodes {
		if c.Nodes[i].Offline {
			excl[i] = true
		}
	}
	s := newState(c, c.fullScope(), nil)
	res := &EvacResult{}
	for _, idx := range idxs {
		inst := s.inst(idx)
		g := s.node(inst.PNode).Group
		var avail []int
		for i := range c.Nodes {
			if c.Nodes[i].Group == g && !excl[i] && i != inst.PNode {
				avail = append(avail, i)
			}
		}
		ns, ops, err := c.nodeEvacInstance(s, idx, mode, g, avail, opts.IgnoreSoftErrors)
		if err != nil {
			res.Failed = append(res.Failed, EvacFailed{Instance: inst.Name, Reason: err.Error()})
			continue
		}
		s = ns
		res.Moved = append(res.Moved, Moved{Instance: s.inst(idx).Name,
			Group: c.Groups[s.node(s.inst(idx).PNode).Group].Name, Nodes: c.allNodeNames(s, idx)})
		res.Jobs = append(res.Jobs, ops)
	}
	c.commitState(s)
	return res
}

// Relocate moves the secondary (DRBD) or primary (shared storage) of one
// instance away from the node it is asked to leave (hail's relocate).
func (c *Cluster) Relocate(idx, reqNodes int, from []int, opts Options) ([]string, error) {
	if reqNodes != 1 {
		return nil, failf("Exchange %d nodes mode is not implemented", reqNodes)
	}
	inst := &c.Instances[idx]
	var exp int
	var what string
	var mode EvacMode
	switch inst.Template.mirror() {
	case mirrorNone:
		return nil, failf("Can't relocate non-mirrored instances")
	case mirrorInternal:
		exp, what, mode = inst.SNode, "secondary", EvacSecondary
	default:
		exp, what, mode = inst.PNode, "primary", EvacPrimary
	}
	if len(from) != 1 || from[0] != exp {
		parts := make([]string, len(from))
		for i, f := range from {
			parts[i] = fmt.Sprint(f)
		}
		return nil, failf("Unsupported request: excluded nodes not equal to instance's %s(%d versus [%s])", what, exp, strings.Join(parts, ","))
	}
	r := c.NodeEvacuate([]int{idx}, mode, opts)
	if len(r.Failed) > 0 {
		return nil, failf("%s", r.Failed[0].Reason)
	}
	after := &c.Instances[idx]
	if mode == EvacSecondary {
		return []string{c.Nodes[after.SNode].Name}, nil
	}
	return []string{c.Nodes[after.PNode].Name}, nil
}

// ChangeGroup moves instances to other groups (htools' tryChangeGroup):
// the best group is chosen as for a new allocation, then the instance is
// moved there with both of its nodes.
func (c *Cluster) ChangeGroup(idxs []int, targets []int, opts Options) *EvacResult {
	var evacGroups []int
	for _, idx := range idxs {
		g := c.Nodes[c.Instances[idx].PNode].Group
		if !slices.Contains(evacGroups, g) {
			evacGroups = append(evacGroups, g)
		}
	}
	allowed := targets
	if len(allowed) == 0 {
		allowed = nil
		for g := range c.Groups {
			allowed = append(allowed, g)
		}
	}
	allowed = slices.DeleteFunc(slices.Clone(allowed), func(g int) bool { return slices.Contains(evacGroups, g) })
	if allowed == nil {
		allowed = []int{}
	}
	res := &EvacResult{}
	for _, idx := range idxs {
		inst := c.Instances[idx]
		o := opts
		o.RestrictTo = nil
		ar, err := c.allocMGExisting(&inst, allowed, &o)
		if err != nil {
			res.Failed = append(res.Failed, EvacFailed{Instance: inst.Name, Reason: err.Error()})
			continue
		}
		g := ar.Group
		var avail []int
		for i := range c.Nodes {
			if c.Nodes[i].Group == g && !c.Nodes[i].Offline {
				avail = append(avail, i)
			}
		}
		s := newState(c, c.fullScope(), nil)
		ns, ops, err := c.nodeEvacInstance(s, idx, EvacAll, g, avail, false)
		if err != nil {
			res.Failed = append(res.Failed, EvacFailed{Instance: inst.Name, Reason: err.Error()})
			continue
		}
		res.Moved = append(res.Moved, Moved{Instance: inst.Name,
			Group: c.Groups[ns.node(ns.inst(idx).PNode).Group].Name, Nodes: c.allNodeNames(ns, idx)})
		res.Jobs = append(res.Jobs, ops)
		c.commitState(ns)
	}
	return res
}

// allocMGExisting runs findBestAllocGroup for an existing instance over
// the allowed groups.
func (c *Cluster) allocMGExisting(inst *Instance, allowed []int, opts *Options) (*AllocResult, error) {
	return c.allocMG(inst, inst.RequiredNodes(), opts, false, allowed)
}
