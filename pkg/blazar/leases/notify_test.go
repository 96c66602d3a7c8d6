package leases_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/notify"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// notified is one stored notification: the message and its lease payload.
type notified struct {
	notify.Message
	Lease leases.Payload
}

// notifications are the notification rows in the outbox, in id order.
func notifications(t *testing.T, d *db.DB) []notified {
	t.Helper()
	rows, err := outbox.List(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	var out []notified
	for _, r := range rows {
		if r.Kind != notify.KindLease {
			continue
		}
		var n notified
		if err := json.Unmarshal(r.Payload, &n.Message); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(n.Payload, &n.Lease); err != nil {
			t.Fatal(err)
		}
		if want := notify.Key(n.Lease.LeaseID); r.Key != want || r.LeaseID != "" {
			t.Errorf("row %d: key %q lease %q, want key %q and no lease (a notification never degrades its lease)", r.ID, r.Key, r.LeaseID, want)
		}
		out = append(out, n)
	}
	return out
}

// TestNotificationsFollowTheLease: a lease's life (create, start, rename,
// before end, an extension that re-arms the before-end event, before end
// again, end, delete) records one notification per step, in order, with
// Blazar's event types, the lease payload (status as Blazar shows it at
// that point) and a distinct message id each.
func TestNotificationsFollowTheLease(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			n, err := notify.New(notify.Config{Drivers: []string{"log"}})
			if err != nil {
				t.Fatal(err)
			}
			clock := leasestest.NewClock(t0)
			svc, _ := leasestest.New(d, leasestest.NewHosts(2, nil), clock, leasestest.Options{Notifier: n})
			ev := events.New(d, svc, events.Config{}, clock.Now)
			ctx := context.Background()
			run := func(at time.Time) {
				t.Helper()
				clock.Set(at)
				if _, err := ev.RunDue(ctx); err != nil {
					t.Fatal(err)
				}
			}

			req := leasestest.Request("l", "now", "2030-01-01 12:00", leasestest.HostReservation(1, 1, "", ""))
			req.BeforeEndDate = leasestest.Str("2030-01-01 11:00")
			v, err := svc.Create(ctx, owner, req)
			if err != nil {
				t.Fatal(err)
			}
			run(t0)
			if _, err := svc.Update(ctx, owner, v.ID, leases.UpdateRequest{Name: leasestest.Str("renamed")}); err != nil {
				t.Fatal(err)
			}
			run(time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
			if _, err := svc.Update(ctx, owner, v.ID, leases.UpdateRequest{EndDate: leasestest.Str("2030-01-01 12:30")}); err != nil {
				t.Fatal(err)
			}
			run(time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC))
			if err := svc.Delete(ctx, owner, v.ID); err != nil {
				t.Fatal(err)
			}

			type step struct{ EventType, Status, Name, EndDate string }
			want := []step{
				{leases.NotifyCreate, "PENDING", "l", "2030-01-01T12:00:00.000000"},
				{leases.NotifyStartLease, "ACTIVE", "l", "2030-01-01T12:00:00.000000"},
				{leases.NotifyUpdate, "UPDATING", "renamed", "2030-01-01T12:00:00.000000"},
				{leases.NotifyBeforeEndLease, "ACTIVE", "renamed", "2030-01-01T12:00:00.000000"},
				{leases.NotifyUpdate, "UPDATING", "renamed", "2030-01-01T12:30:00.000000"},
				{leases.NotifyBeforeEndLeaseEnd, "UPDATING", "renamed", "2030-01-01T12:30:00.000000"},
				{leases.NotifyBeforeEndLease, "ACTIVE", "renamed", "2030-01-01T12:30:00.000000"},
				{leases.NotifyEndLease, "TERMINATED", "renamed", "2030-01-01T12:30:00.000000"},
				{leases.NotifyDelete, "DELETING", "renamed", "2030-01-01T12:30:00.000000"},
			}
			got := notifications(t, d)
			var steps []step
			ids := map[string]bool{}
			for _, g := range got {
				steps = append(steps, step{g.EventType, g.Lease.Status, g.Lease.Name, g.Lease.EndDate})
				ids[g.MessageID] = true
				if g.PublisherID != "blazar.lease" || g.Priority != "INFO" || g.Lease.LeaseID != v.ID || g.Lease.ProjectID != "p1" || g.Lease.UserID != "u1" {
					t.Errorf("%s: publisher %q priority %q lease %q project %q user %q", g.EventType, g.PublisherID, g.Priority, g.Lease.LeaseID, g.Lease.ProjectID, g.Lease.UserID)
				}
				if len(g.Lease.Reservations) != 1 || len(g.Lease.Events) != 3 {
					t.Errorf("%s: %d reservations, %d events; want 1 and 3", g.EventType, len(g.Lease.Reservations), len(g.Lease.Events))
				} else if rt := g.Lease.Reservations[0]["resource_type"]; rt != "physical:host" {
					t.Errorf("%s: reservation resource_type %v", g.EventType, rt)
				}
			}
			if diff := cmp.Diff(want, steps); diff != "" {
				t.Errorf("notifications (-want +got):\n%s", diff)
			}
			if len(ids) != len(got) {
				t.Errorf("%d distinct message ids for %d notifications", len(ids), len(got))
			}
			if len(got) > 0 {
				first := got[0]
				if first.Timestamp != "2030-01-01 10:00:30" {
					t.Errorf("timestamp %q, want Python's str() of the commit time", first.Timestamp)
				}
				if first.Lease.CreatedAt != "2030-01-01T10:00:30.000000" || first.Lease.StartDate != "2030-01-01T10:00:00.000000" {
					t.Errorf("created_at %q start_date %q: want oslo's datetime encoding", first.Lease.CreatedAt, first.Lease.StartDate)
				}
			}
		})
	}
}

// TestNoNotifierNoRows: without a notifier (driver noop or none) no
// notification row is written.
func TestNoNotifierNoRows(t *testing.T) {
	for _, drivers := range [][]string{nil, {"noop"}} {
		n, err := notify.New(notify.Config{Drivers: drivers})
		if err != nil || n != nil {
			t.Fatalf("drivers %v: notifier %v, err %v; want none", drivers, n, err)
		}
		d := dbtest.Open(t)
		clock := leasestest.NewClock(t0)
		svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{Notifier: n})
		v := create(t, svc, owner, "l", "now", "2030-01-01 12:00", leasestest.HostReservation(1, 1, "", ""))
		if _, err := events.New(d, svc, events.Config{}, clock.Now).RunDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := svc.Delete(context.Background(), owner, v.ID); err != nil {
			t.Fatal(err)
		}
		if got := notifications(t, d); len(got) != 0 {
			t.Errorf("drivers %v: %d notification rows, want none", drivers, len(got))
		}
	}
}
