package allocator

import (
	"fmt"
	"sort"
)

// Cluster is the whole model: groups, nodes (in tie-break order),
// instances and the tag rules.
type Cluster struct {
	Groups    []Group
	Nodes     []Node
	Instances []Instance
	Rules     TagRules
	// ClusterTags are the raw cluster tags (desired-location prefixes are
	// read from them).
	ClusterTags []string

	// hidden nodes are left out of every scope (hail drops the other
	// groups' nodes after a dedicated multi-group allocation).
	hidden []bool

	// cache of the pre-placement N+1 evacuability, valid for version.
	n1           *n1Cache
	n1key, n1ver int
	version      int
}

// NodeSpec describes a node for NewCluster.
type NodeSpec struct {
	Name                 string
	Group                int
	Offline              bool // offline, drained or not vm_capable
	Tags                 []string
	TotalMem             float64
	ReservedMem, FreeMem int
	TotalDisk            float64
	FreeDisk             int
	TotalCPUs            float64
	ReservedCPUs         int
	TotalSpindles        int // spindle_count (normal) or total_spindles (exclusive)
	FreeSpindles         int
	ExclusiveStorage     bool
}

// InstanceSpec is an existing instance for NewCluster.
type InstanceSpec struct {
	Instance
	Primary, Secondary int // node indices; Secondary -1 if none
}

// NewCluster builds the model the way htools loads a cluster: derived
// memory figures, N+1 reserves, tags, location scores and policies.
func NewCluster(groups []Group, nodes []NodeSpec, insts []InstanceSpec, clusterTags []string) (*Cluster, error) {
	c := &Cluster{Groups: groups, Rules: ParseClusterTags(clusterTags), ClusterTags: clusterTags}
	for i := range c.Groups {
		c.Groups[i].Idx = i
		c.Groups[i].Policy.testSpecs = nil
		c.Groups[i].Policy.testSpecs = testSpecs(&c.Groups[i].Policy)
	}
	var dsrdPrefixes []string
	for _, t := range clusterTags {
		if len(t) > len(TagDesiredLocationPrefix) && t[:len(TagDesiredLocationPrefix)] == TagDesiredLocationPrefix {
			dsrdPrefixes = append(dsrdPrefixes, t[len(TagDesiredLocationPrefix):])
		}
	}
	c.Nodes = make([]Node, len(nodes))
	for i, s := range nodes {
		if s.Group < 0 || s.Group >= len(groups) {
			return nil, fmt.Errorf("node %s: unknown group %d", s.Name, s.Group)
		}
		n := Node{
			Name: s.Name, Idx: i, Group: s.Group, Offline: s.Offline, Tags: s.Tags,
			TMem: s.TotalMem, NMem: s.ReservedMem, FMem: s.FreeMem, FMemForth: s.FreeMem,
			TDsk: s.TotalDisk, FDsk: s.FreeDisk, FDskForth: s.FreeDisk,
			TCpu: s.TotalCPUs, NCpu: s.ReservedCPUs, UCpu: s.ReservedCPUs, UCpuForth: s.ReservedCPUs,
			TSpindles: s.TotalSpindles, FSpindles: s.FreeSpindles, FSpindlesForth: s.FreeSpindles,
			ExclStorage: s.ExclusiveStorage,
		}
		n.PMemForth = float64(s.FreeMem) / s.TotalMem
		if s.ExclusiveStorage {
			n.PDsk = computePDsk(s.FreeSpindles, float64(s.TotalSpindles))
		} else {
			n.PDsk = computePDsk(s.FreeDisk, s.TotalDisk)
		}
		n.PDskForth = n.PDsk
		n.PCpu = float64(s.ReservedCPUs) / s.TotalCPUs
		n.PCpuForth = n.PCpu
		n.LoDsk = 0 // reserved disk ratio 0
		n.LocTags = c.Rules.LocationTags(s.Tags)
		n.MigTags = c.Rules.MigrationTags(s.Tags)
		n.RMigTags = c.Rules.ReceivableMigrationTags(s.Tags)
		pol := &c.Groups[s.Group].Policy
		n.Policy = pol
		n.HiSpindles = pol.SpindleRatio * float64(s.TotalSpindles)
		c.Nodes[i] = n
	}
	c.Instances = make([]Instance, len(insts))
	for i, s := range insts {
		inst := s.Instance
		inst.Idx = i
		inst.PNode, inst.SNode = s.Primary, s.Secondary
		if inst.PNode < 0 || inst.PNode >= len(nodes) || inst.SNode >= len(nodes) {
			return nil, fmt.Errorf("instance %s: bad node index", inst.Name)
		}
		c.prepareInstance(&inst, dsrdPrefixes)
		if inst.SNode >= 0 {
			inst.LocationScore = countCommon(c.Nodes[inst.PNode].LocTags, c.Nodes[inst.SNode].LocTags)
		}
		c.Instances[i] = inst
	}
	// fixNodes: setPri / setSec in instance order.
	for i := range c.Instances {
		inst := &c.Instances[i]
		c.Nodes[inst.PNode].setPri(inst)
		if inst.SNode >= 0 {
			c.Nodes[inst.SNode].setSec(inst)
		}
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		// buildPeers
		peers := map[int]int{}
		for _, ii := range n.sList {
			inst := &c.Instances[ii]
			mem := 0
			if inst.usesSecMem() && !inst.Forthcoming {
				mem = inst.Mem
			}
			peers[inst.PNode] += mem
		}
		for k, v := range peers {
			if v == 0 {
				delete(peers, k)
			}
		}
		n.peers = peers
		n.RMem = 0
		for _, v := range peers {
			n.RMem = max(n.RMem, v)
		}
		n.FailN1 = n.FMem < n.RMem
		n.PRem = float64(n.RMem) / n.TMem
		// updateMemStat
		n.IMem = 0
		for _, ii := range n.pList {
			if c.Instances[ii].usesMemory() {
				n.IMem += c.Instances[ii].Mem
			}
		}
		n.XMem = (int(n.TMem) - n.NMem - n.IMem) - n.FMem
		n.PMem = float64(n.unallocatedMem()) / n.TMem
	}
	return c, nil
}

// prepareInstance derives exclusion and desired-location tags.
func (c *Cluster) prepareInstance(inst *Instance, dsrdPrefixes []string) {
	inst.ExclTags = c.Rules.ExclusionTags(inst.Tags)
	inst.DsrdLocTags = nil
	for _, t := range inst.Tags {
		for _, p := range dsrdPrefixes {
			if len(t) >= len(p) && t[:len(p)] == p {
				inst.DsrdLocTags = append(inst.DsrdLocTags, t)
				break
			}
		}
	}
	inst.DsrdLocTags = sortedUnique(inst.DsrdLocTags)
}

// PrepareRequest derives the tag-dependent fields of a new instance.
func (c *Cluster) PrepareRequest(inst *Instance) {
	var dsrd []string
	for _, t := range c.ClusterTags {
		if len(t) > len(TagDesiredLocationPrefix) && t[:len(TagDesiredLocationPrefix)] == TagDesiredLocationPrefix {
			dsrd = append(dsrd, t[len(TagDesiredLocationPrefix):])
		}
	}
	c.prepareInstance(inst, dsrd)
	inst.PNode, inst.SNode = -1, -1
	inst.Idx = -1
}

func countCommon(a, b []string) int {
	n := 0
	for _, x := range a {
		if containsSorted(b, x) {
			n++
		}
	}
	return n
}

// setPri is Ganeti's Node.setPri (loading, no checks).
func (n *Node) setPri(inst *Instance) {
	if len(inst.ExclTags) > 0 {
		if n.pTags == nil {
			n.pTags = map[string]int{}
		}
		for _, t := range inst.ExclTags {
			n.pTags[t]++
		}
		n.ConflictPri = conflictOf(n.pTags)
	}
	if !inst.usesMemory() {
		n.FMemForth -= inst.Mem
	}
	n.PMemForth = float64(n.FMemForth) / n.TMem
	if inst.notOffline() {
		n.UCpuForth += inst.VCPUs
	}
	n.PCpuForth = float64(n.UCpuForth) / n.TCpu
	n.InstSpindlesForth += n.spindleDelta(inst)
	if inst.Forthcoming {
		if inst.Template.usesLocalStorage() {
			n.FDskForth -= inst.Dsk
		}
		n.FSpindlesForth = freeSpindlesAfter(n, inst, true, n.FSpindlesForth)
		n.PDskForth = n.newPDsk(n.FSpindlesForth, n.FDskForth)
		return
	}
	n.pList = append(n.pList, inst.Idx)
	n.NPri++
	if inst.notOffline() {
		n.UCpu += inst.VCPUs
	}
	n.PCpu = float64(n.UCpu) / n.TCpu
	n.CLoad++
	n.MLoad++
	n.DLoad++
	n.NLoad++
	n.InstSpindles += n.spindleDelta(inst)
	n.LocationScore += inst.LocationScore + n.dsrdLocMisses(inst)
	if pairs := n.locExclPairs(inst); len(pairs) > 0 {
		if n.instMap == nil {
			n.instMap = map[[2]string]int{}
		}
		for _, p := range pairs {
			n.instMap[p]++
		}
	}
}

// setSec is Ganeti's Node.setSec (loading, no checks).
func (n *Node) setSec(inst *Instance) {
	n.InstSpindlesForth += n.spindleDelta(inst)
	if inst.Forthcoming {
		if inst.Template.usesLocalStorage() {
			n.FDskForth -= inst.Dsk
		}
		n.FSpindlesForth = freeSpindlesAfter(n, inst, true, n.FSpindlesForth)
		n.PDskForth = n.newPDsk(n.FSpindlesForth, n.FDskForth)
		return
	}
	n.sList = append(n.sList, inst.Idx)
	n.NSec++
	n.DLoad++
	n.InstSpindles += n.spindleDelta(inst)
}

// groupsWithNodes returns the indices of groups that have nodes, in order
// (Ganeti's splitCluster).
func (c *Cluster) groupsWithNodes() []int {
	seen := map[int]bool{}
	for i := range c.Nodes {
		if c.isHidden(i) {
			continue
		}
		seen[c.Nodes[i].Group] = true
	}
	var out []int
	for g := range seen {
		out = append(out, g)
	}
	sort.Ints(out)
	return out
}

func (c *Cluster) isHidden(i int) bool { return c.hidden != nil && c.hidden[i] }

// keepOnlyGroup hides the nodes of every other group.
func (c *Cluster) keepOnlyGroup(g int) {
	c.hidden = make([]bool, len(c.Nodes))
	for i := range c.Nodes {
		c.hidden[i] = c.Nodes[i].Group != g
	}
	c.version++
	c.n1 = nil
}
