package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// benchSource lists fixed hosts.
type benchSource struct{ hs []hosts.Host }

func (s *benchSource) Reservable(context.Context) ([]hosts.Host, error) { return s.hs, nil }
func (s *benchSource) Properties(context.Context, bool) ([]hosts.Property, error) {
	return nil, nil
}

// insertRows inserts rows of n columns each in chunks of one statement.
func insertRows(b *testing.B, d *db.DB, head string, n int, rows [][]any) {
	b.Helper()
	for from := 0; from < len(rows); from += 500 {
		chunk := rows[from:min(from+500, len(rows))]
		ph := "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
		q := head + " VALUES " + strings.TrimSuffix(strings.Repeat(ph+",", len(chunk)), ",")
		var args []any
		for _, r := range chunk {
			args = append(args, r...)
		}
		if err := d.Exec(q, args...).Error; err != nil {
			b.Fatal(err)
		}
	}
}

// busyCluster is 1,000 compute nodes running 10,000 instances of project
// "other", 100 of the nodes (grp=x) eligible for the lease it returns with
// the plugin, all of them busy.
func busyCluster(b *testing.B) (*hostplugin.Plugin, plugins.Lease, plugins.Request) {
	ctx := context.Background()
	d := dbtest.Open(b)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var vcpu, mem int64
	d.Raw("SELECT id FROM resource_classes WHERE name = 'VCPU'").Scan(&vcpu)
	d.Raw("SELECT id FROM resource_classes WHERE name = 'MEMORY_MB'").Scan(&mem)
	if err := d.Exec("INSERT INTO consumer_types (name, created_at, updated_at) VALUES ('INSTANCE', ?, ?)", now, now).Error; err != nil {
		b.Fatal(err)
	}
	var typeID int64
	d.Raw("SELECT id FROM consumer_types WHERE name = 'INSTANCE'").Scan(&typeID)
	var rps, invs, cons, allocs [][]any
	src := &benchSource{}
	for i := 1; i <= 1000; i++ {
		u := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		rps = append(rps, []any{i, u, fmt.Sprintf("node-%d", i), 1, i, now, now})
		invs = append(invs, []any{i, vcpu, 64, 0, 1, 64, 1, 1.0, now, now}, []any{i, mem, 262144, 0, 1, 262144, 1, 1.0, now, now})
		h := hosts.Host{ID: fmt.Sprint(i), HypervisorHostname: fmt.Sprintf("node-%d", i), VCPUs: 64, MemoryMB: 262144,
			Reservable: true, ComputeProviderUUID: u, ExtraCapabilities: map[string]string{}}
		if i <= 100 {
			h.ExtraCapabilities["grp"] = "x"
		}
		src.hs = append(src.hs, h)
		for k := range 10 {
			c := fmt.Sprintf("10000000-0000-4000-8000-%08d%04d", i, k)
			cons = append(cons, []any{c, "other", "someone", 1, typeID, now, now})
			allocs = append(allocs, []any{i, c, vcpu, 1 + (i+k)%4, now, now}, []any{i, c, mem, 1024 * (1 + (i*k)%8), now, now})
		}
	}
	insertRows(b, d, "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id, created_at, updated_at)", 7, rps)
	insertRows(b, d, "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio, created_at, updated_at)", 10, invs)
	insertRows(b, d, "INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at)", 7, cons)
	insertRows(b, d, "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)", 6, allocs)
	p := hostplugin.New(src, d.DB, hostplugin.Config{ClearHosts: true}, func() time.Time { return now })
	if err := p.Refresh(ctx, true); err != nil {
		b.Fatal(err)
	}
	lease := plugins.Lease{ProjectID: "mine", Start: now, End: now.Add(24 * time.Hour)}
	req, err := p.Parse(plugins.Values{"min": json.Number("20"), "max": json.Number("20"),
		"hypervisor_properties": "", "resource_properties": `["==", "$grp", "x"]`}, lease)
	if err != nil {
		b.Fatal(err)
	}
	return p, lease, req
}

// BenchmarkPrepareClearing: the whole planning of a BEST-EFFORT lease of
// 20 hosts (Placement read, view, allocator.PlanScavenge) on busyCluster.
func BenchmarkPrepareClearing(b *testing.B) {
	p, lease, req := busyCluster(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.PrepareClearing(context.Background(), lease, req, true, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareNowBusy: the choice of a lease that starts now on
// busyCluster (every node in use by another project: refused), the cost
// the "in use now" check adds to every such lease.
func BenchmarkPrepareNowBusy(b *testing.B) {
	p, lease, req := busyCluster(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Prepare(context.Background(), lease, req, true, nil); err == nil {
			b.Fatal("a lease on busy hosts was accepted")
		}
	}
}
