package iallocator

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

var benchDir = flag.String("benchdir", "", "TestWriteBenchInputs writes the benchmark requests here (to time hail on them)")

// benchCluster is the scenario of the reference timings: one normal group,
// nodes of 256 GiB / 4 TiB / 32 cpus, each with one DRBD primary and one
// DRBD secondary (instance i on node i -> node i+1). With loc, nodes are
// spread over 10 power domains and every 4th instance has an exclusion
// tag. dedicated: exclusive storage, quarter/half/full policy, nodes 0-4
// quarters full.
func benchCluster(n int, scenario string) *tCluster {
	c := &tCluster{}
	switch scenario {
	case "dedicated", "dedidrbd":
		c = dedicatedCluster([]int{1, 2, 4}, nil)
		r := rand.New(rand.NewPCG(uint64(n), 7))
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("node%05d", i)
			c.Nodes = append(c.Nodes, tNode{Name: name, Group: "uuid-ded", Mem: 4096, Disk: 40960, CPUs: 4, Spindles: 4, Excl: true})
			if q := r.IntN(5); q > 0 {
				c.Insts = append(c.Insts, tInst{Name: fmt.Sprintf("inst%05d", i), Mem: q * 1024, Disk: q * 10240, VCPUs: q,
					Template: "plain", Nodes: []string{name}, Spindles: q, SpindleUse: q})
			}
		}
		return c
	}
	c.Groups = []tGroup{{UUID: "uuid-g", Name: "default",
		MinMax:    []tMinMax{{Min: tSpec{128, 1, 1024, 1, 1, 1}, Max: tSpec{262144, 32, 4 << 20, 16, 8, 12}}},
		VCPURatio: 4, SpindleRatio: 32}}
	if scenario == "drbdloc" {
		c.ClusterTags = []string{"htools:nlocation:power", "htools:iextags:service"}
	}
	r := rand.New(rand.NewPCG(uint64(n), 11))
	for i := 0; i < n; i++ {
		nd := tNode{Name: fmt.Sprintf("node%05d", i), Group: "uuid-g", Mem: 256 * gib, Disk: 4 << 20, CPUs: 32, Spindles: 12}
		if scenario == "drbdvar" {
			// every node different: no two secondaries score alike
			nd.Mem = (192 + r.IntN(128)) * gib
			nd.Disk = (3 << 20) + r.IntN(2<<20)
		}
		if scenario == "drbdloc" {
			nd.Tags = []string{fmt.Sprintf("power:p%d", i%10)}
		}
		c.Nodes = append(c.Nodes, nd)
	}
	for i := 0; i < n; i++ {
		in := drbd(fmt.Sprintf("inst%05d", i), c.Nodes[i].Name, c.Nodes[(i+1)%n].Name, 8*gib, 100*gib)
		in.VCPUs = 2
		if scenario == "drbdvar" {
			in.Mem = (4 + r.IntN(12)) * gib
			in.Disk = (50 + r.IntN(200)) * gib
		}
		if scenario == "drbdloc" && i%4 == 0 {
			in.Tags = []string{fmt.Sprintf("service:s%d", i%7)}
		}
		c.Insts = append(c.Insts, in)
	}
	return c
}

func benchRequest(n int, scenario string) []byte {
	c := benchCluster(n, scenario)
	switch scenario {
	case "plain":
		return c.request(allocReq("new", 16*gib, 200*gib, 4, "plain", 0, nil))
	case "dedicated":
		return c.request(dedReq(1, "plain"))
	case "dedidrbd":
		return c.request(dedReq(1, "drbd"))
	case "drbdloc":
		return c.request(allocReq("new", 16*gib, 200*gib, 4, "drbd", 0, []string{"service:s1"}))
	}
	return c.request(allocReq("new", 16*gib, 200*gib, 4, "drbd", 0, nil))
}

var benchCases = []struct {
	scenario string
	n        int
}{
	{"drbd", 100}, {"drbd", 300}, {"drbd", 1000},
	{"drbdloc", 1000}, {"drbdvar", 1000},
	{"plain", 100}, {"plain", 1000}, {"plain", 10000},
	{"dedicated", 1000}, {"dedicated", 10000},
	{"dedidrbd", 1000},
}

// TestWriteBenchInputs writes the benchmark requests to -benchdir.
func TestWriteBenchInputs(t *testing.T) {
	if *benchDir == "" {
		t.Skip("-benchdir not set")
	}
	for _, bc := range benchCases {
		f := filepath.Join(*benchDir, fmt.Sprintf("%s-%d.json", bc.scenario, bc.n))
		if err := os.WriteFile(f, benchRequest(bc.n, bc.scenario), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkIAllocator runs the full pipeline (decode + allocate + encode)
// on the scenarios hail was timed on.
func BenchmarkIAllocator(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(fmt.Sprintf("%s/nodes=%d", bc.scenario, bc.n), func(b *testing.B) {
			data := benchRequest(bc.n, bc.scenario)
			b.ReportAllocs()
			var out bytes.Buffer
			defer reportCPU(b)()
			for b.Loop() {
				out.Reset()
				if err := Run(bytes.NewReader(data), &out); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Contains(out.Bytes(), []byte(`"success":true`)) {
				b.Fatalf("allocation failed: %s", out.String())
			}
		})
	}
}

// BenchmarkAllocate times the allocation alone on a decoded cluster.
func BenchmarkAllocate(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(fmt.Sprintf("%s/nodes=%d", bc.scenario, bc.n), func(b *testing.B) {
			req, err := Decode(benchRequest(bc.n, bc.scenario), DecodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				c := req.Cluster.Clone()
				r, err := c.Allocate(&req.Allocs[0], req.opts())
				if err != nil || r.Placement == nil {
					b.Fatalf("allocation failed: %v", err)
				}
			}
		})
	}
}

// reportCPU adds the process CPU time per operation (user+system) to the
// benchmark: on a shared machine it is steadier than wall time. Call as
// defer reportCPU(b)() before the loop.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
