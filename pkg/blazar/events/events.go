// Package events is the lease event manager: it runs start_lease,
// end_lease and before_end_lease events on time and exactly once, even
// with several `leasehold serve` processes on one database.
//
// On time: the loop sleeps until the next due event, but never longer
// than the poll interval (at most 1 s) so events created by another
// process are seen promptly; Notify wakes it at once when this process
// creates or moves an event.
//
// Order: due events run sorted by (time, type) with before_end_lease
// before end_lease before start_lease at the same instant, so a lease
// ending when the next one starts hands its hosts over first. A
// start_lease also waits while any end_lease due at or before it is still
// pending or running elsewhere, and an end_lease waits for its lease's
// due before_end_lease.
//
// Exactly once: a manager claims an event with a conditional UPDATE
// (status UNDONE → IN_PROGRESS, claimed_by = its id); only the manager
// whose UPDATE changed the row runs it. The action and the final DONE
// status are written in one transaction that checks the claim still holds
// (leases.Service.RunEvent). A claim older than the claim timeout belongs
// to a dead process and is taken back (set UNDONE) by any manager.
// Events due while no manager ran are simply due at start.
package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/db"
)

// Runner runs one claimed event (leases.Service).
type Runner interface {
	RunEvent(ctx context.Context, ev models.Event, claimant string) error
}

// Config tunes the manager.
type Config struct {
	// Poll bounds the sleep between two looks at the database (default
	// 1s; the server never configures more than 1s).
	Poll time.Duration
	// ClaimTimeout is how old a claim must be to be taken back.
	ClaimTimeout time.Duration
	// MaxRetries is how many times an event whose lease cannot take it
	// yet is retried before it goes to ERROR ([manager]
	// event_max_retries).
	MaxRetries int
	// ID names this manager in claims (default host-pid-random).
	ID string
	// ObserveLag, when set, is told how late each event this manager
	// claimed starts to run (run time minus due time), for metrics. It
	// must not block.
	ObserveLag func(eventType string, lag time.Duration)
}

// Manager runs lease events.
type Manager struct {
	db   *db.DB
	run  Runner
	cfg  Config
	now  func() time.Time
	wake chan struct{}
	// Ran counts the events this manager ran to completion (DONE or
	// ERROR); for tests and metrics.
	Ran atomic.Int64
}

var order = map[string]int{leases.EventBeforeEnd: 0, leases.EventEnd: 1, leases.EventStart: 2}

var runnable = []string{leases.EventBeforeEnd, leases.EventEnd, leases.EventStart}

// New returns a manager; now is the clock (time.Now in production).
func New(d *db.DB, run Runner, cfg Config, now func() time.Time) *Manager {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = 5 * time.Minute
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
		if len(cfg.ID) > 64 {
			cfg.ID = cfg.ID[len(cfg.ID)-64:]
		}
	}
	if now == nil {
		now = time.Now
	}
	return &Manager{db: d, run: run, cfg: cfg, now: func() time.Time { return now().UTC() }, wake: make(chan struct{}, 1)}
}

// ID is this manager's claim name.
func (m *Manager) ID() string { return m.cfg.ID }

// Notify wakes the loop (an event was created or moved here).
func (m *Manager) Notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run loops until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	slog.InfoContext(ctx, "lease event manager started", "id", m.cfg.ID)
	for ctx.Err() == nil {
		n, err := m.RunDue(ctx)
		if err != nil && ctx.Err() == nil {
			slog.ErrorContext(ctx, "lease events", "err", err)
		}
		wait := m.cfg.Poll
		if n > 0 {
			wait = 0 // more may have become due meanwhile
		} else if next, err := m.NextDue(ctx); err == nil && next != nil {
			// A due event left pending (blocked, or claimed elsewhere)
			// is looked at again after a poll interval, not in a loop.
			if d := next.Sub(m.now()); d > 0 && d < wait {
				wait = d
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-m.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// NextDue is the time of the earliest pending event, or nil.
func (m *Manager) NextDue(ctx context.Context) (*time.Time, error) {
	var ev models.Event
	err := m.db.WithContext(ctx).Where("status = ? AND event_type IN ?", leases.EventUndone, runnable).
		Order("time").Limit(1).Find(&ev).Error
	if err != nil || ev.ID == "" {
		return nil, err
	}
	t := ev.Time.UTC()
	return &t, nil
}

// RunDue takes back stale claims and runs every due event once, in
// order. It returns how many events this call ran.
func (m *Manager) RunDue(ctx context.Context) (int, error) {
	now := m.now()
	g := m.db.WithContext(ctx)
	stale := now.Add(-m.cfg.ClaimTimeout)
	var n int64
	if err := g.Model(&models.Event{}).Where("status = ? AND claimed_at < ?", leases.EventInProgress, stale).Count(&n).Error; err != nil {
		return 0, err
	}
	if n > 0 {
		var taken int64
		if err := m.db.Write(ctx, func(tx *gorm.DB) error {
			res := tx.Model(&models.Event{}).Where("status = ? AND claimed_at < ?", leases.EventInProgress, stale).
				Updates(map[string]any{"status": leases.EventUndone, "claimed_by": ""})
			taken = res.RowsAffected
			return res.Error
		}); err != nil {
			return 0, err
		}
		slog.WarnContext(ctx, "took back stale event claims", "count", taken)
	}
	var due []models.Event
	if err := g.Where("status = ? AND time <= ? AND event_type IN ?", leases.EventUndone, now, runnable).
		Order("time").Limit(1000).Find(&due).Error; err != nil {
		return 0, err
	}
	sort.SliceStable(due, func(i, j int) bool {
		a, b := due[i], due[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if order[a.EventType] != order[b.EventType] {
			return order[a.EventType] < order[b.EventType]
		}
		return a.LeaseID < b.LeaseID
	})
	ran := 0
	var errs []error
	for _, ev := range due {
		if ctx.Err() != nil {
			break
		}
		blocked, err := m.blocked(ctx, ev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if blocked {
			continue
		}
		ok, err := m.claim(ctx, &ev, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue // another manager has it
		}
		if m.cfg.ObserveLag != nil {
			m.cfg.ObserveLag(ev.EventType, max(m.now().Sub(ev.Time), 0))
		}
		err = m.run.RunEvent(ctx, ev, m.cfg.ID)
		switch {
		case err == nil:
			ran++
			m.Ran.Add(1)
		case errors.Is(err, leases.ErrClaimLost):
		case ctx.Err() != nil:
			// Stopping (SIGTERM): the event did not run here; another
			// process, or the next start, takes it at once instead of
			// after the claim timeout.
			if rerr := m.handBack(ctx, ev); rerr != nil {
				errs = append(errs, rerr)
			}
		case errors.Is(err, leases.ErrLeaseBusy):
			if rerr := m.release(ctx, ev); rerr != nil {
				errs = append(errs, rerr)
			}
		default:
			ran++
			m.Ran.Add(1)
			errs = append(errs, fmt.Errorf("event %s (%s of lease %s): %w", ev.ID, ev.EventType, ev.LeaseID, err))
		}
	}
	return ran, errors.Join(errs...)
}

// blocked reports whether an event must wait for earlier events that are
// still pending or running (possibly in another process).
func (m *Manager) blocked(ctx context.Context, ev models.Event) (bool, error) {
	q := m.db.WithContext(ctx).Model(&models.Event{}).
		Where("status IN ? AND time <= ? AND id <> ?", []string{leases.EventUndone, leases.EventInProgress}, ev.Time, ev.ID)
	switch ev.EventType {
	case leases.EventStart:
		q = q.Where("event_type = ?", leases.EventEnd)
	case leases.EventEnd:
		q = q.Where("event_type = ? AND lease_id = ?", leases.EventBeforeEnd, ev.LeaseID)
	default:
		return false, nil
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		return false, err
	}
	return n > 0, nil
}

func (m *Manager) claim(ctx context.Context, ev *models.Event, now time.Time) (bool, error) {
	var changed int64
	err := m.db.Write(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&models.Event{}).
			Where("id = ? AND status = ?", ev.ID, leases.EventUndone).
			Updates(map[string]any{
				"status": leases.EventInProgress, "claimed_by": m.cfg.ID, "claimed_at": now,
				"attempts": ev.Attempts + 1,
			})
		changed = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return false, err
	}
	if changed == 1 {
		ev.Attempts++
		ev.Status = leases.EventInProgress
		ev.ClaimedBy = m.cfg.ID
		return true, nil
	}
	return false, nil
}

// release puts back an event whose lease could not take it, or fails it
// after MaxRetries retries.
func (m *Manager) release(ctx context.Context, ev models.Event) error {
	status := leases.EventUndone
	if ev.Attempts > m.cfg.MaxRetries {
		status = leases.EventError
		slog.WarnContext(ctx, "lease event gave up: lease cannot take it", "event", ev.ID, "type", ev.EventType, "lease", ev.LeaseID)
	}
	return m.db.Write(ctx, func(tx *gorm.DB) error {
		return tx.Model(&models.Event{}).
			Where("id = ? AND status = ? AND claimed_by = ?", ev.ID, leases.EventInProgress, m.cfg.ID).
			Updates(map[string]any{"status": status, "claimed_by": "", "updated_at": m.now().Truncate(time.Second)}).Error
	})
}

// handBackTimeout bounds the write that hands a claimed event back at
// shutdown (it runs after the manager's context has ended).
const handBackTimeout = 10 * time.Second

// handBack puts an event this manager claimed but did not run back to
// UNDONE, without counting the attempt. Only while the claim still holds:
// a run that committed after all left it DONE, which stays.
func (m *Manager) handBack(ctx context.Context, ev models.Event) error {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	var n int64
	err := m.db.Write(hctx, func(tx *gorm.DB) error {
		res := tx.Model(&models.Event{}).
			Where("id = ? AND status = ? AND claimed_by = ?", ev.ID, leases.EventInProgress, m.cfg.ID).
			Updates(map[string]any{"status": leases.EventUndone, "claimed_by": "", "attempts": max(ev.Attempts-1, 0)})
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("hand back event %s: %w", ev.ID, err)
	}
	if n == 1 {
		slog.InfoContext(hctx, "handed back a claimed lease event at shutdown", "event", ev.ID, "type", ev.EventType, "lease", ev.LeaseID)
	}
	return nil
}
