package placement

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
)

// propClasses are the classes the property test allocates (plus one the
// providers never have inventory of, and one that does not exist).
var propClasses = []string{"VCPU", "MEMORY_MB", "DISK_GB", "PCI_DEVICE", "CUSTOM_NOPE"}

// propInv is a generated inventory with the capacity it implies.
type propInv struct {
	total, reserved, minU, maxU, step int64
	ratio                             float64
}

func (p propInv) capacity() float64 { return float64(p.total-p.reserved) * p.ratio }

// allocSnapshot is everything an allocation write may change, for the
// providers and consumers of one property-test run.
type allocSnapshot struct {
	Allocations []string
	Consumers   []string
	Generations map[string]int64
	// Usage is allocation_usages (non-zero rows) of the run's providers.
	Usage []string
}

func takeSnapshot(t *rapid.T, s *Service, rps []*Provider, consumers []string) allocSnapshot {
	snap := allocSnapshot{Generations: map[string]int64{}}
	for _, p := range rps {
		q, err := s.GetProvider(context.Background(), p.UUID)
		if err != nil {
			t.Fatal(err)
		}
		snap.Generations[p.UUID] = q.Generation
	}
	type arow struct {
		ConsumerID string
		UUID       string
		Name       string
		Used       int64
	}
	var as []arow
	if err := s.db.Raw(`SELECT a.consumer_id, rp.uuid, rc.name, a.used FROM allocations a
 JOIN resource_providers rp ON rp.id = a.resource_provider_id JOIN resource_classes rc ON rc.id = a.resource_class_id
 WHERE a.consumer_id IN ?`, consumers).Scan(&as).Error; err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		snap.Allocations = append(snap.Allocations, fmt.Sprintf("%s %s %s %d", a.ConsumerID, a.UUID, a.Name, a.Used))
	}
	sort.Strings(snap.Allocations)
	var cs []models.Consumer
	if err := s.db.Where("uuid IN ?", consumers).Find(&cs).Error; err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		typ := int64(0)
		if c.ConsumerTypeID != nil {
			typ = *c.ConsumerTypeID
		}
		snap.Consumers = append(snap.Consumers, fmt.Sprintf("%s %s %s %d %d", c.UUID, c.ProjectID, c.UserID, c.Generation, typ))
	}
	sort.Strings(snap.Consumers)
	var ids []int64
	for _, p := range rps {
		ids = append(ids, p.ID)
	}
	type urow struct {
		ResourceProviderID int64
		ResourceClassID    int64
		Used               int64
	}
	var us []urow
	if err := s.db.Raw("SELECT resource_provider_id, resource_class_id, used FROM allocation_usages WHERE resource_provider_id IN ? AND used <> 0", ids).Scan(&us).Error; err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		snap.Usage = append(snap.Usage, fmt.Sprintf("%d %d %d", u.ResourceProviderID, u.ResourceClassID, u.Used))
	}
	sort.Strings(snap.Usage)
	return snap
}

// checkUsageTable fails unless allocation_usages equals the sums of the
// allocations themselves, for every provider.
func checkUsageTable(t interface{ Fatalf(string, ...any) }, s *Service) {
	var drift []string
	if err := s.db.Raw(`SELECT CONCAT('table ', u.resource_provider_id, '/', u.resource_class_id, '=', u.used, ' sum=', COALESCE(a.used, 0))
 FROM allocation_usages u LEFT JOIN (SELECT resource_provider_id, resource_class_id, SUM(used) AS used FROM allocations GROUP BY resource_provider_id, resource_class_id) a
 ON a.resource_provider_id = u.resource_provider_id AND a.resource_class_id = u.resource_class_id
 WHERE u.used <> COALESCE(a.used, 0)
 UNION ALL
 SELECT CONCAT('missing ', a.resource_provider_id, '/', a.resource_class_id) FROM allocations a
 LEFT JOIN allocation_usages u ON u.resource_provider_id = a.resource_provider_id AND u.resource_class_id = a.resource_class_id
 WHERE u.resource_provider_id IS NULL`).Scan(&drift).Error; err != nil {
		t.Fatalf("usage table check: %v", err)
	}
	if len(drift) > 0 {
		t.Fatalf("allocation_usages drifted from the allocations: %v", drift)
	}
}

// TestAllocationInvariants drives random allocation writes (PUT-like and
// POST-like, with right and wrong consumer generations, unknown classes
// and providers, clears and deletes) against random inventories and
// checks after every step:
//   - usage never exceeds (total − reserved) × allocation_ratio;
//   - provider generations never go down, and go up on every provider a
//     successful write allocates on;
//   - a failed request changes nothing at all;
//   - a successful one leaves exactly the allocations it asked for.
func TestAllocationInvariants(t *testing.T) {
	s := newAllocService(t)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		nProv := rapid.IntRange(1, 3).Draw(t, "providers")
		var rps []*Provider
		invs := map[string]map[string]propInv{} // rp uuid → class → inventory
		for i := 0; i < nProv; i++ {
			p, err := s.CreateProvider(ctx, fmt.Sprintf("prop-%d-%d", run, i), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			rps = append(rps, p)
			invs[p.UUID] = map[string]propInv{}
			for ci, class := range propClasses[:3] {
				if !rapid.Bool().Draw(t, fmt.Sprintf("has %d/%s", i, class)) {
					continue
				}
				in := propInv{total: rapid.Int64Range(1, 40).Draw(t, "total")}
				in.reserved = rapid.Int64Range(0, in.total).Draw(t, "reserved")
				in.minU = rapid.Int64Range(1, 3).Draw(t, "min_unit")
				in.maxU = rapid.Int64Range(in.minU, 40).Draw(t, "max_unit")
				in.step = rapid.Int64Range(1, 3).Draw(t, "step_size")
				in.ratio = rapid.SampledFrom([]float64{0.5, 1, 1.5, 2}).Draw(t, "ratio")
				invs[p.UUID][class] = in
				row := models.Inventory{ResourceProviderID: p.ID, ResourceClassID: int64(ci + 1), Total: in.total, Reserved: in.reserved,
					MinUnit: in.minU, MaxUnit: in.maxU, StepSize: in.step, AllocationRatio: in.ratio}
				if err := s.db.Create(&row).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
		consumers := make([]string, 4)
		for i := range consumers {
			consumers[i] = fmt.Sprintf("%08x-%04x-4000-8000-000000000000", run, i)
		}
		// model: what each consumer holds (rp → class → n) and its
		// generation (0 = does not exist).
		model := map[string]map[string]map[string]int64{}
		gens := map[string]int64{}
		genFor := func(c string, right bool) *int64 {
			if right {
				if gens[c] == 0 {
					return nil
				}
				g := gens[c]
				return &g
			}
			g := gens[c] + 1 + rapid.Int64Range(0, 2).Draw(t, "wrong gen")
			return &g
		}
		drawAllocs := func() map[string]map[string]int64 {
			out := map[string]map[string]int64{}
			for _, p := range rps {
				if !rapid.Bool().Draw(t, "use provider") {
					continue
				}
				res := map[string]int64{}
				for _, class := range propClasses {
					if rapid.IntRange(0, 3).Draw(t, "use class") == 0 {
						res[class] = rapid.Int64Range(1, 12).Draw(t, "amount")
					}
				}
				if len(res) > 0 {
					out[p.UUID] = res
				}
			}
			if rapid.IntRange(0, 20).Draw(t, "unknown provider") == 0 {
				out["deadbeef-0000-4000-8000-000000000000"] = map[string]int64{"VCPU": 1}
			}
			return out
		}

		steps := rapid.IntRange(1, 25).Draw(t, "steps")
		for step := 0; step < steps; step++ {
			before := takeSnapshot(t, s, rps, consumers)
			var ws []ConsumerWrite
			var err error
			deleted := ""
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6: // PUT-like, one consumer, 1.28 rules or not
				c := rapid.SampledFrom(consumers).Draw(t, "consumer")
				w := ConsumerWrite{UUID: c, ProjectID: "p", UserID: "u", Allocations: drawAllocs()}
				if rapid.Bool().Draw(t, "check generation") {
					w.CheckGeneration = true
					w.Generation = genFor(c, rapid.IntRange(0, 4).Draw(t, "right gen") > 0)
				} else if len(w.Allocations) == 0 {
					continue // below 1.28 a PUT cannot be empty
				}
				ws = []ConsumerWrite{w}
				err = s.WriteAllocations(ctx, ws, false)
			case op < 9: // POST-like, several consumers
				perm := rapid.Permutation(consumers).Draw(t, "consumers")
				for _, c := range perm[:rapid.IntRange(1, len(perm)).Draw(t, "how many")] {
					ws = append(ws, ConsumerWrite{UUID: c, ProjectID: "p", UserID: "u", CheckGeneration: true,
						Generation: genFor(c, rapid.IntRange(0, 6).Draw(t, "right gen") > 0), Allocations: drawAllocs()})
				}
				err = s.WriteAllocations(ctx, ws, true)
			default:
				deleted = rapid.SampledFrom(consumers).Draw(t, "delete")
				err = s.DeleteAllocations(ctx, deleted)
			}
			after := takeSnapshot(t, s, rps, consumers)

			for uuid, g := range after.Generations {
				if g < before.Generations[uuid] {
					t.Fatalf("step %d: provider %s generation went down %d → %d", step, uuid, before.Generations[uuid], g)
				}
			}
			if err != nil {
				if _, ok := err.(*errs.Error); !ok {
					t.Fatalf("step %d: not a domain error: %v", step, err)
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Fatalf("step %d: failed request (%v) changed the database (-before +after):\n%s", step, err, diff)
				}
				continue
			}
			if deleted != "" {
				delete(model, deleted)
				gens[deleted] = 0
			}
			for _, w := range ws {
				for rp := range w.Allocations {
					if after.Generations[rp] <= before.Generations[rp] {
						t.Fatalf("step %d: provider %s allocated on but generation %d → %d", step, rp, before.Generations[rp], after.Generations[rp])
					}
				}
				if len(w.Allocations) == 0 {
					delete(model, w.UUID)
					gens[w.UUID] = 0
				} else {
					model[w.UUID] = w.Allocations
					gens[w.UUID]++
				}
			}
			// The database holds exactly the model.
			var want []string
			for c, m := range model {
				for rp, res := range m {
					for class, n := range res {
						want = append(want, fmt.Sprintf("%s %s %s %d", c, rp, class, n))
					}
				}
			}
			sort.Strings(want)
			if diff := cmp.Diff(want, after.Allocations); diff != "" {
				t.Fatalf("step %d: allocations differ from the successful writes (-want +got):\n%s", step, diff)
			}
			for c, g := range gens {
				if g == 0 {
					continue
				}
				ca, err := s.GetConsumerAllocations(ctx, c)
				if err != nil || ca.Consumer == nil || ca.Consumer.Generation != g {
					t.Fatalf("step %d: consumer %s: %+v %v, want generation %d", step, c, ca, err, g)
				}
			}
			checkUsageTable(t, s)
			// Capacity holds on every inventory.
			for _, p := range rps {
				pu, err := s.GetProviderUsages(ctx, p.UUID)
				if err != nil {
					t.Fatal(err)
				}
				u := pu.Usages
				for class, in := range invs[p.UUID] {
					if float64(u[class]) > in.capacity() {
						t.Fatalf("step %d: %s on %s used %d > capacity %v", step, class, p.UUID, u[class], in.capacity())
					}
				}
			}
		}
	})
}
