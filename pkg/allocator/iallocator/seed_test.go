package iallocator

import (
	"fmt"
	"testing"
)

const gib = 1024

// dedicatedCluster is the partitioned-allocation example of the design
// document: nodes of 4 GiB / 40 GiB / 4 cpus / 4 spindles, filled with
// quarter-node instances; the policy has one interval per size in
// quarters (each min a little below its max: hail's limits are strict).
func dedicatedCluster(quarters []int, fills []string) *tCluster {
	var mm []tMinMax
	for _, k := range quarters {
		max := tSpec{Mem: k * 1024, CPU: k, Disk: k * 10240, DiskCount: 1, NICCount: 1, SpindleUse: k}
		min := max
		min.Mem -= 2
		min.Disk -= 20
		mm = append(mm, tMinMax{Min: min, Max: max})
	}
	c := &tCluster{Groups: []tGroup{{UUID: "uuid-ded", Name: "dedicated", MinMax: mm,
		Templates: []string{"plain", "drbd"}, VCPURatio: 1, SpindleRatio: 1}}}
	quarter := func(name, node string, k int) tInst {
		return tInst{Name: name, Mem: k * 1024, Disk: k * 10240, VCPUs: k, Template: "plain",
			Nodes: []string{node}, Spindles: k, SpindleUse: k}
	}
	for _, f := range fills {
		n := "n-" + f
		if len(f) > 1 && (f[len(f)-1] == 'A' || f[len(f)-1] == 'B') {
			f = f[:len(f)-1]
		}
		c.Nodes = append(c.Nodes, tNode{Name: n, Group: "uuid-ded", Mem: 4096, Disk: 40960, CPUs: 4, Spindles: 4, Excl: true})
		switch f {
		case "quarter":
			c.Insts = append(c.Insts, quarter("i-"+n, n, 1))
		case "half":
			c.Insts = append(c.Insts, quarter("i-"+n, n, 2))
		case "3quarter":
			c.Insts = append(c.Insts, quarter("i-"+n+"-h", n, 2), quarter("i-"+n+"-q", n, 1))
		case "full":
			c.Insts = append(c.Insts, quarter("i-"+n, n, 4))
		}
	}
	return c
}

func dedReq(k int, tmpl string) ordered {
	return allocReq("new", k*1024-1, k*10240-10, k, tmpl, k, nil)
}

// sixNodes is the location example: six nodes of 64 GiB / 1 TiB / 16
// cpus in three power domains.
func sixNodes(ctags []string) *tCluster {
	c := &tCluster{ClusterTags: ctags, Groups: []tGroup{{UUID: "uuid-g", Name: "default",
		MinMax:    []tMinMax{{Min: tSpec{128, 1, 1024, 1, 1, 1}, Max: tSpec{65536, 16, 1 << 20, 16, 8, 12}}},
		VCPURatio: 4, SpindleRatio: 32}}}
	for i := 1; i <= 6; i++ {
		c.Nodes = append(c.Nodes, tNode{Name: fmt.Sprintf("n%d", i), Group: "uuid-g", Mem: 64 * gib,
			Disk: 1 << 20, CPUs: 16, Spindles: 1, Tags: []string{"power:" + string(rune('a'+(i-1)/2))}})
	}
	return c
}

func drbd(name, p, s string, mem, disk int, tags ...string) tInst {
	return tInst{Name: name, Mem: mem, Disk: disk, VCPUs: 1, Template: "drbd", Nodes: []string{p, s}, Tags: tags, SpindleUse: 1}
}

// seedCases are the examples of the two seed documents and of the
// reference notes, plus migration-restricted relocation and evacuation.
func seedCases() []diffCase {
	var cs []diffCase
	add := func(name string, c *tCluster, req ordered, args ...string) {
		cs = append(cs, diffCase{name: name, data: c.request(req), args: args})
	}
	five := []string{"empty", "quarter", "half", "3quarter", "full"}
	no3q := []string{"empty", "quarter", "half", "full"}
	add("a1-dedicated-quarter", dedicatedCluster([]int{1, 2, 4}, five), dedReq(1, "plain"))
	add("a2-dedicated-half", dedicatedCluster([]int{1, 2, 4}, five), dedReq(2, "plain"))
	add("a2b-dedicated-full", dedicatedCluster([]int{1, 2, 4}, five), dedReq(4, "plain"))
	add("a3-dedicated-quarter-no3q", dedicatedCluster([]int{1, 2, 4}, no3q), dedReq(1, "plain"))
	add("a4-dedicated-tie-AB", dedicatedCluster([]int{1, 2, 4}, []string{"empty", "quarterA", "quarterB"}), dedReq(1, "plain"))
	add("a4-dedicated-tie-BA", dedicatedCluster([]int{1, 2, 4}, []string{"quarterB", "quarterA", "empty"}), dedReq(1, "plain"))
	add("a5-dedicated-quarter-drbd", dedicatedCluster([]int{1, 2, 4}, five), dedReq(1, "drbd"))
	{
		c := dedicatedCluster([]int{1, 2, 4}, five)
		c.ClusterTags = []string{"htools:nlocation:power"}
		for i := range c.Nodes {
			c.Nodes[i].Tags = []string{"power:b"}
		}
		c.Nodes[1].Tags = []string{"power:a"}
		c.Nodes[3].Tags = []string{"power:a"}
		add("a6-dedicated-drbd-nlocation-ignored", c, dedReq(1, "drbd"))
	}
	add("b1-dedicated3q-quarter", dedicatedCluster([]int{1, 2, 3, 4}, five), dedReq(1, "plain"))
	add("b2-dedicated3q-quarter-no3q", dedicatedCluster([]int{1, 2, 3, 4}, no3q), dedReq(1, "plain"))
	add("b3-dedicated3q-half", dedicatedCluster([]int{1, 2, 3, 4}, five), dedReq(2, "plain"))
	add("b4-dedicated3q-3quarter", dedicatedCluster([]int{1, 2, 3, 4}, five), dedReq(3, "plain"))
	{
		c := dedicatedCluster([]int{1, 2, 4}, five)
		c.Insts = nil
		add("a7-dedicated-all-empty", c, dedReq(4, "plain"))
	}
	// Location awareness.
	add("c1-nlocation-drbd", sixNodes([]string{"htools:nlocation:power"}), allocReq("new", 4096, 51200, 1, "drbd", 0, nil))
	add("c2-no-nlocation-drbd", sixNodes(nil), allocReq("new", 4096, 51200, 1, "drbd", 0, nil))
	dCluster := func(ctags []string) *tCluster {
		c := sixNodes(ctags)
		c.Insts = []tInst{
			drbd("web1", "n1", "n4", 4096, 51200, "service:web"),
			drbd("web2", "n3", "n6", 4096, 51200, "service:web"),
			drbd("db1", "n5", "n6", 4096, 51200, "service:db"),
			drbd("db2", "n6", "n5", 4096, 51200, "service:db"),
			drbd("x1", "n2", "n3", 4096, 51200),
			drbd("x2", "n4", "n1", 4096, 51200),
		}
		// every node one primary and one secondary
		c.Insts[1].Nodes = []string{"n3", "n2"}
		return c
	}
	loc := []string{"htools:nlocation:power", "htools:iextags:service"}
	add("d1-exclusion-nlocation-drbd", dCluster(loc), allocReq("new", 4096, 51200, 1, "drbd", 0, []string{"service:web"}))
	add("d1-exclusion-nlocation-plain", dCluster(loc), allocReq("new", 4096, 51200, 1, "plain", 0, []string{"service:web"}))
	add("d2-exclusion-only-drbd", dCluster([]string{"htools:iextags:service"}), allocReq("new", 4096, 51200, 1, "drbd", 0, []string{"service:web"}))
	add("d2-exclusion-only-plain", dCluster([]string{"htools:iextags:service"}), allocReq("new", 4096, 51200, 1, "plain", 0, []string{"service:web"}))
	add("d3-exclusion-nlocation-db", dCluster(loc), allocReq("new", 4096, 51200, 1, "drbd", 0, []string{"service:db"}))
	add("d4-nocap-nlocation-drbd", dCluster(loc), allocReq("new", 4096, 51200, 1, "drbd", 0, []string{"service:web"}), "--no-capacity-checks")
	{
		c := dCluster(append(loc, "htools:desiredlocation:power"))
		add("d5-desired-location-plain", c, allocReq("new", 4096, 51200, 1, "plain", 0, []string{"power:b"}))
	}
	// Migration tags: node-01 (hv:new) holds DRBD primaries whose
	// secondaries are on hv:old, hv:new and untagged nodes.
	migCluster := func(ctags []string, tags map[string]string) *tCluster {
		c := sixNodes(ctags)
		c.Nodes = c.Nodes[:4]
		for i := range c.Nodes {
			c.Nodes[i].Tags = nil
			if t := tags[c.Nodes[i].Name]; t != "" {
				c.Nodes[i].Tags = []string{t}
			}
		}
		c.Insts = []tInst{
			drbd("a", "n1", "n2", 4096, 51200), drbd("b", "n1", "n3", 4096, 51200),
			drbd("c", "n1", "n4", 4096, 51200), drbd("d", "n2", "n1", 4096, 51200),
			drbd("e", "n3", "n4", 4096, 51200), drbd("f", "n4", "n2", 4096, 51200),
		}
		return c
	}
	m1 := map[string]string{"n1": "hv:new", "n3": "hv:new"}
	m2 := map[string]string{"n1": "hv:old", "n2": "hv:old", "n3": "hv:new"}
	mig := []string{"htools:migration:hv"}
	allow := []string{"htools:migration:hv", "htools:allowmigration:hv:old::hv:new"}
	evac := func(mode string, names ...string) ordered {
		return ordered{{"type", "node-evacuate"}, {"instances", names}, {"evac_mode", mode}}
	}
	reloc := func(name, from string) ordered {
		return ordered{{"type", "relocate"}, {"name", name}, {"required_nodes", 1}, {"relocate_from", []string{from}}}
	}
	add("m0-evac-primary-no-migration-tags", migCluster(nil, m1), evac("primary-only", "a", "b", "c"))
	add("m1-evac-primary-migration", migCluster(mig, m1), evac("primary-only", "a", "b", "c"))
	add("m1-evac-all-migration", migCluster(mig, m1), evac("all", "a", "b", "c"))
	add("m1-evac-secondary-migration", migCluster(mig, m1), evac("secondary-only", "d"))
	add("m2-evac-primary-allowmigration", migCluster(allow, m2), evac("primary-only", "a", "b", "c", "d"))
	add("m2-evac-all-allowmigration", migCluster(allow, m2), evac("all", "a", "b"))
	add("m1-relocate-migration", migCluster(mig, m1), reloc("b", "n3"))
	add("m2-relocate-allowmigration", migCluster(allow, m2), reloc("a", "n2"))
	add("m1-alloc-n1-migration", migCluster(mig, m1), allocReq("new", 8192, 51200, 1, "drbd", 0, nil))
	add("m2-alloc-n1-allowmigration", migCluster(allow, m2), allocReq("new", 8192, 51200, 1, "plain", 0, nil))
	// 100-node clusters of the benchmarks: many exact ties (the plain one
	// is decided by htools' from-scratch summation order).
	cs = append(cs, diffCase{name: "bench-plain-100", data: benchRequest(100, "plain")},
		diffCase{name: "bench-drbd-100", data: benchRequest(100, "drbd")},
		diffCase{name: "bench-dedidrbd-100", data: benchRequest(100, "dedidrbd")})
	add("m1-change-group-one-group", migCluster(mig, m1), ordered{{"type", "change-group"}, {"instances", []string{"a"}}, {"target_groups", []string{}}})
	return cs
}

// TestSeedGolden compares Leasehold with the recorded hail answers.
func TestSeedGolden(t *testing.T) {
	for _, dc := range seedCases() {
		t.Run(dc.name, func(t *testing.T) { checkGolden(t, dc) })
	}
}

// TestSeedHail compares Leasehold with the live hail.
func TestSeedHail(t *testing.T) {
	runLiveParallel(t, seedCases())
}
