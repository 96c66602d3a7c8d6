package host

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// BenchmarkViewEarliest is the earliest-window search as the plugin runs
// it: on the view (sorted, packed booking bounds) of 10,000 hosts with
// 100,000 bookings over four weeks (disjoint per host, 1 to 24 hours),
// for 2, 10 and 100 hosts free together for 4 hours after a random
// time. It reports the p50 and p99 of the search.
func BenchmarkViewEarliest(b *testing.B) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(14, 2))
	const nHosts, perHost = 10000, 10
	infos := make([]Host, nHosts)
	var rows []allocRow
	for i := range infos {
		infos[i] = Host{ID: fmt.Sprint(i + 1), HypervisorHostname: fmt.Sprint("compute-", i+1), MemoryMB: 196608}
		at := base.Add(time.Duration(r.IntN(48)) * time.Hour)
		for k := range perHost {
			at = at.Add(time.Duration(r.IntN(36)) * time.Hour)
			end := at.Add(time.Duration(1+r.IntN(24)) * time.Hour)
			rows = append(rows, allocRow{ComputeHostID: infos[i].ID, ReservationID: fmt.Sprint("r", i, "-", k), StartDate: at, EndDate: end})
			at = end
		}
	}
	var x index
	x.setHostsLocked(infos)
	x.addRowsLocked(rows)
	x.packBoundsLocked()
	all := func(func(string) *Host) func(*allocator.Host) (bool, string) { return nil }
	for _, min := range []int{2, 10, 100} {
		b.Run(fmt.Sprint(min, "hosts"), func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				req := allocator.EarliestRequest{After: base.Add(time.Duration(r.IntN(14*24)) * time.Hour), Duration: 4 * time.Hour, Cleaning: time.Hour, Min: min}
				s := time.Now()
				res, err := x.earliest(req, all)
				lat = append(lat, time.Since(s))
				if err != nil || !res.Found {
					b.Fatal(err, res.Found)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(rows)), "allocations")
		})
	}
}
