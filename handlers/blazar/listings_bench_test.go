package blazar

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// seedListing writes nLeases leases of one physical:host reservation each
// (with its allocation and three events) spread over nHosts hosts and 10
// projects, straight into the tables: the shape the dashboard lists.
// Every lease ends after 2030-01-01, so every allocation is listed.
func seedListing(tb testing.TB, d *db.DB, nLeases, nHosts int) {
	tb.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hs := make([]models.ComputeHost, nHosts)
	for i := range hs {
		hs[i] = models.ComputeHost{ID: int64(i + 1), VCPUs: 8, CPUInfo: "{}", HypervisorHostname: fmt.Sprintf("h%05d", i),
			ServiceName: fmt.Sprintf("h%05d", i), MemoryMB: 1024, LocalGB: 10, Reservable: true, CreatedAt: base}
	}
	if err := d.WithContext(ctx).CreateInBatches(hs, 200).Error; err != nil {
		tb.Fatal(err)
	}
	const batch = 500
	for from := 0; from < nLeases; from += batch {
		var (
			ls   []models.Lease
			rs   []models.Reservation
			chrs []models.ComputeHostReservation
			as   []models.ComputeHostAllocation
			evs  []models.Event
		)
		for i := from; i < min(from+batch, nLeases); i++ {
			start := base.Add(time.Duration(r.IntN(365*24)) * time.Hour)
			end := start.Add(time.Duration(1+r.IntN(72)) * time.Hour)
			created := base.Add(-time.Duration(nLeases-i) * time.Second).Add(time.Duration(r.IntN(1e6)) * time.Microsecond)
			l := models.Lease{ID: uuid.NewString(), Name: fmt.Sprintf("lease-%d", i), UserID: "u", ProjectID: fmt.Sprintf("p%d", i%10),
				StartDate: start, EndDate: end, Status: "PENDING", CreatedAt: created}
			if i%3 == 0 {
				u := created.Add(time.Minute)
				l.UpdatedAt = &u
			}
			res := models.Reservation{ID: uuid.NewString(), LeaseID: l.ID, ResourceID: uuid.NewString(), ResourceType: "physical:host",
				Status: "pending", CreatedAt: created}
			ls, rs = append(ls, l), append(rs, res)
			chrs = append(chrs, models.ComputeHostReservation{ID: res.ResourceID, ReservationID: res.ID, CountRange: "1-1",
				HypervisorProperties: `[">=", "$vcpus", "4"]`, BeforeEnd: "default", CreatedAt: created})
			as = append(as, models.ComputeHostAllocation{ID: uuid.NewString(), ReservationID: res.ID, ComputeHostID: fmt.Sprint(1 + i%nHosts),
				StartDate: start, EndDate: end, CreatedAt: created})
			for _, e := range []struct {
				typ string
				at  time.Time
			}{{leases.EventStart, start}, {leases.EventEnd, end}, {leases.EventBeforeEnd, end.Add(-time.Hour)}} {
				evs = append(evs, models.Event{ID: uuid.NewString(), LeaseID: l.ID, EventType: e.typ, Time: e.at, Status: "UNDONE", CreatedAt: created})
			}
		}
		for _, rows := range []any{ls, rs, chrs, as, evs} {
			if err := d.WithContext(ctx).CreateInBatches(rows, 250).Error; err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// listingServer is the Blazar API over a database seeded by seedListing,
// with the clock at 2030-01-01.
func listingServer(tb testing.TB, dialect db.Dialect, nLeases, nHosts int) (http.Handler, *db.DB) {
	tb.Helper()
	d := dbtest.OpenDialect(tb, dialect)
	seedListing(tb, d, nLeases, nHosts)
	// The seed's rows went in one by one through the triggers: fold the
	// change log as a running service's listings do, so the runs measure
	// the steady state (one row per bucket plus the recent writes).
	if _, err := d.CompactLeaseChanges(context.Background()); err != nil {
		tb.Fatal(err)
	}
	now := func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }
	hsvc := hosts.New(d, standalone.New(nil))
	hsvc.SetClock(now)
	reg, err := plugins.NewRegistry(
		hostplugin.New(hsvc, d.DB, hostplugin.Config{CheckHosts: hosts.ReservableTx}, now),
		floatingip.New(hsvc),
	)
	if err != nil {
		tb.Fatal(err)
	}
	rt := NewRouter()
	RegisterHosts(rt, hsvc)
	RegisterLeases(rt, leases.New(d, reg, leases.Config{MinutesBeforeEndLease: 60}, now, nil))
	return rt.Handler(NoAuth{}), d
}

// benchGet serves GET path through h (in process, the whole request:
// routing, auth, policy, loading, rendering) b.N times and reports the
// p50 and p99 per request and the bytes/s of the whole answer. before,
// when not nil, runs ahead of each request, untimed.
func benchGet(b *testing.B, h http.Handler, path string, headers map[string]string, before func()) {
	lat := make([]time.Duration, 0, 64)
	size := 0
	cpu0 := cpuTime()
	for b.Loop() {
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		// noauth fails closed: the admin's token, or the member's
		// "user:project" one.
		req.Header.Set("X-Auth-Token", "admin")
		if p := headers["X-Project-Id"]; p != "" {
			req.Header.Set("X-Auth-Token", headers["X-User-Id"]+":"+p)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		t := time.Now()
		h.ServeHTTP(rec, req)
		lat = append(lat, time.Since(t))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	// The box is shared: CPU time per request is steadier than latency.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
	b.SetBytes(int64(size))
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size), "body-bytes")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkListLeases: GET /v1/leases as an admin (every lease) and as a
// member of one of the ten projects, and GET /v1/os-hosts/allocations,
// over 1,000 and 10,000 leases on 100 hosts (one host allocation per
// lease), on every dialect; the -after-write ones with a commit to one
// lease's rows ahead of each request.
func BenchmarkListLeases(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		for _, n := range []int{1000, 10000} {
			h, d := listingServer(b, dialect, n, 100)
			// A commit ahead of each request, as another process's event
			// manager makes it: one event of one lease (a different one
			// each time) changes status. The cached bodies (SQLite) are
			// stale, and that lease's object is rendered again.
			var events []string
			if err := d.Raw("SELECT id FROM events ORDER BY id LIMIT 1000").Scan(&events).Error; err != nil {
				b.Fatal(err)
			}
			writes := 0
			write := func() {
				writes++
				st := []string{"UNDONE", "DONE"}[writes/len(events)%2]
				if err := d.Exec("UPDATE events SET status = ? WHERE id = ?", st, events[writes%len(events)]).Error; err != nil {
					b.Fatal(err)
				}
			}
			name := fmt.Sprintf("%s/%d", dialect, n)
			b.Run(name+"/leases-admin", func(b *testing.B) { benchGet(b, h, "/leases", nil, nil) })
			b.Run(name+"/leases-member", func(b *testing.B) { benchGet(b, h, "/leases", member, nil) })
			b.Run(name+"/allocations", func(b *testing.B) { benchGet(b, h, "/os-hosts/allocations", nil, nil) })
			b.Run(name+"/leases-admin-after-write", func(b *testing.B) { benchGet(b, h, "/leases", nil, write) })
			b.Run(name+"/leases-member-after-write", func(b *testing.B) { benchGet(b, h, "/leases", member, write) })
			b.Run(name+"/allocations-after-write", func(b *testing.B) { benchGet(b, h, "/os-hosts/allocations", nil, write) })
		}
	}
}
