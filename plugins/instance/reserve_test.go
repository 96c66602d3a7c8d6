package instance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins/instance"
)

// TestWholeHostReserve: with Config.WholeReservePercent 20 over 10 hosts,
// 2 hosts are kept whole: once 8 hosts are taken, a small lease in that
// window is refused with the reason, the earliest-window search waits
// for the hosts to come back, and whole-host sized slots still take the
// 2 kept hosts.
func TestWholeHostReserve(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnvWith(t, d, 10, nil, instance.Config{DB: d, WholeReservePercent: 20})
		whole := func(n int) map[string]any { return instanceRes(n, 8, 16384, 800, nil) }
		e.mustCreate(t, "eight", "2030-01-02 00:00", "2030-01-03 00:00", whole(8))
		_, err := e.create(t, "small", "2030-01-02 12:00", "2030-01-02 14:00", instanceRes(1, 1, 1024, 10, nil))
		if want := "2 hosts kept whole for whole-host requests (whole_host_reserve_percent=20)"; kindOf(err) != errs.NotEnoughResources || !strings.Contains(err.Error(), want) {
			t.Fatalf("small lease: %v, want NotEnoughResources with %q", err, want)
		}
		win, err := e.svc.Earliest(context.Background(), owner, leases.EarliestRequest{After: strp("2030-01-02 12:00"), Duration: 2 * time.Hour,
			Reservations: []leases.ReservationRequest{leasestest.Reservation(instanceRes(1, 1, 1024, 10, nil))}})
		if err != nil || win.StartDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("earliest: %+v, %v; want 2030-01-03 00:00", win, err)
		}
		v := e.mustCreate(t, "two", "2030-01-02 12:00", "2030-01-02 14:00", whole(2))
		if s := e.slots(t, v.Reservations[0]["id"].(string)); sum(s) != 2 || len(s) != 2 {
			t.Errorf("whole-host slots on %v, want one on each kept host", s)
		}
	})
}
