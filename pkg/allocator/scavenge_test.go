package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// shost builds a host of capacity (vcpu, mem) with the given instances,
// each "id:vcpu:mem[:tag]".
func shost(id string, eligible, target bool, capV, capM int64, tags []string, insts ...string) ScavengeHost {
	h := ScavengeHost{ID: id, Eligible: eligible, Target: target, Capacity: []int64{capV, capM}, Used: []int64{0, 0}, Tags: tags}
	for _, s := range insts {
		f := strings.Split(s, ":")
		var v, m int64
		fmt.Sscan(f[1], &v)
		fmt.Sscan(f[2], &m)
		inst := ScavengeInstance{ID: f[0], Usage: []int64{v, m}}
		if len(f) > 3 {
			inst.Tags = []string{f[3]}
		}
		h.Instances = append(h.Instances, inst)
		h.Used[0] += v
		h.Used[1] += m
	}
	return h
}

func TestPlanScavenge(t *testing.T) {
	migRules := ParseClusterTags([]string{"htools:migration:net", "htools:allowmigration:net:a::net:b"})
	exclRules := ParseClusterTags([]string{"htools:iextags:svc"})
	for _, tc := range []struct {
		name      string
		in        ScavengeInput
		want      ScavengePlan
		wantError string
	}{{
		name: "free host first, no moves",
		in: ScavengeInput{Min: 1, Max: 1, Hosts: []ScavengeHost{
			shost("h1", true, true, 8, 8, nil, "i1:1:1"),
			shost("h2", true, true, 8, 8, nil),
		}},
		want: ScavengePlan{Hosts: []string{"h2"}},
	}, {
		name: "clear the host with the fewest instances, best fit target",
		in: ScavengeInput{Min: 1, Max: 1, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, nil, "i1:1:1", "i2:1:1"),
			shost("h2", true, false, 8, 8, nil, "i3:2:2"),
			shost("t1", false, true, 8, 8, nil),
			shost("t2", false, true, 8, 8, nil, "x:5:5"),
		}},
		want: ScavengePlan{Hosts: []string{"h2"}, Clear: []string{"h2"}, Moves: []ScavengeMove{{"i3", "h2", "t2"}}},
	}, {
		name: "instance with nowhere to go",
		in: ScavengeInput{Min: 1, Max: 1, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, nil, "big:6:6"),
			shost("t1", false, true, 8, 8, nil, "x:4:4"),
		}},
		wantError: "instance big has nowhere to go (no host has room for VCPU=6,MEMORY_MB=6)",
	}, {
		name: "blocked by leases",
		in: ScavengeInput{Min: 2, Max: 2, NotEligible: 3, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, nil, "i:1:1"),
			shost("t1", false, true, 8, 8, nil),
		}},
		wantError: "blocked by leases (1 hosts match and are free of leases over the window, 3 more are held by other leases, 2 needed)",
	}, {
		name: "migration tags: only the allowed class receives",
		in: ScavengeInput{Min: 1, Max: 1, Rules: &migRules, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, []string{"net:a"}, "i1:1:1"),
			shost("t1", false, true, 8, 8, []string{"net:c"}),
			shost("t2", false, true, 8, 8, []string{"net:b"}, "x:8:8"),
			shost("t3", false, true, 8, 8, []string{"net:b"}),
		}},
		want: ScavengePlan{Hosts: []string{"h1"}, Clear: []string{"h1"}, Moves: []ScavengeMove{{"i1", "h1", "t3"}}},
	}, {
		name: "migration tags: nowhere allowed",
		in: ScavengeInput{Min: 1, Max: 1, Rules: &migRules, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, []string{"net:b"}, "i1:1:1"),
			shost("t1", false, true, 8, 8, []string{"net:a"}),
		}},
		wantError: "instance i1 has nowhere to go (no host with room is allowed by the migration tags)",
	}, {
		name: "exclusion tags keep two instances apart",
		in: ScavengeInput{Min: 1, Max: 1, Rules: &exclRules, Hosts: []ScavengeHost{
			shost("h1", true, false, 8, 8, nil, "i1:1:1:svc-db"),
			shost("t1", false, true, 8, 8, nil, "x:6:6:svc-db"),
			shost("t2", false, true, 8, 8, nil),
		}},
		want: ScavengePlan{Hosts: []string{"h1"}, Clear: []string{"h1"}, Moves: []ScavengeMove{{"i1", "h1", "t2"}}},
	}, {
		name: "pinned host explained, next one cleared",
		in: ScavengeInput{Min: 1, Max: 2, Hosts: []ScavengeHost{
			func() ScavengeHost {
				h := shost("h1", true, false, 8, 8, nil)
				h.Pinned = "holds consumer m (MIGRATION)"
				return h
			}(),
			shost("h2", true, false, 8, 8, nil, "i1:1:1"),
			shost("t1", false, true, 8, 8, nil),
		}},
		want: ScavengePlan{Hosts: []string{"h2"}, Clear: []string{"h2"}, Moves: []ScavengeMove{{"i1", "h2", "t1"}},
			Explain: []string{"host h1: holds consumer m (MIGRATION)"}},
	}, {
		name: "an eligible host that failed receives the next one's instance",
		in: ScavengeInput{Min: 1, Max: 1, Hosts: []ScavengeHost{
			shost("h1", true, true, 8, 8, nil, "a:1:1"),
			shost("h2", true, true, 8, 8, nil, "b:1:1", "c:1:1"),
		}},
		want: ScavengePlan{Hosts: []string{"h2"}, Clear: []string{"h2"},
			Moves:   []ScavengeMove{{"b", "h2", "h1"}, {"c", "h2", "h1"}},
			Explain: []string{"host h1: instance a has nowhere to go (no other host may receive instances)"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Classes = []string{"VCPU", "MEMORY_MB"}
			got, err := PlanScavenge(tc.in)
			if tc.wantError != "" {
				var se *ScavengeError
				if !errors.As(err, &se) || !strings.Contains(se.Reason, tc.wantError) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// TestPlanScavengeInvariants: every plan is complete and honest: Min..Max
// hosts, all eligible; every instance of a cleared host moves exactly
// once, to a target that is neither taken nor over capacity, with the
// migration tags allowing it; the same input gives the same plan.
func TestPlanScavengeInvariants(t *testing.T) {
	rules := ParseClusterTags([]string{"htools:migration:c", "htools:allowmigration:c:x::c:y"})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "hosts")
		in := ScavengeInput{Classes: []string{"VCPU", "MEMORY_MB"}, Rules: &rules}
		for i := range n {
			tag := rapid.SampledFrom([]string{"", "c:x", "c:y"}).Draw(t, "tag")
			var tags []string
			if tag != "" {
				tags = []string{tag}
			}
			h := shost(fmt.Sprintf("h%02d", i), rapid.Bool().Draw(t, "eligible"), rapid.Bool().Draw(t, "target"), 8, 16, tags)
			for k := range rapid.IntRange(0, 3).Draw(t, "insts") {
				v, m := rapid.Int64Range(1, 4).Draw(t, "v"), rapid.Int64Range(1, 8).Draw(t, "m")
				if h.Used[0]+v > 8 || h.Used[1]+m > 16 {
					break
				}
				h.Instances = append(h.Instances, ScavengeInstance{ID: fmt.Sprintf("i%d-%d", i, k), Usage: []int64{v, m}})
				h.Used[0] += v
				h.Used[1] += m
			}
			in.Hosts = append(in.Hosts, h)
		}
		in.Min = rapid.IntRange(1, 3).Draw(t, "min")
		in.Max = in.Min + rapid.IntRange(0, 2).Draw(t, "extra")
		plan, err := PlanScavenge(in)
		if err != nil {
			var se *ScavengeError
			if !errors.As(err, &se) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		again, _ := PlanScavenge(in)
		if d := cmp.Diff(plan, again); d != "" {
			t.Fatalf("not deterministic:\n%s", d)
		}
		if len(plan.Hosts) < in.Min || len(plan.Hosts) > in.Max {
			t.Fatalf("%d hosts, want %d..%d", len(plan.Hosts), in.Min, in.Max)
		}
		pos := map[string]int{}
		for i, h := range in.Hosts {
			pos[h.ID] = i
		}
		used := make([][]int64, n)
		for i, h := range in.Hosts {
			used[i] = slices.Clone(h.Used)
		}
		moved := map[string]bool{}
		for _, m := range plan.Moves {
			if moved[m.Instance] {
				t.Fatalf("%s moved twice", m.Instance)
			}
			moved[m.Instance] = true
			from, to := &in.Hosts[pos[m.From]], &in.Hosts[pos[m.To]]
			if !to.Target || slices.Contains(plan.Hosts, m.To) {
				t.Fatalf("move %v onto a host that is not a free target", m)
			}
			if !MigrationAllowed(rules.MigrationTags(from.Tags), rules.ReceivableMigrationTags(to.Tags)) {
				t.Fatalf("move %v not allowed by migration tags", m)
			}
			for _, inst := range from.Instances {
				if inst.ID == m.Instance {
					for c, u := range inst.Usage {
						used[pos[m.To]][c] += u
						used[pos[m.From]][c] -= u
					}
				}
			}
		}
		for i, h := range in.Hosts {
			for c := range used[i] {
				if used[i][c] > h.Capacity[c] {
					t.Fatalf("host %s over capacity in class %d", h.ID, c)
				}
			}
		}
		for _, id := range plan.Hosts {
			h := &in.Hosts[pos[id]]
			if !h.Eligible || h.Pinned != "" {
				t.Fatalf("plan takes host %s, not eligible", id)
			}
			for _, inst := range h.Instances {
				if !moved[inst.ID] {
					t.Fatalf("plan takes host %s but leaves %s on it", id, inst.ID)
				}
			}
		}
	})
}

// BenchmarkPlanScavenge: 1,000 hosts with 10,000 instances, 100 eligible
// hosts all busy, a lease of 20 hosts.
func BenchmarkPlanScavenge(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	in := ScavengeInput{Classes: []string{"VCPU", "MEMORY_MB", "DISK_GB"}, Min: 20, Max: 20}
	for i := range 1000 {
		h := ScavengeHost{ID: fmt.Sprintf("host%04d", i), Eligible: i < 100, Target: i >= 100 || i%2 == 0,
			Capacity: []int64{64, 262144, 2000}, Used: make([]int64, 3)}
		for k := range 10 {
			u := []int64{int64(1 + r.IntN(4)), int64(1024 * (1 + r.IntN(8))), int64(10 + r.IntN(40))}
			h.Instances = append(h.Instances, ScavengeInstance{ID: fmt.Sprintf("i%04d-%d", i, k), Usage: u})
			for c := range u {
				h.Used[c] += u[c]
			}
		}
		in.Hosts = append(in.Hosts, h)
	}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := PlanScavenge(in)
		if err != nil || len(plan.Hosts) != 20 {
			b.Fatal(err, len(plan.Hosts))
		}
	}
}
