package allocator

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// genModel draws a random consistent cluster and a request.
func genModel(t *rapid.T) (*Cluster, *AllocRequest) {
	nGroups := rapid.IntRange(1, 2).Draw(t, "groups")
	ded := rapid.Bool().Draw(t, "dedicated")
	var groups []Group
	for g := 0; g < nGroups; g++ {
		p := DefaultPolicy()
		p.VCPURatio = rapid.SampledFrom([]float64{1, 2, 4}).Draw(t, "vcpuRatio")
		if ded {
			p.MinMax = nil
			for _, k := range []int{1, 2, 4} {
				max := ISpec{MemorySize: k * 4096, CPUCount: 2 * k, DiskSize: k * 102400, DiskCount: 1, NICCount: 1, SpindleUse: k}
				min := max
				min.MemorySize -= 512
				min.DiskSize -= 1024
				p.MinMax = append(p.MinMax, MinMax{Min: min, Max: max})
			}
		}
		groups = append(groups, Group{Name: fmt.Sprintf("g%d", g), UUID: fmt.Sprintf("u%d", g), Policy: p,
			AllocPolicy: AllocPolicy(rapid.IntRange(0, 1).Draw(t, "allocPolicy"))})
	}
	nNodes := rapid.IntRange(2, 9).Draw(t, "nodes")
	var nodes []NodeSpec
	type used struct{ mem, dsk, sp int }
	use := make([]used, nNodes)
	for i := 0; i < nNodes; i++ {
		n := NodeSpec{Name: fmt.Sprintf("n%d", i), Group: rapid.IntRange(0, nGroups-1).Draw(t, "group"),
			TotalMem: float64(rapid.SampledFrom([]int{16384, 32768}).Draw(t, "mem")), TotalDisk: 409600 * 2,
			TotalCPUs: 16, TotalSpindles: 8, FreeSpindles: 8, ExclusiveStorage: ded,
			Offline: rapid.IntRange(0, 9).Draw(t, "offline") == 0}
		if rapid.Bool().Draw(t, "rack") {
			n.Tags = []string{"rack:" + rapid.SampledFrom([]string{"a", "b"}).Draw(t, "rackName")}
		}
		nodes = append(nodes, n)
	}
	var insts []InstanceSpec
	for k := rapid.IntRange(0, 2*nNodes).Draw(t, "insts"); k > 0; k-- {
		p := rapid.IntRange(0, nNodes-1).Draw(t, "p")
		s := -1
		tmpl := DTPlain
		if rapid.Bool().Draw(t, "drbd") {
			s = rapid.IntRange(0, nNodes-1).Draw(t, "s")
			if s == p || nodes[s].Group != nodes[p].Group {
				s = -1
			} else {
				tmpl = DTDrbd
			}
		}
		q := rapid.SampledFrom([]int{1, 2}).Draw(t, "size")
		sp := q
		inst := Instance{Name: fmt.Sprintf("i%d", len(insts)), Mem: q*4096 - 512, Dsk: q*102400 - 1024, VCPUs: 2 * q,
			Template: tmpl, SpindleUse: q, AutoBalance: true, Disks: []Disk{{Size: q*102400 - 1024, Spindles: &sp}}}
		if rapid.Bool().Draw(t, "tagged") {
			inst.Tags = []string{"svc:" + rapid.SampledFrom([]string{"x", "y"}).Draw(t, "svc")}
		}
		if use[p].mem+inst.Mem >= int(nodes[p].TotalMem) || use[p].dsk+inst.Dsk >= int(nodes[p].TotalDisk) ||
			(s >= 0 && use[s].dsk+inst.Dsk >= int(nodes[s].TotalDisk)) {
			continue
		}
		use[p].mem += inst.Mem
		use[p].dsk += inst.Dsk
		use[p].sp += q
		if s >= 0 {
			use[s].dsk += inst.Dsk
			use[s].sp += q
		}
		insts = append(insts, InstanceSpec{Instance: inst, Primary: p, Secondary: s})
	}
	for i := range nodes {
		nodes[i].FreeMem = int(nodes[i].TotalMem) - use[i].mem
		nodes[i].FreeDisk = int(nodes[i].TotalDisk) - use[i].dsk
		nodes[i].FreeSpindles = nodes[i].TotalSpindles - use[i].sp
	}
	ctags := []string{"htools:nlocation:rack", "htools:iextags:svc"}
	c, err := NewCluster(groups, nodes, insts, ctags)
	if err != nil {
		t.Fatal(err)
	}
	q := rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "reqSize")
	sp := q
	req := &AllocRequest{Inst: Instance{Name: "new", Mem: q*4096 - 600, Dsk: q*102400 - 2000, VCPUs: 2 * q,
		Template: DTPlain, SpindleUse: q, AutoBalance: true, Disks: []Disk{{Size: q*102400 - 2000, Spindles: &sp}}}}
	if rapid.Bool().Draw(t, "reqDrbd") {
		req.Inst.Template = DTDrbd
	}
	if rapid.Bool().Draw(t, "reqTag") {
		req.Inst.Tags = []string{"svc:x"}
	}
	req.RequiredNodes = req.Inst.RequiredNodes()
	c.PrepareRequest(&req.Inst)
	return c, req
}

// checkFeasible verifies a placement with plain arithmetic over the
// cluster's instances, independently of the node bookkeeping.
func checkFeasible(c *Cluster, pl *Placement) error {
	inst := &pl.Inst
	nodes := []int{pl.P}
	if inst.Template == DTDrbd {
		if pl.S < 0 || pl.S == pl.P || c.Nodes[pl.S].Group != c.Nodes[pl.P].Group {
			return fmt.Errorf("bad secondary %d for primary %d", pl.S, pl.P)
		}
		nodes = append(nodes, pl.S)
	}
	for _, ni := range nodes {
		if c.Nodes[ni].Offline {
			return fmt.Errorf("node %s is offline", c.Nodes[ni].Name)
		}
	}
	p := &c.Nodes[pl.P]
	mem, vcpus := 0, 0
	var tags []string
	for i := range c.Instances {
		in := &c.Instances[i]
		if in.PNode == pl.P {
			mem += in.Mem
			vcpus += in.VCPUs
			tags = append(tags, in.ExclTags...)
		}
	}
	if free := int(p.TMem) - p.NMem - mem - inst.Mem; free <= 0 {
		return fmt.Errorf("memory overcommitted on %s: %d", p.Name, free)
	}
	if r := float64(p.NCpu+vcpus+inst.VCPUs) / p.TCpu; r > p.Policy.VCPURatio {
		return fmt.Errorf("vcpu ratio %v > %v on %s", r, p.Policy.VCPURatio, p.Name)
	}
	for _, t := range inst.ExclTags {
		if slices.Contains(tags, t) {
			return fmt.Errorf("exclusion tag %s clashes on %s", t, p.Name)
		}
	}
	for _, ni := range nodes {
		n := &c.Nodes[ni]
		dsk := 0
		for i := range c.Instances {
			in := &c.Instances[i]
			if in.PNode == ni || in.SNode == ni {
				dsk += in.Dsk
			}
		}
		if free := int(n.TDsk) - dsk - inst.Dsk; free <= 0 {
			return fmt.Errorf("disk overcommitted on %s", n.Name)
		}
	}
	if f := inst.MatchesPolicy(p.Policy, p.ExclStorage); f != FailNone {
		return fmt.Errorf("policy: %s", f)
	}
	return nil
}

func TestPropChosenPlacementFeasible(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, req := genModel(t)
		res, err := c.Allocate(req, Options{NoCapacityChecks: rapid.Bool().Draw(t, "nocap")})
		if err != nil || res.Placement == nil {
			return
		}
		if err := checkFeasible(c, res.Placement); err != nil {
			t.Fatalf("infeasible placement %s: %v", res.Info, err)
		}
	})
}

func TestPropIncrementalEqualsScratch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, req := genModel(t)
		sc := c.fullScope()
		base := c.statsOf(sc)
		opts := &Options{}
		for p := range c.Nodes {
			for s := -1; s < len(c.Nodes); s++ {
				var pl Placement
				var f FailMode
				switch {
				case s < 0 && req.Inst.Template != DTDrbd:
					pl, f = c.evalSingle(base, &req.Inst, p, opts, false)
				case s >= 0 && s != p && req.Inst.Template == DTDrbd:
					pl, f = c.evalPair(base, &req.Inst, p, s, opts, false)
				default:
					continue
				}
				if f != FailNone {
					continue
				}
				want := c.scoreFromScratch(sc, &pl)
				// htools' incremental variance update loses a few ulps;
				// near-zero variances then show as ~1e-9 after sqrt.
				if math.Abs(want-pl.Score) > 1e-7*math.Max(1, math.Abs(want)) {
					t.Fatalf("placement %d/%d: incremental %.12f, from scratch %.12f", p, s, pl.Score, want)
				}
			}
		}
	})
}

func TestPropDeterministicAndPure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, req := genModel(t)
		before := c.Clone()
		r1, err1 := c.Allocate(req, Options{})
		r2, err2 := c.Clone().Allocate(req, Options{})
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("errors differ: %v vs %v", err1, err2)
		}
		if err1 == nil {
			if r1.Info != r2.Info || fmt.Sprint(r1.Nodes(c)) != fmt.Sprint(r2.Nodes(c)) {
				t.Fatalf("results differ:\n%s\n%s", r1.Info, r2.Info)
			}
		}
		if diff := cmp.Diff(before.Nodes, c.Nodes, cmp.AllowUnexported(Node{}, Policy{})); diff != "" {
			t.Fatalf("Allocate modified the cluster:\n%s", diff)
		}
	})
}
