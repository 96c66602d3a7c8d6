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

// TestWholeHostReserveWithHostReservation: a lease of one whole host and
// one small slot, with 2 of 10 hosts kept whole and only 3 entirely free:
// the host reservation takes one of them, which still counts among the
// matching hosts, so the slot must wait as well; the earliest window and
// the create at "earliest" agree on when.
func TestWholeHostReserveWithHostReservation(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnvWith(t, d, 10, nil, instance.Config{DB: d, WholeReservePercent: 20})
		ctx := context.Background()
		e.mustCreate(t, "seven", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(7, 8, 16384, 800, nil))
		res := []map[string]any{leasestest.HostReservation(1, 1, "", ""), instanceRes(1, 1, 1024, 10, nil)}
		if _, err := e.create(t, "now", "2030-01-02 12:00", "2030-01-02 14:00", res...); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("create in the window: %v, want NotEnoughResources", err)
		}
		var rrs []leases.ReservationRequest
		for _, r := range res {
			rrs = append(rrs, leasestest.Reservation(r))
		}
		win, err := e.svc.Earliest(ctx, owner, leases.EarliestRequest{After: strp("2030-01-02 12:00"), Duration: 2 * time.Hour, Reservations: rrs})
		if err != nil || win.StartDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("earliest: %+v, %v; want 2030-01-03 00:00", win, err)
		}
		req := leasestest.Request("late", "earliest", "", res...)
		req.EndDate = nil
		v, err := e.svc.CreateEarliest(ctx, owner, req, strp("2030-01-02 12:00"), 2*time.Hour)
		if err != nil || v.StartDate != "2030-01-03T00:00:00.000000" {
			t.Fatalf("created: %v, %v; want at 2030-01-03 00:00", v, err)
		}
	})
}
