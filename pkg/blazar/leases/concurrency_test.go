package leases_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/blazar/internal/blazartest"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

// TestNoDoubleBookingConcurrent fires 200 concurrent lease creations for
// overlapping windows at two lease services, each with its own connection
// pool and its own cached host view (two processes), then checks in SQL
// that no host is booked twice in overlapping windows.
func TestNoDoubleBookingConcurrent(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d1, d2 := blazartest.OpenTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			hosts := leasestest.NewHosts(12, nil)
			svcs := []*leases.Service{}
			for _, d := range []*db.DB{d1, d2} {
				s, _ := leasestest.New(d, hosts, clock, leasestest.Options{})
				svcs = append(svcs, s)
			}
			// Warm both views before the storm so they go stale at once.
			for _, s := range svcs {
				create(t, s, owner, "warm", "2031-01-01 00:00", "2031-01-01 01:00", leasestest.HostReservation(1, 1, "", ""))
			}
			const n = 200
			var ok, refused atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(i), 7))
					start := time.Date(2030, 1, 2, r.IntN(6), 0, 0, 0, time.UTC)
					end := start.Add(time.Duration(1+r.IntN(4)) * time.Hour)
					mx := 1 + r.IntN(3)
					_, err := svcs[i%2].Create(context.Background(), owner, leases.CreateRequest{Name: leasestest.Str(fmt.Sprint("c", i)), StartDate: leasestest.Str(start.Format("2006-01-02 15:04")), EndDate: leasestest.Str(end.Format("2006-01-02 15:04")), Reservations: leasestest.Res(leasestest.HostReservation(1, mx, "", ""))})
					switch {
					case err == nil:
						ok.Add(1)
					case status(err) == 409:
						refused.Add(1)
					default:
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("unexpected error: %v", err)
			}
			over, err := leasestest.Overlaps(context.Background(), d1)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range over {
				t.Error("double booking: " + o)
			}
			t.Logf("%d created, %d refused (409)", ok.Load(), refused.Load())
			if ok.Load() == 0 || refused.Load() == 0 {
				t.Errorf("the storm did not contend: %d created, %d refused", ok.Load(), refused.Load())
			}
		})
	}
}

// TestAllocatorPathProperty drives random creates, updates and deletes
// (windows, min/max, cleaning time) through the lease service and checks
// after every step that no host is double booked and that a refusal for
// lack of hosts is right: fewer than min hosts are free by brute force.
func TestAllocatorPathProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := dbtest.OpenDialect(t, db.SQLite)
		clock := leasestest.NewClock(t0)
		nHosts := rapid.IntRange(1, 5).Draw(rt, "hosts")
		cleaning := time.Duration(rapid.SampledFrom([]int{0, 0, 30}).Draw(rt, "cleaning")) * time.Minute
		svc, _ := leasestest.New(d, leasestest.NewHosts(nHosts, nil), clock, leasestest.Options{Cleaning: cleaning})
		ctx := context.Background()
		var ids []string
		window := func(label string) (time.Time, time.Time) {
			s := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 16).Draw(rt, label+"start")) * 30 * time.Minute)
			return s, s.Add(time.Duration(rapid.IntRange(1, 8).Draw(rt, label+"len")) * 30 * time.Minute)
		}
		for step := range rapid.IntRange(1, 25).Draw(rt, "steps") {
			op := rapid.IntRange(0, 3).Draw(rt, "op")
			switch {
			case op <= 1 || len(ids) == 0:
				s, e := window("c")
				mn := rapid.IntRange(1, 3).Draw(rt, "min")
				mx := mn + rapid.IntRange(0, 2).Draw(rt, "extra")
				v, err := svc.Create(ctx, owner, leases.CreateRequest{Name: leasestest.Str(fmt.Sprint(step)), StartDate: leasestest.Str(s.Format("2006-01-02 15:04")), EndDate: leasestest.Str(e.Format("2006-01-02 15:04")), Reservations: leasestest.Res(leasestest.HostReservation(mn, mx, "", ""))})
				if err == nil {
					ids = append(ids, v.ID)
					continue
				}
				if status(err) != 409 {
					rt.Fatalf("create: %v", err)
				}
				if free := freeHosts(rt, d, nHosts, s, e, cleaning, ""); free >= mn {
					rt.Fatalf("create [%s, %s) min %d refused (%v) but %d hosts are free", s, e, mn, err, free)
				}
			case op == 2:
				id := ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "which")]
				s, e := window("u")
				_, err := svc.Update(ctx, owner, id, leasestest.Upd(map[string]any{"start_date": s.Format("2006-01-02 15:04"), "end_date": e.Format("2006-01-02 15:04")}))
				if err != nil && errs.As(err) == nil {
					rt.Fatalf("update: %v", err)
				}
			default:
				i := rapid.IntRange(0, len(ids)-1).Draw(rt, "which")
				if err := svc.Delete(ctx, owner, ids[i]); err != nil {
					rt.Fatalf("delete: %v", err)
				}
				ids = append(ids[:i], ids[i+1:]...)
			}
			if over := overlapsWithCleaning(rt, d, cleaning); len(over) > 0 {
				rt.Fatalf("step %d: double booking: %v", step, over)
			}
		}
	})
}

func overlapsWithCleaning(rt *rapid.T, d *db.DB, cleaning time.Duration) []string {
	type row struct {
		ComputeHostID string
		AStart, AEnd  time.Time
		BStart, BEnd  time.Time
	}
	var rows []row
	if err := d.Raw(`SELECT a.compute_host_id, a.start_date AS a_start, a.end_date AS a_end, b.start_date AS b_start, b.end_date AS b_end
		FROM computehost_allocations a JOIN computehost_allocations b ON a.compute_host_id = b.compute_host_id AND a.id < b.id`).Scan(&rows).Error; err != nil {
		rt.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.AStart.Before(r.BEnd.Add(cleaning)) && r.BStart.Before(r.AEnd.Add(cleaning)) {
			out = append(out, fmt.Sprintf("host %s: [%s, %s) and [%s, %s)", r.ComputeHostID, r.AStart, r.AEnd, r.BStart, r.BEnd))
		}
	}
	return out
}

func freeHosts(rt *rapid.T, d *db.DB, nHosts int, s, e time.Time, cleaning time.Duration, exclude string) int {
	var busy []string
	if err := d.Raw(`SELECT DISTINCT compute_host_id FROM computehost_allocations WHERE start_date < ? AND end_date > ? AND reservation_id <> ?`,
		e.Add(cleaning), s.Add(-cleaning), exclude).Scan(&busy).Error; err != nil {
		rt.Fatal(err)
	}
	return nHosts - len(busy)
}

// TestConcurrentCreatesAllSucceedWhileHostsAreFree: 20 concurrent creates
// of one host each over the same window, at two lease services on one
// database (two processes), with 40 free hosts: every one succeeds on a
// host of its own. A booking that loses a race re-plans on the hosts still
// free instead of giving up with a 409.
func TestConcurrentCreatesAllSucceedWhileHostsAreFree(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d1, d2 := blazartest.OpenTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			hosts := leasestest.NewHosts(40, nil)
			var svcs []*leases.Service
			for _, d := range []*db.DB{d1, d2} {
				s, _ := leasestest.New(d, hosts, clock, leasestest.Options{})
				svcs = append(svcs, s)
			}
			for round := range 5 {
				start := time.Date(2030, 2, 1+round, 0, 0, 0, 0, time.UTC).Format("2006-01-02 15:04")
				end := time.Date(2030, 2, 1+round, 12, 0, 0, 0, time.UTC).Format("2006-01-02 15:04")
				var wg sync.WaitGroup
				errc := make(chan error, 20)
				for i := range 20 {
					wg.Go(func() {
						_, err := svcs[i%2].Create(context.Background(), owner, leasestest.Request(fmt.Sprint("r", round, "-", i), start, end, leasestest.HostReservation(1, 1, "", "")))
						errc <- err
					})
				}
				wg.Wait()
				close(errc)
				for err := range errc {
					if err != nil {
						t.Errorf("round %d: create refused with 20 of 40 hosts free: %v", round, err)
					}
				}
			}
			over, err := leasestest.Overlaps(context.Background(), d1)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range over {
				t.Error("double booking: " + o)
			}
		})
	}
}
