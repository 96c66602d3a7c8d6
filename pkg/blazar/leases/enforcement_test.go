package leases_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/config"
)

func TestMaxLeaseDuration(t *testing.T) {
	filters := leases.NewFilters(config.Enforcement{
		EnabledFilters: []string{"MaxLeaseDurationFilter"}, MaxLeaseDuration: 86400,
		MaxLeaseDurationExemptProjectIDs: []string{"vip"},
	}, nil)
	svc, _ := setup(t, 2, nil, leasestest.Options{Filters: filters})
	ctx := context.Background()
	req := func(end string) leases.CreateRequest {
		return leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-01-02 12:00"), EndDate: leasestest.Str(end)}
	}
	_, err := svc.Create(ctx, owner, req("2030-01-04 12:00"))
	if status(err) != 403 || err.Error() != "Lease duration of 172800 seconds must be less than or equal to the maximum lease duration of 86400 seconds." {
		t.Fatalf("2-day lease: %v (%d)", err, status(err))
	}
	if _, err := svc.Create(ctx, leases.Caller{UserID: "u", ProjectID: "vip"}, req("2030-01-04 12:00")); err != nil {
		t.Fatalf("exempt project: %v", err)
	}
	v, err := svc.Create(ctx, owner, req("2030-01-03 12:00"))
	if err != nil {
		t.Fatalf("1-day lease: %v", err)
	}
	if _, err := svc.Update(ctx, owner, v.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-03 12:01"})); status(err) != 400 || !strings.Contains(err.Error(), "Lease duration of 86460 seconds") {
		t.Fatalf("extension over the limit: %v (%d)", err, status(err))
	}
}

type extCall struct {
	Path  string
	Token string
	Body  map[string]any
}

func TestExternalServiceFilter(t *testing.T) {
	var mu sync.Mutex
	var calls []extCall
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls = append(calls, extCall{Path: r.URL.Path, Token: r.Header.Get("X-Auth-Token"), Body: body})
		mu.Unlock()
		lease, _ := body["lease"].(map[string]any)
		switch lease["name"] {
		case "deny":
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message": "Project p1 has no hours left"}`))
		case "deny-silently":
			w.WriteHeader(http.StatusForbidden)
		case "broken":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer ext.Close()
	filters := leases.NewFilters(config.Enforcement{
		EnabledFilters:              []string{"ExternalServiceFilter"},
		ExternalServiceBaseEndpoint: ext.URL + "/api",
		ExternalServiceToken:        "secret",
	}, ext.Client())
	svc, clock := setup(t, 2, nil, leasestest.Options{Filters: filters})
	ctx := context.Background()
	mk := func(name string) (*leases.View, error) {
		return svc.Create(ctx, owner, leases.CreateRequest{Name: leasestest.Str(name), StartDate: leasestest.Str("2030-01-02 12:00"), EndDate: leasestest.Str("2030-01-03 12:00"), Reservations: leasestest.Res(leasestest.HostReservation(1, 1, "", ""))})
	}
	for _, tc := range []struct{ name, msg string }{
		{"deny", "Project p1 has no hours left"},
		{"deny-silently", "External service enforcement filter denied the request."},
		{"broken", "External service enforcement filter denied the request."},
	} {
		if _, err := mk(tc.name); status(err) != 400 || err.Error() != tc.msg {
			t.Errorf("create %s: %v (%d), want 400 %q", tc.name, err, status(err), tc.msg)
		}
	}
	v, err := mk("ok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, owner, v.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-03 13:00"})); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, owner, v.ID, leasestest.Upd(map[string]any{"name": "deny", "end_date": "2030-01-03 14:00"})); status(err) != 400 || err.Error() != "Project p1 has no hours left" {
		t.Errorf("update denied: %v", err)
	}
	clock.Set(time.Date(2030, 1, 2, 13, 0, 0, 0, time.UTC))
	if err := svc.Delete(ctx, owner, v.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var paths []string
	for _, c := range calls {
		paths = append(paths, c.Path)
		if c.Token != "secret" {
			t.Errorf("%s without the token", c.Path)
		}
	}
	want := []string{"/api/check-create", "/api/check-create", "/api/check-create", "/api/check-create", "/api/check-update", "/api/check-update", "/api/on-end"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("calls (-want +got): %s", diff)
	}
	create := calls[3].Body
	ctxm, _ := create["context"].(map[string]any)
	lease, _ := create["lease"].(map[string]any)
	if ctxm["project_id"] != "p1" || ctxm["user_id"] != "u1" || lease["start_date"] != "2030-01-02T12:00:00.000000" || lease["end_date"] != "2030-01-03T12:00:00.000000" {
		t.Errorf("check-create body: %v", create)
	}
	if res, _ := lease["reservations"].([]any); len(res) != 1 || res[0].(map[string]any)["resource_type"] != "physical:host" {
		t.Errorf("check-create reservations: %v", lease["reservations"])
	}
	upd := calls[4].Body
	if cur, _ := upd["current_lease"].(map[string]any); cur["end_date"] != "2030-01-03T12:00:00.000000" || upd["lease"].(map[string]any)["end_date"] != "2030-01-03T13:00:00.000000" {
		t.Errorf("check-update body: %v", upd)
	}
}
