package instance_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins/instance"
)

var _ leases.EarliestFinder = (*instance.Plugin)(nil)

func strp(s string) *string { return &s }

// TestEarliestWindow: the earliest-window search for virtual:instance
// waits for the slots, whole-host reservations and affinity that block
// the request, and a lease created at "earliest" gets that window.
func TestEarliestWindow(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		e := newEnvWith(t, d, 2, nil, instance.Config{DB: d})
		ctx := context.Background()
		// 3 half-host slots on the two hosts for a day, then host 1 (or
		// 2) taken whole for the next day.
		e.mustCreate(t, "slots", "2030-01-02 00:00", "2030-01-03 00:00", instanceRes(3, 4, 8192, 400, nil))
		e.mustCreate(t, "whole", "2030-01-03 00:00", "2030-01-04 00:00", map[string]any{"resource_type": "physical:host",
			"min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""})
		for _, tc := range []struct {
			name            string
			after, notAfter string
			res             map[string]any
			want            string // "" : none
		}{
			{"fits before the slots", "2030-01-01 12:00", "", instanceRes(2, 4, 8192, 400, nil), "2030-01-01T12:00:00.000000"},
			{"one half-host free during the slots", "2030-01-02 06:00", "", instanceRes(1, 4, 8192, 400, nil), "2030-01-02T06:00:00.000000"},
			{"two wait for the slots to end", "2030-01-01 23:00", "", instanceRes(2, 4, 8192, 400, nil), "2030-01-03T00:00:00.000000"},
			{"three wait for the whole host too", "2030-01-01 23:00", "", instanceRes(3, 4, 8192, 400, nil), "2030-01-04T00:00:00.000000"},
			{"anti-affinity over both hosts", "2030-01-01 23:00", "", instanceRes(2, 2, 2048, 100, "False"), "2030-01-04T00:00:00.000000"},
			{"affinity on the free host", "2030-01-01 23:00", "", instanceRes(2, 4, 8192, 400, "True"), "2030-01-03T00:00:00.000000"},
			{"not by the latest start", "2030-01-01 23:00", "2030-01-03 23:00", instanceRes(3, 4, 8192, 400, nil), ""},
			{"never: more than the hosts hold", "2030-01-01 12:00", "", instanceRes(5, 4, 8192, 400, nil), ""},
		} {
			req := leases.EarliestRequest{After: strp(tc.after), Duration: 2 * time.Hour,
				Reservations: []leases.ReservationRequest{leasestest.Reservation(tc.res)}}
			if tc.notAfter != "" {
				req.NotAfter = strp(tc.notAfter)
			}
			win, err := e.svc.Earliest(ctx, owner, req)
			if tc.want == "" {
				if kindOf(err) != errs.NotEnoughResources {
					t.Errorf("%s: %+v, %v; want NotEnoughResources", tc.name, win, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			n := 0
			if len(win.Reservations) == 1 {
				n = len(win.Reservations[0].Resources)
			}
			if win.StartDate != tc.want || n == 0 {
				t.Errorf("%s: window %s with hosts %+v, want start %s", tc.name, win.StartDate, win.Reservations, tc.want)
			}
		}
		// A lease created at "earliest" gets the window the search finds.
		req := leasestest.Request("late", "earliest", "", instanceRes(3, 4, 8192, 400, nil))
		req.EndDate = nil
		v, err := e.svc.CreateEarliest(ctx, owner, req, strp("2030-01-01 23:00"), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if v.StartDate != "2030-01-04T00:00:00.000000" {
			t.Errorf("created at %s, want 2030-01-04 00:00", v.StartDate)
		}
	})
}
