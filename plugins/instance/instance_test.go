package instance_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/scheduler"
	"github.com/leasehold/leasehold/pkg/compute/nova"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/instance"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

var owner = leases.Caller{UserID: "u1", ProjectID: "p1"}

// env is a lease service with the host and instance plugins over real
// registered hosts (standalone compute driver, built-in Placement).
type env struct {
	d      *db.DB
	hosts  *hosts.Service
	svc    *leases.Service
	events *events.Manager
	clock  *leasestest.Clock
}

func newEnv(t testing.TB, d *db.DB, nHosts int, host func(i int) map[string]any) *env {
	return newEnvWith(t, d, nHosts, host, instance.Config{})
}

// flavors is a fake flavor lookup: f1 only.
type flavors struct{}

func (flavors) GetFlavor(_ context.Context, id, _ string) (instance.Flavor, error) {
	if id == "f1" {
		return instance.Flavor{ID: "f1", Name: "m1.small", VCPUs: 2, RAM: 4096, Disk: 10, Ephemeral: 5,
			ExtraSpecs: map[string]string{"hw:cpu_policy": "shared"}}, nil
	}
	if specs, ok := specFlavors[id]; ok {
		return instance.Flavor{ID: id, Name: id, VCPUs: 2, RAM: 1024, Disk: 10, ExtraSpecs: specs}, nil
	}
	return instance.Flavor{}, errs.NotFoundf("Flavor %s could not be found.", id)
}

// specFlavors are flavors of 2 vCPUs, 1 GiB and 10 GB with extra specs
// (flavor_spec_test.go).
var specFlavors = map[string]map[string]string{
	"pinned":    {"hw:cpu_policy": "dedicated"},
	"gpu":       {"resources:CUSTOM_GPU": "1"},
	"fpga":      {"resources:CUSTOM_FPGA": "1"},
	"avx":       {"trait:CUSTOM_AVX": "required"},
	"no-avx":    {"trait:CUSTOM_AVX": "forbidden"},
	"numa":      {"hw:numa_nodes": "2"},
	"granular":  {"resources1:CUSTOM_GPU": "1"},
	"bigcustom": {"resources:CUSTOM_GPU": "3"},
}

func newEnvWith(t testing.TB, d *db.DB, nHosts int, host func(i int) map[string]any, cfg instance.Config) *env {
	t.Helper()
	return newEnvHost(t, d, nHosts, host, cfg, hostplugin.Config{})
}

// newEnvHost is newEnvWith with the host plugin's configuration hc;
// with an ownership hook, its reclaims shorten instance reservations
// (the server's wiring).
func newEnvHost(t testing.TB, d *db.DB, nHosts int, host func(i int) map[string]any, cfg instance.Config, hc hostplugin.Config) *env {
	t.Helper()
	clock := leasestest.NewClock(t0)
	hs := hosts.New(d, standalone.New(nil))
	hs.SetClock(clock.Now)
	ctx := context.Background()
	for i := 1; i <= nHosts; i++ {
		body := map[string]any{"name": fmt.Sprintf("compute-%d", i), "vcpus": "8", "memory_mb": "16384", "local_gb": "800"}
		if host != nil {
			for k, v := range host(i) {
				body[k] = v
			}
		}
		if _, err := hs.Create(ctx, body); err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
	}
	cfg.CheckHosts = hosts.ReservableTx
	inst := instance.New(hs, cfg)
	fl := instance.NewFlavor(inst, flavors{})
	hc.CheckHosts = hosts.ReservableTx
	if hc.Ownership != nil {
		hc.Shorteners = []plugins.Plugin{inst, fl}
	}
	hp := hostplugin.New(hs, d.DB, hc, clock.Now)
	if hc.Ownership != nil {
		inst.SetReclaimer(hp)
	}
	reg, err := plugins.NewRegistry(hp, inst, fl)
	if err != nil {
		t.Fatal(err)
	}
	svc := leases.New(d, reg, leases.Config{}, clock.Now, nil)
	return &env{d: d, hosts: hs, svc: svc, events: events.New(d, svc, events.Config{}, clock.Now), clock: clock}
}

func instanceRes(amount int, vcpus, mem, disk int, affinity any) map[string]any {
	return map[string]any{"resource_type": instance.ResourceType, "amount": amount, "vcpus": vcpus,
		"memory_mb": mem, "disk_gb": disk, "affinity": affinity, "resource_properties": ""}
}

func (e *env) create(t testing.TB, name, start, end string, res ...map[string]any) (*leases.View, error) {
	t.Helper()
	return e.svc.Create(context.Background(), owner, leasestest.Request(name, start, end, res...))
}

func (e *env) mustCreate(t testing.TB, name, start, end string, res ...map[string]any) *leases.View {
	t.Helper()
	v, err := e.create(t, name, start, end, res...)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return v
}

// slots returns a reservation's slots per host name.
func (e *env) slots(t testing.TB, resID string) map[string]int {
	t.Helper()
	var rows []struct {
		Name  string
		Slots int
	}
	if err := e.d.Raw(`SELECT h.hypervisor_hostname AS name, a.slots FROM instance_allocations a
		JOIN computehosts h ON CAST(h.id AS CHAR(36)) = a.compute_host_id WHERE a.reservation_id = ?`, resID).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Name] = r.Slots
	}
	return out
}

func kindOf(err error) errs.Kind {
	if e := errs.As(err); e != nil {
		return e.Kind
	}
	return -1
}

func each(t *testing.T, fn func(t *testing.T, d *db.DB)) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) { fn(t, dbtest.OpenDialect(t, dialect)) })
	}
}

func TestCreateShowAffinity(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 3, nil)
		for _, tc := range []struct {
			affinity any
			want     any
			hosts    int
		}{
			{"None", nil, 0}, {nil, nil, 0}, {"True", true, 1}, {"False", false, 3}, {true, true, 1}, {"no", false, 3},
		} {
			v := e.mustCreate(t, "l", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(3, 1, 1024, 10, tc.affinity))
			r := v.Reservations[0]
			id := r["id"].(string)
			want := map[string]any{"amount": 3, "vcpus": int64(1), "memory_mb": int64(1024), "disk_gb": int64(10), "affinity": tc.want,
				"resource_properties": "", "flavor_id": id, "server_group_id": nil, "aggregate_id": nil}
			for k, w := range want {
				if !cmp.Equal(r[k], w) {
					t.Errorf("affinity %v: %s = %#v, want %#v", tc.affinity, k, r[k], w)
				}
			}
			got, err := e.svc.Get(context.Background(), owner, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if g := got.Reservations[0]; g["flavor_id"] != id || !cmp.Equal(g["affinity"], tc.want) || fmt.Sprint(g["amount"]) != "3" {
				t.Errorf("show: %v", g)
			}
			s := e.slots(t, id)
			total := 0
			for _, n := range s {
				total += n
			}
			if total != 3 || (tc.hosts != 0 && len(s) != tc.hosts) {
				t.Errorf("affinity %v: slots %v", tc.affinity, s)
			}
			if err := e.svc.Delete(context.Background(), owner, v.ID); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestErrors(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		for _, tc := range []struct {
			name string
			res  map[string]any
			kind errs.Kind
			msg  string
		}{
			{"too many", instanceRes(9, 4, 4096, 10, nil), errs.NotEnoughResources, "9 slots of 4 VCPU/4 GiB/10 GB disk needed, 4 free in the window on 2 matching hosts"},
			{"anti-affinity beyond hosts", instanceRes(3, 1, 1024, 0, "False"), errs.NotEnoughResources, "on distinct hosts (anti-affinity), 2 of the 2 matching hosts"},
			{"affinity beyond one host", instanceRes(3, 4, 1024, 0, "True"), errs.NotEnoughResources, "on one host (affinity), at most 2 free on one host"},
			{"blank vcpus", instanceRes(1, 1, 1, 1, nil), errs.BadRequest, "Malformed parameter vcpus"},
			{"zero memory", instanceRes(1, 1, 0, 1, nil), errs.BadRequest, "Malformed parameter memory_mb"},
			{"zero amount", instanceRes(0, 1, 1, 1, nil), errs.BadRequest, "Malformed parameter amount"},
			{"bad affinity", instanceRes(1, 1, 1, 1, ""), errs.BadRequest, "Malformed parameter affinity"},
			{"missing amount", map[string]any{"resource_type": instance.ResourceType, "vcpus": 1, "memory_mb": 1, "disk_gb": 1, "affinity": nil, "resource_properties": ""}, errs.BadRequest, "Missing parameter amount"},
			{"bad properties", map[string]any{"resource_type": instance.ResourceType, "amount": 1, "vcpus": 1, "memory_mb": 1, "disk_gb": 1, "affinity": nil, "resource_properties": "[\"=\""}, errs.BadRequest, ""},
		} {
			if tc.name == "blank vcpus" {
				tc.res["vcpus"] = ""
			}
			_, err := e.create(t, tc.name, "2030-01-02 00:00", "2030-01-03 00:00", tc.res)
			if kindOf(err) != tc.kind || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("%s: %v (%s), want %s with %q", tc.name, err, kindOf(err), tc.kind, tc.msg)
			}
		}
		var n int64
		d.Raw("SELECT COUNT(*) FROM instance_reservations").Scan(&n)
		if n != 0 {
			t.Errorf("%d instance reservations left by refusals", n)
		}
	})
}

// TestCapacityOverTime: slots of overlapping leases add up, back-to-back
// ones do not, and a whole-host lease keeps instances off its host and
// the other way round.
func TestCapacityOverTime(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		e.mustCreate(t, "a", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(2, 8, 1024, 0, nil))
		if _, err := e.create(t, "b", "2030-01-02 12:00", "2030-01-04 00:00", instanceRes(1, 1, 1024, 0, nil)); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("overlapping: %v", err)
		}
		e.mustCreate(t, "c", "2030-01-03 00:00", "2030-01-04 00:00", instanceRes(2, 8, 1024, 0, nil))
		if _, err := e.create(t, "h", "2030-01-03 12:00", "2030-01-03 13:00", leasestest.HostReservation(1, 1, "", "")); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("host lease over instance slots: %v", err)
		}
		e.mustCreate(t, "h2", "2030-01-05 00:00", "2030-01-06 00:00", leasestest.HostReservation(1, 1, "", ""))
		v := e.mustCreate(t, "d", "2030-01-05 00:00", "2030-01-06 00:00", instanceRes(3, 2, 1024, 0, nil))
		s := e.slots(t, v.Reservations[0]["id"].(string))
		if len(s) != 1 {
			t.Fatalf("instances beside a host lease on %v", s)
		}
	})
}

// TestLifecycle: start sets the Placement inventory of the reservation
// class on the reserved hosts' child providers, candidates for the class
// are those hosts, updates change it, end removes it and the class.
func TestLifecycle(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 3, nil)
		ctx := context.Background()
		v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-02 00:00", instanceRes(3, 4, 4096, 100, nil))
		resID := v.Reservations[0]["id"].(string)
		class := placement.ReservationClass(resID)
		if !strings.HasPrefix(class, "CUSTOM_RESERVATION_") || strings.Contains(class, "-") || class != strings.ToUpper(class) {
			t.Fatalf("class %s", class)
		}
		ps := placement.NewService(d, placement.Config{})
		if _, err := ps.GetResourceClass(ctx, class); err != nil {
			t.Fatalf("class after create: %v", err)
		}
		// Pending: amount and sizes may change.
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 4, "vcpus": 2})); err != nil {
			t.Fatal(err)
		}
		if s := e.slots(t, resID); sum(s) != 4 {
			t.Fatalf("after update: %v", s)
		}
		e.clock.Set(time.Date(2030, 1, 1, 11, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := e.svc.Get(ctx, owner, v.ID)
		if got.Status != "ACTIVE" {
			t.Fatalf("lease %s", got.Status)
		}
		checkInventory(t, e, resID)
		// Active: only amount, only upwards.
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": resID, "vcpus": 1})); kindOf(err) != errs.Conflict {
			t.Errorf("active size change: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 2})); kindOf(err) != errs.Conflict {
			t.Errorf("active amount down: %v", err)
		}
		before := e.slots(t, resID)
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 6})); err != nil {
			t.Fatal(err)
		}
		after := e.slots(t, resID)
		for h, n := range before {
			if after[h] < n {
				t.Errorf("active update moved slots: %v → %v", before, after)
			}
		}
		if sum(after) != 6 {
			t.Errorf("active amount 6: %v", after)
		}
		checkInventory(t, e, resID)
		// Candidates for the class are the reserved hosts' children.
		cands := candidates(t, ps, class)
		var want []string
		for h := range after {
			want = append(want, "blazar_"+h)
		}
		if !cmp.Equal(sorted(cands), sorted(want)) {
			t.Errorf("candidates %v, want %v", cands, want)
		}
		e.clock.Set(time.Date(2030, 1, 2, 0, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var n int64
		d.Raw("SELECT COUNT(*) FROM inventories i JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ?", class).Scan(&n)
		if n != 0 {
			t.Errorf("%d inventories of %s after the end", n, class)
		}
		if _, err := ps.GetResourceClass(ctx, class); kindOf(err) != errs.NotFound {
			t.Errorf("class after end: %v", err)
		}
		if s := e.slots(t, resID); len(s) != 0 {
			t.Errorf("slots after end: %v", s)
		}
	})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// checkInventory compares the class inventory on the child providers
// with the slots.
func checkInventory(t *testing.T, e *env, resID string) {
	t.Helper()
	var rows []struct {
		Name              string
		Total, MaxUnit    int64
		AllocationRatio   float64
		Reserved, MinUnit int64
		StepSize          int64
	}
	e.d.Raw(`SELECT p.name, i.total, i.max_unit, i.allocation_ratio, i.reserved, i.min_unit, i.step_size FROM inventories i
		JOIN resource_providers p ON p.id = i.resource_provider_id JOIN resource_classes c ON c.id = i.resource_class_id
		WHERE c.name = ?`, placement.ReservationClass(resID)).Scan(&rows)
	got := map[string]int{}
	for _, r := range rows {
		if r.MaxUnit != 1 || r.AllocationRatio != 1 || r.Reserved != 0 || r.MinUnit != 1 || r.StepSize != 1 {
			t.Errorf("inventory on %s: %+v", r.Name, r)
		}
		got[strings.TrimPrefix(r.Name, "blazar_")] = int(r.Total)
	}
	if want := e.slots(t, resID); !cmp.Equal(got, want) {
		t.Errorf("inventory %v, slots %v", got, want)
	}
}

// candidates lists the provider names of the allocation candidates for
// one unit of class.
func candidates(t *testing.T, ps *placement.Service, class string) []string {
	t.Helper()
	var names []string
	err := ps.DB().Raw(`SELECT p.name FROM inventories i JOIN resource_providers p ON p.id = i.resource_provider_id
		JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ? AND i.total - i.reserved >= 1`, class).Scan(&names).Error
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestFlavorInstance(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		ctx := context.Background()
		res := map[string]any{"resource_type": instance.FlavorResourceType, "flavor_id": "f1", "amount": 3, "affinity": "None"}
		v := e.mustCreate(t, "f", "2030-01-02 00:00", "2030-01-03 00:00", res)
		r := v.Reservations[0]
		id := r["id"].(string)
		if r["vcpus"] != int64(2) || r["memory_mb"] != int64(4096) || r["disk_gb"] != int64(15) || r["flavor_id"] != id || r["affinity"] != nil ||
			!strings.Contains(fmt.Sprint(r["resource_properties"]), `"name":"m1.small"`) || !strings.Contains(fmt.Sprint(r["resource_properties"]), "hw:cpu_policy") {
			t.Errorf("flavor:instance reservation %v", r)
		}
		got, _ := e.svc.Get(ctx, owner, v.ID)
		if g := got.Reservations[0]; g["resource_properties"] != r["resource_properties"] || g["disk_gb"] != int64(15) {
			t.Errorf("show: %v", g)
		}
		if sum(e.slots(t, id)) != 3 {
			t.Errorf("slots %v", e.slots(t, id))
		}
		// Lifted: affinity and amount updates work; the size cannot change.
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": id, "amount": 4, "affinity": "True"})); err != nil {
			t.Errorf("amount/affinity update: %v", err)
		}
		if s := e.slots(t, id); sum(s) != 4 || len(s) != 1 {
			t.Errorf("after update: %v", s)
		}
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": id, "vcpus": 1})); kindOf(err) != errs.Conflict {
			t.Errorf("vcpus update: %v", err)
		}
		res["flavor_id"] = "nope"
		if _, err := e.create(t, "g", "2030-01-02 00:00", "2030-01-03 00:00", res); kindOf(err) != errs.NotFound {
			t.Errorf("unknown flavor: %v", err)
		}
		delete(res, "flavor_id")
		if _, err := e.create(t, "g", "2030-01-02 00:00", "2030-01-03 00:00", res); kindOf(err) != errs.BadRequest || !strings.Contains(err.Error(), "Missing parameter flavor_id") {
			t.Errorf("no flavor: %v", err)
		}
	})
}

// flavorCalls records the flavor driver calls (the outbox worker runs
// the actions of different keys at once).
type flavorCalls struct {
	mu    sync.Mutex
	calls []string
}

func (f *flavorCalls) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *flavorCalls) CreateReservationFlavor(_ context.Context, s instance.FlavorSpec) error {
	keys := make([]string, 0, len(s.ExtraSpecs))
	for k, v := range s.ExtraSpecs {
		keys = append(keys, k+"="+v)
	}
	f.record(fmt.Sprintf("create %s %s %d/%d/%d %v", s.ID, s.Name, s.VCPUs, s.MemoryMB, s.DiskGB, sorted(keys)))
	return nil
}

func (f *flavorCalls) AddFlavorAccess(_ context.Context, flavor, project string) error {
	f.record("access " + flavor + " " + project)
	return nil
}

func (f *flavorCalls) DeleteReservationFlavor(_ context.Context, flavor string) error {
	f.record("delete " + flavor)
	return nil
}

// TestFlavorActions: with a flavor driver, the private flavor is created
// with the reservation, the project gets it at start, and it is deleted
// at the end, through the outbox.
func TestFlavorActions(t *testing.T) {
	d := dbtest.Open(t)
	e := newEnvWith(t, d, 1, nil, instance.Config{Flavors: true})
	rec := &flavorCalls{}
	w := outbox.NewWorker(d, instance.OutboxHandlers(rec, d.DB), outbox.Config{}, e.clock.Now)
	ctx := context.Background()
	v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-01 12:00", instanceRes(1, 2, 2048, 20, nil))
	id := v.Reservations[0]["id"].(string)
	// A pending size change replaces the flavor (Nova's are immutable).
	if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": id, "vcpus": 4})); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{t0.Add(time.Hour + time.Second), t0.Add(2*time.Hour + time.Second)} {
		if _, err := w.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(at)
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	class := placement.ReservationClass(id)
	want := []string{
		fmt.Sprintf("create %s reservation:%s 2/2048/20 [aggregate_instance_extra_specs:reservation=%s resources:%s=1]", id, id, id, class),
		"delete " + id,
		fmt.Sprintf("create %s reservation:%s 4/2048/20 [aggregate_instance_extra_specs:reservation=%s resources:%s=1]", id, id, id, class),
		"access " + id + " p1",
		"delete " + id,
	}
	if diff := cmp.Diff(want, rec.calls); diff != "" {
		t.Errorf("flavor calls (-want +got):\n%s", diff)
	}
}

// TestNonReservableHost: a host made non-reservable keeps its instance
// slots and takes no new ones, and a host holding slots cannot be
// deleted.
func TestNonReservableHost(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		ctx := context.Background()
		v := e.mustCreate(t, "a", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(1, 1, 1024, 0, "False"))
		id := v.Reservations[0]["id"].(string)
		held := e.slots(t, id)
		var onHost string
		for h := range held {
			onHost = h
		}
		hostID := map[string]string{"compute-1": "1", "compute-2": "2"}[onHost]
		if err := e.hosts.Delete(ctx, hostID); kindOf(err) != errs.Conflict {
			t.Errorf("delete of a host with slots: %v", err)
		}
		if _, err := e.hosts.Update(ctx, hostID, map[string]any{"reservable": "false"}); err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(e.slots(t, id), held) {
			t.Errorf("slots after the host was made non-reservable: %v, want %v", e.slots(t, id), held)
		}
		w := e.mustCreate(t, "b", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(2, 1, 1024, 0, nil))
		if s := e.slots(t, w.Reservations[0]["id"].(string)); s[onHost] != 0 || sum(s) != 2 {
			t.Errorf("new slots %v on non-reservable %s", s, onHost)
		}
	})
}

// TestResourceProperties: both query languages pick the matching hosts.
func TestResourceProperties(t *testing.T) {
	d := dbtest.Open(t)
	e := newEnv(t, d, 3, func(i int) map[string]any { return map[string]any{"rack": fmt.Sprint("r", i%2)} })
	for _, q := range []string{`["==", "$rack", "r1"]`, `{"rack": "r1"}`} {
		res := instanceRes(4, 4, 1024, 0, nil)
		res["resource_properties"] = q
		v := e.mustCreate(t, "p", "2030-01-02 00:00", "2030-01-03 00:00", res)
		s := e.slots(t, v.Reservations[0]["id"].(string))
		if s["compute-2"] != 0 || sum(s) != 4 || v.Reservations[0]["resource_properties"] != q {
			t.Errorf("%s: slots %v (%v)", q, s, v.Reservations[0]["resource_properties"])
		}
		if _, err := e.create(t, "p", "2030-01-02 00:00", "2030-01-03 00:00", res); kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), "on 2 matching hosts") {
			t.Errorf("%s: a second lease beyond the matching hosts: %v", q, err)
		}
		if err := e.svc.Delete(context.Background(), owner, v.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpdateDates: moving a pending lease places its slots again over the
// new window; an active one keeps its slots and may grow only while its
// hosts still hold them; a pure shortening keeps everything.
func TestUpdateDates(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 1, nil)
		ctx := context.Background()
		a := e.mustCreate(t, "a", "2030-01-01 11:00", "2030-01-01 13:00", instanceRes(2, 4, 1024, 0, nil))
		b := e.mustCreate(t, "b", "2030-01-01 14:00", "2030-01-01 16:00", instanceRes(2, 4, 1024, 0, nil))
		// b cannot move onto a's window while a holds the host...
		if _, err := e.svc.Update(ctx, owner, b.ID, leases.UpdateRequest{StartDate: leasestest.Str("2030-01-01 12:00")}); kindOf(err) != errs.NotEnoughResources {
			t.Errorf("pending move onto a full host: %v", err)
		}
		e.clock.Set(time.Date(2030, 1, 1, 11, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		// ...and active a cannot grow into b's.
		_, err := e.svc.Update(ctx, owner, a.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 15:00")})
		if kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), "no longer fit") {
			t.Errorf("active extension into another lease: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, a.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 14:00")}); err != nil {
			t.Errorf("active extension up to the next lease: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, a.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 12:30")}); err != nil {
			t.Errorf("shortening: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, b.ID, leases.UpdateRequest{StartDate: leasestest.Str("2030-01-01 12:30")}); err != nil {
			t.Errorf("pending move next to the shortened lease: %v", err)
		}
		if s := e.slots(t, b.Reservations[0]["id"].(string)); sum(s) != 2 {
			t.Errorf("b after the move: %v", s)
		}
	})
}

// TestListingMatchesShow: the lease listing (DescribeListed) shows each
// instance reservation as show (Describe) does.
func TestListingMatchesShow(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		ctx := context.Background()
		e.mustCreate(t, "a", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(2, 1, 1024, 10, "True"))
		e.mustCreate(t, "b", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(1, 1, 1024, 10, nil),
			map[string]any{"resource_type": instance.FlavorResourceType, "flavor_id": "f1", "amount": 1, "affinity": nil})
		for _, c := range []leases.Caller{owner, {Admin: true}} {
			ls, err := e.svc.List(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) != 2 {
				t.Fatalf("%d leases listed", len(ls))
			}
			for _, l := range ls {
				got, err := e.svc.Get(ctx, owner, l.ID)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(got.Reservations, l.Reservations); diff != "" {
					t.Errorf("lease %s: listing vs show (-show +list):\n%s", l.Name, diff)
				}
			}
		}
	})
}

// TestFailureDomains: with a location prefix in the cluster tags,
// anti-affinity spreads over the hosts' racks first.
func TestFailureDomains(t *testing.T) {
	d := dbtest.Open(t)
	rules := allocator.ParseClusterTags([]string{allocator.TagLocationPrefix + "rack"})
	racks := map[int]string{1: "r1", 2: "r1", 3: "r2"}
	e := newEnvWith(t, d, 3, func(i int) map[string]any { return map[string]any{"rack": racks[i]} }, instance.Config{Rules: &rules})
	v := e.mustCreate(t, "a", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(2, 1, 1024, 0, "False"))
	s := e.slots(t, v.Reservations[0]["id"].(string))
	if s["compute-3"] != 1 || sum(s) != 2 {
		t.Errorf("anti-affinity over racks: %v", s)
	}
}

// TestSchedulerFilter: Leasehold's Nova filter passes a boot with an
// active instance reservation's flavor to exactly its hosts, and only for
// the lease's project.
func TestSchedulerFilter(t *testing.T) {
	d := dbtest.Open(t)
	e := newEnv(t, d, 3, nil)
	ctx := context.Background()
	v := e.mustCreate(t, "a", "2030-01-01 11:00", "2030-01-02 00:00", instanceRes(2, 1, 1024, 0, "True"))
	id := v.Reservations[0]["id"].(string)
	e.clock.Set(time.Date(2030, 1, 1, 11, 0, 1, 0, time.UTC))
	if _, err := e.events.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	var reserved string
	for h := range e.slots(t, id) {
		reserved = h
	}
	f := scheduler.New(d, e.hosts, e.clock.Now)
	for _, tc := range []struct {
		project string
		want    []string
	}{{"p1", []string{reserved}}, {"other", nil}} {
		req, err := scheduler.ParseRequest(map[string]any{"project_id": tc.project,
			"flavor": map[string]any{"extra_specs": map[string]any{"resources:" + placement.ReservationClass(id): "1"}},
			"hosts":  []any{"compute-1", "compute-2", "compute-3"}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Filter(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(res.Hosts, tc.want, cmpopts.EquateEmpty()) {
			t.Errorf("project %s: hosts %v, want %v (rejected %v)", tc.project, res.Hosts, tc.want, res.Rejected)
		}
	}
}

// TestClosedHostExtension: an active reservation on a host since made
// non-reservable may grow its window while the host still holds its
// slots, not into a time the host is full, and gets no new slots there.
func TestClosedHostExtension(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d, 2, nil)
		ctx := context.Background()
		a := e.mustCreate(t, "a", "2030-01-01 11:00", "2030-01-01 13:00", instanceRes(2, 4, 1024, 0, "True"))
		aid := a.Reservations[0]["id"].(string)
		var host string
		for h := range e.slots(t, aid) {
			host = h
		}
		hostID := strings.TrimPrefix(host, "compute-")
		// b fills the same host later.
		bres := instanceRes(2, 4, 1024, 0, "True")
		bres["resource_properties"] = `["==", "$hypervisor_hostname", "` + host + `"]`
		b := e.mustCreate(t, "b", "2030-01-01 14:00", "2030-01-01 16:00", bres)
		if s := e.slots(t, b.Reservations[0]["id"].(string)); s[host] != 2 {
			t.Fatalf("b on %v, want %s", s, host)
		}
		e.clock.Set(time.Date(2030, 1, 1, 11, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.hosts.Update(ctx, hostID, map[string]any{"reservable": "false"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Update(ctx, owner, a.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 15:00")}); kindOf(err) != errs.NotEnoughResources {
			t.Errorf("extension into a full closed host: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, a.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 14:00")}); err != nil {
			t.Errorf("extension on a closed host with room: %v", err)
		}
		if _, err := e.svc.Update(ctx, owner, a.ID, leasestest.Update(map[string]any{"id": aid, "amount": 3})); kindOf(err) != errs.NotEnoughResources {
			t.Errorf("a new slot on a closed host (affinity): %v", err)
		}
		if s := e.slots(t, aid); s[host] != 2 || len(s) != 1 {
			t.Errorf("a's slots %v", s)
		}
	})
}

// TestCapabilityInUse: a capability an instance reservation's
// resource_properties names cannot change on a host holding its slots.
func TestCapabilityInUse(t *testing.T) {
	d := dbtest.Open(t)
	e := newEnv(t, d, 1, func(int) map[string]any { return map[string]any{"rack": "r1", "gpu": "no"} })
	res := instanceRes(1, 1, 1024, 0, nil)
	res["resource_properties"] = `["==", "$rack", "r1"]`
	e.mustCreate(t, "a", "2030-01-02 00:00", "2030-01-03 00:00", res)
	ctx := context.Background()
	if _, err := e.hosts.Update(ctx, "1", map[string]any{"rack": "r2"}); kindOf(err) != errs.Conflict {
		t.Errorf("changing a capability in use: %v", err)
	}
	if _, err := e.hosts.Update(ctx, "1", map[string]any{"gpu": "yes"}); err != nil {
		t.Errorf("changing another capability: %v", err)
	}
}

// groupCalls records the flavor and server group driver calls; groups
// are numbered g1, g2, … and looked up by name, as Nova's would be.
type groupCalls struct {
	flavorCalls
	groups map[string]string // name → id
	n      int
}

func (g *groupCalls) CreateServerGroup(_ context.Context, name, policy string) (string, error) {
	g.record("group " + name + " " + policy)
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.groups[name]; ok {
		return id, nil
	}
	g.n++
	g.groups[name] = fmt.Sprint("g", g.n)
	return g.groups[name], nil
}

func (g *groupCalls) DeleteServerGroups(_ context.Context, name string) error {
	g.record("ungroup " + name)
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.groups, name)
	return nil
}

// TestServerGroupActions: a reservation with an affinity gets the server
// group reservation:<id> (affinity or anti-affinity) through the outbox,
// its id shown as server_group_id once made; a pending change of affinity
// replaces the group, and the end deletes it. A null affinity has no
// group, nor does anything without a compute service.
func TestServerGroupActions(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnvWith(t, d, 2, nil, instance.Config{Flavors: true})
		rec := &groupCalls{groups: map[string]string{}}
		w := outbox.NewWorker(d, instance.OutboxHandlers(rec, d.DB), outbox.Config{}, e.clock.Now)
		ctx := context.Background()
		groupOf := func(leaseID string) any {
			t.Helper()
			v, err := e.svc.Get(ctx, owner, leaseID)
			if err != nil {
				t.Fatal(err)
			}
			return v.Reservations[0]["server_group_id"]
		}
		run := func() {
			t.Helper()
			if _, err := w.RunDue(ctx); err != nil {
				t.Fatal(err)
			}
		}
		v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-01 12:00", instanceRes(2, 1, 1024, 10, true))
		id := v.Reservations[0]["id"].(string)
		if g := groupOf(v.ID); g != nil {
			t.Errorf("server_group_id before the group is made: %v, want null", g)
		}
		run()
		if g := groupOf(v.ID); g != "g1" {
			t.Errorf("server_group_id %v, want g1", g)
		}
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": id, "affinity": false})); err != nil {
			t.Fatal(err)
		}
		if g := groupOf(v.ID); g != nil {
			t.Errorf("server_group_id after an affinity change: %v, want null until the new group is made", g)
		}
		run()
		if g := groupOf(v.ID); g != "g2" {
			t.Errorf("server_group_id %v, want g2", g)
		}
		none := e.mustCreate(t, "n", "2030-01-01 11:00", "2030-01-01 12:00", instanceRes(1, 1, 1024, 10, nil))
		for _, at := range []time.Time{t0.Add(time.Hour + time.Second), t0.Add(2*time.Hour + time.Second)} {
			run()
			e.clock.Set(at)
			if _, err := e.events.RunDue(ctx); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if g := groupOf(none.ID); g != nil {
			t.Errorf("server_group_id of a null affinity: %v, want null", g)
		}
		name := "reservation:" + id
		var groupCalls []string
		for _, c := range rec.calls {
			if strings.HasPrefix(c, "group ") || strings.HasPrefix(c, "ungroup ") {
				groupCalls = append(groupCalls, c)
			}
		}
		want := []string{"group " + name + " affinity", "ungroup " + name, "group " + name + " anti-affinity", "ungroup " + name}
		if diff := cmp.Diff(want, groupCalls); diff != "" {
			t.Errorf("server group calls (-want +got):\n%s", diff)
		}
		if len(rec.groups) != 0 {
			t.Errorf("groups left after the end: %v", rec.groups)
		}
	})
}

// The nova driver is what the composition root hands the plugin in nova
// mode: a flavor lookup (flavor:instance registers) and a server group
// driver (the group actions have a handler).
var (
	_ instance.FlavorLookup      = (*nova.Driver)(nil)
	_ instance.ServerGroupDriver = (*nova.Driver)(nil)
	_ instance.FlavorDriver      = (*nova.Driver)(nil)
)

// TestServerGroupStandalone: without a compute service nothing is
// recorded and server_group_id stays null whatever the affinity.
func TestServerGroupStandalone(t *testing.T) {
	d := dbtest.Open(t)
	e := newEnv(t, d, 2, nil)
	v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-01 12:00", instanceRes(2, 1, 1024, 10, false))
	var n int64
	if err := d.Raw("SELECT COUNT(*) FROM outbox WHERE lease_id = ?", v.ID).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 || v.Reservations[0]["server_group_id"] != nil {
		t.Errorf("standalone: %d outbox actions, server_group_id %v; want none and null", n, v.Reservations[0]["server_group_id"])
	}
}

// TestReleaseAfterServers: at the end, a server still holding a slot in
// Placement keeps the inventory (and so the class); the release action
// after the flavor's deletion fails while the allocation is there, and
// removes both once it is gone.
func TestReleaseAfterServers(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnvWith(t, d, 1, nil, instance.Config{Flavors: true})
		rec := &flavorCalls{}
		w := outbox.NewWorker(d, instance.OutboxHandlers(rec, d.DB), outbox.Config{Backoff: func(int) time.Duration { return time.Minute }}, e.clock.Now)
		ps := placement.NewService(d, placement.Config{})
		ctx := context.Background()
		v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-01 12:00", instanceRes(2, 1, 1024, 10, nil))
		id := v.Reservations[0]["id"].(string)
		class := placement.ReservationClass(id)
		e.clock.Set(t0.Add(time.Hour + time.Second))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var child string
		if err := d.Raw("SELECT uuid FROM resource_providers WHERE name = ?", "blazar_compute-1").Scan(&child).Error; err != nil || child == "" {
			t.Fatalf("child provider: %q %v", child, err)
		}
		server := "6e3b3a47-4a8e-4c1c-9a55-1b2c3d4e5f60"
		if err := ps.WriteAllocations(ctx, []placement.ConsumerWrite{{UUID: server, ProjectID: "p1", UserID: "u1",
			Allocations: map[string]map[string]int64{child: {class: 1}}}}, false); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(2*time.Hour + time.Second))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := w.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		if got := candidates(t, ps, class); len(got) != 0 {
			t.Errorf("candidates for %s after the end: %v, want none", class, got)
		}
		var kept int64
		d.Raw("SELECT COUNT(*) FROM inventories i JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ?", class).Scan(&kept)
		if kept != 1 {
			t.Fatalf("inventories of %s while a server holds a unit: %d, want 1", class, kept)
		}
		if err := ps.DeleteAllocations(ctx, server); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(2*time.Hour + 2*time.Minute))
		if _, err := w.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var left int64
		d.Raw("SELECT (SELECT COUNT(*) FROM inventories i JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ?) + (SELECT COUNT(*) FROM resource_classes WHERE name = ?)", class, class).Scan(&left)
		if left != 0 {
			t.Errorf("inventory or class %s left after the release: %d rows", class, left)
		}
	})
}
