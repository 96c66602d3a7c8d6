package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// The benchmark's cloud: benchHosts hosts, each booked benchSlots times
// back to back (one-day windows, leases of benchLeaseHosts hosts), so
// there are benchHosts×benchSlots allocations; "now" lies in slot
// benchNowSlot, so every host is reserved now and a fifth of its
// bookings are in the future (the rows the overlap query reads past).
const (
	benchHosts      = 1000
	benchSlots      = 100
	benchLeaseHosts = 10
	benchNowSlot    = 80
)

var benchBase = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// benchCloud fills d and returns the decision service, the reservation
// holding host 1 now and that reservation's project.
func benchCloud(b *testing.B, d *db.DB) (svc *Service, resNow, project string) {
	b.Helper()
	hs := make([]host, benchHosts)
	for i := range hs {
		hs[i] = host{id: int64(i + 1), node: fmt.Sprintf("compute%d", i+1), service: fmt.Sprintf("compute%d", i+1)}
	}
	now := benchBase.Add(benchNowSlot*24*time.Hour + 12*time.Hour)
	f := newFixture(b, d, hs)
	f.clk.set(now)
	var ls []models.Lease
	var rs []models.Reservation
	var as []models.ComputeHostAllocation
	day := 24 * time.Hour
	for slot := range benchSlots {
		start := benchBase.Add(time.Duration(slot) * day)
		end := start.Add(day - time.Hour)
		status := map[bool]string{true: "deleted", false: "pending"}[slot < benchNowSlot]
		if slot == benchNowSlot {
			status = "active"
		}
		for g := range benchHosts / benchLeaseHosts {
			n := slot*benchHosts + g
			lid := fmt.Sprintf("1ea5e000-0000-4000-8000-%012d", n)
			rid := fmt.Sprintf("2e5e0000-0000-4000-8000-%012d", n)
			proj := fmt.Sprintf("project%d", g%37)
			ls = append(ls, models.Lease{ID: lid, Name: lid, ProjectID: proj, StartDate: start, EndDate: end, Status: "ACTIVE", CreatedAt: start})
			rs = append(rs, models.Reservation{ID: rid, LeaseID: lid, ResourceID: rid, ResourceType: "physical:host", Status: status, CreatedAt: start})
			for k := range benchLeaseHosts {
				hostID := g*benchLeaseHosts + k + 1
				as = append(as, models.ComputeHostAllocation{ID: fmt.Sprintf("a110c000-0000-4000-8000-%012d", n*benchLeaseHosts+k),
					ReservationID: rid, ComputeHostID: fmt.Sprint(hostID), StartDate: start, EndDate: end, CreatedAt: start})
			}
			if slot == benchNowSlot && g == 0 {
				resNow, project = rid, proj
			}
		}
	}
	err := d.Write(context.Background(), func(tx *gorm.DB) error {
		for _, rows := range []any{ls, rs, as} {
			if err := tx.CreateInBatches(rows, 500).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if d.Dialect == db.MySQL {
		for _, t := range []string{"computehosts", "leases", "reservations", "computehost_allocations"} {
			if err := d.Exec("ANALYZE TABLE " + t).Error; err != nil {
				b.Fatal(err)
			}
		}
	} else if err := d.Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	return f.svc, resNow, project
}

// BenchmarkFilter measures one decision for 1,000 candidate hosts over
// 100,000 allocations, from the JSON body (decoded as the handler does)
// to the result, and reports its p50 and p99.
func BenchmarkFilter(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			svc, resNow, project := benchCloud(b, d)
			names := make([]any, benchHosts)
			for i := range names {
				names[i] = fmt.Sprintf("compute%d", i+1)
			}
			for _, bc := range []struct {
				name  string
				body  map[string]any
				check func(*Result) bool
			}{
				{"no-hint", map[string]any{"project_id": "project1", "hosts": names},
					func(r *Result) bool { return len(r.Hosts) == 0 && len(r.Rejected) == benchHosts }},
				{"no-hint-explain", map[string]any{"project_id": "project1", "hosts": names, "explain": true},
					func(r *Result) bool { return len(r.Hosts) == 0 && len(r.Rejected) == benchHosts }},
				{"hint", map[string]any{"project_id": project, "hosts": names, "scheduler_hints": map[string]any{"reservation": []any{resNow}}},
					func(r *Result) bool { return len(r.Hosts) == benchLeaseHosts }},
				{"flavor", map[string]any{"project_id": project, "hosts": names, "flavor": map[string]any{
					"extra_specs": map[string]any{"resources:" + ClassOfReservation(resNow): "1"}}},
					func(r *Result) bool { return len(r.Hosts) == benchLeaseHosts }},
			} {
				raw, err := json.Marshal(bc.body)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(bc.name, func(b *testing.B) {
					ctx := context.Background()
					var lat []time.Duration
					for b.Loop() {
						t := time.Now()
						var m map[string]any
						dec := json.NewDecoder(bytes.NewReader(raw))
						dec.UseNumber()
						if err := dec.Decode(&m); err != nil {
							b.Fatal(err)
						}
						req, err := ParseRequest(m)
						if err != nil {
							b.Fatal(err)
						}
						res, err := svc.Filter(ctx, req)
						if err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t))
						if !bc.check(res) {
							b.Fatalf("unexpected result: %d pass, %d rejected", len(res.Hosts), len(res.Rejected))
						}
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}
