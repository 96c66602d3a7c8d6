package ownership

import (
	"fmt"
	"testing"
	"time"
)

// benchWorld is 10,000 hosts in two groups and 1,000 consumers: 10
// domains of 99 projects each, every domain owning 450 hosts of each group
// and its projects 4 each; a third of the hosts carry workload.
func benchWorld(nh, domains, perDomain int) (*Plan, []Host) {
	hs := make([]Host, nh)
	for i := range hs {
		rack := "r1"
		if i%2 == 1 {
			rack = "r2"
		}
		hs[i] = Host{ID: fmt.Sprintf("host-%05d", i), Load: i % 7, Properties: map[string]string{"rack": rack}}
	}
	p := &Plan{Groups: []Group{
		{Name: "even", Properties: map[string]string{"rack": "r1"}},
		{Name: "odd", Properties: map[string]string{"rack": "r2"}},
	}}
	per := nh / 2 / (domains + 1)
	for d := 0; d < domains; d++ {
		did := fmt.Sprintf("dom-%02d", d)
		p.Consumers = append(p.Consumers, Consumer{ID: did, Rank: d, LendingLimit: -1})
		for _, g := range []string{"even", "odd"} {
			p.Entries = append(p.Entries, Entry{Consumer: did, Group: g, Amount: per, Lend: true})
		}
		for q := 0; q < perDomain; q++ {
			pid := fmt.Sprintf("%s-p%02d", did, q)
			p.Consumers = append(p.Consumers, Consumer{ID: pid, Parent: did, Rank: q % 5, Project: pid, LendingLimit: -1})
			for _, g := range []string{"even", "odd"} {
				p.Entries = append(p.Entries, Entry{Consumer: pid, Group: g, Amount: per / perDomain, Lend: q%2 == 0})
			}
		}
	}
	for i := range hs {
		if i%3 == 0 {
			c := p.Consumers[(i/3)%len(p.Consumers)]
			hs[i].Users = map[string]int{c.ID: 1}
		}
	}
	return p, hs
}

// BenchmarkRecompute: 10,000 hosts, 1,000 consumers, from the previous
// ownership after a host goes down and one project's amount changes.
func BenchmarkRecompute(b *testing.B) {
	p, hs := benchWorld(10000, 10, 99)
	first, err := Recompute(p, hs, nil)
	if err != nil {
		b.Fatal(err)
	}
	hs[17].Down = true
	p.Entries[3].Amount--
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := Recompute(p, hs, first.Ownership); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkAssign: the first assignment (no previous ownership).
func BenchmarkAssign(b *testing.B) {
	p, hs := benchWorld(10000, 10, 99)
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := Recompute(p, hs, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkOrder: one request's pool order at 1,000 hosts (the extra work
// of a lease create with ownership on, given a built view).
func BenchmarkOrder(b *testing.B) {
	p, hs := benchWorld(1000, 10, 99)
	r, err := Recompute(p, hs, nil)
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewView(p, hs, r.Ownership)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if len(v.Order("dom-03-p07")) == 0 {
			b.Fatal("no pools")
		}
	}
	reportCPU(b, cpu0)
}

// reportCPU adds the process CPU time per operation (cpu-ns/op): on a
// shared, loaded machine it is steadier than wall time. It includes the
// garbage collector's work on the other core.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}
