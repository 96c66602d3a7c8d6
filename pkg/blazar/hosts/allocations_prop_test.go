package hosts

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
)

// oldAllocationsJSON is the body the handler wrote before the typed
// renderer: encoding/json over one map per host, the reservations from
// the three-table SQL join.
func oldAllocationsJSON(t *rapid.T, s *Service, f AllocationFilter) []byte {
	ctx := context.Background()
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&models.ComputeHost{}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, err := s.db.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	byHost, err := s.hostAllocations(ctx, sqlDB, f, "", s.now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(ids))
	for i, n := range ids {
		id := fmt.Sprint(n)
		res := make([]map[string]any, len(byHost[id]))
		for j, x := range byHost[id] {
			res[j] = map[string]any{"id": x.ID, "lease_id": x.LeaseID,
				"start_date": leases.FormatDate(x.StartDate), "end_date": leases.FormatDate(x.EndDate)}
		}
		out[i] = map[string]any{"resource_id": id, "reservations": res}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendAllocationsMatchesJoin: on every dialect, for random leases
// (some ended, some starting together, some with microseconds), random
// allocations (some of reservations or leases that do not exist) and
// every filter, AppendAllocations writes the bytes encoding/json wrote
// over the SQL join. On SQLite the unfiltered listing is the in-memory
// join, so this also checks it against the SQL one.
func TestAppendAllocationsMatchesJoin(t *testing.T) {
	eachDialect(t, func(tt *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(tt, d)
		for i := range 3 {
			if _, err := s.Create(ctx, body("name", fmt.Sprint("c", i))); err != nil {
				tt.Fatal(err)
			}
		}
		cases, seq := 0, 0
		rapid.Check(tt, func(t *rapid.T) {
			// Each case is some forty round trips: on MySQL the first 15
			// cases are enough and keep the test short.
			if cases++; d.Dialect == db.MySQL && cases > 15 {
				return
			}
			for _, table := range []string{"computehost_allocations", "reservations", "leases"} {
				if err := d.Exec("DELETE FROM " + table).Error; err != nil {
					t.Fatal(err)
				}
			}
			starts := []time.Duration{0, time.Hour, 90 * time.Minute, 1500 * time.Microsecond, -3 * time.Hour}
			nLeases := rapid.IntRange(0, 6).Draw(t, "leases")
			for i := range nLeases {
				start := fixed.Add(rapid.SampledFrom(starts).Draw(t, "start"))
				l := models.Lease{ID: fmt.Sprint("l", i), Name: "x", ProjectID: "p", StartDate: start,
					EndDate: start.Add(rapid.SampledFrom([]time.Duration{time.Hour, 2 * time.Hour, 1}).Draw(t, "len")), Status: "PENDING", CreatedAt: fixed}
				if err := d.Create(&l).Error; err != nil {
					t.Fatal(err)
				}
			}
			nRes := rapid.IntRange(0, 8).Draw(t, "reservations")
			for i := range nRes {
				r := models.Reservation{ID: fmt.Sprint("r", rapid.IntRange(0, 9).Draw(t, "rid"), "-", i),
					LeaseID: fmt.Sprint("l", rapid.IntRange(0, nLeases).Draw(t, "lease")), ResourceType: "physical:host", Status: "pending", CreatedAt: fixed}
				if err := d.Create(&r).Error; err != nil {
					t.Fatal(err)
				}
				for range rapid.IntRange(0, 3).Draw(t, "allocs") {
					seq++
					a := models.ComputeHostAllocation{ID: fmt.Sprint("a", seq), ReservationID: r.ID,
						ComputeHostID: fmt.Sprint(rapid.IntRange(1, 4).Draw(t, "host")), StartDate: fixed, EndDate: fixed, CreatedAt: fixed}
					if err := d.Create(&a).Error; err != nil {
						t.Fatal(err)
					}
				}
			}
			if rapid.Bool().Draw(t, "orphan") {
				a := models.ComputeHostAllocation{ID: "orphan", ReservationID: "nope", ComputeHostID: "1", StartDate: fixed, EndDate: fixed, CreatedAt: fixed}
				if err := d.Create(&a).Error; err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []AllocationFilter{{}, {LeaseID: "l0"}, {ReservationID: "r0-0"}} {
				want := oldAllocationsJSON(t, s, f)
				got, err := s.AppendAllocations(ctx, f, nil)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Fatalf("%+v: AppendAllocations differs from the join (-want +got):\n%s", f, diff)
				}
			}
		})
	})
}
