package leases_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins/floatingip"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 30, 0, time.UTC)

var owner = leases.Caller{UserID: "u1", ProjectID: "p1"}

func setup(t *testing.T, nHosts int, caps func(int) map[string]string, o leasestest.Options) (*leases.Service, *leasestest.Clock) {
	t.Helper()
	d := dbtest.Open(t)
	clock := leasestest.NewClock(t0)
	if o.MinutesBeforeEndLease == 0 {
		o.MinutesBeforeEndLease = 60
	}
	svc, _ := leasestest.New(d, leasestest.NewHosts(nHosts, caps), clock, o)
	return svc, clock
}

func create(t testing.TB, svc *leases.Service, c leases.Caller, name, start, end string, res ...map[string]any) *leases.View {
	t.Helper()
	v, err := svc.Create(context.Background(), c, leases.CreateRequest{Name: leasestest.Str(name), StartDate: leasestest.Str(start), EndDate: leasestest.Str(end), Reservations: leasestest.Res(res...)})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return v
}

// status is the HTTP status the Blazar API gives err's kind (0: not an
// API error).
func status(err error) int {
	e := errs.As(err)
	if e == nil {
		return 0
	}
	return map[errs.Kind]int{errs.BadRequest: 400, errs.Forbidden: 403, errs.NotFound: 404,
		errs.Conflict: 409, errs.NotEnoughResources: 409}[e.Kind]
}

func hostsOf(t *testing.T, svc *leases.Service, leaseID string) []string {
	t.Helper()
	var ids []string
	err := svc.DB().Raw(`SELECT a.compute_host_id FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id
		WHERE r.lease_id = ? ORDER BY a.compute_host_id`, leaseID).Scan(&ids).Error
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestCreateShape(t *testing.T) {
	svc, _ := setup(t, 3, func(i int) map[string]string {
		return map[string]string{"gpu": map[bool]string{true: "true", false: "false"}[i == 2]}
	}, leasestest.Options{})
	v := create(t, svc, owner, "lease1", "2030-01-02 12:00", "2030-01-03 12:00",
		leasestest.HostReservation(1, 1, "", `["==", "$gpu", "true"]`))
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"id", "name", "user_id", "project_id", "start_date", "end_date", "trust_id", "status", "degraded", "created_at", "updated_at", "reservations", "events"} {
		if _, ok := m[k]; !ok {
			t.Errorf("lease has no %q: %s", k, b)
		}
	}
	if v.StartDate != "2030-01-02T12:00:00.000000" || v.EndDate != "2030-01-03T12:00:00.000000" {
		t.Errorf("dates %s %s", v.StartDate, v.EndDate)
	}
	// Upstream stamps updated_at when it sets the new lease PENDING.
	if v.CreatedAt != "2030-01-01 10:00:30" || v.UpdatedAt == nil || *v.UpdatedAt != v.CreatedAt || v.Status != "PENDING" {
		t.Errorf("created_at %q updated_at %v status %s", v.CreatedAt, v.UpdatedAt, v.Status)
	}
	if len(v.Reservations) != 1 {
		t.Fatalf("reservations %v", v.Reservations)
	}
	r := v.Reservations[0]
	want := map[string]any{"min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": `["==", "$gpu", "true"]`,
		"before_end": "default", "status": "pending", "resource_type": "physical:host", "missing_resources": false, "resources_changed": false, "lease_id": v.ID}
	for k, w := range want {
		if diff := cmp.Diff(w, r[k]); diff != "" {
			t.Errorf("reservation[%s] (-want +got): %s", k, diff)
		}
	}
	var types []string
	for _, e := range v.Events {
		types = append(types, e.EventType+"@"+e.Time+"/"+e.Status)
	}
	// In the order upstream creates and lists them.
	wantEv := []string{"start_lease@2030-01-02T12:00:00.000000/UNDONE", "end_lease@2030-01-03T12:00:00.000000/UNDONE", "before_end_lease@2030-01-03T11:00:00.000000/UNDONE"}
	if diff := cmp.Diff(wantEv, types); diff != "" {
		t.Errorf("events (-want +got): %s", diff)
	}
	if diff := cmp.Diff([]string{"2"}, hostsOf(t, svc, v.ID)); diff != "" {
		t.Errorf("hosts (-want +got): %s", diff)
	}
}

func TestCreateErrors(t *testing.T) {
	svc, _ := setup(t, 2, nil, leasestest.Options{})
	host := func(kv ...any) map[string]any {
		m := leasestest.HostReservation(1, 1, "", "")
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	for _, tc := range []struct {
		name       string
		req        leases.CreateRequest
		wantStatus int
		wantMsg    string
	}{
		{"no name", leases.CreateRequest{StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-02 10:00")}, 400, "Missing parameter name"},
		{"no end", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now")}, 400, "Missing parameter end_date"},
		{"bad date", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-02-30 12:00"), EndDate: leasestest.Str("2030-03-02 12:00")}, 400, "2030-02-30 12:00 is an invalid date. Required format: %Y-%m-%d %H:%M"},
		{"past", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2001-01-01 12:00"), EndDate: leasestest.Str("2001-01-02 12:00")}, 400, "Start date must be later than current date"},
		{"end before start", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-01-05 12:00"), EndDate: leasestest.Str("2030-01-04 12:00")}, 400, "End date must be later than start date."},
		{"end equals start", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-01-05 12:00"), EndDate: leasestest.Str("2030-01-05 12:00")}, 400, "End date must be later than start date."},
		{"long name", leases.CreateRequest{Name: leasestest.Str(strings.Repeat("n", 81)), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00")}, 400, "Lease name is too long"},
		{"no resource_type", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(map[string]any{"min": 1})}, 400, "Missing parameter resource_type"},
		{"unknown type", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(map[string]any{"resource_type": "virtual:bogus"})}, 400, "Unsupported resource type virtual:bogus"},
		{"no min", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("min", nil))}, 400, "Missing parameter min"},
		{"blank min", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("min", ""))}, 400, "Malformed parameter min"},
		{"zero max", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("max", 0))}, 400, "min and max must be at least 1"},
		{"max < min", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("min", 2, "max", 1))}, 400, "Max must be equal to or larger than min"},
		{"no hyper props", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("hypervisor_properties", nil))}, 400, "Missing parameter hypervisor_properties"},
		{"bad props", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("resource_properties", `["==", "$gpu"]`))}, 400, "Malformed requirements"},
		{"bad before_end", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("before_end", "reboot"))}, 400, "Invalid before_end"},
		{"too many hosts", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("now"), EndDate: leasestest.Str("2030-01-05 12:00"), Reservations: leasestest.Res(host("min", 5, "max", 5))}, 409, "Not enough hosts available: 2 hosts match the properties, 2 are free in the window, 5 needed"},
		{"before_end outside", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-01-02 12:00"), EndDate: leasestest.Str("2030-01-03 12:00"), BeforeEndDate: leasestest.Str("2030-01-04 12:00")}, 403, "Datetime is out of lease limits"},
		{"before_end bad", leases.CreateRequest{Name: leasestest.Str("x"), StartDate: leasestest.Str("2030-01-02 12:00"), EndDate: leasestest.Str("2030-01-03 12:00"), BeforeEndDate: leasestest.Str("soon")}, 400, "soon is an invalid date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Create(context.Background(), owner, tc.req)
			if status(err) != tc.wantStatus || err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Create = %v (status %d), want %d %q", err, status(err), tc.wantStatus, tc.wantMsg)
			}
		})
	}
	ls, err := svc.List(context.Background(), leases.Caller{Admin: true})
	if err != nil || len(ls) != 0 {
		t.Fatalf("after failed creates: %d leases, %v (want none: no partial write)", len(ls), err)
	}
	var n int64
	svc.DB().Raw("SELECT COUNT(*) FROM computehost_allocations").Scan(&n)
	if n != 0 {
		t.Fatalf("%d allocations left behind", n)
	}
}

func TestOwnershipAndNotFound(t *testing.T) {
	svc, _ := setup(t, 2, nil, leasestest.Options{})
	ctx := context.Background()
	v := create(t, svc, owner, "mine", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", ""))
	other := leases.Caller{UserID: "u2", ProjectID: "p2"}
	if _, err := svc.Get(ctx, other, v.ID); status(err) != http.StatusForbidden {
		t.Errorf("Get by another project = %v, want 403", err)
	}
	if _, err := svc.Update(ctx, other, v.ID, leasestest.Upd(map[string]any{"name": "x"})); status(err) != http.StatusForbidden {
		t.Errorf("Update by another project = %v, want 403", err)
	}
	if err := svc.Delete(ctx, other, v.ID); status(err) != http.StatusForbidden {
		t.Errorf("Delete by another project = %v, want 403", err)
	}
	if ls, _ := svc.List(ctx, other); len(ls) != 0 {
		t.Errorf("List by another project shows %d leases", len(ls))
	}
	if ls, _ := svc.List(ctx, leases.Caller{Admin: true, ProjectID: "admin"}); len(ls) != 1 {
		t.Errorf("admin List shows %d leases, want 1", len(ls))
	}
	missing := "00000000-0000-4000-8000-000000000000"
	want := "Object with {'lease_id': '" + missing + "'} not found"
	if _, err := svc.Get(ctx, owner, missing); status(err) != 404 || err.Error() != want {
		t.Errorf("Get unknown = %v", err)
	}
	if _, err := svc.Update(ctx, owner, missing, leasestest.Upd(map[string]any{"name": "x"})); status(err) != 404 {
		t.Errorf("Update unknown = %v", err)
	}
	if err := svc.Delete(ctx, owner, missing); status(err) != 404 {
		t.Errorf("Delete unknown = %v", err)
	}
}

func TestUpdateDates(t *testing.T) {
	svc, clock := setup(t, 2, nil, leasestest.Options{})
	ctx := context.Background()
	a := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(2, 2, "", ""))
	b := create(t, svc, owner, "b", "2030-01-04 12:00", "2030-01-05 12:00", leasestest.HostReservation(1, 1, "", ""))

	// Extending a into b's window: only one host stays free, min is 2.
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-04 13:00"})); status(err) != 409 {
		t.Fatalf("extend over b = %v, want 409", err)
	}
	// Prolong up to b's start (back-to-back) is fine.
	v, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-04 12:00"}))
	if err != nil {
		t.Fatal(err)
	}
	if v.EndDate != "2030-01-04T12:00:00.000000" {
		t.Errorf("end = %s", v.EndDate)
	}
	for _, e := range v.Events {
		if e.EventType == "end_lease" && e.Time != v.EndDate {
			t.Errorf("end_lease not moved: %s", e.Time)
		}
		if e.EventType == "before_end_lease" && e.Time != "2030-01-04T11:00:00.000000" {
			t.Errorf("before_end_lease kept its gap badly: %s", e.Time)
		}
	}
	// Defer b by an hour, advance by 30 minutes: moves start and events.
	if _, err := svc.Update(ctx, owner, b.ID, leasestest.Upd(map[string]any{"start_date": "2030-01-04 13:00"})); err != nil {
		t.Fatal(err)
	}
	v, err = svc.Update(ctx, owner, b.ID, leasestest.Upd(map[string]any{"start_date": "2030-01-04 12:30"}))
	if err != nil || v.StartDate != "2030-01-04T12:30:00.000000" {
		t.Fatalf("advance: %v %v", v, err)
	}
	// min/max change: b grows to 2 hosts.
	v, err = svc.Update(ctx, owner, b.ID, leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": b.Reservations[0]["id"], "max": 2}}}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Reservations[0]["max"] != 2 || len(hostsOf(t, svc, b.ID)) != 2 {
		t.Errorf("max 2: %v hosts %v", v.Reservations[0], hostsOf(t, svc, b.ID))
	}
	for _, tc := range []struct {
		name string
		req  leases.UpdateRequest
		code int
		msg  string
	}{
		{"past start", leasestest.Upd(map[string]any{"start_date": "2029-01-01 00:00"}), 400, "Start date must be later than current date"},
		{"end before start", leasestest.Upd(map[string]any{"end_date": "2030-01-04 11:00"}), 400, "End date must be later than current and start date"},
		{"bad date", leasestest.Upd(map[string]any{"end_date": "tomorrow"}), 400, "tomorrow is an invalid date"},
		{"res unknown id", leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": "nope", "max": 1}}}), 400, "Please enter valid reservation IDs. Invalid reservation IDs are: nope"},
		{"res type change", leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": b.Reservations[0]["id"], "resource_type": "virtual:floatingip"}}}), 409, "Cannot change the resource type"},
		{"res bad max", leasestest.Upd(map[string]any{"reservations": []any{map[string]any{"id": b.Reservations[0]["id"], "max": "many"}}}), 400, "Malformed parameter max"},
		{"before_end outside", leasestest.Upd(map[string]any{"before_end_date": "2031-01-01 00:00"}), 403, "Datetime is out of lease limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Update(ctx, owner, b.ID, tc.req)
			if status(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Update = %v (%d), want %d %q", err, status(err), tc.code, tc.msg)
			}
		})
	}
	// Rename works, an empty body returns the lease.
	if v, err := svc.Update(ctx, owner, b.ID, leasestest.Upd(map[string]any{"name": "b2"})); err != nil || v.Name != "b2" || v.UpdatedAt == nil {
		t.Fatalf("rename: %v %v", v, err)
	}
	if v, err := svc.Update(ctx, owner, b.ID, leases.UpdateRequest{}); err != nil || v.Name != "b2" {
		t.Fatalf("empty update: %v %v", v, err)
	}
	_ = clock
}

func TestUpdateStartedLease(t *testing.T) {
	svc, clock := setup(t, 2, nil, leasestest.Options{})
	ctx := context.Background()
	a := create(t, svc, owner, "a", "now", "2030-01-01 20:00", leasestest.HostReservation(1, 1, "", ""))
	clock.Add(time.Hour)
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"start_date": "2030-01-01 12:00"})); status(err) != 400 ||
		err.Error() != "Cannot modify the start date of already started leases" {
		t.Fatalf("move start of started lease: %v", err)
	}
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-01 10:30"})); status(err) != 400 {
		t.Fatalf("end in the past: %v", err)
	}
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-01 21:00"})); err != nil {
		t.Fatalf("prolong started lease: %v", err)
	}
	clock.Set(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"end_date": "2030-01-03 21:00"})); status(err) != 400 ||
		err.Error() != "Terminated leases can only be renamed" {
		t.Fatalf("update of an ended lease: %v", err)
	}
	if _, err := svc.Update(ctx, owner, a.ID, leasestest.Upd(map[string]any{"name": "renamed"})); err != nil {
		t.Fatalf("rename of an ended lease: %v", err)
	}
}

func TestDeleteRemovesEverything(t *testing.T) {
	svc, _ := setup(t, 1, nil, leasestest.Options{})
	ctx := context.Background()
	a := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", ""))
	if _, err := svc.Create(ctx, owner, leases.CreateRequest{Name: leasestest.Str("b"), StartDate: leasestest.Str("2030-01-02 18:00"), EndDate: leasestest.Str("2030-01-02 20:00"), Reservations: leasestest.Res(leasestest.HostReservation(1, 1, "", ""))}); status(err) != 409 {
		t.Fatalf("overlapping lease on the only host: %v, want 409", err)
	}
	if err := svc.Delete(ctx, owner, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"leases", "reservations", "events", "computehost_reservations", "computehost_allocations"} {
		var n int64
		if err := svc.DB().Raw("SELECT COUNT(*) FROM " + table).Scan(&n).Error; err != nil || n != 0 {
			t.Errorf("%s: %d rows left (%v)", table, n, err)
		}
	}
	// The host is free again (the cached view saw the delete).
	create(t, svc, owner, "b", "2030-01-02 18:00", "2030-01-02 20:00", leasestest.HostReservation(1, 1, "", ""))
}

func TestFloatingIPReservation(t *testing.T) {
	net := "net-1"
	fips := &leasestest.FIPs{List: []floatingip.FIP{
		{ID: "f1", NetworkID: net, Address: "192.0.2.10", Reservable: true},
		{ID: "f2", NetworkID: net, Address: "192.0.2.11", Reservable: true},
	}}
	svc, _ := setup(t, 1, nil, leasestest.Options{FIPs: fips})
	ctx := context.Background()
	fip := func(amount any, req ...any) map[string]any {
		return map[string]any{"resource_type": "virtual:floatingip", "network_id": net, "amount": amount, "required_floatingips": req}
	}
	a := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", fip(1, "192.0.2.11"))
	r := a.Reservations[0]
	if diff := cmp.Diff([]string{"192.0.2.11"}, r["required_floatingips"]); diff != "" || r["amount"] != 1 || r["network_id"] != net {
		t.Errorf("fip reservation %v %s", r, diff)
	}
	for _, tc := range []struct {
		res  map[string]any
		code int
		msg  string
	}{
		{fip(1, "192.0.2.11"), 400, "already reserved"},
		{fip(2), 400, "Not enough floating IPs available"},
		{fip(1, "not-an-ip"), 400, "IP address not-an-ip is invalid"},
		{fip(1, "192.0.2.10", "192.0.2.11"), 400, "exceeds the amount"},
		{map[string]any{"resource_type": "virtual:floatingip", "amount": 1}, 400, "Missing parameter network_id"},
	} {
		_, err := svc.Create(ctx, owner, leases.CreateRequest{Name: leasestest.Str("b"), StartDate: leasestest.Str("2030-01-02 18:00"), EndDate: leasestest.Str("2030-01-02 20:00"), Reservations: leasestest.Res(tc.res)})
		if status(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("create %v = %v, want %d %q", tc.res, err, tc.code, tc.msg)
		}
	}
	create(t, svc, owner, "c", "2030-01-02 18:00", "2030-01-02 20:00", fip(1))
	if err := svc.Delete(ctx, owner, a.ID); err != nil {
		t.Fatal(err)
	}
	create(t, svc, owner, "d", "2030-01-02 12:00", "2030-01-02 13:00", fip(2))
}

// TestTwoHostReservations: the host reservations of one lease get
// distinct hosts (each choice leaves out the ones before it), and a
// lease whose reservations together need more hosts than there are is
// refused whole.
func TestTwoHostReservations(t *testing.T) {
	svc, _ := setup(t, 3, nil, leasestest.Options{})
	v := create(t, svc, owner, "two", "2030-01-02 00:00", "2030-01-03 00:00",
		leasestest.HostReservation(1, 2, "", ""), leasestest.HostReservation(1, 1, "", ""))
	if len(v.Reservations) != 2 {
		t.Fatalf("%d reservations, want 2", len(v.Reservations))
	}
	var hosts []string
	if err := svc.DB().Raw("SELECT compute_host_id FROM computehost_allocations ORDER BY compute_host_id").Scan(&hosts).Error; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, hosts); diff != "" {
		t.Errorf("booked hosts (-want +got):\n%s", diff)
	}
	_, err := svc.Create(context.Background(), owner, leases.CreateRequest{Name: leasestest.Str("too many"), StartDate: leasestest.Str("2030-02-01 00:00"), EndDate: leasestest.Str("2030-02-02 00:00"), Reservations: leasestest.Res(leasestest.HostReservation(2, 2, "", ""), leasestest.HostReservation(2, 2, "", ""))})
	if status(err) != http.StatusConflict {
		t.Fatalf("create needing 4 of 3 hosts: err %v (status %d), want 409", err, status(err))
	}
	var n int64
	if err := svc.DB().Raw("SELECT COUNT(*) FROM leases").Scan(&n).Error; err != nil || n != 1 {
		t.Fatalf("%d leases (err %v), want 1: the refused lease left rows", n, err)
	}
}

// TestStampsRoundTrip: created_at/updated_at keep their microseconds in
// the database (DATETIME(6) on MySQL), so a lease reads back exactly as
// its create answered, on every dialect.
func TestStampsRoundTrip(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			clock := leasestest.NewClock(t0.Add(123456789 * time.Nanosecond))
			svc, _ := leasestest.New(d, leasestest.NewHosts(1, nil), clock, leasestest.Options{})
			v := create(t, svc, owner, "a", "2030-01-02 12:00", "2030-01-03 12:00", leasestest.HostReservation(1, 1, "", ""))
			if v.CreatedAt != "2030-01-01 10:00:30.123456" {
				t.Errorf("created_at %q", v.CreatedAt)
			}
			got, err := svc.Get(context.Background(), owner, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(v, got); diff != "" {
				t.Errorf("read back (-create +get): %s", diff)
			}
		})
	}
}
