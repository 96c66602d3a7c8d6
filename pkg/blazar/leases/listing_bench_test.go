package leases

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
)

// seedLeases writes n leases of one reservation and three events each
// straight into the tables.
func seedLeases(b *testing.B, d *db.DB, n int) {
	b.Helper()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for from := 0; from < n; from += 500 {
		var ls []models.Lease
		var rs []models.Reservation
		var evs []models.Event
		for i := from; i < min(from+500, n); i++ {
			created := base.Add(time.Duration(i) * 1001 * time.Microsecond)
			l := models.Lease{ID: uuid.NewString(), Name: fmt.Sprint("lease-", i), UserID: "u", ProjectID: fmt.Sprint("p", i%10),
				StartDate: base.Add(time.Duration(i) * time.Hour), EndDate: base.Add(time.Duration(i+2) * time.Hour), Status: "PENDING", CreatedAt: created}
			ls = append(ls, l)
			rs = append(rs, models.Reservation{ID: uuid.NewString(), LeaseID: l.ID, ResourceID: uuid.NewString(), ResourceType: "physical:host",
				Status: "pending", CreatedAt: created})
			for _, typ := range []string{EventStart, EventEnd, EventBeforeEnd} {
				evs = append(evs, models.Event{ID: uuid.NewString(), LeaseID: l.ID, EventType: typ, Time: l.StartDate, Status: "UNDONE", CreatedAt: created})
			}
		}
		for _, rows := range []any{ls, rs, evs} {
			if err := d.CreateInBatches(rows, 250).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkListing splits GET /v1/leases (10,000 leases, every one, no
// plugin) into loading the typed rows and rendering them, and compares
// the renderer's bytes/s with encoding/json over the same leases as
// Views (host-plugin-like fields added to every reservation).
func BenchmarkListing(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		d := dbtest.OpenDialect(b, dialect)
		seedLeases(b, d, 10000)
		reg, err := plugins.NewRegistry()
		if err != nil {
			b.Fatal(err)
		}
		s := New(d, reg, Config{}, nil, nil)
		ctx := context.Background()
		admin := Caller{Admin: true}
		b.Run(string(dialect)+"/load", func(b *testing.B) {
			cpu0, n := processCPU(), 0
			for b.Loop() {
				if _, err := s.listing(ctx, admin); err != nil {
					b.Fatal(err)
				}
				n++
			}
			// The box is shared: CPU time per call is steadier than latency.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/op")
		})
		l, err := s.listing(ctx, admin)
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range l.leases {
			for _, r := range x.ress {
				l.extra[r.ID] = map[string]any{"min": 1, "max": 2, "hypervisor_properties": `[">=", "$vcpus", "4"]`,
					"resource_properties": "", "before_end": "default"}
			}
		}
		b.Run(string(dialect)+"/render", func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				if buf, err = l.appendJSON(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
		b.Run(string(dialect)+"/encoding-json", func(b *testing.B) {
			var n int
			for b.Loop() {
				out, err := json.Marshal(l.views())
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.SetBytes(int64(n))
		})
	}
}
