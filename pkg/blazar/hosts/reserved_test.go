package hosts

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/blazar/hosts/hoststest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

func TestDeleteReservedHost(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, drv := newService(t, d)
		h, err := s.Create(ctx, body("name", "c1"))
		if err != nil {
			t.Fatal(err)
		}
		other, err := s.Create(ctx, body("name", "c2"))
		if err != nil {
			t.Fatal(err)
		}
		l := hoststest.Lease{ID: "l1", ReservationID: "r1", Start: fixed, End: fixed.Add(time.Hour)}
		hoststest.ReserveHosts(t, d, l, h.ID)
		err = s.Delete(ctx, h.ID)
		wantKind(t, err, errs.Conflict)
		if err.Error() != "Can't delete host "+h.ID+". The host is reserved." {
			t.Errorf("message %q", err)
		}
		wantKind(t, s.Delete(ctx, "nope"), errs.NotFound)
		wantKind(t, s.Delete(ctx, "12345"), errs.NotFound)
		if _, err := s.Get(ctx, h.ID); err != nil {
			t.Fatalf("reserved host gone: %v", err)
		}
		if err := s.Delete(ctx, other.ID); err != nil {
			t.Fatalf("unreserved host: %v", err)
		}
		hoststest.Release(t, d, l)
		if err := s.Delete(ctx, h.ID); err != nil {
			t.Fatalf("released host: %v", err)
		}
		// Refused deletes recorded nothing for the compute service.
		runOutbox(t, d, drv)
		want := map[string][]string{"c1": {"add_to_freepool", "remove_from_freepool"}, "c2": {"add_to_freepool", "remove_from_freepool"}}
		if diff := cmp.Diff(want, driverOps(drv)); diff != "" {
			t.Errorf("driver calls (-want +got):\n%s", diff)
		}
	})
}

// TestDeleteReservedInsideTx: a booking that commits between Delete's
// check before the transaction and the transaction itself is still seen
// (the check is made again under the host's resource lock).
func TestDeleteReservedInsideTx(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h, err := s.Create(ctx, body("name", "c1"))
		if err != nil {
			t.Fatal(err)
		}
		hoststest.ReserveHosts(t, d, hoststest.Lease{ID: "l1", ReservationID: "r1", Start: fixed, End: fixed.Add(time.Hour)}, h.ID)
		err = s.write(ctx, func(tx *gorm.DB) error { return s.deleteHostTx(ctx, tx, h.ID, "c1") })
		wantKind(t, err, errs.Conflict)
		err = s.write(ctx, func(tx *gorm.DB) error { return s.deleteHostTx(ctx, tx, h.ID, "renamed") })
		wantKind(t, err, errs.NotFound)
		// A delete that goes through took the host's resource lock.
		hoststest.Release(t, d, hoststest.Lease{ReservationID: "r1"})
		if err := s.Delete(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		var versions []int64
		d.Raw("SELECT version FROM blazar_resource_locks WHERE resource_type = ? AND resource_id = ?", ResourceType, h.ID).Scan(&versions)
		if diff := cmp.Diff([]int64{1}, versions); diff != "" {
			t.Errorf("resource lock versions (-want +got):\n%s", diff)
		}
	})
}

func TestAllocations(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h1, _ := s.Create(ctx, body("name", "c1"))
		h2, _ := s.Create(ctx, body("name", "c2"))
		all, err := s.Allocations(ctx, AllocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]HostAllocation{{h1.ID, []HostReservation{}}, {h2.ID, []HostReservation{}}}, all); diff != "" {
			t.Errorf("without reservations (-want +got):\n%s", diff)
		}
		r1 := HostReservation{ID: "r1", LeaseID: "l1", StartDate: fixed.Add(time.Hour), EndDate: fixed.Add(2 * time.Hour)}
		r0 := HostReservation{ID: "r0", LeaseID: "l0", StartDate: fixed, EndDate: fixed.Add(time.Hour)}
		for _, r := range []HostReservation{r1, r0} {
			hoststest.ReserveHosts(t, d, hoststest.Lease{ID: r.LeaseID, ReservationID: r.ID, Start: r.StartDate, End: r.EndDate}, h2.ID)
		}
		one, err := s.Allocation(ctx, h2.ID, AllocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&HostAllocation{h2.ID, []HostReservation{r0, r1}}, one); diff != "" {
			t.Errorf("allocation (-want +got):\n%s", diff)
		}
		_, err = s.Allocation(ctx, "77", AllocationFilter{})
		wantKind(t, err, errs.NotFound)
		// Without a filter only leases not yet ended count; a lease or
		// reservation filter shows ended ones too.
		s.now = func() time.Time { return fixed.Add(90 * time.Minute) }
		for _, tt := range []struct {
			f    AllocationFilter
			want []HostReservation
		}{
			{AllocationFilter{}, []HostReservation{r1}},
			{AllocationFilter{LeaseID: "l0"}, []HostReservation{r0}},
			{AllocationFilter{ReservationID: "r0"}, []HostReservation{r0}},
			{AllocationFilter{LeaseID: "l0", ReservationID: "r1"}, []HostReservation{}},
		} {
			all, err := s.Allocations(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			want := []HostAllocation{{h1.ID, []HostReservation{}}, {h2.ID, tt.want}}
			if diff := cmp.Diff(want, all); diff != "" {
				t.Errorf("%+v (-want +got):\n%s", tt.f, diff)
			}
		}
	})
}

func TestProperties(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		s.Create(ctx, body("name", "c1", "gpu", "true", "rack", "r1"))
		s.Create(ctx, body("name", "c2", "gpu", "false", "rack", "r1"))
		props, err := s.Properties(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		type pv struct {
			Name    string
			Private bool
			Values  []string
		}
		simplify := func(ps []Property) []pv {
			var out []pv
			for _, p := range ps {
				out = append(out, pv{p.Name, p.Private, p.Values})
			}
			return out
		}
		if diff := cmp.Diff([]pv{{"gpu", false, []string{"false", "true"}}, {"rack", false, []string{"r1"}}}, simplify(props)); diff != "" {
			t.Errorf("properties (-want +got):\n%s", diff)
		}
		p, err := s.SetPropertyPrivate(ctx, "gpu", true)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Private || p.Name != "gpu" || p.ResourceType != "physical:host" || p.UpdatedAt == nil {
			t.Errorf("set private: %+v", p)
		}
		props, _ = s.Properties(ctx, false)
		if diff := cmp.Diff([]pv{{"rack", false, []string{"r1"}}}, simplify(props)); diff != "" {
			t.Errorf("public properties (-want +got):\n%s", diff)
		}
		props, _ = s.Properties(ctx, true)
		if len(props) != 2 || !props[0].Private {
			t.Errorf("all properties: %+v", props)
		}
		_, err = s.SetPropertyPrivate(ctx, "nope", true)
		wantKind(t, err, errs.NotFound)
	})
}

func TestFloatingIPs(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		net := "1e17587e-a7ed-4b82-a17b-4beb32523e28"
		f, err := s.CreateFloatingIP(ctx, net, "192.0.2.10")
		if err != nil {
			t.Fatal(err)
		}
		want := FloatingIP{ID: f.ID, FloatingNetworkID: net, FloatingIPAddress: "192.0.2.10", Reservable: true, CreatedAt: fixed}
		if diff := cmp.Diff(want, *f); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
		f6, err := s.CreateFloatingIP(ctx, net, "2001:DB8::1")
		if err != nil || f6.FloatingIPAddress != "2001:db8::1" {
			t.Fatalf("v6: %+v %v", f6, err)
		}
		for _, tt := range []struct {
			net, addr string
			kind      errs.Kind
		}{
			{"", "192.0.2.1", errs.BadRequest}, {net, "", errs.BadRequest}, {net, "192.0.2", errs.BadRequest},
			{net, "fe80::1%eth0", errs.BadRequest}, {net, "0.0.0.0", errs.BadRequest}, {net, "224.0.0.1", errs.BadRequest},
			{net, "192.0.2.10", errs.Conflict},
		} {
			_, err := s.CreateFloatingIP(ctx, tt.net, tt.addr)
			wantKind(t, err, tt.kind)
		}
		list, err := s.ListFloatingIPs(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("list: %+v %v", list, err)
		}
		got, err := s.GetFloatingIP(ctx, f.ID)
		if err != nil || got.ID != f.ID {
			t.Fatalf("get: %+v %v", got, err)
		}
		_, err = s.GetFloatingIP(ctx, "nope")
		wantKind(t, err, errs.NotFound)
		l := hoststest.Lease{ID: "l1", ReservationID: "r1", Start: fixed, End: fixed.Add(time.Hour)}
		hoststest.ReserveFloatingIP(t, d, l, f.ID)
		err = s.DeleteFloatingIP(ctx, f.ID)
		wantKind(t, err, errs.Conflict)
		if want := "Cannot delete floating IP " + f.ID + ": it is reserved."; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
		if err := s.DeleteFloatingIP(ctx, f6.ID); err != nil {
			t.Fatal(err)
		}
		wantKind(t, s.DeleteFloatingIP(ctx, f6.ID), errs.NotFound)
		hoststest.Release(t, d, l)
		if err := s.DeleteFloatingIP(ctx, f.ID); err != nil {
			t.Fatalf("released floating IP: %v", err)
		}
	})
}
