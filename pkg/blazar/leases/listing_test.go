package leases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins/floatingip"
)

// TestListMatchesGet: on every dialect, the listing (typed rows, joined
// queries, DescribeListed) writes the bytes encoding/json writes for the
// leases as Get shows them one by one (GORM, Describe), in creation
// order; a member sees only its project's leases, an admin every lease.
func TestListMatchesGet(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			clock := leasestest.NewClock(t0)
			net := "net-1"
			fips := &leasestest.FIPs{List: []floatingip.FIP{
				{ID: "f1", NetworkID: net, Address: "192.0.2.10", Reservable: true},
				{ID: "f2", NetworkID: net, Address: "192.0.2.11", Reservable: true},
				{ID: "f3", NetworkID: net, Address: "192.0.2.12", Reservable: true},
			}}
			svc, _ := leasestest.New(d, leasestest.NewHosts(4, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60, FIPs: fips})
			ctx := context.Background()
			other := leases.Caller{UserID: "u2", ProjectID: "p2"}
			admin := leases.Caller{UserID: "a", ProjectID: "admin", Admin: true}
			fip := func(amount any, req ...any) map[string]any {
				return map[string]any{"resource_type": "virtual:floatingip", "network_id": net, "amount": amount, "required_floatingips": req}
			}
			a := create(t, svc, owner, `a <"&>`, "2030-01-02 12:00", "2030-01-03 12:00",
				leasestest.HostReservation(1, 2, `[">=", "$vcpus", "1"]`, ""), fip(2, "192.0.2.11", "192.0.2.10"))
			clock.Add(1500 * time.Microsecond) // microseconds in created_at
			create(t, svc, other, "b", "2030-01-04 12:00", "2030-01-05 12:00", leasestest.HostReservation(1, 1, "", ""))
			create(t, svc, owner, "c", "2030-01-06 12:00", "2030-01-06 13:00")
			create(t, svc, owner, "d", "now", "2030-01-01 12:00", fip(1))
			c := create(t, svc, other, "e", "2030-01-07 12:00", "2030-01-07 14:00", leasestest.HostReservation(2, 3, "", ""))
			clock.Add(61 * time.Second)
			if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"name": "a2", "end_date": "2030-01-03 18:00"})); err != nil {
				t.Fatal(err)
			}
			if err := svc.Delete(ctx, other, c.ID); err != nil {
				t.Fatal(err)
			}
			for _, caller := range []leases.Caller{owner, other, admin, {UserID: "u9", ProjectID: "nobody"}} {
				q := d.WithContext(ctx).Model(&models.Lease{}).Order("created_at, id")
				if !caller.Admin {
					q = q.Where("project_id = ?", caller.ProjectID)
				}
				var ids []string
				if err := q.Pluck("id", &ids).Error; err != nil {
					t.Fatal(err)
				}
				want := []*leases.View{}
				for _, id := range ids {
					v, err := svc.Get(ctx, admin, id)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, v)
				}
				wantJSON, _ := json.Marshal(want)
				got, err := svc.AppendList(ctx, caller, nil)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(wantJSON), string(got)); diff != "" {
					t.Errorf("%s: AppendList differs from Get (-want +got):\n%s", caller.ProjectID, diff)
				}
				list, err := svc.List(ctx, caller)
				if err != nil {
					t.Fatal(err)
				}
				if listJSON, _ := json.Marshal(list); string(listJSON) != string(got) {
					t.Errorf("%s: List and AppendList differ:\n%s\n%s", caller.ProjectID, listJSON, got)
				}
				for _, v := range list {
					if !caller.Admin && v.ProjectID != caller.ProjectID {
						t.Errorf("%s sees lease %s of %s", caller.ProjectID, v.ID, v.ProjectID)
					}
				}
				if n := map[string]int{"p1": 3, "p2": 1, "admin": 4, "nobody": 0}[caller.ProjectID]; len(list) != n {
					t.Errorf("%s sees %d leases, want %d: %s", caller.ProjectID, len(list), n, fmt.Sprint(ids))
				}
			}
		})
	}
}

// TestListInMemory: the listing reads its tables concurrently; on a
// private in-memory database (one connection) the reads take turns.
func TestListInMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := db.Open(ctx, "sqlite://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	svc, _ := leasestest.New(d, leasestest.NewHosts(2, nil), leasestest.NewClock(t0), leasestest.Options{MinutesBeforeEndLease: 60})
	a := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", ""))
	done := make(chan error, 1)
	var got []*leases.View
	go func() {
		var err error
		got, err = svc.List(ctx, owner)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("List did not return")
	}
	want, _ := json.Marshal([]*leases.View{a})
	if b, _ := json.Marshal(got); string(b) != string(want) {
		t.Errorf("got %s\nwant %s", b, want)
	}
}
