package instance_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins/instance"
)

// TestNoHostOverCapacity: for random sequences of whole-host and instance
// leases, updates and deletes, at no moment does a host hold more
// instance slots than its capacity, nor slots beside a whole-host
// reservation.
func TestNoHostOverCapacity(t *testing.T) {
	d := dbtest.Open(t)
	// Hosts of different sizes: 8 VCPU/16 GiB/800 GB, and half that; one
	// kept whole for whole-host requests (the reserve only refuses).
	e := newEnvWith(t, d, 4, func(i int) map[string]any {
		if i%2 == 0 {
			return map[string]any{"vcpus": "4", "memory_mb": "8192", "local_gb": "400"}
		}
		return nil
	}, instance.Config{WholeReservePercent: 25})
	ctx := context.Background()
	day := func(n int) string { return t0.Add(time.Duration(n) * 6 * time.Hour).Format("2006-01-02 15:04") }
	var accepted, refused int
	rapid.Check(t, func(rt *rapid.T) {
		// A clean slate for each sequence (the hosts stay).
		ls, err := e.svc.List(ctx, leases.Caller{Admin: true})
		if err != nil {
			rt.Fatal(err)
		}
		for _, l := range ls {
			if err := e.svc.Delete(ctx, leases.Caller{Admin: true}, l.ID); err != nil {
				rt.Fatal(err)
			}
		}
		var live []string // lease ids
		resOf := map[string]string{}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for i := range steps {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 5 || len(live) == 0:
				s := rapid.IntRange(1, 20).Draw(rt, "start")
				n := rapid.IntRange(1, 8).Draw(rt, "len")
				var res map[string]any
				if rapid.IntRange(0, 4).Draw(rt, "kind") == 0 {
					res = leasestest.HostReservation(1, rapid.IntRange(1, 2).Draw(rt, "max"), "", "")
				} else {
					res = instanceRes(rapid.IntRange(1, 8).Draw(rt, "amount"), rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "vcpus"),
						rapid.SampledFrom([]int{1024, 2048, 4096}).Draw(rt, "mem"), rapid.SampledFrom([]int{0, 50, 100}).Draw(rt, "disk"),
						rapid.SampledFrom([]any{nil, "True", "False"}).Draw(rt, "affinity"))
				}
				v, err := e.create(t, fmt.Sprint("l", i), day(s), day(s+n), res)
				if err != nil {
					refused++
				} else {
					accepted++
					live = append(live, v.ID)
					if res["resource_type"] == instance.ResourceType {
						resOf[v.ID] = v.Reservations[0]["id"].(string)
					}
				}
			case op < 8:
				id := rapid.SampledFrom(live).Draw(rt, "update")
				req := leases.UpdateRequest{}
				if rapid.Bool().Draw(rt, "dates") {
					s := rapid.IntRange(1, 20).Draw(rt, "nstart")
					req.StartDate, req.EndDate = leasestest.Str(day(s)), leasestest.Str(day(s+rapid.IntRange(1, 8).Draw(rt, "nlen")))
				}
				if rid, ok := resOf[id]; ok && rapid.Bool().Draw(rt, "params") {
					req.Reservations = leasestest.Update(map[string]any{"id": rid, "amount": rapid.IntRange(1, 10).Draw(rt, "namount"),
						"vcpus": rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "nvcpus")}).Reservations
				}
				_, _ = e.svc.Update(ctx, owner, id, req)
			default:
				k := rapid.IntRange(0, len(live)-1).Draw(rt, "delete")
				if err := e.svc.Delete(ctx, owner, live[k]); err != nil {
					rt.Fatal(err)
				}
				live = append(live[:k], live[k+1:]...)
			}
			if problems := overCapacity(rt, e); len(problems) > 0 {
				rt.Fatalf("after step %d: %v", i, problems)
			}
		}
	})
	// The sequences must fill hosts up, or the property says nothing.
	t.Logf("%d leases accepted, %d refused", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Errorf("%d accepted, %d refused: the sequences never reached capacity", accepted, refused)
	}
}

// overCapacity checks every host's instance slots over time against its
// capacity, and against whole-host bookings, by SQL on what was stored.
func overCapacity(t *rapid.T, e *env) []string {
	var caps []struct {
		ID                string
		VCPUs             int64 `gorm:"column:vcpus"`
		MemoryMB, LocalGB int64
	}
	if err := e.d.Raw("SELECT CAST(id AS CHAR(36)) AS id, vcpus, memory_mb, local_gb FROM computehosts").Scan(&caps).Error; err != nil {
		t.Fatal(err)
	}
	var slots []struct {
		ComputeHostID      string
		Slots              int64
		StartDate, EndDate time.Time
		VCPUs              int64 `gorm:"column:vcpus"`
		MemoryMB, DiskGB   int64
	}
	if err := e.d.Raw(`SELECT a.compute_host_id, a.slots, a.start_date, a.end_date, r.vcpus, r.memory_mb, r.disk_gb
		FROM instance_allocations a JOIN instance_reservations r ON r.reservation_id = a.reservation_id`).Scan(&slots).Error; err != nil {
		t.Fatal(err)
	}
	var problems []string
	var clash int64
	if err := e.d.Raw(`SELECT COUNT(*) FROM instance_allocations a JOIN computehost_allocations c
		ON c.compute_host_id = a.compute_host_id AND c.end_date > a.start_date AND c.start_date < a.end_date
		WHERE NOT EXISTS (SELECT 1 FROM instance_reservations r WHERE r.reservation_id = c.reservation_id)`).Scan(&clash).Error; err != nil {
		t.Fatal(err)
	}
	if clash > 0 {
		problems = append(problems, fmt.Sprintf("%d instance slots beside whole-host bookings", clash))
	}
	for _, h := range caps {
		// Use at each booking start is the use's maximum points.
		var times []time.Time
		for _, s := range slots {
			if s.ComputeHostID == h.ID {
				times = append(times, s.StartDate)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		for _, at := range times {
			var v, m, dk int64
			for _, s := range slots {
				if s.ComputeHostID == h.ID && !at.Before(s.StartDate) && at.Before(s.EndDate) {
					v, m, dk = v+s.Slots*s.VCPUs, m+s.Slots*s.MemoryMB, dk+s.Slots*s.DiskGB
				}
			}
			if v > h.VCPUs || m > h.MemoryMB || dk > h.LocalGB {
				problems = append(problems, fmt.Sprintf("host %s at %s: %d VCPU/%d MB/%d GB of %d/%d/%d", h.ID, at, v, m, dk, h.VCPUs, h.MemoryMB, h.LocalGB))
			}
		}
	}
	return problems
}
