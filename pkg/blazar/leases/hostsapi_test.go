package leases_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
)

func TestHostsAPI(t *testing.T) {
	svc, clock := setup(t, 2, func(i int) map[string]string { return map[string]string{"gpu": "true"} }, leasestest.Options{})
	ctx := context.Background()
	a := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", `["==", "$gpu", "true"]`))
	held := hostsOf(t, svc, a.ID)
	api := &leases.HostsAPI{DB: svc.DB(), Now: clock.Now}
	g := svc.DB().DB
	for _, tc := range []struct {
		host, key string
		want      bool
	}{{held[0], "gpu", true}, {held[0], "rack", false}} {
		got, err := api.CapabilityInUse(ctx, g, tc.host, tc.key)
		if err != nil || got != tc.want {
			t.Errorf("CapabilityInUse(%s, %s) = %v, %v", tc.host, tc.key, got, err)
		}
	}
	other := map[string]string{"1": "2", "2": "1"}[held[0]]
	for _, tc := range []struct {
		host string
		want bool
	}{{held[0], true}, {other, false}} {
		got, err := api.HostReserved(ctx, g, tc.host)
		if err != nil || got != tc.want {
			t.Errorf("HostReserved(%s) = %v, %v", tc.host, got, err)
		}
	}
	all, err := api.HostAllocations(ctx, hosts.AllocationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]hosts.HostReservation{held[0]: {{ID: a.Reservations[0]["id"].(string), LeaseID: a.ID,
		StartDate: time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC), EndDate: time.Date(2030, 1, 3, 12, 0, 0, 0, time.UTC)}}}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("HostAllocations (-want +got): %s", diff)
	}
	// Without a filter only leases not yet ended count.
	clock.Set(time.Date(2030, 1, 4, 0, 0, 0, 0, time.UTC))
	if all, _ := api.HostAllocations(ctx, hosts.AllocationFilter{}); len(all) != 0 {
		t.Errorf("ended lease still listed: %v", all)
	}
	if byLease, _ := api.HostAllocations(ctx, hosts.AllocationFilter{LeaseID: a.ID}); len(byLease) != 1 {
		t.Errorf("by lease id: %v", byLease)
	}
}
