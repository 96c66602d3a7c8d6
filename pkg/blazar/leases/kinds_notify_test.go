package leases_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/notify"
)

// TestImmediateNotifications: an IMMEDIATE lease, started in the
// transaction that creates it, is notified as created and started, both
// ACTIVE; a refused one is not notified at all.
func TestImmediateNotifications(t *testing.T) {
	d := dbtest.Open(t)
	n, err := notify.New(notify.Config{Drivers: []string{"log"}})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), leasestest.NewClock(t0), leasestest.Options{Notifier: n})
	req := leasestest.Request("l", "now", "2030-01-01 12:00", leasestest.HostReservation(1, 1, "", ""))
	req.LeaseType = leasestest.Str(leases.KindImmediate)
	v, err := svc.Create(context.Background(), owner, req)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != leases.StatusActive || v.LeaseType != leases.KindImmediate {
		t.Fatalf("lease %s %s, want ACTIVE IMMEDIATE", v.Status, v.LeaseType)
	}
	req.Name = leasestest.Str("refused")
	if _, err := svc.Create(context.Background(), owner, req); err == nil {
		t.Fatal("a second IMMEDIATE lease on the one host was accepted")
	}
	type step struct{ EventType, Status string }
	var got []step
	for _, g := range notifications(t, d) {
		got = append(got, step{g.EventType, g.Lease.Status})
	}
	want := []step{{leases.NotifyCreate, "ACTIVE"}, {leases.NotifyStartLease, "ACTIVE"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}
