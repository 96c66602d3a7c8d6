package leases_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

const (
	benchHosts  = 10000
	benchAllocs = 100000
)

// benchSetup makes a database with benchHosts hosts (in the host source)
// and benchAllocs existing allocations spread over 2030, and a lease
// service whose view is loaded.
func benchSetup(b *testing.B, dialect db.Dialect) *leases.Service {
	b.Helper()
	d := dbtest.OpenDialect(b, dialect)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]models.ComputeHostAllocation, 0, 1000)
	flush := func() {
		if err := d.WithContext(ctx).CreateInBatches(rows, 500).Error; err != nil {
			b.Fatal(err)
		}
		rows = rows[:0]
	}
	// The bookings the system itself would have made: per host, disjoint
	// windows of 1-48 h with gaps, spread over 2030.
	perHost := benchAllocs / benchHosts
	for h := 1; h <= benchHosts; h++ {
		at := base.Add(time.Duration(r.IntN(200)) * time.Hour)
		for k := range perHost {
			s := at.Add(time.Duration(r.IntN(1500)) * time.Hour / time.Duration(perHost))
			e := s.Add(time.Duration(1+r.IntN(48)) * time.Hour)
			rows = append(rows, models.ComputeHostAllocation{
				ID: uuid.NewString(), ReservationID: fmt.Sprint("bench-", h, "-", k), ComputeHostID: fmt.Sprint(h),
				StartDate: s, EndDate: e, CreatedAt: base,
			})
			at = e
			if len(rows) == cap(rows) {
				flush()
			}
		}
	}
	flush()
	clock := leasestest.NewClock(time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC))
	svc, _ := leasestest.New(d, leasestest.NewHosts(benchHosts, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
	// First create loads the view (not measured).
	create(b, svc, leases.Caller{ProjectID: "p", UserID: "u"}, "warm", "2031-01-01 00:00", "2031-01-01 01:00", leasestest.HostReservation(1, 1, "", ""))
	return svc
}

var benchSeq atomic.Int64

func benchCreate(b testing.TB, svc *leases.Service) time.Duration {
	n := benchSeq.Add(1)
	r := rand.New(rand.NewPCG(uint64(n), 9))
	s := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(365*24)) * time.Hour)
	t := time.Now()
	_, err := svc.Create(context.Background(), leases.Caller{ProjectID: "p", UserID: "u"}, leases.CreateRequest{Name: leasestest.Str(fmt.Sprint("b", n)), StartDate: leasestest.Str(s.Format("2006-01-02 15:04")), EndDate: leasestest.Str(s.Add(4 * time.Hour).Format("2006-01-02 15:04")), Reservations: leasestest.Res(leasestest.HostReservation(1, 2, "", ""))})
	d := time.Since(t)
	if err != nil {
		b.Fatalf("create: %v", err)
	}
	return d
}

// BenchmarkLeaseCreate measures lease creation (one physical:host
// reservation, min 1 max 2, through the allocator, lock and re-check) with
// 10,000 hosts and 100,000 existing allocations: sequential latency
// (p50/p99 reported) and 10 concurrent clients (creations/s reported).
func BenchmarkLeaseCreate(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		svc := benchSetup(b, dialect)
		b.Run(string(dialect)+"/sequential", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime()
			for b.Loop() {
				lat = append(lat, benchCreate(b, svc))
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
		b.Run(string(dialect)+"/10-clients", func(b *testing.B) {
			b.SetParallelism(max(1, 10/runtimeProcs()))
			start := time.Now()
			var done atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchCreate(b, svc)
					done.Add(1)
				}
			})
			b.ReportMetric(float64(done.Load())/time.Since(start).Seconds(), "creates/s")
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
