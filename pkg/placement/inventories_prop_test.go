package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestInventoryWriteInvariants drives random inventory, trait and
// aggregate writes (valid and invalid: stale generations, unknown or
// absent classes, classes in use, bad capacities) at two providers and
// checks after every step that
//
//   - a failed write changes nothing at all (inventories, traits,
//     aggregates, generations of both providers);
//   - a write fails exactly when the model says it must;
//   - a successful inventory write bumps its provider's generation by
//     exactly one and leaves the other provider alone;
//   - generations never decrease, and the stored inventories equal the
//     model's.
func TestInventoryWriteInvariants(t *testing.T) {
	// One database for all runs; each run has its own providers.
	s := newInvService(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		classes := []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_NOPE"}
		traits := []string{"HW_CPU_X86_AVX", "HW_CPU_X86_SSE", "CUSTOM_NOPE"}
		aggs := []string{"11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"}
		var ps []*Provider
		model := []map[string]Inventory{{}, {}}
		for i := 0; i < 2; i++ {
			p, err := s.CreateProvider(ctx, fmt.Sprintf("run%d-rp%d", run, i), "", nil)
			if err != nil {
				rt.Fatal(err)
			}
			ps = append(ps, p)
		}
		// Provider 0 starts with DISK_GB in use (10 units).
		seed := inventoryOf("DISK_GB", 100)
		if _, _, err := s.SetInventories(ctx, ps[0].UUID, nil, []Inventory{seed}, nil); err != nil {
			rt.Fatal(err)
		}
		model[0]["DISK_GB"] = seed
		p0, _ := s.GetProvider(ctx, ps[0].UUID)
		ivAllocate(t, s, p0, "DISK_GB", 10)
		inUse := map[string]bool{"DISK_GB": true}

		genInv := func(rt *rapid.T, class string) Inventory {
			inv := DefaultInventory(class)
			inv.Total = rapid.Int64Range(1, 50).Draw(rt, "total")
			inv.Reserved = rapid.Int64Range(0, 60).Draw(rt, "reserved")
			inv.MinUnit = rapid.Int64Range(1, 5).Draw(rt, "min_unit")
			inv.MaxUnit = rapid.Int64Range(1, 100).Draw(rt, "max_unit")
			inv.StepSize = rapid.Int64Range(1, 4).Draw(rt, "step_size")
			inv.AllocationRatio = rapid.SampledFrom([]float64{0.5, 1, 1.5, 16}).Draw(rt, "ratio")
			return inv
		}
		capCheck := func(v126 bool, invs ...Inventory) func(*Provider) error {
			return func(p *Provider) error { return CheckCapacity(p.UUID, v126, invs...) }
		}
		capOK := func(v126 bool, invs ...Inventory) bool { return CheckCapacity("x", v126, invs...) == nil }
		known := func(c string) bool { return c != "CUSTOM_NOPE" }

		lastGen := []int64{1, 0}
		for step := 0; step < 25; step++ {
			i := rapid.IntRange(0, 1).Draw(rt, "provider")
			p := ps[i]
			before := ivSnapshot(rt, s, ps)
			cur := before.Generations[i]
			// A generation that is current or stale.
			drawGen := func() int64 {
				if rapid.Bool().Draw(rt, "stale") {
					return cur - rapid.Int64Range(1, 3).Draw(rt, "behind")
				}
				return cur
			}
			v126 := rapid.Bool().Draw(rt, "v126")
			var err error
			mustFail := false
			next := maps2(model[i])
			invWrite := true
			switch op := rapid.IntRange(0, 6).Draw(rt, "op"); op {
			case 0: // POST …/inventories (with a possibly stale provider read)
				class := rapid.SampledFrom(classes).Draw(rt, "class")
				inv := genInv(rt, class)
				read := *p
				read.Generation = drawGen()
				_, have := model[i][class]
				mustFail = !known(class) || have || read.Generation != cur
				next[class] = inv
				_, _, err = s.AddInventory(ctx, &read, inv)
			case 1: // PUT …/inventories/{rc}
				class := rapid.SampledFrom(classes).Draw(rt, "class")
				inv := genInv(rt, class)
				g := drawGen()
				_, have := model[i][class]
				mustFail = g != cur || !capOK(v126, inv) || !known(class) || !have
				next[class] = inv
				_, _, err = s.UpdateInventory(ctx, p.UUID, g, inv, capCheck(v126, inv))
			case 2: // PUT …/inventories (or DELETE with no generation)
				var g *int64
				if rapid.Bool().Draw(rt, "with generation") {
					gg := drawGen()
					g = &gg
				}
				picked := rapid.SliceOfNDistinct(rapid.SampledFrom(classes), 0, len(classes), rapid.ID[string]).Draw(rt, "classes")
				var invs []Inventory
				next = map[string]Inventory{}
				for _, c := range picked {
					inv := genInv(rt, c)
					invs = append(invs, inv)
					next[c] = inv
				}
				mustFail = (g != nil && *g != cur) || !capOK(v126, invs...)
				for _, c := range picked {
					mustFail = mustFail || !known(c)
				}
				for c := range model[i] {
					if _, kept := next[c]; !kept && i == 0 && inUse[c] {
						mustFail = true
					}
				}
				_, _, err = s.SetInventories(ctx, p.UUID, g, invs, capCheck(v126, invs...))
			case 3: // DELETE …/inventories/{rc}
				class := rapid.SampledFrom(classes).Draw(rt, "class")
				_, have := model[i][class]
				mustFail = !known(class) || !have || (i == 0 && inUse[class])
				delete(next, class)
				err = s.DeleteInventory(ctx, p.UUID, class)
			case 4: // PUT …/traits
				invWrite = false
				g := drawGen()
				names := rapid.SliceOfNDistinct(rapid.SampledFrom(traits), 0, 3, rapid.ID[string]).Draw(rt, "traits")
				mustFail = g != cur || slices.Contains(names, "CUSTOM_NOPE")
				_, _, err = s.SetProviderTraits(ctx, p.UUID, g, names)
			case 5: // PUT …/aggregates (1.19)
				invWrite = false
				g := drawGen()
				names := rapid.SliceOfNDistinct(rapid.SampledFrom(aggs), 0, 2, rapid.ID[string]).Draw(rt, "aggregates")
				mustFail = g != cur
				_, err = s.SetProviderAggregates(ctx, p.UUID, &g, names)
			case 6: // DELETE …/traits
				invWrite = false
				err = s.DeleteProviderTraits(ctx, p.UUID)
			}
			after := ivSnapshot(rt, s, ps)
			if (err != nil) != mustFail {
				rt.Fatalf("step %d on rp%d: error %v, model says fail=%v", step, i, err, mustFail)
			}
			if err != nil {
				if diff := cmp.Diff(before, after); diff != "" {
					rt.Fatalf("failed write (%v) changed state (-before +after):\n%s", err, diff)
				}
				continue
			}
			other := 1 - i
			if after.Generations[other] != before.Generations[other] || !cmp.Equal(after.Inventories[other], before.Inventories[other]) {
				rt.Fatalf("a write on rp%d changed rp%d", i, other)
			}
			if invWrite {
				if after.Generations[i] != cur+1 {
					rt.Fatalf("inventory write: generation %d -> %d, want +1", cur, after.Generations[i])
				}
				model[i] = next
			}
			if want := ivModelView(model[i]); !cmp.Equal(want, after.Inventories[i]) {
				rt.Fatalf("inventories of rp%d (-model +db):\n%s", i, cmp.Diff(want, after.Inventories[i]))
			}
			for j := range ps {
				if after.Generations[j] < lastGen[j] {
					rt.Fatalf("generation of rp%d went back: %d -> %d", j, lastGen[j], after.Generations[j])
				}
				lastGen[j] = after.Generations[j]
			}
		}
	})
}

func maps2(m map[string]Inventory) map[string]Inventory {
	out := make(map[string]Inventory, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ivState is everything the writes under test may change.
type ivState struct {
	Generations []int64
	Inventories [][]string
	Traits      [][]string
	Aggregates  [][]string
}

func ivModelView(m map[string]Inventory) []string {
	out := []string{}
	for _, inv := range m {
		out = append(out, ivRow(inv))
	}
	sort.Strings(out)
	return out
}

func ivRow(inv Inventory) string {
	return fmt.Sprintf("%s t=%d r=%d min=%d max=%d step=%d ratio=%g", inv.ResourceClass, inv.Total, inv.Reserved,
		inv.MinUnit, inv.MaxUnit, inv.StepSize, inv.AllocationRatio)
}

func ivSnapshot(t *rapid.T, s *Service, ps []*Provider) ivState {
	ctx := context.Background()
	var st ivState
	for _, p := range ps {
		q, invs, err := s.ProviderInventories(ctx, p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		st.Generations = append(st.Generations, q.Generation)
		rows := []string{}
		for _, inv := range invs {
			rows = append(rows, ivRow(inv))
		}
		sort.Strings(rows)
		st.Inventories = append(st.Inventories, rows)
		_, ts, err := s.ProviderTraits(ctx, p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, tr := range ts {
			names = append(names, tr.Name)
		}
		st.Traits = append(st.Traits, names)
		_, as, err := s.ProviderAggregates(ctx, p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		st.Aggregates = append(st.Aggregates, append([]string{}, as...))
	}
	return st
}
