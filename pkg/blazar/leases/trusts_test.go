package leases_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/events"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// fakeTrusts records the trust calls; trusts are "trust-<n>".
type fakeTrusts struct {
	mu        sync.Mutex
	n         int
	createErr error // CreateTrust fails with it
	dropErr   error // DeleteTrustAsCaller fails with it
	calls     []string
}

func (f *fakeTrusts) CreateTrust(_ context.Context, token, userID, projectID string, roles []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("create %s %s %s %s", token, userID, projectID, strings.Join(roles, ",")))
	if f.createErr != nil {
		return "", f.createErr
	}
	f.n++
	return fmt.Sprintf("trust-%d", f.n), nil
}

func (f *fakeTrusts) DeleteTrustAsCaller(_ context.Context, token, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "drop "+token+" "+id)
	return f.dropErr
}

func (f *fakeTrusts) DeleteTrust(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "delete "+id)
	return nil
}

func (f *fakeTrusts) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// trustRows are the trust ids of the pending trust deletions.
func trustRows(t *testing.T, svc *leases.Service) []string {
	t.Helper()
	var rows []models.OutboxAction
	if err := svc.DB().Where("kind = ?", leases.KindDeleteTrust).Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		var p struct {
			TrustID string `json:"trust_id"`
		}
		if err := json.Unmarshal([]byte(r.Payload), &p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.TrustID)
	}
	return ids
}

func count(t *testing.T, svc *leases.Service, m any) int64 {
	t.Helper()
	var n int64
	if err := svc.DB().Model(m).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

var trusted = leases.Caller{UserID: "u1", ProjectID: "p1", Token: "tok", Roles: []string{"member", "reader"}}

// TestLeaseTrustLifecycle: a lease made with a token gets a trust (made
// before the transaction, stored, shown); without a token none; a trust
// whose lease is not written is deleted with the caller's token, or
// through the outbox when that fails; a Keystone failure stores nothing;
// the lease's deletion and its end each record the trust's deletion,
// which the outbox handler carries out.
func TestLeaseTrustLifecycle(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			ft := &fakeTrusts{}
			d := dbtest.OpenDialect(t, dialect)
			clock := leasestest.NewClock(t0)
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{Trusts: ft})
			ctx := context.Background()

			// Made, stored, shown.
			v := create(t, svc, trusted, "a", "2030-01-02 10:00", "2030-01-02 11:00")
			if v.TrustID == nil || *v.TrustID != "trust-1" {
				t.Fatalf("trust_id %v, want trust-1", v.TrustID)
			}
			if got, err := svc.Get(ctx, trusted, v.ID); err != nil || got.TrustID == nil || *got.TrustID != "trust-1" {
				t.Fatalf("show: %+v %v", got, err)
			}
			if diff := cmp.Diff([]string{"create tok u1 p1 member,reader"}, ft.took()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}

			// No token (noauth): no trust.
			if v := create(t, svc, owner, "b", "2030-01-02 10:00", "2030-01-02 11:00"); v.TrustID != nil {
				t.Errorf("lease without a token has trust_id %q", *v.TrustID)
			}
			if calls := ft.took(); len(calls) != 0 {
				t.Errorf("calls without a token: %v", calls)
			}

			// Keystone fails: the error, nothing stored.
			leasesBefore := count(t, svc, &models.Lease{})
			ft.createErr = errs.Unavailablef("The identity service is unavailable; try again later.")
			_, err := svc.Create(ctx, trusted, leasestest.Request("c", "2030-01-02 10:00", "2030-01-02 11:00"))
			if errs.KindOf(err) != errs.Unavailable {
				t.Errorf("create with Keystone failing: %v, want Unavailable", err)
			}
			ft.createErr = nil
			if n := count(t, svc, &models.Lease{}); n != leasesBefore {
				t.Errorf("%d leases after a failed trust, want %d", n, leasesBefore)
			}
			ft.took()

			// The lease is not written (no host free): its trust is dropped
			// with the caller's token.
			_, err = svc.Create(ctx, trusted, leasestest.Request("d", "2030-01-02 10:00", "2030-01-02 11:00", leasestest.HostReservation(2, 2, "", "")))
			if err == nil {
				t.Fatal("two hosts out of one reserved")
			}
			if diff := cmp.Diff([]string{"create tok u1 p1 member,reader", "drop tok trust-2"}, ft.took()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if rows := trustRows(t, svc); len(rows) != 0 {
				t.Errorf("trust deletions queued: %v, want none", rows)
			}
			// … and when that fails, through the outbox.
			ft.dropErr = errors.New("keystone down")
			_, err = svc.Create(ctx, trusted, leasestest.Request("e", "2030-01-02 10:00", "2030-01-02 11:00", leasestest.HostReservation(2, 2, "", "")))
			if err == nil {
				t.Fatal("two hosts out of one reserved")
			}
			ft.dropErr = nil
			if diff := cmp.Diff([]string{"trust-3"}, trustRows(t, svc)); diff != "" {
				t.Errorf("trust deletions queued (-want +got):\n%s", diff)
			}
			ft.took()

			// Deleted: its trust's deletion is queued with the lease's.
			if err := svc.Delete(ctx, trusted, v.ID); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"trust-3", "trust-1"}, trustRows(t, svc)); diff != "" {
				t.Errorf("trust deletions queued (-want +got):\n%s", diff)
			}
			// Ended: likewise.
			ended := create(t, svc, trusted, "f", "now", "2030-01-01 11:00", leasestest.HostReservation(1, 1, "", ""))
			clock.Set(t0.Add(time.Hour))
			if _, err := events.New(d, svc, events.Config{}, clock.Now).RunDue(ctx); err != nil {
				t.Fatal(err)
			}
			if got, err := svc.Get(ctx, trusted, ended.ID); err != nil || got.Status != leases.StatusTerminated {
				t.Fatalf("lease after its end: %+v %v", got, err)
			}
			if diff := cmp.Diff([]string{"trust-3", "trust-1", *ended.TrustID}, trustRows(t, svc)); diff != "" {
				t.Errorf("trust deletions queued (-want +got):\n%s", diff)
			}
			ft.took()

			// The outbox carries them out (the host actions are not this
			// test's).
			if err := svc.DB().Where("kind <> ?", leases.KindDeleteTrust).Delete(&models.OutboxAction{}).Error; err != nil {
				t.Fatal(err)
			}
			w := outbox.NewWorker(d, leases.TrustHandlers(ft), outbox.Config{}, clock.Now)
			if n, err := w.RunDue(ctx); n != 3 || err != nil {
				t.Fatalf("outbox ran %d, %v; want the 3 deletions", n, err)
			}
			calls := ft.took()
			want := []string{"delete trust-1", "delete trust-3", "delete " + *ended.TrustID}
			if diff := cmp.Diff(want, calls, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("deletions (-want +got):\n%s", diff)
			}
			if rows := trustRows(t, svc); len(rows) != 0 {
				t.Errorf("trust deletions left: %v", rows)
			}
		})
	}
}
