package leases_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// gateDriver is a compute driver whose AddToReservation (the call that
// gives a reserved host to its project) can be made to block or fail;
// every call that returned nil is an effect.
type gateDriver struct {
	*standalone.Driver
	entered chan string   // a call started (host)
	gate    chan struct{} // when not nil, a call waits for it
	mu      sync.Mutex
	fails   int // the next fails calls fail
	effects []string
}

func (g *gateDriver) AddToReservation(ctx context.Context, agg compute.ReservationAggregate, hosts []string) error {
	if g.entered != nil {
		g.entered <- hosts[0]
	}
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fails > 0 {
		g.fails--
		return errors.New("compute service unavailable")
	}
	g.effects = append(g.effects, agg.ReservationID+" "+hosts[0])
	return nil
}

func (g *gateDriver) Effects() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.effects...)
}

// outboxEnv is a lease service whose host plugin's compute actions go
// through an outbox worker over drv.
type outboxEnv struct {
	d      *db.DB
	clock  *leasestest.Clock
	svc    *leases.Service
	events *events.Manager
	worker *outbox.Worker
}

func newOutboxEnv(t *testing.T, d *db.DB, drv compute.Driver, cfg outbox.Config) *outboxEnv {
	t.Helper()
	e := &outboxEnv{d: d, clock: leasestest.NewClock(t0)}
	e.svc, _ = leasestest.New(d, leasestest.NewHosts(3, nil), e.clock, leasestest.Options{})
	e.events = events.New(d, e.svc, events.Config{}, e.clock.Now)
	cfg.OnFailure, cfg.OnSuccess = e.svc.OutboxFailure, e.svc.OutboxSuccess
	e.worker = outbox.NewWorker(d, hostplugin.OutboxHandlers(drv), cfg, e.clock.Now)
	return e
}

// start creates a lease of one host starting now and runs its start
// event: the host's reserve action is in the outbox.
func (e *outboxEnv) start(t *testing.T, name string) *leases.View {
	t.Helper()
	v := create(t, e.svc, owner, name, "now", "2030-01-01 12:00", leasestest.HostReservation(1, 1, "", ""))
	if _, err := e.events.RunDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (e *outboxEnv) lease(t *testing.T, id string) models.Lease {
	t.Helper()
	var l models.Lease
	if err := e.d.Where("id = ?", id).Take(&l).Error; err != nil {
		t.Fatal(err)
	}
	return l
}

// within fails the test when ch does not deliver in a generous bound (a
// hang, not a speed assertion).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

// TestBlockedComputeCallDelaysNoWrite: while the compute driver blocks
// in a lease's start action, an unrelated lease create and a Placement
// write commit: the call runs after the commit, outside any transaction.
func TestBlockedComputeCallDelaysNoWrite(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			drv := &gateDriver{Driver: standalone.New(nil), entered: make(chan string, 4), gate: make(chan struct{})}
			e := newOutboxEnv(t, d, drv, outbox.Config{})
			a := e.start(t, "a")
			ran := make(chan error, 1)
			go func() { _, err := e.worker.RunDue(context.Background()); ran <- err }()
			within(t, drv.entered, "start action")

			// The driver is blocked; writes go on.
			done := make(chan error, 2)
			go func() {
				_, err := e.svc.Create(context.Background(), owner, leasestest.Request("b", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", "")))
				done <- err
			}()
			go func() {
				_, err := placement.NewService(d, placement.Config{}).CreateProvider(context.Background(), "rp-1", uuid.NewString(), nil)
				done <- err
			}()
			for range 2 {
				if err := within(t, done, "write while the compute driver blocks"); err != nil {
					t.Fatal(err)
				}
			}
			close(drv.gate)
			if err := within(t, ran, "outbox pass"); err != nil {
				t.Fatal(err)
			}
			if got := drv.Effects(); len(got) != 1 || got[0][:36] != a.Reservations[0]["id"] {
				t.Errorf("effects %v", got)
			}
		})
	}
}

// TestComputeCallRetriedUntilItWorks: a start action that fails three
// times and then succeeds has one effect; meanwhile the lease shows
// degraded and the outbox row its last error; after the success the
// lease is clear again.
func TestComputeCallRetriedUntilItWorks(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			drv := &gateDriver{Driver: standalone.New(nil), fails: 3}
			e := newOutboxEnv(t, d, drv, outbox.Config{Backoff: func(int) time.Duration { return time.Minute }})
			a := e.start(t, "a")
			ctx := context.Background()
			for i := 1; i <= 3; i++ {
				if _, err := e.worker.RunDue(ctx); err != nil {
					t.Fatal(err)
				}
				rows, err := outbox.List(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != 1 || rows[0].Attempts != i || rows[0].LastError != "compute service unavailable" {
					t.Fatalf("after failure %d: rows %+v", i, rows)
				}
				if l := e.lease(t, a.ID); !l.Degraded || l.Status != leases.StatusActive {
					t.Fatalf("after failure %d: lease degraded=%v status %s", i, l.Degraded, l.Status)
				}
				e.clock.Add(time.Minute) // the backoff passes
			}
			if _, err := e.worker.RunDue(ctx); err != nil {
				t.Fatal(err)
			}
			if got := drv.Effects(); len(got) != 1 {
				t.Errorf("effects %v, want one", got)
			}
			if rows, _ := outbox.List(ctx, d); len(rows) != 0 {
				t.Errorf("rows left: %+v", rows)
			}
			if l := e.lease(t, a.ID); l.Degraded {
				t.Error("lease still degraded after the action succeeded")
			}
		})
	}
}

// TestComputeCallFailsForGood: after the retry budget the row is FAILED
// and kept, and the lease whose start could not be applied is in ERROR.
func TestComputeCallFailsForGood(t *testing.T) {
	d := dbtest.Open(t)
	drv := &gateDriver{Driver: standalone.New(nil), fails: 100}
	e := newOutboxEnv(t, d, drv, outbox.Config{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }})
	a := e.start(t, "a")
	ctx := context.Background()
	for range 2 {
		if _, err := e.worker.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := outbox.List(ctx, d, outbox.StatusFailed)
	if err != nil || len(rows) != 1 || rows[0].LeaseID != a.ID {
		t.Fatalf("failed rows %+v, %v", rows, err)
	}
	l := e.lease(t, a.ID)
	if !l.Degraded || l.Status != leases.StatusError {
		t.Errorf("lease degraded=%v status %s, want degraded ERROR", l.Degraded, l.Status)
	}
	v, err := e.svc.Get(ctx, owner, a.ID)
	if err != nil || v.Reservations[0]["status"] != leases.ResError {
		t.Errorf("reservation %v, %v", v.Reservations, err)
	}
}

// TestComputeActionsOfALease: the compute calls a host lease makes, in
// order: the reservation's aggregate when it is created, the host from
// the freepool into it at the start, and at the end the servers cleaned
// up and the host back (the last host out deletes the aggregate); a
// lease deleted before
// its start only creates and deletes the aggregate.
func TestComputeActionsOfALease(t *testing.T) {
	d := dbtest.Open(t)
	drv := standalone.New(nil)
	e := newOutboxEnv(t, d, drv, outbox.Config{})
	ctx := context.Background()
	run := func() {
		t.Helper()
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.worker.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ops := func() []string {
		var out []string
		for _, c := range drv.Calls() {
			out = append(out, c.Op+" "+c.ReservationID[:min(8, len(c.ReservationID))]+" "+c.ProjectID)
		}
		return out
	}
	a := create(t, e.svc, owner, "a", "2030-01-02 00:00", "2030-01-02 06:00", leasestest.HostReservation(1, 1, "", ""))
	res := a.Reservations[0]["id"].(string)[:8]
	run()
	e.clock.Set(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))
	run()
	e.clock.Set(time.Date(2030, 1, 2, 6, 0, 0, 0, time.UTC))
	run()
	p := a.ProjectID
	want := []string{
		"create_reservation_aggregate " + res + " " + p,
		"remove_from_freepool  ",
		"add_to_reservation " + res + " " + p,
		"cleanup_servers  ",
		"remove_from_reservation " + res + " ",
		"add_to_freepool  ",
	}
	if diff := cmp.Diff(want, ops()); diff != "" {
		t.Errorf("compute calls (-want +got):\n%s", diff)
	}

	b := create(t, e.svc, owner, "b", "2031-01-01 00:00", "2031-01-01 06:00", leasestest.HostReservation(1, 1, "", ""))
	resB := b.Reservations[0]["id"].(string)[:8]
	run()
	if err := e.svc.Delete(ctx, owner, b.ID); err != nil {
		t.Fatal(err)
	}
	run()
	want = append(want, "create_reservation_aggregate "+resB+" "+p, "delete_reservation_aggregate "+resB+" "+p)
	if diff := cmp.Diff(want, ops()); diff != "" {
		t.Errorf("compute calls after deleting a future lease (-want +got):\n%s", diff)
	}
}
