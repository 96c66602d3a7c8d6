package db_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/plugins/instance"
)

// The upgrade tests build, for every earlier schema version (each prefix
// of the migration list), the database an older binary left behind, fill
// it with rows written by raw SQL as that binary's code would have, then
// run the current Migrate and read the rows back through the current
// services. Each fixture names the migration that created its tables and
// is written only when the starting schema has them.

// Fixed ids and values of the fixtures.
const (
	upComputeUUID = "8e3c2b58-0f5b-4b2a-9a55-1d3a0c6e1a01"
	upResvUUID    = "8e3c2b58-0f5b-4b2a-9a55-1d3a0c6e1a02"
	upConsumer    = "5d1f6a3e-7c1b-4e59-8d1e-2b9f3c4a5e01"
	upAggregate   = "b0a3f3e4-1c1d-4c5e-9f1a-6e7d8c9b0a01"
	upProject     = "c2a5d7e9f1b34c6d8e0a2b4c6d8e0f1a"
	upUser        = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
	upLease       = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e01"
	upKindsLease  = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e07"
	upTagsLease   = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e08"
	upListedLease = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e0a"
	upReservation = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e02"
	upHostResv    = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e03"
	upHostAlloc   = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e04"
	upProperty    = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e05"
	upCapability  = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e06"
	upCustomClass = "CUSTOM_RESERVATION_0F6E7D8C_9B0A_4C1D_8E2F_3A4B5C6D7E02"
	upResProps    = `["==", "$gpu", "a100"]`

	upInstReservation = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e07"
	upInstResv        = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e08"
	upInstAlloc       = "0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e09"
)

var (
	// Millisecond stamps: migration 0007 widens the lease tables' MySQL
	// columns from DATETIME(3) to DATETIME(6), so what an old binary
	// could store must come back unchanged.
	upCreated = time.Date(2026, 1, 2, 3, 4, 5, 123_000_000, time.UTC)
	upUpdated = time.Date(2026, 1, 3, 4, 5, 6, 456_000_000, time.UTC)
	upStart   = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	upEnd     = time.Date(2099, 1, 2, 0, 0, 0, 0, time.UTC)
)

type upgradeFixture struct {
	name  string
	since string // the migration that created the fixture's tables
	// write stores the fixture; have tells which migrations the starting
	// schema has (a table newer than the schema is not written).
	write func(t *testing.T, d *db.DB, have map[string]bool)
	check func(t *testing.T, d *db.DB)
}

func stringOf(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

func mustExec(t *testing.T, d *db.DB, sql string, args ...any) {
	t.Helper()
	if err := d.Exec(sql, args...).Error; err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func classID(t *testing.T, d *db.DB, name string) int64 {
	t.Helper()
	var id int64
	if err := d.Raw("SELECT id FROM resource_classes WHERE name = ?", name).Scan(&id).Error; err != nil || id == 0 {
		t.Fatalf("resource class %s: id %d, %v", name, id, err)
	}
	return id
}

var upgradeFixtures = []upgradeFixture{
	{
		name: "placement", since: "0001_placement",
		write: func(t *testing.T, d *db.DB, have map[string]bool) {
			vcpu, mem := classID(t, d, "VCPU"), classID(t, d, "MEMORY_MB")
			mustExec(t, d, `INSERT INTO resource_providers (id, uuid, name, generation, parent_provider_id, root_provider_id, created_at, updated_at)
 VALUES (1, ?, 'compute-1', 7, NULL, 1, ?, ?), (2, ?, 'blazar_compute-1', 2, 1, 1, ?, ?)`,
				upComputeUUID, upCreated, upUpdated, upResvUUID, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO resource_classes (id, name, created_at, updated_at) VALUES (10000, ?, ?, ?)`, upCustomClass, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio, created_at, updated_at)
 VALUES (1, ?, 16, 1, 1, 16, 1, 4.0, ?, ?), (1, ?, 65536, 512, 1, 65536, 256, 1.5, ?, ?), (2, 10000, 2, 0, 1, 1, 1, 1.0, ?, ?)`,
				vcpu, upCreated, upUpdated, mem, upCreated, upUpdated, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO consumers (uuid, project_id, user_id, generation, created_at, updated_at) VALUES (?, ?, ?, 3, ?, ?)`,
				upConsumer, upProject, upUser, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)
 VALUES (1, ?, ?, 4, ?, ?), (1, ?, ?, 8192, ?, ?)`, upConsumer, vcpu, upCreated, upUpdated, upConsumer, mem, upCreated, upUpdated)
			if have["0004_allocation_usages"] {
				// From 0004 on every allocation write keeps the sums.
				mustExec(t, d, `INSERT INTO allocation_usages (resource_provider_id, resource_class_id, used) VALUES (1, ?, 4), (1, ?, 8192)`, vcpu, mem)
			}
			mustExec(t, d, `INSERT INTO traits (name, created_at, updated_at) VALUES ('CUSTOM_UPGRADED', ?, ?)`, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO resource_provider_traits (resource_provider_id, trait_id) SELECT 1, id FROM traits WHERE name IN ('CUSTOM_UPGRADED', 'HW_CPU_X86_AVX2')`)
			mustExec(t, d, `INSERT INTO placement_aggregates (uuid) VALUES (?)`, upAggregate)
			mustExec(t, d, `INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id) SELECT 1, id FROM placement_aggregates WHERE uuid = ?`, upAggregate)
		},
		check: func(t *testing.T, d *db.DB) {
			ctx := context.Background()
			svc := placement.NewService(d, placement.Config{})
			p, invs, err := svc.ProviderInventories(ctx, upComputeUUID)
			if err != nil {
				t.Fatalf("inventories: %v", err)
			}
			if p.Name != "compute-1" || p.Generation != 7 || p.RootProviderUUID != upComputeUUID || p.ParentProviderUUID != nil {
				t.Errorf("provider = %+v", p)
			}
			type inv struct {
				Class                           string
				Total, Reserved, Min, Max, Step int64
				Ratio                           float64
			}
			var gotInv []inv
			for _, i := range invs {
				gotInv = append(gotInv, inv{i.ResourceClass, i.Total, i.Reserved, i.MinUnit, i.MaxUnit, i.StepSize, i.AllocationRatio})
			}
			sort.Slice(gotInv, func(i, j int) bool { return gotInv[i].Class < gotInv[j].Class })
			wantInv := []inv{{"MEMORY_MB", 65536, 512, 1, 65536, 256, 1.5}, {"VCPU", 16, 1, 1, 16, 1, 4.0}}
			if diff := cmp.Diff(wantInv, gotInv); diff != "" {
				t.Errorf("inventories (-want +got):\n%s", diff)
			}
			child, err := svc.GetProvider(ctx, upResvUUID)
			if err != nil {
				t.Fatalf("child provider: %v", err)
			}
			if child.ParentProviderUUID == nil || *child.ParentProviderUUID != upComputeUUID || child.RootProviderUUID != upComputeUUID {
				t.Errorf("child provider = %+v", child)
			}
			if _, invs, err := svc.ProviderInventories(ctx, upResvUUID); err != nil || len(invs) != 1 || invs[0].ResourceClass != upCustomClass || invs[0].Total != 2 {
				t.Errorf("child inventories = %+v, %v", invs, err)
			}
			// Usages come from allocation_usages, which 0004 filled from
			// the allocations of a database that predates it.
			u, err := svc.GetProviderUsages(ctx, upComputeUUID)
			if err != nil {
				t.Fatalf("usages: %v", err)
			}
			if diff := cmp.Diff(map[string]int64{"VCPU": 4, "MEMORY_MB": 8192}, u.Usages); diff != "" || u.ProviderGeneration != 7 {
				t.Errorf("usages generation %d (-want +got):\n%s", u.ProviderGeneration, diff)
			}
			ca, err := svc.GetConsumerAllocations(ctx, upConsumer)
			if err != nil {
				t.Fatalf("consumer allocations: %v", err)
			}
			if ca.Consumer == nil || ca.Consumer.ProjectID != upProject || ca.Consumer.UserID != upUser || ca.Consumer.Generation != 3 {
				t.Errorf("consumer = %+v", ca.Consumer)
			}
			if pr := ca.Providers[upComputeUUID]; pr == nil || !cmp.Equal(pr.Resources, map[string]int64{"VCPU": 4, "MEMORY_MB": 8192}) {
				t.Errorf("consumer allocations = %+v", ca.Providers)
			}
			_, traits, err := svc.ProviderTraits(ctx, upComputeUUID)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tr := range traits {
				names = append(names, tr.Name)
			}
			sort.Strings(names)
			if diff := cmp.Diff([]string{"CUSTOM_UPGRADED", "HW_CPU_X86_AVX2"}, names); diff != "" {
				t.Errorf("traits (-want +got):\n%s", diff)
			}
			if _, aggs, err := svc.ProviderAggregates(ctx, upComputeUUID); err != nil || !cmp.Equal(aggs, []string{upAggregate}) {
				t.Errorf("aggregates = %v, %v", aggs, err)
			}
		},
	},
	{
		name: "hosts", since: "0002_blazar_hosts",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `INSERT INTO computehosts (id, vcpus, cpu_info, hypervisor_type, hypervisor_version, hypervisor_hostname, service_name,
 memory_mb, local_gb, status, availability_zone, trust_id, reservable, compute_provider_uuid, reservation_provider_uuid, owns_compute_provider, created_at, updated_at)
 VALUES (1, 16, '{"arch": "x86_64"}', 'QEMU', 8002000, 'compute-1', 'compute-1', 65536, 500, NULL, 'az1', NULL, ?, ?, ?, ?, ?, ?)`,
				true, upComputeUUID, upResvUUID, true, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO resource_properties (id, resource_type, property_name, private, created_at, updated_at) VALUES (?, 'physical:host', 'gpu', ?, ?, NULL)`,
				upProperty, false, upCreated)
			mustExec(t, d, `INSERT INTO computehost_extra_capabilities (id, computehost_id, property_id, capability_value, created_at, updated_at) VALUES (?, 1, ?, 'a100', ?, NULL)`,
				upCapability, upProperty, upCreated)
			mustExec(t, d, `UPDATE leasehold_change_markers SET version = version + 1 WHERE name = 'computehosts'`)
		},
		check: func(t *testing.T, d *db.DB) {
			h, err := hosts.New(d, nil).Get(context.Background(), "1")
			if err != nil {
				t.Fatalf("host: %v", err)
			}
			want := hosts.Host{
				ID: "1", HypervisorHostname: "compute-1", ServiceName: "compute-1", VCPUs: 16, MemoryMB: 65536, LocalGB: 500,
				HypervisorType: "QEMU", HypervisorVersion: 8002000, CPUInfo: `{"arch": "x86_64"}`, AvailabilityZone: "az1",
				Reservable: true, CreatedAt: upCreated, UpdatedAt: &upUpdated,
				ExtraCapabilities:   map[string]string{"gpu": "a100"},
				ComputeProviderUUID: upComputeUUID, ReservationProviderUUID: upResvUUID,
			}
			if diff := cmp.Diff(want, *h, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("host (-want +got):\n%s", diff)
			}
			var version int64
			if err := d.Raw("SELECT version FROM leasehold_change_markers WHERE name = 'computehosts'").Scan(&version).Error; err != nil || version != 1 {
				t.Errorf("computehosts change marker = %d, %v; want 1", version, err)
			}
		},
	},
	{
		name: "lease", since: "0005_blazar_leases",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at)
 VALUES (?, 'upgraded', ?, ?, ?, ?, '', 'PENDING', ?, ?, ?)`, upLease, upUser, upProject, upStart, upEnd, false, upCreated, upUpdated)
			mustExec(t, d, `INSERT INTO reservations (id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at, updated_at)
 VALUES (?, ?, ?, 'physical:host', 'pending', ?, ?, ?, NULL)`, upReservation, upLease, upHostResv, false, false, upCreated)
			mustExec(t, d, `INSERT INTO computehost_reservations (id, reservation_id, aggregate_id, count_range, hypervisor_properties, resource_properties, before_end, created_at, updated_at)
 VALUES (?, ?, NULL, '1-1', '', ?, 'default', ?, NULL)`, upHostResv, upReservation, upResProps, upCreated)
			mustExec(t, d, `INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at) VALUES (?, ?, '1', ?, ?, ?)`,
				upHostAlloc, upReservation, upStart, upEnd, upCreated)
			for i, ev := range []struct {
				typ string
				at  time.Time
			}{{"start_lease", upStart}, {"before_end_lease", upEnd.Add(-time.Hour)}, {"end_lease", upEnd}} {
				mustExec(t, d, `INSERT INTO events (id, lease_id, event_type, time, status, claimed_by, claimed_at, attempts, created_at, updated_at)
 VALUES (?, ?, ?, ?, 'UNDONE', '', NULL, 0, ?, NULL)`, fmt.Sprintf("0f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7f%02d", i), upLease, ev.typ, ev.at, upCreated)
			}
			mustExec(t, d, `INSERT INTO blazar_resource_locks (resource_type, resource_id, version) VALUES ('physical:host', '1', 1)`)
		},
		check: func(t *testing.T, d *db.DB) {
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), leasestest.NewClock(upCreated), leasestest.Options{})
			v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, upLease)
			if err != nil {
				t.Fatalf("lease: %v", err)
			}
			if v.Name != "upgraded" || v.ProjectID != upProject || v.UserID != upUser || v.Status != "PENDING" || v.Degraded ||
				v.StartDate != leases.FormatDate(upStart) || v.EndDate != leases.FormatDate(upEnd) ||
				v.CreatedAt != leases.FormatStamp(upCreated) || v.UpdatedAt == nil || *v.UpdatedAt != leases.FormatStamp(upUpdated) {
				t.Errorf("lease = %+v", v)
			}
			if len(v.Reservations) != 1 {
				t.Fatalf("reservations = %+v", v.Reservations)
			}
			r := v.Reservations[0]
			if r["id"] != upReservation || r["resource_type"] != "physical:host" || r["status"] != "pending" ||
				r["resource_properties"] != upResProps || r["before_end"] != "default" || fmt.Sprint(r["min"], r["max"]) != "1 1" {
				t.Errorf("reservation = %v", r)
			}
			got := map[string]string{}
			for _, e := range v.Events {
				got[e.EventType] = e.Time + " " + e.Status
			}
			want := map[string]string{
				"start_lease":      leases.FormatDate(upStart) + " UNDONE",
				"before_end_lease": leases.FormatDate(upEnd.Add(-time.Hour)) + " UNDONE",
				"end_lease":        leases.FormatDate(upEnd) + " UNDONE",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			var alloc struct {
				ComputeHostID string
				StartDate     time.Time
				EndDate       time.Time
			}
			if err := d.Raw("SELECT compute_host_id, start_date, end_date FROM computehost_allocations WHERE reservation_id = ?", upReservation).Scan(&alloc).Error; err != nil ||
				alloc.ComputeHostID != "1" || !alloc.StartDate.Equal(upStart) || !alloc.EndDate.Equal(upEnd) {
				t.Errorf("host allocation = %+v, %v", alloc, err)
			}
			// The widened stamp columns keep what a new write gives them.
			micro := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
			mustExec(t, d, "UPDATE leases SET updated_at = ? WHERE id = ?", micro, upLease)
			v, err = svc.Get(context.Background(), leases.Caller{Admin: true}, upLease)
			if err != nil {
				t.Fatal(err)
			}
			if v.UpdatedAt == nil || *v.UpdatedAt != leases.FormatStamp(micro) {
				t.Errorf("updated_at after the upgrade = %v, want %s (microseconds kept)", stringOf(v.UpdatedAt), leases.FormatStamp(micro))
			}
		},
	},
	{
		name: "lease kinds", since: "0009_lease_kinds",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout)
 VALUES (?, 'best-effort', ?, ?, ?, ?, '', 'IN-PROGRESS', ?, ?, NULL, 'BEST-EFFORT', 600)`, upKindsLease, upUser, upProject, upStart, upEnd, false, upCreated)
		},
		check: func(t *testing.T, d *db.DB) {
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), leasestest.NewClock(upCreated), leasestest.Options{})
			v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, upKindsLease)
			if err != nil {
				t.Fatalf("lease: %v", err)
			}
			if v.LeaseType != "BEST-EFFORT" || v.Timeout == nil || *v.Timeout != 600 || v.Status != "IN-PROGRESS" {
				t.Errorf("lease kind = %s, timeout %v, status %s; want BEST-EFFORT, 600, IN-PROGRESS", v.LeaseType, v.Timeout, v.Status)
			}
			// A lease written before 0009 is a SCHEDULE lease without a
			// timeout.
			if v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, upLease); err == nil && (v.LeaseType != "SCHEDULE" || v.Timeout != nil) {
				t.Errorf("older lease kind = %s, timeout %v; want SCHEDULE, none", v.LeaseType, v.Timeout)
			}
		},
	},
	{
		name: "lease tags", since: "0011_lease_tags",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout, tags)
 VALUES (?, 'tagged', ?, ?, ?, ?, '', 'PENDING', ?, ?, NULL, 'SCHEDULE', NULL, ?)`, upTagsLease, upUser, upProject, upStart, upEnd, false, upCreated, `["svc:db","team"]`)
		},
		check: func(t *testing.T, d *db.DB) {
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), leasestest.NewClock(upCreated), leasestest.Options{})
			v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, upTagsLease)
			if err != nil {
				t.Fatalf("lease: %v", err)
			}
			if diff := cmp.Diff([]string{"svc:db", "team"}, v.Tags); diff != "" {
				t.Errorf("tags (-want +got):\n%s", diff)
			}
			// A lease written before 0011 has no tags.
			if v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, upLease); err == nil && (v.Tags == nil || len(v.Tags) != 0) {
				t.Errorf("older lease tags = %#v; want []", v.Tags)
			}
		},
	},
	{
		name: "lease changes", since: "0009_lease_kinds",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout)
 VALUES (?, 'listed', ?, ?, ?, ?, '', 'PENDING', ?, ?, NULL, 'SCHEDULE', NULL)`, upListedLease, upUser, upProject, upStart, upEnd, false, upCreated)
		},
		check: func(t *testing.T, d *db.DB) {
			// A lease written before 0013 (no lease_changes rows, version
			// 0) or after it: the triggers move its version when its
			// rows are written.
			v := listingVersion(t, d, upListedLease)
			mustExec(t, d, `INSERT INTO events (id, lease_id, event_type, time, status, created_at) VALUES (?, ?, 'start_lease', ?, 'UNDONE', ?)`,
				upListedLease, upListedLease, upStart, upCreated)
			if w := listingVersion(t, d, upListedLease); w == v {
				t.Errorf("version stayed %d after an event was written", w)
			}
		},
	},
	{
		name: "ownership", since: "0010_ownership",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			mustExec(t, d, `UPDATE ownership_plans SET generation = 5, plan = ?, ownership = ?, report = '{}', updated_at = ? WHERE id = 1`,
				`{"consumers":[{"id":"dom","rank":1,"borrow_grace_seconds":0,"lending_limit":null}],"groups":[{"name":"all","properties":{"rack":"r1"}}],"entries":[{"consumer":"dom","group":"all","amount":1}]}`,
				`{"dom":{"1":{"group":"all","slots":1}}}`, upUpdated)
		},
		check: func(t *testing.T, d *db.DB) {
			svc := ownership.New(d, hosts.New(d, nil), nil)
			st, err := svc.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Generation != 5 || len(st.Plan.Consumers) != 1 || st.Plan.Consumers[0].ID != "dom" || st.Ownership["dom"]["1"].Group != "all" {
				t.Errorf("ownership state = %+v", st)
			}
			// The upgraded plan takes edits at its generation.
			if _, err := svc.Update(context.Background(), 5, func(p *ownership.Plan) error { p.Entries[0].Amount = 0; return nil }); err != nil {
				t.Errorf("update the upgraded plan: %v", err)
			}
		},
	},
	{
		name: "outbox", since: "0006_outbox",
		write: func(t *testing.T, d *db.DB, _ map[string]bool) {
			// FAILED: kept for the operator, as an old binary left it.
			mustExec(t, d, `INSERT INTO outbox (kind, order_key, lease_id, payload, status, attempts, last_error, next_at, claimed_by, claimed_at, created_at, updated_at)
 VALUES ('host.reserve', 'host:1', ?, '{"host": "compute-1"}', 'FAILED', 5, 'nova: 503', NULL, '', NULL, ?, ?)`, upLease, upCreated, upUpdated)
		},
		check: func(t *testing.T, d *db.DB) {
			rs, err := outbox.List(context.Background(), d, outbox.StatusFailed)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 {
				t.Fatalf("FAILED outbox rows = %+v", rs)
			}
			r := rs[0]
			if r.Kind != "host.reserve" || r.Key != "host:1" || r.LeaseID != upLease || string(r.Payload) != `{"host": "compute-1"}` ||
				r.Attempts != 5 || r.LastError != "nova: 503" || !r.CreatedAt.Equal(upCreated) || r.UpdatedAt == nil || !r.UpdatedAt.Equal(upUpdated) {
				t.Errorf("outbox row = %+v", r)
			}
			if err := outbox.Retry(context.Background(), d, r.ID); err != nil {
				t.Errorf("retry the upgraded FAILED row: %v", err)
			}
		},
	},
}

var upgradeInstanceFixture = upgradeFixture{
	name: "instance", since: "0008_instance_reservations",
	write: func(t *testing.T, d *db.DB, _ map[string]bool) {
		mustExec(t, d, `INSERT INTO instance_reservations (id, reservation_id, vcpus, memory_mb, disk_gb, amount, affinity, resource_properties, flavor_id, server_group_id, aggregate_id, source_flavor, created_at, updated_at)
 VALUES (?, ?, 2, 4096, 20, 3, ?, ?, ?, NULL, NULL, '', ?, NULL)`, upInstResv, upInstReservation, false, upResProps, upInstReservation, upCreated)
		mustExec(t, d, `INSERT INTO instance_allocations (id, reservation_id, compute_host_id, slots, start_date, end_date, span_s, created_at) VALUES (?, ?, '1', 3, ?, ?, 86400, ?)`,
			upInstAlloc, upInstReservation, upStart, upEnd, upCreated)
	},
	check: func(t *testing.T, d *db.DB) {
		got, err := instance.New(nil, instance.Config{}).Describe(context.Background(), d.DB, []*models.Reservation{{ID: upInstReservation}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]any{upInstReservation: {
			"amount": 3, "vcpus": int64(2), "memory_mb": int64(4096), "disk_gb": int64(20), "affinity": false,
			"resource_properties": upResProps, "flavor_id": upInstReservation, "server_group_id": nil, "aggregate_id": nil,
		}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("instance reservation (-want +got):\n%s", diff)
		}
		var slots struct {
			Slots     int
			StartDate time.Time
		}
		if err := d.Raw("SELECT slots, start_date FROM instance_allocations WHERE reservation_id = ?", upInstReservation).Scan(&slots).Error; err != nil ||
			slots.Slots != 3 || !slots.StartDate.Equal(upStart) {
			t.Errorf("instance allocation = %+v, %v", slots, err)
		}
	},
}

func init() { upgradeFixtures = append(upgradeFixtures, upgradeInstanceFixture) }

// TestUpgradeFromEachSchemaVersion: for each prefix of the migration list,
// a database at that version with representative rows migrates to the
// current schema with every row intact and readable by the current code,
// and ends with the same schema as a database created at the current
// version.
func TestUpgradeFromEachSchemaVersion(t *testing.T) {
	ids := db.MigrationIDs()
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	for _, f := range upgradeFixtures {
		if !known[f.since] {
			t.Fatalf("fixture %s: migration %s is not in the list %v", f.name, f.since, ids)
		}
	}
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			fresh := schemaOf(t, dbtest.OpenDialect(t, dialect))
			for n := 1; n <= len(ids); n++ {
				t.Run("from_"+ids[n-1], func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					d, err := db.Open(ctx, dbtest.URLDialect(t, dialect))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { d.Close() })
					if err := db.MigrateFirst(ctx, d, n); err != nil {
						t.Fatalf("schema version %s: %v", ids[n-1], err)
					}
					have := map[string]bool{}
					for _, id := range ids[:n] {
						have[id] = true
					}
					var written []upgradeFixture
					for _, f := range upgradeFixtures {
						if have[f.since] {
							f.write(t, d, have)
							written = append(written, f)
						}
					}
					if err := d.Migrate(ctx); err != nil {
						t.Fatalf("upgrade from %s: %v", ids[n-1], err)
					}
					var applied []string
					if err := d.Raw("SELECT id FROM leasehold_migrations ORDER BY id").Scan(&applied).Error; err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(ids, applied); diff != "" {
						t.Errorf("applied migrations (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(fresh, schemaOf(t, d)); diff != "" {
						t.Errorf("upgraded schema differs from a fresh one (-fresh +upgraded):\n%s", diff)
					}
					for _, f := range written {
						t.Run(f.name, func(t *testing.T) { f.check(t, d) })
					}
					// A second sync is a no-op on the upgraded database.
					if err := d.Migrate(ctx); err != nil {
						t.Errorf("second sync: %v", err)
					}
				})
			}
		})
	}
}

// schemaOf describes every table: its columns (name, type, nullability)
// and its indexes (name, columns, uniqueness).
func schemaOf(t *testing.T, d *db.DB) map[string][]string {
	t.Helper()
	m := d.Migrator()
	tables, err := m.GetTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, table := range tables {
		if table == "sqlite_sequence" {
			continue // SQLite's own bookkeeping
		}
		cols, err := m.ColumnTypes(table)
		if err != nil {
			t.Fatalf("columns of %s: %v", table, err)
		}
		var desc []string
		for _, c := range cols {
			nullable, _ := c.Nullable()
			full, _ := c.ColumnType() // with length and precision where the driver tells them
			desc = append(desc, fmt.Sprintf("column %s %s %s null=%v", c.Name(), c.DatabaseTypeName(), full, nullable))
		}
		idxs, err := m.GetIndexes(table)
		if err != nil {
			t.Fatalf("indexes of %s: %v", table, err)
		}
		for _, ix := range idxs {
			unique, _ := ix.Unique()
			desc = append(desc, fmt.Sprintf("index %s %v unique=%v", ix.Name(), ix.Columns(), unique))
		}
		sort.Strings(desc)
		out[table] = desc
	}
	// The triggers (names): SQLite's schema table, MySQL's information
	// schema.
	q := "SELECT name FROM sqlite_master WHERE type = 'trigger'"
	if d.Dialect == db.MySQL {
		q = "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
	}
	var triggers []string
	if err := d.Raw(q).Scan(&triggers).Error; err != nil {
		t.Fatalf("triggers: %v", err)
	}
	sort.Strings(triggers)
	out["(triggers)"] = triggers
	return out
}
