package iallocator

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// genCluster makes a random, internally consistent cluster and request.
// Clusters are small (at most 24 nodes) because hail is slow.
func genCluster(seed uint64) diffCase {
	r := rand.New(rand.NewPCG(seed, 0x1ea5e))
	pick := func(xs ...int) int { return xs[r.IntN(len(xs))] }
	chance := func(p float64) bool { return r.Float64() < p }

	dedicated := chance(0.3)
	mixed := !dedicated && chance(0.1)
	c := &tCluster{}
	var ctags []string
	for _, t := range []string{"htools:nlocation:power", "htools:iextags:service", "htools:migration:hv",
		"htools:allowmigration:hv:old::hv:new", "htools:desiredlocation:power", "htools:nlocation:rack"} {
		if chance(0.4) {
			ctags = append(ctags, t)
		}
	}
	c.ClusterTags = ctags
	nGroups := pick(1, 1, 1, 2, 3)
	for g := 0; g < nGroups; g++ {
		grp := tGroup{UUID: fmt.Sprintf("uuid-%d", g), Name: fmt.Sprintf("group%d", g),
			VCPURatio: []float64{1, 2, 4, 8}[r.IntN(4)], SpindleRatio: []float64{1, 4, 32}[r.IntN(3)]}
		switch {
		case chance(0.15):
			grp.AllocPolicy = "last_resort"
		case chance(0.08):
			grp.AllocPolicy = "unallocable"
		}
		if dedicated {
			ks := [][]int{{1, 2, 4}, {1, 2, 3, 4}, {4, 2, 1}, {1, 4}, {2}}[r.IntN(5)]
			for _, k := range ks {
				max := tSpec{Mem: k * 4096, CPU: k * 2, Disk: k * 102400, DiskCount: 1, NICCount: 1, SpindleUse: k}
				min := max
				min.Mem -= pick(1, 2, 512)
				min.Disk -= pick(10, 20, 1024)
				min.CPU -= r.IntN(2)
				grp.MinMax = append(grp.MinMax, tMinMax{Min: min, Max: max})
			}
			grp.Templates = []string{"plain", "drbd"}
		} else {
			grp.MinMax = []tMinMax{{Min: tSpec{128, 1, 1024, 1, 1, 1}, Max: tSpec{pick(32768, 65536), pick(8, 16), 1 << 20, 4, 8, 12}}}
			if chance(0.2) {
				grp.MinMax = append(grp.MinMax, tMinMax{Min: tSpec{65536, 8, 1024, 1, 1, 1}, Max: tSpec{131072, 32, 1 << 21, 4, 8, 12}})
			}
			if chance(0.1) {
				grp.Templates = []string{"drbd", "diskless", "sharedfile"}
			}
		}
		c.Groups = append(c.Groups, grp)
	}
	nNodes := 3 + r.IntN(18)
	if chance(0.15) {
		nNodes = 2 + r.IntN(3)
	}
	type cap struct{ mem, dsk, sp int }
	free := map[string]*cap{}
	for i := 0; i < nNodes; i++ {
		g := r.IntN(nGroups)
		n := tNode{Name: fmt.Sprintf("node%02d", i), Group: c.Groups[g].UUID}
		if dedicated {
			n.Mem, n.Disk, n.CPUs, n.Spindles, n.Excl = 16384, 409600, 8, 4, true
			if chance(0.3) {
				n.Mem, n.Disk, n.CPUs, n.Spindles = 32768, 819200, 16, 8
			}
		} else {
			n.Mem = pick(16384, 32768, 65536)
			n.Disk = pick(262144, 524288, 1048576)
			n.CPUs = pick(8, 16, 32)
			n.Spindles = pick(1, 2, 4, 12)
			n.ReservedMem = pick(0, 0, 512, 1024)
			n.ReservedCPUs = pick(0, 0, 1)
			if mixed && chance(0.5) {
				n.Excl = true
				n.Spindles = 8
			}
		}
		if chance(0.6) {
			n.Tags = append(n.Tags, "power:"+string(rune('a'+r.IntN(3))))
		}
		if chance(0.3) {
			n.Tags = append(n.Tags, "rack:r"+strconv.Itoa(r.IntN(4)))
		}
		if chance(0.5) {
			n.Tags = append(n.Tags, "hv:"+[]string{"old", "new"}[r.IntN(2)])
		}
		switch {
		case chance(0.04):
			n.Offline = true
		case chance(0.05):
			n.Drained = true
		case chance(0.03):
			n.VMCapableFalse = true
		}
		c.Nodes = append(c.Nodes, n)
		free[n.Name] = &cap{n.Mem - n.ReservedMem, n.Disk, n.Spindles}
	}
	online := func(n tNode) bool { return !n.Offline && !n.VMCapableFalse }
	if chance(0.1) {
		c.Hypervisor = "kvm"
	}
	if chance(0.1) {
		c.Groups[r.IntN(nGroups)].Networks = []string{"net-a"}
	}
	groupNodes := func(g string) []tNode {
		var out []tNode
		for _, n := range c.Nodes {
			if n.Group == g && online(n) {
				out = append(out, n)
			}
		}
		return out
	}
	services := []string{"service:web", "service:db", "service:cache"}
	nInst := r.IntN(2 * nNodes)
	for i := 0; i < nInst; i++ {
		p := c.Nodes[r.IntN(nNodes)]
		if !online(p) {
			continue
		}
		in := tInst{Name: fmt.Sprintf("inst%02d", i), VCPUs: pick(1, 2, 4), SpindleUse: 1}
		if dedicated || p.Excl {
			k := pick(1, 1, 2, 4)
			in.Mem, in.Disk, in.VCPUs, in.Spindles, in.SpindleUse = k*4096-512, k*102400-1024, k*2, k, k
		} else {
			in.Mem = pick(1024, 2048, 4096, 8192)
			in.Disk = pick(10240, 51200, 102400)
		}
		in.Template = "plain"
		if chance(0.6) {
			in.Template = "drbd"
		} else if !dedicated && chance(0.15) {
			in.Template = []string{"diskless", "sharedfile"}[r.IntN(2)]
		}
		in.Nodes = []string{p.Name}
		if in.Template == "drbd" {
			var ss []tNode
			for _, s := range groupNodes(p.Group) {
				if s.Name != p.Name {
					ss = append(ss, s)
				}
			}
			if len(ss) == 0 {
				in.Template = "plain"
			} else {
				in.Nodes = append(in.Nodes, ss[r.IntN(len(ss))].Name)
			}
		}
		if chance(0.4) {
			in.Tags = append(in.Tags, services[r.IntN(3)])
		}
		switch {
		case chance(0.1):
			in.AdminState = "down"
		case chance(0.03):
			in.AdminState = "offline"
		}
		in.Forthcoming = chance(0.05)
		// keep the cluster consistent: skip what does not fit
		fp := free[in.Nodes[0]]
		if in.Mem >= fp.mem || (usesDisk(in.Template) && in.Disk >= fp.dsk) || in.Spindles > fp.sp {
			continue
		}
		if len(in.Nodes) > 1 {
			fs := free[in.Nodes[1]]
			if in.Disk >= fs.dsk || in.Spindles > fs.sp {
				continue
			}
			fs.dsk -= in.Disk
			fs.sp -= in.Spindles
		}
		if in.AdminState == "" {
			fp.mem -= in.Mem
		}
		if usesDisk(in.Template) {
			fp.dsk -= in.Disk
		}
		fp.sp -= in.Spindles
		c.Insts = append(c.Insts, in)
	}

	// the request
	var req ordered
	tmpl := "plain"
	if chance(0.5) {
		tmpl = "drbd"
	} else if !dedicated && chance(0.1) {
		tmpl = "diskless"
	}
	newInst := func(name string) ordered {
		var tags []string
		if chance(0.5) {
			tags = append(tags, services[r.IntN(3)])
		}
		if chance(0.2) {
			tags = append(tags, "power:"+string(rune('a'+r.IntN(3))))
		}
		if dedicated || mixed {
			k := pick(1, 1, 2, 4)
			return allocReq(name, k*4096-pick(1, 600), k*102400-pick(10, 2000), k*2, tmpl, k, tags)
		}
		return allocReq(name, pick(512, 2048, 4096, 8192, 16384, 40000), pick(1024, 10240, 102400, 409600), pick(1, 2, 4, 8), tmpl, 0, tags)
	}
	var args []string
	switch {
	case len(c.Insts) > 0 && chance(0.3):
		req = evacRequest(r, c)
	case chance(0.15):
		reqs := []ordered{}
		for k := 0; k < 2+r.IntN(3); k++ {
			reqs = append(reqs, newInst(fmt.Sprintf("new%d", k)))
		}
		req = ordered{{"type", "multi-allocate"}, {"instances", reqs}}
	default:
		req = newInst("new0")
	}
	if req[0].v == "allocate" || req[0].v == "multi-allocate" {
		req = allocExtras(r, c, req)
		if req[0].v == "allocate" && chance(0.15) {
			for k := range req {
				if req[k].k == "nics" {
					req[k].v = []ordered{{{"mac", "aa:00:00:00:00:01"}, {"network", "net-a"}}}
				}
			}
		}
	}
	if chance(0.25) {
		args = append(args, "--no-capacity-checks")
	}
	return diffCase{name: fmt.Sprintf("random-%04d", seed), data: c.request(req), args: args}
}

// allocExtras adds group_name and restrict-to-nodes to allocations.
func allocExtras(r *rand.Rand, c *tCluster, req ordered) ordered {
	chance := func(p float64) bool { return r.Float64() < p }
	nGroups, nNodes := len(c.Groups), len(c.Nodes)
	if chance(0.25) {
		g := c.Groups[r.IntN(nGroups)]
		name := g.Name
		if chance(0.3) {
			name = g.UUID
		}
		req = append(req, kv{"group_name", name})
	}
	if chance(0.05) && nNodes > 3 {
		req = append(req, kv{"restrict-to-nodes", []string{c.Nodes[0].Name, c.Nodes[1].Name, c.Nodes[2].Name}})
	}
	return req
}

// evacRequest makes a node-evacuate, relocate or change-group request.
func evacRequest(r *rand.Rand, c *tCluster) ordered {
	in := c.Insts[r.IntN(len(c.Insts))]
	switch r.IntN(3) {
	case 0:
		// evacuate one node: the instances that have it as primary or
		// secondary, as Ganeti asks
		node := in.Nodes[r.IntN(len(in.Nodes))]
		mode := []string{"primary-only", "secondary-only", "all"}[r.IntN(3)]
		var names []string
		for _, i := range c.Insts {
			isP := i.Nodes[0] == node
			isS := len(i.Nodes) > 1 && i.Nodes[1] == node
			if (mode == "primary-only" && isP) || (mode == "secondary-only" && isS) || (mode == "all" && (isP || isS)) {
				names = append(names, i.Name)
			}
		}
		if names == nil {
			names = []string{in.Name}
		}
		return ordered{{"type", "node-evacuate"}, {"instances", names}, {"evac_mode", mode}}
	case 1:
		from := in.Nodes[len(in.Nodes)-1]
		if r.IntN(8) == 0 {
			from = in.Nodes[0]
		}
		return ordered{{"type", "relocate"}, {"name", in.Name}, {"required_nodes", 1}, {"relocate_from", []string{from}}}
	default:
		var targets []string
		for _, g := range c.Groups {
			if r.IntN(2) == 0 {
				targets = append(targets, g.UUID)
			}
		}
		if targets == nil {
			targets = []string{}
		}
		names := []string{in.Name}
		if o := c.Insts[r.IntN(len(c.Insts))]; o.Name != in.Name && r.IntN(2) == 0 {
			names = append(names, o.Name)
		}
		return ordered{{"type", "change-group"}, {"instances", names}, {"target_groups", targets}}
	}
}

// randomCount is the number of generated cases (env LEASEHOLD_RANDOM_CASES).
func randomCount() int {
	if s := os.Getenv("LEASEHOLD_RANDOM_CASES"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return 240
}

// TestRandomHail compares Leasehold with hail on seeded random clusters.
func TestRandomHail(t *testing.T) {
	var cases []diffCase
	for seed := uint64(1); seed <= uint64(randomCount()); seed++ {
		cases = append(cases, genCluster(seed))
	}
	runLiveParallel(t, cases)
}
