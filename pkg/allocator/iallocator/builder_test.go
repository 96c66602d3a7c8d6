package iallocator

import (
	"bytes"
	"encoding/json"
)

// This file builds IAllocator requests for the tests: consistent node
// figures (free memory, disk and spindles derived from the instances) and
// JSON objects whose key order is the node order.

type kv struct {
	k string
	v any
}

// ordered is a JSON object with a fixed key order.
type ordered []kv

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type tSpec struct{ Mem, CPU, Disk, DiskCount, NICCount, SpindleUse int }

func (s tSpec) json() ordered {
	return ordered{{"memory-size", s.Mem}, {"cpu-count", s.CPU}, {"disk-size", s.Disk},
		{"disk-count", s.DiskCount}, {"nic-count", s.NICCount}, {"spindle-use", s.SpindleUse}}
}

type tMinMax struct{ Min, Max tSpec }

type tGroup struct {
	UUID, Name, AllocPolicy string
	MinMax                  []tMinMax
	Templates               []string
	VCPURatio, SpindleRatio float64
	Networks                []string
}

type tNode struct {
	Name, Group      string // group uuid
	Mem, Disk        int    // MiB
	CPUs             int
	Spindles         int // spindle_count or total_spindles
	ReservedMem      int
	ReservedCPUs     int
	Excl             bool
	Tags             []string
	Offline, Drained bool
	VMCapableFalse   bool
}

type tInst struct {
	Name        string
	Mem, Disk   int // Disk: disk_space_total; one disk of that size
	VCPUs       int
	Template    string
	Nodes       []string
	Tags        []string
	Spindles    int // per-disk spindles (exclusive storage); 0 = omit
	SpindleUse  int
	AdminState  string
	Forthcoming bool
}

type tCluster struct {
	Groups      []tGroup
	Nodes       []tNode
	Insts       []tInst
	ClusterTags []string
	Hypervisor  string
}

func (g tGroup) json() ordered {
	var mm []ordered
	for _, m := range g.MinMax {
		mm = append(mm, ordered{{"min", m.Min.json()}, {"max", m.Max.json()}})
	}
	std := g.MinMax[0].Min
	tmpl := g.Templates
	if tmpl == nil {
		tmpl = []string{"drbd", "plain", "diskless", "file", "sharedfile", "rbd"}
	}
	nets := g.Networks
	if nets == nil {
		nets = []string{}
	}
	ap := g.AllocPolicy
	if ap == "" {
		ap = "preferred"
	}
	return ordered{{"name", g.Name}, {"alloc_policy", ap}, {"networks", nets}, {"tags", []string{}},
		{"ipolicy", ordered{{"minmax", mm}, {"std", std.json()}, {"disk-templates", tmpl},
			{"vcpu-ratio", g.VCPURatio}, {"spindle-ratio", g.SpindleRatio}}}}
}

func usesDisk(t string) bool { return t == "plain" || t == "drbd" }

func (i tInst) json() ordered {
	disk := ordered{{"size", i.Disk}, {"mode", "rw"}}
	if i.Spindles > 0 {
		disk = append(disk, kv{"spindles", i.Spindles})
	}
	tags := i.Tags
	if tags == nil {
		tags = []string{}
	}
	o := ordered{{"nodes", i.Nodes}, {"disks", []ordered{disk}}, {"disk_space_total", i.Disk},
		{"memory", i.Mem}, {"vcpus", i.VCPUs}, {"tags", tags}, {"disk_template", i.Template},
		{"spindle_use", i.SpindleUse}, {"nics", []any{}}}
	if i.AdminState != "" {
		o = append(o, kv{"admin_state", i.AdminState})
	}
	if i.Forthcoming {
		o = append(o, kv{"forthcoming", true})
	}
	return o
}

// request builds the full IAllocator document for req (an ordered object
// for the "request" key).
func (c *tCluster) request(req ordered) []byte {
	groups := ordered{}
	for _, g := range c.Groups {
		groups = append(groups, kv{g.UUID, g.json()})
	}
	memUsed := map[string]int{}
	dskUsed := map[string]int{}
	spUsed := map[string]int{}
	insts := ordered{}
	for _, in := range c.Insts {
		insts = append(insts, kv{in.Name, in.json()})
		if in.Forthcoming {
			continue // not there yet: the node reports nothing for it
		}
		if in.AdminState == "" || in.AdminState == "up" {
			memUsed[in.Nodes[0]] += in.Mem
		}
		if usesDisk(in.Template) {
			for k, n := range in.Nodes {
				if k > 1 || (k == 1 && in.Template != "drbd") {
					break
				}
				dskUsed[n] += in.Disk
				spUsed[n] += in.Spindles
			}
		}
	}
	nodes := ordered{}
	for _, n := range c.Nodes {
		tags := n.Tags
		if tags == nil {
			tags = []string{}
		}
		nd := ordered{{"exclusive_storage", n.Excl}}
		if !n.Excl {
			nd = append(nd, kv{"spindle_count", n.Spindles})
		}
		o := ordered{{"group", n.Group}, {"offline", n.Offline}, {"drained", n.Drained},
			{"ndparams", nd}, {"tags", tags},
			{"total_memory", n.Mem}, {"reserved_memory", n.ReservedMem},
			{"free_memory", n.Mem - n.ReservedMem - memUsed[n.Name]},
			{"total_disk", n.Disk}, {"free_disk", n.Disk - dskUsed[n.Name]},
			{"total_cpus", n.CPUs}, {"reserved_cpus", n.ReservedCPUs},
			{"free_spindles", n.Spindles - spUsed[n.Name]},
			{"primary_ip", "192.0.2.1"}, {"secondary_ip", "192.0.2.1"},
			{"master_candidate", true}, {"master_capable", true}}
		if n.Excl {
			o = append(o, kv{"total_spindles", n.Spindles})
		}
		if n.VMCapableFalse {
			o = append(o, kv{"vm_capable", false})
		}
		nodes = append(nodes, kv{n.Name, o})
	}
	ctags := c.ClusterTags
	if ctags == nil {
		ctags = []string{}
	}
	hv := c.Hypervisor
	if hv == "" {
		hv = "xen-pvm"
	}
	doc := ordered{{"version", 2}, {"cluster_name", "cluster.example.com"},
		{"cluster_tags", ctags}, {"enabled_hypervisors", []string{hv}},
		{"nodegroups", groups}, {"nodes", nodes}, {"instances", insts}, {"request", req}}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		panic(err)
	}
	return b
}

// allocReq builds an "allocate" request.
func allocReq(name string, mem, disk, vcpus int, tmpl string, spindles int, tags []string) ordered {
	nodes := 1
	if tmpl == "drbd" {
		nodes = 2
	}
	disk0 := ordered{{"size", disk}, {"mode", "rw"}}
	if spindles > 0 {
		disk0 = append(disk0, kv{"spindles", spindles})
	}
	if tags == nil {
		tags = []string{}
	}
	su := spindles
	if su == 0 {
		su = 1
	}
	return ordered{{"type", "allocate"}, {"name", name}, {"required_nodes", nodes},
		{"disk_template", tmpl}, {"disks", []ordered{disk0}}, {"disk_space_total", disk},
		{"memory", mem}, {"vcpus", vcpus}, {"spindle_use", su}, {"tags", tags},
		{"nics", []any{}}, {"os", "debian"}, {"hypervisor", "xen-pvm"}}
}
