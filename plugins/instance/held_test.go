package instance

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/errs"
)

// heldOrder is a's order where h1 (4 slots) is split between a (2 slots)
// and b (2 slots, lent into dom's pool) and h2 is b's whole host, lent
// too; b lends at most one host at once.
func heldOrder(t *testing.T) *ownership.Order {
	t.Helper()
	hs := []ownership.Host{{ID: "h1", Slots: 4}, {ID: "h2"}}
	plan := &ownership.Plan{
		Consumers: []ownership.Consumer{{ID: "dom", Rank: 1, LendingLimit: -1},
			{ID: "a", Parent: "dom", Rank: 1, Project: "PA", LendingLimit: -1},
			{ID: "b", Parent: "dom", Rank: 2, Project: "PB", LendingLimit: 1}},
		Groups: []ownership.Group{{Name: "g1", Hosts: []string{"h1"}}, {Name: "g2", Hosts: []string{"h2"}}},
		Entries: []ownership.Entry{{Consumer: "dom", Group: "g1", Amount: 1}, {Consumer: "dom", Group: "g2", Amount: 1},
			{Consumer: "a", Group: "g1", Amount: 2, Partial: true},
			{Consumer: "b", Group: "g1", Amount: 2, Partial: true, Lend: true, LendGrace: time.Hour},
			{Consumer: "b", Group: "g2", Amount: 1, Lend: true, LendGrace: time.Hour}},
	}
	if err := ownership.Validate(plan, hs); err != nil {
		t.Fatal(err)
	}
	res, err := ownership.Recompute(plan, hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ownership.NewView(plan, hs, res.Ownership)
	if err != nil {
		t.Fatal(err)
	}
	return v.HostOrder("a")
}

// TestHeldPicks: the hosts an active reservation holds grow within what
// they were taken from: a held part bounds the host's free capacity to
// the part's room (its share less its other bookings), a part no longer
// offered takes no more slots, a booking without a record and whole
// hosts keep the host's free capacity; held loans count against their
// lenders' budgets, and held loans alone over a limit refuse the update.
func TestHeldPicks(t *testing.T) {
	o := heldOrder(t)
	slot := allocator.SlotSize{VCPUs: 2}
	capa := allocator.SlotSize{VCPUs: 8}
	host := func(id string, held int) allocator.SlotHost {
		return allocator.SlotHost{ID: id, Capacity: capa, Free: allocator.SlotSize{VCPUs: 6}, Held: held,
			Profile: []allocator.SlotSegment{{Dur: 1, Free: allocator.SlotSize{VCPUs: 6}}}}
	}
	// b's part of h1 has one slot booked by others; a's part none.
	peak := func(h, owner string, _ allocator.SlotSize) allocator.SlotSize {
		if h == "h1" && owner == "b" {
			return slot
		}
		return allocator.SlotSize{}
	}
	tests := []struct {
		name    string
		base    []allocator.SlotHost
		part    map[string]string // held host → recorded part owner
		budgets map[string]int
		free    map[string]int64 // host → free VCPUs after
		charges map[string][]string
		left    map[string]int
		err     string
	}{
		{name: "own part bounds the host", base: []allocator.SlotHost{host("h1", 1)}, part: map[string]string{"h1": "a"},
			budgets: map[string]int{"b": 1}, free: map[string]int64{"h1": 4}, charges: map[string][]string{"h1": nil}, left: map[string]int{"b": 1}},
		{name: "borrowed part: its room, charged", base: []allocator.SlotHost{host("h1", 1)}, part: map[string]string{"h1": "b"},
			budgets: map[string]int{"b": 1}, free: map[string]int64{"h1": 2}, charges: map[string][]string{"h1": {"b"}}, left: map[string]int{"b": 0}},
		{name: "no record: the host's free capacity", base: []allocator.SlotHost{host("h1", 1)},
			budgets: map[string]int{"b": 1}, free: map[string]int64{"h1": 6}, charges: map[string][]string{"h1": nil}, left: map[string]int{"b": 1}},
		{name: "part no longer offered: held slots only", base: []allocator.SlotHost{host("h1", 2)}, part: map[string]string{"h1": "gone"},
			budgets: map[string]int{"b": 1}, free: map[string]int64{"h1": 4}, charges: map[string][]string{"h1": nil}, left: map[string]int{"b": 1}},
		{name: "borrowed whole host charged", base: []allocator.SlotHost{host("h2", 1), host("h1", 0)},
			budgets: map[string]int{"b": 1}, free: map[string]int64{"h2": 6, "h1": 6}, charges: map[string][]string{"h2": {"b"}}, left: map[string]int{"b": 0}},
		{name: "held loans over the limit", base: []allocator.SlotHost{host("h2", 1), host("h1", 1)}, part: map[string]string{"h1": "b"},
			budgets: map[string]int{"b": 1}, err: `consumer "b" lends at most 1 hosts at once and has 1 left to lend over the window, fewer than the 2 the reservation holds borrow`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]allocator.SlotHost(nil), tc.base...)
			got, picks, left, err := heldPicks(o, tc.budgets, tc.base, slot, peak, func(h string) (string, bool) {
				p, ok := tc.part[h]
				return p, ok
			})
			if diff := cmp.Diff(before, tc.base); diff != "" {
				t.Errorf("base changed in place (-before +after):\n%s", diff)
			}
			if tc.err != "" {
				if e := errs.As(err); e == nil || e.Kind != errs.NotEnoughResources || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a refusal with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			free := map[string]int64{}
			for _, sh := range got {
				free[sh.ID] = sh.Free.VCPUs
			}
			if diff := cmp.Diff(tc.free, free); diff != "" {
				t.Errorf("free VCPUs (-want +got):\n%s", diff)
			}
			charges := map[string][]string{}
			for h, pk := range picks {
				if !pk.held {
					t.Errorf("pick of %s not marked held", h)
				}
				charges[h] = pk.charges
			}
			if diff := cmp.Diff(tc.charges, charges); diff != "" {
				t.Errorf("charges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.left, left); diff != "" {
				t.Errorf("budgets left (-want +got):\n%s", diff)
			}
		})
	}
}
