package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/internal/blazartest"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

var owner = leases.Caller{UserID: "u1", ProjectID: "p1"}

// counter wraps a Runner and counts, per event, the runs that committed.
type counter struct {
	next events.Runner
	mu   sync.Mutex
	runs map[string]int
	log  []string
}

func (c *counter) RunEvent(ctx context.Context, ev models.Event, claimant string) error {
	err := c.next.RunEvent(ctx, ev, claimant)
	if err == nil {
		c.mu.Lock()
		c.runs[ev.ID]++
		c.log = append(c.log, ev.LeaseID+":"+ev.EventType)
		c.mu.Unlock()
	}
	return err
}

func newCounter(r events.Runner) *counter { return &counter{next: r, runs: map[string]int{}} }

func create(t *testing.T, svc *leases.Service, name, start, end string, nHosts int) *leases.View {
	t.Helper()
	v, err := svc.Create(context.Background(), owner, leases.CreateRequest{Name: leasestest.Str(name), StartDate: leasestest.Str(start), EndDate: leasestest.Str(end), Reservations: leasestest.Res(leasestest.HostReservation(nHosts, nHosts, "", ""))})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return v
}

func get(t *testing.T, svc *leases.Service, id string) *leases.View {
	t.Helper()
	v, err := svc.Get(context.Background(), leases.Caller{Admin: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func eventStatuses(v *leases.View) map[string]string {
	m := map[string]string{}
	for _, e := range v.Events {
		m[e.EventType] = e.Status
	}
	return m
}

func TestStartNowAndEnd(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0.Add(20 * time.Second))
	svc, _ := leasestest.New(d, leasestest.NewHosts(2, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
	m := events.New(d, svc, events.Config{}, clock.Now)
	ctx := context.Background()
	a := create(t, svc, "a", "now", "2030-01-01 12:00", 2)
	if n, err := m.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("RunDue = %d, %v; want the start event", n, err)
	}
	v := get(t, svc, a.ID)
	if v.Status != "ACTIVE" || v.Reservations[0]["status"] != "active" {
		t.Fatalf("after start: lease %s, reservation %v", v.Status, v.Reservations[0]["status"])
	}
	clock.Set(time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
	if n, err := m.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("RunDue at before_end = %d, %v", n, err)
	}
	clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	if n, err := m.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("RunDue at end = %d, %v", n, err)
	}
	v = get(t, svc, a.ID)
	want := map[string]string{"start_lease": "DONE", "before_end_lease": "DONE", "end_lease": "DONE"}
	if diff := cmp.Diff(want, eventStatuses(v)); diff != "" || v.Status != "TERMINATED" || v.Reservations[0]["status"] != "deleted" {
		t.Fatalf("after end: %s %v (-want +got events): %s", v.Status, v.Reservations[0]["status"], diff)
	}
	var n int64
	d.Raw("SELECT COUNT(*) FROM computehost_allocations").Scan(&n)
	if n != 0 {
		t.Errorf("%d allocations left after the end", n)
	}
	// The hosts are free for a new lease at once.
	create(t, svc, "b", "now", "2030-01-01 13:00", 2)
}

func TestBackToBackLeasesHandOver(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{})
	c := newCounter(svc)
	m := events.New(d, c, events.Config{}, clock.Now)
	ctx := context.Background()
	a := create(t, svc, "a", "2030-01-01 11:00", "2030-01-01 12:00", 1)
	b := create(t, svc, "b", "2030-01-01 12:00", "2030-01-01 13:00", 1)
	// The manager was down: everything up to 12:00 runs at once, in order.
	clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	if _, err := m.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{a.ID + ":start_lease", a.ID + ":end_lease", b.ID + ":start_lease"}
	if diff := cmp.Diff(want, c.log); diff != "" {
		t.Fatalf("order (-want +got): %s", diff)
	}
	if s := get(t, svc, a.ID).Status; s != "TERMINATED" {
		t.Errorf("a is %s", s)
	}
	if s := get(t, svc, b.ID).Status; s != "ACTIVE" {
		t.Errorf("b is %s", s)
	}
}

func TestStaleClaimTakenBack(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{})
	ctx := context.Background()
	a := create(t, svc, "a", "now", "2030-01-01 12:00", 1)
	// A dead manager claimed the start event and never finished.
	old := t0.Add(-10 * time.Minute)
	if err := d.Model(&models.Event{}).Where("lease_id = ? AND event_type = ?", a.ID, "start_lease").
		Updates(map[string]any{"status": "IN_PROGRESS", "claimed_by": "dead", "claimed_at": old}).Error; err != nil {
		t.Fatal(err)
	}
	m := events.New(d, svc, events.Config{ClaimTimeout: 15 * time.Minute}, clock.Now)
	if n, _ := m.RunDue(ctx); n != 0 {
		t.Fatalf("a fresh claim was taken back")
	}
	// The dead manager cannot finish it either once it is taken back.
	clock.Add(6 * time.Minute)
	if n, err := m.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("RunDue after the claim timeout = %d, %v", n, err)
	}
	var ev models.Event
	d.Where("lease_id = ? AND event_type = ?", a.ID, "start_lease").Take(&ev)
	if err := svc.RunEvent(ctx, ev, "dead"); err == nil {
		t.Fatal("the dead claimant could still complete the event")
	}
	if s := get(t, svc, a.ID).Status; s != "ACTIVE" {
		t.Errorf("lease is %s", s)
	}
}

// TestExactlyOnceTwoManagers runs two managers (each with its own
// connection pool and lease service, as two processes) concurrently over
// the same events: every event runs exactly once.
func TestExactlyOnceTwoManagers(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d1, d2 := blazartest.OpenTwice(t, dialect)
			clock := leasestest.NewClock(t0)
			hosts := leasestest.NewHosts(40, nil)
			svc1, _ := leasestest.New(d1, hosts, clock, leasestest.Options{MinutesBeforeEndLease: 30})
			svc2, _ := leasestest.New(d2, hosts, clock, leasestest.Options{MinutesBeforeEndLease: 30})
			const n = 40
			var ids []string
			for i := range n {
				start := t0.Add(time.Duration(i%5) * time.Minute)
				v := create(t, svc1, fmt.Sprint("l", i), start.Format("2006-01-02 15:04"), start.Add(time.Hour).Format("2006-01-02 15:04"), 1)
				ids = append(ids, v.ID)
			}
			c1, c2 := newCounter(svc1), newCounter(svc2)
			m1 := events.New(d1, c1, events.Config{ID: "m1"}, clock.Now)
			m2 := events.New(d2, c2, events.Config{ID: "m2"}, clock.Now)
			ctx := context.Background()
			for _, at := range []time.Duration{2 * time.Minute, 10 * time.Minute, 45 * time.Minute, 2 * time.Hour} {
				clock.Set(t0.Add(at))
				var wg sync.WaitGroup
				for _, m := range []*events.Manager{m1, m2} {
					wg.Go(func() {
						for range 3 {
							if _, err := m.RunDue(ctx); err != nil {
								t.Errorf("%s: %v", m.ID(), err)
							}
						}
					})
				}
				wg.Wait()
			}
			var evs []models.Event
			if err := d1.Find(&evs).Error; err != nil {
				t.Fatal(err)
			}
			if len(evs) != 3*n {
				t.Fatalf("%d events, want %d", len(evs), 3*n)
			}
			for _, e := range evs {
				runs := c1.runs[e.ID] + c2.runs[e.ID]
				if runs != 1 || e.Status != "DONE" {
					t.Errorf("event %s (%s): ran %d times, status %s", e.ID, e.EventType, runs, e.Status)
				}
			}
			if m1.Ran.Load()+m2.Ran.Load() != 3*n {
				t.Errorf("managers ran %d + %d events, want %d", m1.Ran.Load(), m2.Ran.Load(), 3*n)
			}
			t.Logf("manager 1 ran %d, manager 2 ran %d", m1.Ran.Load(), m2.Ran.Load())
			for _, id := range ids {
				if s := get(t, svc1, id).Status; s != "TERMINATED" {
					t.Errorf("lease %s is %s", id, s)
				}
			}
		})
	}
}

// TestRunLoopWakesOnNotify: the loop runs a "now" lease's start without
// waiting for a poll when the service notifies it.
func TestRunLoopWakesOnNotify(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	var m *events.Manager
	svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{EventsChanged: func() { m.Notify() }})
	started := make(chan struct{}, 10)
	m = events.New(d, runFunc(func(ctx context.Context, ev models.Event, c string) error {
		err := svc.RunEvent(ctx, ev, c)
		started <- struct{}{}
		return err
	}), events.Config{Poll: time.Hour}, clock.Now) // the poll alone would never fire
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	create(t, svc, "a", "now", "2030-01-01 12:00", 1)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not wake up on Notify (its poll is an hour)")
	}
	cancel()
	<-done
}

type runFunc func(ctx context.Context, ev models.Event, claimant string) error

func (f runFunc) RunEvent(ctx context.Context, ev models.Event, claimant string) error {
	return f(ctx, ev, claimant)
}

// TestHostActionsAndPrivacy: start, before_end (snapshot) and end call the
// compute actions with the hosts' names; deleting an active lease runs the
// end actions; a non-admin may not reserve by a private property.
func TestHostActionsAndPrivacy(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	hosts := leasestest.NewHosts(2, func(i int) map[string]string {
		return map[string]string{"service_name": fmt.Sprint("node-", i), "secret": "x"}
	})
	hosts.Private = map[string]bool{"secret": true}
	acts := &leasestest.Actions{}
	svc, _ := leasestest.New(d, hosts, clock, leasestest.Options{Actions: acts, MinutesBeforeEndLease: 30, DefaultBeforeEnd: "snapshot"})
	m := events.New(d, svc, events.Config{}, clock.Now)
	ctx := context.Background()
	_, err := svc.Create(ctx, owner, leases.CreateRequest{Name: leasestest.Str("p"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-01 12:00"), Reservations: leasestest.Res(leasestest.HostReservation(1, 1, "", `["==", "$secret", "x"]`))})
	if err == nil || !strings.Contains(err.Error(), "Property secret is private") {
		t.Fatalf("private property by a member: %v", err)
	}
	if _, err := svc.Create(ctx, leases.Caller{UserID: "admin", ProjectID: "admin", Admin: true}, leases.CreateRequest{Name: leasestest.Str("adm"), StartDate: leasestest.Str("2030-02-01 12:00"), EndDate: leasestest.Str("2030-02-01 13:00"), Reservations: leasestest.Res(leasestest.HostReservation(1, 1, "", `["==", "$secret", "x"]`))}); err != nil {
		t.Fatalf("private property by an admin: %v", err)
	}
	a := create(t, svc, "a", "now", "2030-01-01 12:00", 1)
	b := create(t, svc, "b", "now", "2030-01-01 12:00", 1)
	// The actions are carried out from the outbox after each commit
	// (acts.Log runs the due rows, as the server's worker would).
	if _, err := m.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	acts.Log()
	clock.Set(time.Date(2030, 1, 1, 11, 30, 0, 0, time.UTC))
	if _, err := m.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	acts.Log()
	if err := svc.Delete(ctx, owner, b.ID); err != nil {
		t.Fatal(err)
	}
	acts.Log()
	clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	if _, err := m.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	_ = a
	got := acts.Log()
	// a and b each got one of the two nodes; which one is the allocator's
	// choice, so compare with the names normalised.
	var norm []string
	for _, c := range got {
		norm = append(norm, strings.NewReplacer("node-1", "node-N", "node-2", "node-N").Replace(c))
	}
	want := []string{"start p1 [node-N]", "start p1 [node-N]", "snapshot [node-N]", "snapshot [node-N]", "end [node-N]", "end [node-N]"}
	if diff := cmp.Diff(want, norm); diff != "" {
		t.Errorf("actions (-want +got): %s\n%v", diff, got)
	}
	if got[0][len(got[0])-7:] == got[1][len(got[1])-7:] {
		t.Errorf("both leases started on the same host: %v", got)
	}
}

// TestUpdateActiveLease: upstream's rules for a started lease — its hosts
// must stay (max cannot drop below the hosts held, an extension needs
// them free), more hosts join at once.
func TestUpdateActiveLease(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	acts := &leasestest.Actions{}
	svc, _ := leasestest.New(d, leasestest.NewHosts(3, nil), clock, leasestest.Options{Actions: acts})
	m := events.New(d, svc, events.Config{}, clock.Now)
	ctx := context.Background()
	a := create(t, svc, "a", "now", "2030-01-01 12:00", 2)
	if _, err := m.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := acts.Log(); len(got) != 2 {
		t.Fatalf("start actions: %v", got)
	}
	// Someone else books the third host right after a ends.
	b := create(t, svc, "b", "2030-01-01 12:00", "2030-01-01 14:00", 1)
	rid := a.Reservations[0]["id"]
	upd := func(req leases.UpdateRequest) error {
		_, err := svc.Update(ctx, owner, a.ID, req)
		return err
	}
	if err := upd(leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": rid, "min": 1, "max": 1}}})); err == nil ||
		!strings.Contains(err.Error(), "cannot be kept") {
		t.Errorf("lowering max of an active reservation: %v", err)
	}
	// b took one of a's hosts (the best fit: it starts when a ends), so a
	// cannot be extended over b without losing a host.
	if err := upd(leasestest.Upd(map[string]any{"end_date": "2030-01-01 13:00"})); err == nil || !strings.Contains(err.Error(), "cannot be kept") {
		t.Errorf("extending an active lease over a host booked next: %v", err)
	}
	if err := svc.Delete(ctx, owner, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := upd(leasestest.Upd(map[string]any{"end_date": "2030-01-01 13:00"})); err != nil {
		t.Errorf("extending an active lease whose hosts stay free: %v", err)
	}
	if err := upd(leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": rid, "max": 3}}})); err != nil {
		t.Fatalf("growing an active reservation: %v", err)
	}
	v := get(t, svc, a.ID)
	if v.Reservations[0]["max"] != 3 || v.Status != "ACTIVE" {
		t.Errorf("after growing: %v %s", v.Reservations[0], v.Status)
	}
	var n int64
	d.Raw("SELECT COUNT(*) FROM computehost_allocations").Scan(&n)
	if n != 3 {
		t.Errorf("%d hosts held, want 3", n)
	}
	log := acts.Log()
	if len(log) != 3 || !strings.HasPrefix(log[2], "start p1 [") || slices.Contains(log[:2], log[2]) {
		t.Errorf("the added host must join at once: %v", log)
	}
}

// TestObserveLag: the hook is told, for each event this manager claims,
// how long after its due time it started, by the manager's clock.
func TestObserveLag(t *testing.T) {
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0.Add(20 * time.Second))
	svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{MinutesBeforeEndLease: 60})
	var got []string
	m := events.New(d, svc, events.Config{ObserveLag: func(typ string, lag time.Duration) {
		got = append(got, fmt.Sprintf("%s %v", typ, lag))
	}}, clock.Now)
	ctx := context.Background()
	create(t, svc, "a", "2030-01-01 10:01", "2030-01-01 12:00", 1)
	for _, at := range []time.Time{
		t0.Add(30 * time.Second),                     // nothing due
		t0.Add(time.Minute + 1500*time.Millisecond),  // start, 1.5s late
		time.Date(2030, 1, 1, 11, 7, 0, 0, time.UTC), // before_end, 7 minutes late
		time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), // end, on time
	} {
		clock.Set(at)
		if _, err := m.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"start_lease 1.5s", "before_end_lease 7m0s", "end_lease 0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observed lags (-want +got):\n%s", diff)
	}
}

// TestShutdownHandsClaimBack: a manager stopped (its context cancelled)
// while the event it claimed has not run puts the claim back at once,
// without counting the attempt, so another manager runs the event
// without waiting for the claim timeout.
func TestShutdownHandsClaimBack(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			clock := leasestest.NewClock(t0)
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{})
			a := create(t, svc, "a", "now", "2030-01-01 12:00", 1)
			ctx, cancel := context.WithCancel(context.Background())
			claimed := make(chan models.Event, 1)
			stopping := events.New(d, runFunc(func(ctx context.Context, ev models.Event, claimant string) error {
				claimed <- ev
				<-ctx.Done() // SIGTERM arrives while the event is claimed
				return svc.RunEvent(ctx, ev, claimant)
			}), events.Config{ClaimTimeout: time.Hour}, clock.Now)
			done := make(chan error, 1)
			go func() { _, err := stopping.RunDue(ctx); done <- err }()
			var ev models.Event
			select {
			case ev = <-claimed:
			case <-time.After(10 * time.Second):
				t.Fatal("the manager did not claim the due event")
			}
			var mid models.Event
			if err := d.Where("id = ?", ev.ID).Take(&mid).Error; err != nil {
				t.Fatal(err)
			}
			if mid.Status != "IN_PROGRESS" || mid.ClaimedBy != stopping.ID() {
				t.Fatalf("while claimed: status %s by %q", mid.Status, mid.ClaimedBy)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("RunDue at shutdown: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("RunDue did not return after its context ended")
			}
			var back models.Event
			if err := d.Where("id = ?", ev.ID).Take(&back).Error; err != nil {
				t.Fatal(err)
			}
			if back.Status != "UNDONE" || back.ClaimedBy != "" || back.Attempts != 0 {
				t.Fatalf("after shutdown: status %s, claimed by %q, attempts %d; want UNDONE, unclaimed, 0", back.Status, back.ClaimedBy, back.Attempts)
			}
			// Another process runs it now, long before the claim timeout.
			c := newCounter(svc)
			other := events.New(d, c, events.Config{ClaimTimeout: time.Hour}, clock.Now)
			if n, err := other.RunDue(context.Background()); err != nil || n != 1 {
				t.Fatalf("the other manager's RunDue = %d, %v; want the handed-back event", n, err)
			}
			if c.runs[ev.ID] != 1 || get(t, svc, a.ID).Status != "ACTIVE" {
				t.Fatalf("runs %v, lease %s", c.runs, get(t, svc, a.ID).Status)
			}
		})
	}
}
