package hosts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// reportingDriver is a standalone driver whose compute service reports
// the statuses set with set.
type reportingDriver struct {
	*standalone.Driver
	mu sync.Mutex
	st map[string]string
}

func (d *reportingDriver) set(st map[string]string) {
	d.mu.Lock()
	d.st = st
	d.mu.Unlock()
}

func (d *reportingDriver) HostStatuses(context.Context) (map[string]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st, nil
}

// TestComputeStatusHeals: the status poller marking a host down heals
// its reservations as PUT reservable=false does. Hosts c1 and c2 are
// rack x, c3 rack y. An IMMEDIATE lease holds one rack-x host, a future
// lease the rack-y host. The compute service reports the active lease's
// host down: its booking moves to the other rack-x host (resources_changed,
// lease degraded). It reports c3 down: the future lease has nowhere to
// go (missing_resources, degraded). A healing that fails is retried on
// the next round while the host is still down.
func TestComputeStatusHeals(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			testComputeStatusHeals(t, dbtest.OpenDialect(t, dialect))
		})
	}
}

func testComputeStatusHeals(t *testing.T, d *db.DB) {
	ctx := context.Background()
	clock := leasestest.NewClock(time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second))
	drv := &reportingDriver{Driver: standalone.New(nil)}
	hs := hosts.New(d, drv)
	name := map[string]string{}
	for _, h := range []struct{ name, rack string }{{"c1", "x"}, {"c2", "x"}, {"c3", "y"}} {
		out, err := hs.Create(ctx, map[string]any{"name": h.name, "vcpus": "8", "memory_mb": "16384", "local_gb": "100", "rack": h.rack})
		if err != nil {
			t.Fatal(err)
		}
		name[out.ID] = h.name
	}
	hp := hostplugin.New(hs, d.DB, hostplugin.Config{CheckHosts: hosts.ReservableTx}, clock.Now)
	reg, err := plugins.NewRegistry(hp)
	if err != nil {
		t.Fatal(err)
	}
	svc := leases.New(d, reg, leases.Config{MinutesBeforeEndLease: 60}, clock.Now, nil)
	var healErr error
	hs.SetHealer(func(ctx context.Context, id string, lookup func(string) (string, bool)) error {
		if healErr != nil {
			return healErr
		}
		_, err := svc.HealHost(ctx, id, lookup)
		return err
	})
	owner := leases.Caller{UserID: "u1", ProjectID: "p1"}
	create := func(n, typ, start, rack string) string {
		t.Helper()
		req := leasestest.Request(n, start, "2099-01-01 00:00", leasestest.HostReservation(1, 1, "", `["==", "$rack", "`+rack+`"]`))
		if typ != "" {
			req.LeaseType = &typ
		}
		v, err := svc.Create(ctx, owner, req)
		if err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
		return v.ID
	}
	active := create("active", "IMMEDIATE", "now", "x")
	future := create("future", "", "2098-01-01 00:00", "y")
	hostOf := func(id string) string {
		var ids []string
		if err := d.Raw(`SELECT a.compute_host_id FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id
 WHERE r.lease_id = ?`, id).Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 {
			return ""
		}
		return name[ids[0]]
	}
	type flags struct {
		Status                                       string
		Host                                         string
		Degraded, MissingResources, ResourcesChanged bool
	}
	state := func(id string) flags {
		t.Helper()
		v, err := svc.Get(ctx, owner, id)
		if err != nil {
			t.Fatal(err)
		}
		r := v.Reservations[0]
		return flags{Status: v.Status, Host: hostOf(id), Degraded: v.Degraded,
			MissingResources: r["missing_resources"] == true, ResourcesChanged: r["resources_changed"] == true}
	}
	first := hostOf(active)
	other := map[string]string{"c1": "c2", "c2": "c1"}[first]
	if first == "" || other == "" || hostOf(future) != "c3" {
		t.Fatalf("active lease on %q, future lease on %q; want a rack-x host and c3", first, hostOf(future))
	}
	sync := func(st map[string]string, want int) {
		t.Helper()
		drv.set(st)
		n, err := hs.SyncComputeStatus(ctx)
		if err != nil || n != want {
			t.Fatalf("SyncComputeStatus = %d, %v; want %d changes", n, err, want)
		}
	}

	sync(map[string]string{first: compute.StatusDown, other: compute.StatusUp, "c3": compute.StatusUp}, 1)
	if diff := cmp.Diff(flags{Status: "ACTIVE", Host: other, Degraded: true, ResourcesChanged: true}, state(active)); diff != "" {
		t.Errorf("active lease after its host went down (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(flags{Status: "PENDING", Host: "c3"}, state(future)); diff != "" {
		t.Errorf("future lease after another host went down (-want +got):\n%s", diff)
	}

	// c3 goes down while healing fails: the host is marked, its booking
	// stays; the next round heals it.
	healErr = errors.New("database unavailable")
	drv.set(map[string]string{first: compute.StatusDown, other: compute.StatusUp, "c3": compute.StatusDown})
	if _, err := hs.SyncComputeStatus(ctx); err == nil {
		t.Error("SyncComputeStatus with healing failing: no error")
	}
	if got := state(future); got.Host != "c3" || got.Degraded {
		t.Errorf("future lease with healing failing: %+v, want still on c3, not degraded", got)
	}
	healErr = nil
	sync(map[string]string{first: compute.StatusDown, other: compute.StatusUp, "c3": compute.StatusDown}, 0)
	if diff := cmp.Diff(flags{Status: "PENDING", Degraded: true, MissingResources: true}, state(future)); diff != "" {
		t.Errorf("future lease once its host's healing ran (-want +got):\n%s", diff)
	}
	if got := state(active); got.Host != other {
		t.Errorf("active lease moved again to %q on a later round, want it left on %s", got.Host, other)
	}
}
