package hosts

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts/hoststest"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

var fixed = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newService(t *testing.T, d *db.DB) (*Service, *standalone.Driver) {
	t.Helper()
	drv := standalone.New(nil)
	s := New(d, drv)
	s.now = func() time.Time { return fixed }
	return s, drv
}

func eachDialect(t *testing.T, fn func(t *testing.T, d *db.DB)) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) { fn(t, dbtest.OpenDialect(t, dialect)) })
	}
}

func wantKind(t *testing.T, err error, k errs.Kind) {
	t.Helper()
	if e := errs.As(err); e == nil || e.Kind != k {
		t.Fatalf("err = %v, want a %v error", err, k)
	}
}

func body(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

var ignoreProviders = cmpopts.IgnoreFields(Host{}, "ComputeProviderUUID", "ReservationProviderUUID")

func TestCreateGetListUpdateDelete(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, drv := newService(t, d)
		h, err := s.Create(ctx, body("name", "compute-1", "vcpus", "8", "memory_mb", "16384", "local_gb", "200",
			"hypervisor_type", "QEMU", "hypervisor_version", "2010001", "cpu_info", map[string]any{"arch": "x86_64"}, "gpu", "true", "rack", "r1"))
		if err != nil {
			t.Fatal(err)
		}
		want := Host{ID: h.ID, HypervisorHostname: "compute-1", ServiceName: "compute-1", VCPUs: 8, MemoryMB: 16384, LocalGB: 200,
			HypervisorType: "QEMU", HypervisorVersion: 2010001, CPUInfo: `{"arch":"x86_64"}`, Reservable: true, CreatedAt: fixed,
			ExtraCapabilities: map[string]string{"gpu": "true", "rack": "r1"}}
		if diff := cmp.Diff(want, *h, ignoreProviders); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
		if h.ComputeProviderUUID == "" || h.ReservationProviderUUID == "" {
			t.Error("providers not recorded")
		}
		got, err := s.Get(ctx, h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*h, *got); diff != "" {
			t.Errorf("get (-created +got):\n%s", diff)
		}
		if _, err := s.Create(ctx, body("name", "compute-2")); err != nil {
			t.Fatal(err)
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].HypervisorHostname != "compute-1" || list[1].HypervisorHostname != "compute-2" || len(list[1].ExtraCapabilities) != 0 {
			t.Errorf("list = %+v", list)
		}
		up, err := s.Update(ctx, h.ID, body("rack", "r2", "ssd", true, "vcpus", 16))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"gpu": "true", "rack": "r2", "ssd": "true", "vcpus": "16"}, up.ExtraCapabilities); diff != "" {
			t.Errorf("caps after update (-want +got):\n%s", diff)
		}
		if up.VCPUs != 8 || up.UpdatedAt == nil {
			t.Errorf("update changed the host field or left updated_at: %+v", up)
		}
		if v, _ := up.Lookup("vcpus"); v != "8" {
			t.Errorf("Lookup(vcpus) = %q, want the host field 8", v)
		}
		if err := s.Delete(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(ctx, h.ID)
		wantKind(t, err, errs.NotFound)
		var n int64
		d.Model(&models.ComputeHostExtraCapability{}).Where("computehost_id = ?", h.ID).Count(&n)
		if n != 0 {
			t.Errorf("%d capabilities left behind", n)
		}
		d.Model(&models.ResourceProvider{}).Where("name IN ?", []string{"compute-1", "blazar_compute-1"}).Count(&n)
		if n != 0 {
			t.Errorf("%d providers left behind", n)
		}
		// The freepool changes wait in the outbox until its worker runs
		// them after the commit, in order per host.
		if calls := drv.Calls(); len(calls) != 0 {
			t.Errorf("driver called before the outbox ran: %+v", calls)
		}
		wantActions := []string{"compute.add_to_freepool host:1 compute-1", "compute.add_to_freepool host:2 compute-2", "compute.remove_from_freepool host:1 compute-1"}
		if diff := cmp.Diff(wantActions, pendingActions(t, d)); diff != "" {
			t.Errorf("outbox (-want +got):\n%s", diff)
		}
		if n := runOutbox(t, d, drv); n != 3 {
			t.Errorf("%d outbox runs, want 3", n)
		}
		wantOps := map[string][]string{"compute-1": {"add_to_freepool", "remove_from_freepool"}, "compute-2": {"add_to_freepool"}}
		if diff := cmp.Diff(wantOps, driverOps(drv)); diff != "" {
			t.Errorf("driver calls (-want +got):\n%s", diff)
		}
		if left := pendingActions(t, d); len(left) != 0 {
			t.Errorf("outbox rows left: %v", left)
		}
	})
}

func TestPlacementProviders(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h, err := s.Create(ctx, body("name", "c1", "vcpus", "4", "memory_mb", "2048", "local_gb", "0"))
		if err != nil {
			t.Fatal(err)
		}
		type inv struct {
			Name  string
			Total int64
		}
		var invs []inv
		if err := d.Raw(`SELECT rc.name, i.total FROM inventories i JOIN resource_classes rc ON rc.id = i.resource_class_id
 JOIN resource_providers rp ON rp.id = i.resource_provider_id WHERE rp.uuid = ? ORDER BY rc.name`, h.ComputeProviderUUID).Scan(&invs).Error; err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]inv{{"MEMORY_MB", 2048}, {"VCPU", 4}}, invs); diff != "" {
			t.Errorf("inventory (-want +got):\n%s", diff)
		}
		var child models.ResourceProvider
		if err := d.Where("uuid = ?", h.ReservationProviderUUID).Take(&child).Error; err != nil {
			t.Fatal(err)
		}
		var parent models.ResourceProvider
		if err := d.Where("uuid = ?", h.ComputeProviderUUID).Take(&parent).Error; err != nil {
			t.Fatal(err)
		}
		if child.Name != "blazar_c1" || child.ParentProviderID == nil || *child.ParentProviderID != parent.ID || parent.Generation != 1 {
			t.Errorf("child %+v parent %+v", child, parent)
		}
		// An allocation on the child blocks the delete, and nothing changes.
		if err := d.Create(&models.Allocation{ResourceProviderID: child.ID, ConsumerID: "c0000000-0000-0000-0000-000000000000", ResourceClassID: 1, Used: 1, CreatedAt: fixed, UpdatedAt: fixed}).Error; err != nil {
			t.Fatal(err)
		}
		wantKind(t, s.Delete(ctx, h.ID), errs.Conflict)
		if _, err := s.Get(ctx, h.ID); err != nil {
			t.Errorf("host gone after refused delete: %v", err)
		}
	})
}

func TestCreateErrorsLeaveNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		if _, err := s.Create(ctx, body("name", "dup")); err != nil {
			t.Fatal(err)
		}
		long := fmt.Sprintf("%065d", 0)
		// 64 characters but more bytes: accepted (characters count).
		if _, err := s.Create(ctx, body("name", "wide", strings.Repeat("é", 64), "x")); err != nil {
			t.Fatalf("64-character key: %v", err)
		}
		if err := s.Delete(ctx, "2"); err != nil {
			t.Fatal(err)
		}
		d.Exec("DELETE FROM computehost_extra_capabilities")
		d.Exec("DELETE FROM resource_properties")
		tests := []struct {
			name string
			body map[string]any
			kind errs.Kind
		}{
			{"no name", body("gpu", "x"), errs.BadRequest},
			{"long key", body("name", "c2", long, "x"), errs.BadRequest},
			{"empty key", body("name", "c2", " ", "x"), errs.BadRequest},
			{"object capability", body("name", "c2", "x", map[string]any{}), errs.BadRequest},
			{"bad vcpus", body("name", "c2", "vcpus", "many"), errs.BadRequest},
			{"duplicate", body("name", "dup"), errs.Conflict},
			{"huge inventory", body("name", "c2", "vcpus", "99999999999"), errs.BadRequest},
			{"long service name", body("name", "c2", "service_name", strings.Repeat("s", 256)), errs.BadRequest},
			{"long cpu_info", body("name", "c2", "cpu_info", `"`+strings.Repeat("x", 70000)+`"`), errs.BadRequest},
			{"long value", body("name", "c2", "gpu", strings.Repeat("v", 70000)), errs.BadRequest},
			{"long host name", body("name", strings.Repeat("h", 194)), errs.BadRequest},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := s.Create(ctx, tt.body)
				wantKind(t, err, tt.kind)
			})
		}
		var hosts, rps, props int64
		d.Model(&models.ComputeHost{}).Count(&hosts)
		d.Model(&models.ResourceProvider{}).Count(&rps)
		d.Model(&models.ResourceProperty{}).Count(&props)
		if hosts != 1 || rps != 2 || props != 0 {
			t.Errorf("after failed creates: %d hosts, %d providers, %d properties", hosts, rps, props)
		}
		// An existing blazar_ child provider is Blazar's creation conflict.
		if err := d.Create(&models.ResourceProvider{UUID: "11111111-1111-1111-1111-111111111111", Name: "blazar_c3", RootProviderID: 0, CreatedAt: fixed, UpdatedAt: fixed}).Error; err != nil {
			t.Fatal(err)
		}
		_, err := s.Create(ctx, body("name", "c3"))
		wantKind(t, err, errs.Conflict)
	})
}

func TestExistingComputeProviderIsReused(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		nova := models.ResourceProvider{UUID: "22222222-2222-2222-2222-222222222222", Name: "novahost", CreatedAt: fixed, UpdatedAt: fixed}
		if err := d.Create(&nova).Error; err != nil {
			t.Fatal(err)
		}
		d.Model(&nova).Update("root_provider_id", nova.ID)
		h, err := s.Create(ctx, body("name", "novahost", "vcpus", "4"))
		if err != nil {
			t.Fatal(err)
		}
		if h.ComputeProviderUUID != nova.UUID {
			t.Errorf("compute provider %s, want the existing %s", h.ComputeProviderUUID, nova.UUID)
		}
		if err := s.Delete(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		var n int64
		d.Model(&models.ResourceProvider{}).Where("uuid = ?", nova.UUID).Count(&n)
		if n != 1 {
			t.Error("Nova's compute node provider was deleted with the host")
		}
		d.Model(&models.Inventory{}).Count(&n)
		if n != 0 {
			t.Errorf("inventory was added to Nova's provider: %d rows", n)
		}
	})
}

func TestUpdateErrors(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h, err := s.Create(ctx, body("name", "c1", "gpu", "a"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Update(ctx, h.ID, body())
		wantKind(t, err, errs.BadRequest)
		_, err = s.Update(ctx, "999", body("x", "1"))
		wantKind(t, err, errs.NotFound)
		_, err = s.Update(ctx, "c1", body("x", "1"))
		wantKind(t, err, errs.NotFound)
		_, err = s.Update(ctx, h.ID, body(fmt.Sprintf("%065d", 1), "1"))
		wantKind(t, err, errs.BadRequest)
		_, err = s.Update(ctx, h.ID, body("id", "7"))
		wantKind(t, err, errs.BadRequest)
		// A lease whose requirements name gpu (and vcpus, a host field)
		// holds the host: gpu cannot change, other capabilities can.
		hoststest.ReserveHosts(t, d, hoststest.Lease{ID: "l1", ReservationID: "r1", Start: fixed, End: fixed.Add(time.Hour),
			HypervisorProperties: `[">=", "$vcpus", "1"]`, ResourceProperties: `["==", "$gpu", "a"]`}, h.ID)
		_, err = s.Update(ctx, h.ID, body("gpu", "b", "new", "1"))
		wantKind(t, err, errs.Conflict)
		if want := "Can't add extra capability gpu to host " + h.ID + ": a current or future reservation depends on it."; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
		got, _ := s.Get(ctx, h.ID)
		if diff := cmp.Diff(map[string]string{"gpu": "a"}, got.ExtraCapabilities); diff != "" {
			t.Errorf("refused update wrote (-want +got):\n%s", diff)
		}
		// Same value: not a change, allowed.
		if _, err := s.Update(ctx, h.ID, body("gpu", "a", "new", "1")); err != nil {
			t.Fatal(err)
		}
		// A capability no reservation names changes.
		if _, err := s.Update(ctx, h.ID, body("new", "2")); err != nil {
			t.Fatal(err)
		}
		// A capability named by the hypervisor properties is held too
		// (created while held: allowed; changed: refused).
		if _, err := s.Update(ctx, h.ID, body("vcpus", "3")); err != nil {
			t.Fatal(err)
		}
		_, err = s.Update(ctx, h.ID, body("vcpus", "4"))
		wantKind(t, err, errs.Conflict)
		// Once the host is released, gpu changes too.
		hoststest.Release(t, d, hoststest.Lease{ReservationID: "r1"})
		if _, err := s.Update(ctx, h.ID, body("gpu", "b")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConcurrentCreates(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = s.Create(ctx, body("name", fmt.Sprintf("h%d", i%4), "gpu", "x"))
			}(i)
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		list, _ := s.List(ctx)
		if len(list) != 4 || ok != 4 {
			t.Errorf("%d successes, %d hosts, errors %v", ok, len(list), errs)
		}
		// Every host has its capability, though the writes raced to
		// create the property it names.
		for _, h := range list {
			if h.ExtraCapabilities["gpu"] != "x" {
				t.Errorf("%s: capabilities %v", h.HypervisorHostname, h.ExtraCapabilities)
			}
		}
	})
}

func TestLookup(t *testing.T) {
	st := "up"
	h := Host{ID: "3", HypervisorHostname: "c", ServiceName: "s", VCPUs: 2, MemoryMB: 3, LocalGB: 4, HypervisorType: "QEMU",
		HypervisorVersion: 5, CPUInfo: "{}", AvailabilityZone: "az", Reservable: true, Status: &st,
		ExtraCapabilities: map[string]string{"gpu": "x", "vcpus": "99"}}
	for _, tt := range []struct {
		key, want string
		ok        bool
	}{
		{"id", "3", true}, {"hypervisor_hostname", "c", true}, {"service_name", "s", true}, {"vcpus", "2", true},
		{"memory_mb", "3", true}, {"local_gb", "4", true}, {"hypervisor_type", "QEMU", true}, {"hypervisor_version", "5", true},
		{"cpu_info", "{}", true}, {"availability_zone", "az", true}, {"reservable", "true", true}, {"status", "up", true},
		{"trust_id", "", false}, {"gpu", "x", true}, {"nope", "", false},
	} {
		v, ok := h.Lookup(tt.key)
		if v != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%s) = %q, %v", tt.key, v, ok)
		}
	}
}

func TestReservableFlag(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h1, err := s.Create(ctx, body("name", "c1", "reservable", "False"))
		if err != nil {
			t.Fatal(err)
		}
		h2, err := s.Create(ctx, body("name", "c2", "reservable", true))
		if err != nil {
			t.Fatal(err)
		}
		if h1.Reservable || !h2.Reservable || len(h1.ExtraCapabilities) != 0 {
			t.Fatalf("created %+v %+v", h1, h2)
		}
		names := func() []string {
			hs, err := s.Reservable(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, h := range hs {
				out = append(out, h.HypervisorHostname)
			}
			return out
		}
		if diff := cmp.Diff([]string{"c2"}, names()); diff != "" {
			t.Errorf("reservable (-want +got):\n%s", diff)
		}
		up, err := s.Update(ctx, h1.ID, body("reservable", "true"))
		if err != nil {
			t.Fatal(err)
		}
		if !up.Reservable || len(up.ExtraCapabilities) != 0 {
			t.Errorf("after update %+v", up)
		}
		if _, err := s.Update(ctx, h2.ID, body("reservable", false, "rack", "r1")); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"c1"}, names()); diff != "" {
			t.Errorf("reservable after updates (-want +got):\n%s", diff)
		}
		_, err = s.Update(ctx, h2.ID, body("reservable", "maybe"))
		wantKind(t, err, errs.BadRequest)
		_, err = s.Create(ctx, body("name", "c3", "reservable", "maybe"))
		wantKind(t, err, errs.BadRequest)
	})
}

// TestConcurrentWrites: two services (two processes) on one database
// create, update and delete the same few hosts at once. Every failure is
// a 4xx (404 for a host deleted under us, 409 for a duplicate), never a
// database error, and the end state is consistent: providers match hosts.
func TestConcurrentWrites(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		a, _ := newService(t, d)
		b, _ := newService(t, d)
		var wg sync.WaitGroup
		failures := make(chan error, 400)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				s := []*Service{a, b}[g%2]
				for i := 0; i < 12; i++ {
					name := fmt.Sprintf("h%d", (g+i)%3)
					var err error
					switch i % 3 {
					case 0:
						_, err = s.Create(ctx, body("name", name, "gpu", fmt.Sprint(g), fmt.Sprintf("k%d", i%4), "v"))
					case 1:
						var hs []Host
						hs, err = s.List(ctx)
						for _, h := range hs {
							if h.HypervisorHostname == name {
								_, err = s.Update(ctx, h.ID, body("rack", fmt.Sprint(g), fmt.Sprintf("p%d", g), "x"))
							}
						}
					case 2:
						var hs []Host
						hs, err = s.List(ctx)
						for _, h := range hs {
							if h.HypervisorHostname == name {
								err = s.Delete(ctx, h.ID)
							}
						}
					}
					if err != nil {
						failures <- err
					}
				}
			}(g)
		}
		wg.Wait()
		close(failures)
		for err := range failures {
			if k := errs.KindOf(err); errs.As(err) == nil || (k != errs.NotFound && k != errs.Conflict) {
				t.Errorf("unexpected error: %v", err)
			}
		}
		hs, err := a.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hb, _ := b.List(ctx)
		if diff := cmp.Diff(hs, hb); diff != "" {
			t.Errorf("the two services disagree (-a +b):\n%s", diff)
		}
		var rps, orphanCaps int64
		d.Model(&models.ResourceProvider{}).Count(&rps)
		d.Raw("SELECT COUNT(*) FROM computehost_extra_capabilities c LEFT JOIN computehosts h ON h.id = c.computehost_id WHERE h.id IS NULL").Scan(&orphanCaps)
		if rps != int64(2*len(hs)) || orphanCaps != 0 {
			t.Errorf("%d hosts, %d providers, %d orphan capabilities", len(hs), rps, orphanCaps)
		}
	})
}
