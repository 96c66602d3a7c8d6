package iallocator

import (
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// Request is a decoded IAllocator request.
type Request struct {
	Type    string
	Cluster *allocator.Cluster

	// allocate / multi-allocate
	Allocs []allocator.AllocRequest
	// relocate
	Name          string
	RequiredNodes int
	RelocateFrom  []string
	// node-evacuate / change-group
	Instances    []string
	EvacMode     string
	TargetGroups []string
}

// DecodeOptions tune the decoding as hail's command line does.
type DecodeOptions struct {
	// StaticKVMNodeMemory replaces every node's reserved memory when the
	// first enabled hypervisor is kvm (hail's --static-kvm-node-memory,
	// default 4096). Set NoStaticKVM to keep the reported values.
	StaticKVMNodeMemory int
	NoStaticKVM         bool
}

// Decode parses an IAllocator request (JSON) into the allocator model,
// keeping the order of nodes, groups and instances.
func Decode(data []byte, dopts DecodeOptions) (*Request, error) {
	var tm map[string]json.RawMessage
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("Parsing input IAllocator message: %v", err)
	}
	if tm == nil {
		return nil, fmt.Errorf("invalid iallocator message: expected a JSON object")
	}
	top := &obj{m: tm, desc: "invalid iallocator message"}
	reqRaw, err := top.raw("request")
	if err != nil {
		return nil, err
	}
	rq, err := newObj(reqRaw, "invalid request dict")
	if err != nil {
		return nil, err
	}

	// groups
	gRaw, err := top.raw("nodegroups")
	if err != nil {
		return nil, err
	}
	gmembers, err := orderedObject(gRaw, "nodegroups")
	if err != nil {
		return nil, err
	}
	groups := make([]allocator.Group, 0, len(gmembers))
	gIdx := map[string]int{}
	for _, m := range gmembers {
		g, err := parseGroup(m.Key, m.Value)
		if err != nil {
			return nil, err
		}
		gIdx[m.Key] = len(groups)
		groups = append(groups, g)
	}

	// nodes
	nRaw, err := top.raw("nodes")
	if err != nil {
		return nil, err
	}
	nmembers, err := orderedObject(nRaw, "nodes")
	if err != nil {
		return nil, err
	}
	nodes := make([]allocator.NodeSpec, 0, len(nmembers))
	nIdx := map[string]int{}
	for _, m := range nmembers {
		n, err := parseNode(m.Key, m.Value, gIdx)
		if err != nil {
			return nil, err
		}
		nIdx[m.Key] = len(nodes)
		nodes = append(nodes, n)
	}

	// instances
	iRaw, err := top.raw("instances")
	if err != nil {
		return nil, err
	}
	imembers, err := orderedObject(iRaw, "instances")
	if err != nil {
		return nil, err
	}
	insts := make([]allocator.InstanceSpec, 0, len(imembers))
	for _, m := range imembers {
		inst, nl, ok := parseInstanceFast(m.Key, m.Value)
		if !ok {
			o, err := newObj(m.Value, "invalid data for instance '"+m.Key+"'")
			if err != nil {
				return nil, err
			}
			if inst, err = parseBaseInstance(m.Key, o); err != nil {
				return nil, err
			}
			if err := o.decode("nodes", &nl); err != nil {
				return nil, err
			}
		}
		if len(nl) == 0 {
			return nil, fmt.Errorf("empty node list for instance %s", m.Key)
		}
		spec := allocator.InstanceSpec{Instance: inst, Primary: -1, Secondary: -1}
		if spec.Primary, ok = nIdx[nl[0]]; !ok {
			return nil, fmt.Errorf("Unknown node '%s' for instance %s", nl[0], m.Key)
		}
		if len(nl) > 1 {
			if spec.Secondary, ok = nIdx[nl[1]]; !ok {
				return nil, fmt.Errorf("Unknown node '%s' for instance %s", nl[1], m.Key)
			}
		}
		insts = append(insts, spec)
	}

	ctags, err := top.strs("cluster_tags")
	if err != nil {
		return nil, err
	}
	hvs, err := top.strs("enabled_hypervisors")
	if err != nil {
		return nil, err
	}
	if len(hvs) > 0 && hvs[0] == "kvm" && !dopts.NoStaticKVM {
		mem := dopts.StaticKVMNodeMemory
		if mem == 0 {
			mem = 4096
		}
		if mem > 0 {
			for i := range nodes {
				nodes[i].ReservedMem = mem
			}
		}
	}
	c, err := allocator.NewCluster(groups, nodes, insts, ctags)
	if err != nil {
		return nil, err
	}
	r := &Request{Cluster: c}
	if r.Type, err = rq.str("type"); err != nil {
		return nil, err
	}
	switch r.Type {
	case "allocate":
		a, err := parseAllocReq(rq, rq, c)
		if err != nil {
			return nil, err
		}
		if rq.has("restrict-to-nodes") {
			if a.RestrictTo, err = rq.strs("restrict-to-nodes"); err != nil {
				return nil, err
			}
		}
		r.Allocs = []allocator.AllocRequest{a}
	case "multi-allocate":
		var arr []json.RawMessage
		if err := rq.decode("instances", &arr); err != nil {
			return nil, err
		}
		for _, ir := range arr {
			o, err := newObj(ir, "invalid request dict")
			if err != nil {
				return nil, err
			}
			a, err := parseAllocReq(o, rq, c)
			if err != nil {
				return nil, err
			}
			r.Allocs = append(r.Allocs, a)
		}
	case "relocate":
		if r.Name, err = rq.str("name"); err != nil {
			return nil, err
		}
		if r.RequiredNodes, err = rq.integer("required_nodes"); err != nil {
			return nil, err
		}
		if r.RelocateFrom, err = rq.strs("relocate_from"); err != nil {
			return nil, err
		}
	case "change-group":
		if r.Instances, err = rq.strs("instances"); err != nil {
			return nil, err
		}
		if r.TargetGroups, err = rq.strs("target_groups"); err != nil {
			return nil, err
		}
	case "node-evacuate":
		if r.Instances, err = rq.strs("instances"); err != nil {
			return nil, err
		}
		if r.EvacMode, err = rq.str("evac_mode"); err != nil {
			return nil, err
		}
	case "allocate-secondary":
		if r.Name, err = rq.str("name"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("Invalid request type '%s'", r.Type)
	}
	if r.Type != "allocate" && r.Type != "multi-allocate" && r.Type != "allocate-secondary" {
		// names are resolved while parsing, as in hail
		if _, err := r.resolve(); err != nil {
			if r.Type == "change-group" || r.Type == "node-evacuate" || r.Type == "relocate" {
				return nil, err
			}
		}
	}
	return r, nil
}

// parseAllocReq reads one allocation request; the group name always comes
// from the top-level request (as in hail, also for multi-allocate).
func parseAllocReq(o, top *obj, c *allocator.Cluster) (allocator.AllocRequest, error) {
	var a allocator.AllocRequest
	name, err := o.str("name")
	if err != nil {
		return a, err
	}
	if top.has("group_name") {
		g, err := top.str("group_name")
		if err != nil {
			return a, err
		}
		a.GroupName = &g
	}
	if a.RequiredNodes, err = o.integer("required_nodes"); err != nil {
		return a, err
	}
	inst, err := parseBaseInstance(name, withDesc(o, "invalid data for instance '"+name+"'"))
	if err != nil {
		return a, err
	}
	c.PrepareRequest(&inst)
	a.Inst = inst
	return a, nil
}

func withDesc(o *obj, desc string) *obj { return &obj{m: o.m, desc: desc} }

func parseGroup(uuid string, raw json.RawMessage) (allocator.Group, error) {
	g := allocator.Group{UUID: uuid}
	o, err := newObj(raw, "invalid data for group '"+uuid+"'")
	if err != nil {
		return g, err
	}
	if g.Name, err = o.str("name"); err != nil {
		return g, err
	}
	ap, err := o.str("alloc_policy")
	if err != nil {
		return g, err
	}
	switch ap {
	case "preferred":
		g.AllocPolicy = allocator.AllocPreferred
	case "last_resort":
		g.AllocPolicy = allocator.AllocLastResort
	case "unallocable":
		g.AllocPolicy = allocator.AllocUnallocable
	default:
		return g, fmt.Errorf("%s: invalid alloc_policy '%s'", o.desc, ap)
	}
	if g.Networks, err = o.strs("networks"); err != nil {
		return g, err
	}
	if g.Tags, err = o.strs("tags"); err != nil {
		return g, err
	}
	pr, err := o.raw("ipolicy")
	if err != nil {
		return g, err
	}
	if g.Policy, err = parsePolicy(pr, o.desc); err != nil {
		return g, err
	}
	return g, nil
}

func parseSpec(raw json.RawMessage, desc string) (allocator.ISpec, error) {
	var s allocator.ISpec
	o, err := newObj(raw, desc)
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		key string
		p   *int
	}{{"memory-size", &s.MemorySize}, {"cpu-count", &s.CPUCount}, {"disk-size", &s.DiskSize},
		{"disk-count", &s.DiskCount}, {"nic-count", &s.NICCount}, {"spindle-use", &s.SpindleUse}} {
		if *f.p, err = o.integer(f.key); err != nil {
			return s, err
		}
	}
	return s, nil
}

func parsePolicy(raw json.RawMessage, desc string) (allocator.Policy, error) {
	var p allocator.Policy
	o, err := newObj(raw, desc+" ipolicy")
	if err != nil {
		return p, err
	}
	var mms []json.RawMessage
	if err := o.decode("minmax", &mms); err != nil {
		return p, err
	}
	for _, mr := range mms {
		mo, err := newObj(mr, desc+" minmax")
		if err != nil {
			return p, err
		}
		var mm allocator.MinMax
		r, err := mo.raw("min")
		if err != nil {
			return p, err
		}
		if mm.Min, err = parseSpec(r, desc+" min"); err != nil {
			return p, err
		}
		if r, err = mo.raw("max"); err != nil {
			return p, err
		}
		if mm.Max, err = parseSpec(r, desc+" max"); err != nil {
			return p, err
		}
		p.MinMax = append(p.MinMax, mm)
	}
	r, err := o.raw("std")
	if err != nil {
		return p, err
	}
	if p.Std, err = parseSpec(r, desc+" std"); err != nil {
		return p, err
	}
	dts, err := o.strs("disk-templates")
	if err != nil {
		return p, err
	}
	for _, s := range dts {
		t, err := allocator.ParseDiskTemplate(s)
		if err != nil {
			return p, err
		}
		p.DiskTemplates = append(p.DiskTemplates, t)
	}
	if p.VCPURatio, err = o.float("vcpu-ratio"); err != nil {
		return p, err
	}
	if p.SpindleRatio, err = o.float("spindle-ratio"); err != nil {
		return p, err
	}
	return p, nil
}

// nodeJSON is the fast path for a node: one typed decode. Anything it
// cannot take (a missing key, a non-integer where an Int is due) goes to
// the generic path, which also words the error as hail does.
type nodeJSON struct {
	Group     *string `json:"group"`
	Offline   *bool   `json:"offline"`
	Drained   *bool   `json:"drained"`
	VMCapable *bool   `json:"vm_capable"`
	Ndparams  *struct {
		ExclusiveStorage *bool `json:"exclusive_storage"`
		SpindleCount     *int  `json:"spindle_count"`
	} `json:"ndparams"`
	Tags           []string `json:"tags"`
	TotalSpindles  *int     `json:"total_spindles"`
	FreeSpindles   *int     `json:"free_spindles"`
	ReservedMemory *int     `json:"reserved_memory"`
	FreeMemory     *int     `json:"free_memory"`
	FreeDisk       *int     `json:"free_disk"`
	ReservedCPUs   *int     `json:"reserved_cpus"`
	TotalMemory    *float64 `json:"total_memory"`
	TotalDisk      *float64 `json:"total_disk"`
	TotalCPUs      *float64 `json:"total_cpus"`
}

func parseNodeFast(name string, raw json.RawMessage, gIdx map[string]int) (allocator.NodeSpec, bool) {
	n := allocator.NodeSpec{Name: name}
	var j nodeJSON
	if json.Unmarshal(raw, &j) != nil || j.Group == nil || j.Offline == nil || j.Drained == nil ||
		j.Ndparams == nil || j.Ndparams.ExclusiveStorage == nil {
		return n, false
	}
	g, ok := gIdx[*j.Group]
	if !ok {
		return n, false
	}
	n.Group, n.Tags, n.ExclusiveStorage = g, j.Tags, *j.Ndparams.ExclusiveStorage
	vm := j.VMCapable == nil || *j.VMCapable
	live := !*j.Offline && vm
	n.Offline = !live || *j.Drained
	if !n.ExclusiveStorage {
		if j.Ndparams.SpindleCount == nil {
			return n, false
		}
		n.TotalSpindles = *j.Ndparams.SpindleCount
	}
	if !live {
		return n, true
	}
	if n.ExclusiveStorage {
		if j.TotalSpindles == nil {
			return n, false
		}
		n.TotalSpindles = *j.TotalSpindles
	}
	for _, f := range []struct {
		p   *int
		dst *int
	}{{j.FreeSpindles, &n.FreeSpindles}, {j.ReservedMemory, &n.ReservedMem}, {j.FreeMemory, &n.FreeMem},
		{j.FreeDisk, &n.FreeDisk}, {j.ReservedCPUs, &n.ReservedCPUs}} {
		if f.p == nil {
			return n, false
		}
		*f.dst = *f.p
	}
	for _, f := range []struct {
		p   *float64
		dst *float64
	}{{j.TotalMemory, &n.TotalMem}, {j.TotalDisk, &n.TotalDisk}, {j.TotalCPUs, &n.TotalCPUs}} {
		if f.p == nil {
			return n, false
		}
		*f.dst = *f.p
	}
	return n, true
}

func parseNode(name string, raw json.RawMessage, gIdx map[string]int) (allocator.NodeSpec, error) {
	if n, ok := parseNodeFast(name, raw, gIdx); ok {
		return n, nil
	}
	n := allocator.NodeSpec{Name: name}
	o, err := newObj(raw, "invalid data for node '"+name+"'")
	if err != nil {
		return n, err
	}
	offline, err := o.boolean("offline")
	if err != nil {
		return n, err
	}
	drained, err := o.boolean("drained")
	if err != nil {
		return n, err
	}
	guuid, err := o.str("group")
	if err != nil {
		return n, err
	}
	vmCapable := true
	if o.has("vm_capable") {
		if vmCapable, err = o.boolean("vm_capable"); err != nil {
			return n, err
		}
	}
	g, ok := gIdx[guuid]
	if !ok {
		return n, fmt.Errorf("Unknown group '%s' for node %s", guuid, name)
	}
	n.Group = g
	ndr, err := o.raw("ndparams")
	if err != nil {
		return n, err
	}
	nd, err := newObj(ndr, o.desc)
	if err != nil {
		return n, err
	}
	if o.has("tags") {
		if n.Tags, err = o.strs("tags"); err != nil {
			return n, err
		}
	}
	if n.ExclusiveStorage, err = nd.boolean("exclusive_storage"); err != nil {
		return n, err
	}
	live := !offline && vmCapable
	n.Offline = !live || drained
	if !n.ExclusiveStorage {
		if n.TotalSpindles, err = nd.integer("spindle_count"); err != nil {
			return n, err
		}
	}
	if !live {
		return n, nil
	}
	if n.ExclusiveStorage {
		if n.TotalSpindles, err = o.integer("total_spindles"); err != nil {
			return n, err
		}
	}
	for _, f := range []struct {
		key string
		p   *int
	}{{"free_spindles", &n.FreeSpindles}, {"reserved_memory", &n.ReservedMem}, {"free_memory", &n.FreeMem},
		{"free_disk", &n.FreeDisk}, {"reserved_cpus", &n.ReservedCPUs}} {
		if *f.p, err = o.integer(f.key); err != nil {
			return n, err
		}
	}
	for _, f := range []struct {
		key string
		p   *float64
	}{{"total_memory", &n.TotalMem}, {"total_disk", &n.TotalDisk}, {"total_cpus", &n.TotalCPUs}} {
		if *f.p, err = o.float(f.key); err != nil {
			return n, err
		}
	}
	return n, nil
}

// instJSON is the fast path for an instance (see nodeJSON).
type instJSON struct {
	Nodes          []string `json:"nodes"`
	DiskSpaceTotal *int     `json:"disk_space_total"`
	Disks          []struct {
		Size     *int `json:"size"`
		Spindles *int `json:"spindles"`
	} `json:"disks"`
	Memory       *int     `json:"memory"`
	VCPUs        *int     `json:"vcpus"`
	Tags         []string `json:"tags"`
	DiskTemplate *string  `json:"disk_template"`
	SpindleUse   *int     `json:"spindle_use"`
	NICs         []struct {
		Network *string `json:"network"`
	} `json:"nics"`
	AdminState  *string `json:"admin_state"`
	Forthcoming *bool   `json:"forthcoming"`
}

func parseInstanceFast(name string, raw json.RawMessage) (allocator.Instance, []string, bool) {
	inst := allocator.Instance{Name: name, AutoBalance: true}
	var j instJSON
	if json.Unmarshal(raw, &j) != nil || j.Nodes == nil || j.DiskSpaceTotal == nil || j.Disks == nil ||
		j.Memory == nil || j.VCPUs == nil || j.Tags == nil || j.DiskTemplate == nil || j.SpindleUse == nil || j.NICs == nil {
		return inst, nil, false
	}
	var err error
	if inst.Template, err = allocator.ParseDiskTemplate(*j.DiskTemplate); err != nil {
		return inst, nil, false
	}
	inst.Dsk, inst.Mem, inst.VCPUs, inst.Tags, inst.SpindleUse = *j.DiskSpaceTotal, *j.Memory, *j.VCPUs, j.Tags, *j.SpindleUse
	for _, d := range j.Disks {
		if d.Size == nil {
			return inst, nil, false
		}
		inst.Disks = append(inst.Disks, allocator.Disk{Size: *d.Size, Spindles: d.Spindles})
	}
	for _, n := range j.NICs {
		net := ""
		if n.Network != nil {
			net = *n.Network
		}
		inst.NICNetworks = append(inst.NICNetworks, net)
	}
	if j.AdminState != nil {
		switch *j.AdminState {
		case "down":
			inst.Status = allocator.StatusDown
		case "offline":
			inst.Status = allocator.StatusOffline
		}
	}
	if j.Forthcoming != nil {
		inst.Forthcoming = *j.Forthcoming
	}
	return inst, j.Nodes, true
}

func parseBaseInstance(name string, o *obj) (allocator.Instance, error) {
	inst := allocator.Instance{Name: name, AutoBalance: true}
	var err error
	if inst.Dsk, err = o.integer("disk_space_total"); err != nil {
		return inst, err
	}
	var disks []json.RawMessage
	if err := o.decode("disks", &disks); err != nil {
		return inst, err
	}
	for _, dr := range disks {
		do, err := newObj(dr, o.desc)
		if err != nil {
			return inst, err
		}
		var d allocator.Disk
		if d.Size, err = do.integer("size"); err != nil {
			return inst, err
		}
		if do.has("spindles") {
			sp, err := do.integer("spindles")
			if err != nil {
				return inst, err
			}
			d.Spindles = &sp
		}
		inst.Disks = append(inst.Disks, d)
	}
	if inst.Mem, err = o.integer("memory"); err != nil {
		return inst, err
	}
	if inst.VCPUs, err = o.integer("vcpus"); err != nil {
		return inst, err
	}
	if inst.Tags, err = o.strs("tags"); err != nil {
		return inst, err
	}
	dt, err := o.str("disk_template")
	if err != nil {
		return inst, err
	}
	if inst.Template, err = allocator.ParseDiskTemplate(dt); err != nil {
		return inst, err
	}
	if inst.SpindleUse, err = o.integer("spindle_use"); err != nil {
		return inst, err
	}
	var nics []json.RawMessage
	if err := o.decode("nics", &nics); err != nil {
		return inst, err
	}
	for _, nr := range nics {
		no, err := newObj(nr, o.desc)
		if err != nil {
			return inst, err
		}
		net := ""
		if no.has("network") {
			if net, err = no.str("network"); err != nil {
				return inst, err
			}
		}
		inst.NICNetworks = append(inst.NICNetworks, net)
	}
	if o.has("admin_state") {
		// like hail, anything unreadable means "up"
		st, _ := o.str("admin_state")
		switch st {
		case "up":
			inst.Status = allocator.StatusRunning
		case "down":
			inst.Status = allocator.StatusDown
		case "offline":
			inst.Status = allocator.StatusOffline
		}
	}
	if o.has("forthcoming") {
		inst.Forthcoming, _ = o.boolean("forthcoming")
	}
	return inst, nil
}

func (r *Request) opts() allocator.Options { return allocator.Options{} }
