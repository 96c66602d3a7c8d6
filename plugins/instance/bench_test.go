package instance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins/instance"
)

// seedReservations stores n one-slot instance reservations (1 VCPU,
// 1 GiB, random hosts of nHosts, random one-to-three-day windows over a
// year from t0) straight into the tables, as n creates would have.
func seedReservations(b *testing.B, d *db.DB, n, nHosts int) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	err := d.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i := range n {
			lease, res := uuid.NewString(), uuid.NewString()
			start := t0.Add(time.Duration(r.IntN(365*24)) * time.Hour)
			end := start.Add(time.Duration(24+r.IntN(48)) * time.Hour)
			host := fmt.Sprint(1 + r.IntN(nHosts))
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO leases (id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at)
					VALUES (?, ?, 'u1', 'p1', ?, ?, '', 'PENDING', ?, ?, NULL)`, []any{lease, fmt.Sprint("seed", i), start, end, false, t0}},
				{`INSERT INTO reservations (id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at, updated_at)
					VALUES (?, ?, ?, 'virtual:instance', 'pending', ?, ?, ?, NULL)`, []any{res, lease, res, false, false, t0}},
				{`INSERT INTO instance_reservations (id, reservation_id, vcpus, memory_mb, disk_gb, amount, affinity, resource_properties, flavor_id, created_at)
					VALUES (?, ?, 1, 1024, 0, 1, NULL, '', ?, ?)`, []any{res, res, res, t0}},
				{`INSERT INTO instance_allocations (id, reservation_id, compute_host_id, slots, start_date, end_date, span_s, created_at) VALUES (?, ?, ?, 1, ?, ?, ?, ?)`,
					[]any{uuid.NewString(), res, host, start, end, int64(end.Sub(start) / time.Second), t0}},
				{`INSERT INTO computehost_allocations (id, reservation_id, compute_host_id, start_date, end_date, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
					[]any{uuid.NewString(), res, host, start, end, t0}},
			} {
				if err := tx.Exec(q.sql, q.args...).Error; err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCreate: an instance lease create (4 slots of 2 VCPU/4 GiB, any
// split, a random two-day window) with 1,000 hosts and 10,000 existing
// instance reservations on SQLite; reports the median.
func BenchmarkCreate(b *testing.B) {
	d := dbtest.Open(b)
	e := newEnv(b, d, 1000, nil)
	seedReservations(b, d, 10000, 1000)
	r := rand.New(rand.NewPCG(3, 4))
	var took []time.Duration
	for b.Loop() {
		start := t0.Add(time.Duration(24+r.IntN(360*24)) * time.Hour)
		s, en := start.Format("2006-01-02 15:04"), start.Add(48*time.Hour).Format("2006-01-02 15:04")
		t := time.Now()
		if _, err := e.create(b, "bench", s, en, instanceRes(4, 2, 4096, 10, nil)); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkStartEvent: the start event of a lease with one slot on each
// of 100 hosts (anti-affinity): the Placement inventory of the
// reservation's class on 100 child providers, in the event's
// transaction.
func BenchmarkStartEvent(b *testing.B) {
	d := dbtest.Open(b)
	e := newEnv(b, d, 100, nil)
	ctx := context.Background()
	at := t0.Add(time.Hour)
	for b.Loop() {
		b.StopTimer()
		start, end := at.Add(time.Minute), at.Add(time.Hour)
		e.clock.Set(at)
		if _, err := e.events.RunDue(ctx); err != nil { // the previous lease's end
			b.Fatal(err)
		}
		if _, err := e.create(b, "start", start.Format("2006-01-02 15:04"), end.Format("2006-01-02 15:04"), instanceRes(100, 1, 1024, 1, false)); err != nil {
			b.Fatal(err)
		}
		e.clock.Set(start)
		b.StartTimer()
		n, err := e.events.RunDue(ctx)
		if err != nil || n != 1 {
			b.Fatalf("start: %d events, %v", n, err)
		}
		at = end
	}
}

// BenchmarkEarliest: the earliest-window search for an instance request
// with 1,000 hosts and 10,000 existing instance reservations on SQLite:
// 4 slots of 2 VCPU/4 GiB for two days from a random start (room at
// once), and a whole host's worth on every host (anti-affinity, so only
// after the last reservation: the sweep passes all of them).
func BenchmarkEarliest(b *testing.B) {
	d := dbtest.Open(b)
	e := newEnvWith(b, d, 1000, nil, instance.Config{DB: d})
	seedReservations(b, d, 10000, 1000)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		res  map[string]any
	}{
		{"fits-at-once", instanceRes(4, 2, 4096, 10, nil)},
		{"after-all", instanceRes(1000, 8, 16384, 10, "False")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(5, 6))
			var took []time.Duration
			for b.Loop() {
				after := t0.Add(time.Duration(24+r.IntN(360*24)) * time.Hour).Format("2006-01-02 15:04")
				t := time.Now()
				win, err := e.svc.Earliest(ctx, owner, leases.EarliestRequest{After: &after, Duration: 48 * time.Hour,
					Reservations: []leases.ReservationRequest{leasestest.Reservation(bc.res)}})
				if err != nil || len(win.Reservations) != 1 {
					b.Fatal(win, err)
				}
				took = append(took, time.Since(t))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
