package nova

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// racingNova creates aggregate name (as another run of the same action
// would) just before the driver's own create reaches the fake.
type racingNova struct {
	*fakeNova
	name string
}

func (r *racingNova) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == "POST" && req.URL.Path == "/os-aggregates" && r.name != "" {
		r.mu.Lock()
		r.addAgg(r.name, "")
		r.name = ""
		r.mu.Unlock()
	}
	r.fakeNova.ServeHTTP(w, req)
}

func TestAggregateCreatedMeanwhile(t *testing.T) {
	f := newFakeNova()
	srv := httptest.NewServer(&racingNova{fakeNova: f, name: "res-2"})
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"}, Config{}, nil)
	ctx := context.Background()
	agg := compute.ReservationAggregate{ReservationID: "res-2", ProjectID: "p2"}
	if err := d.CreateReservationAggregate(ctx, agg); err != nil {
		t.Fatalf("create after a concurrent create: %v", err)
	}
	if len(f.aggs) != 1 {
		t.Fatalf("aggregates %+v, want exactly one", f.aggs)
	}
	for _, a := range f.aggs {
		if a.Name != "res-2" || a.Metadata["blazar:owner"] != "p2" {
			t.Errorf("aggregate %+v, want res-2 owned by p2", a)
		}
	}
	// Run again: nothing new.
	if err := d.CreateReservationAggregate(ctx, agg); err != nil || len(f.aggs) != 1 {
		t.Errorf("second create: %v, %d aggregates", err, len(f.aggs))
	}
}

func TestDeleteReservationAggregate(t *testing.T) {
	f := newFakeNova()
	d := newDriver(t, f, Config{})
	ctx := context.Background()
	a := f.addAgg("res-3", "blazar_res-3", "c1", "c2")
	agg := compute.ReservationAggregate{ReservationID: "res-3"}
	if err := d.DeleteReservationAggregate(ctx, agg); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.aggs[a.ID]; ok {
		t.Errorf("aggregate still there: %+v", a)
	}
	if err := d.DeleteReservationAggregate(ctx, agg); err != nil {
		t.Errorf("deleting a gone aggregate: %v", err)
	}
}

// TestNovaErrorNamesCallAndRequestID: a failed call is an internal error
// naming the call and the request id Nova gave it.
func TestNovaErrorNamesCallAndRequestID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Openstack-Request-Id", "req-0123abcd")
		writeJSON(w, 500, map[string]any{"computeFault": map[string]any{"code": 500, "message": "boom"}})
	}))
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"}, Config{}, nil)
	err := d.AddToFreePool(context.Background(), []string{"c1"})
	if kind(err) != errs.Internal || !strings.Contains(err.Error(), "list aggregates") || !strings.Contains(err.Error(), "req-0123abcd") {
		t.Errorf("error %v, want an internal error naming the call and the request id", err)
	}
	if got := RequestID(errs.As(err).Unwrap()); got != "req-0123abcd" {
		t.Errorf("RequestID = %q", got)
	}
}

func TestDescribeHostDownOrDisabled(t *testing.T) {
	for _, tc := range []struct {
		state, status string
		want          map[string]string
	}{
		{"up", "enabled", map[string]string{"rack": "r1"}},
		{"down", "enabled", map[string]string{"rack": "r1", compute.StatusKey: compute.StatusDown, "reservable": "false"}},
		{"up", "disabled", map[string]string{"rack": "r1", compute.StatusKey: compute.StatusDisabled, "reservable": "false"}},
	} {
		f := newFakeNova()
		h := hypervisor(1, "c1", 8)
		h["state"], h["status"] = tc.state, tc.status
		f.hypervisors = append(f.hypervisors, h)
		d := newDriver(t, f, Config{})
		_, caps, err := d.DescribeHost(context.Background(), map[string]string{"name": "c1", "rack": "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, caps); diff != "" {
			t.Errorf("%s/%s: capabilities (-want +got):\n%s", tc.state, tc.status, diff)
		}
		st, err := d.HostStatuses(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := compute.StatusUp
		if s := tc.want[compute.StatusKey]; s != "" {
			want = s
		}
		if st["c1"] != want {
			t.Errorf("%s/%s: HostStatuses = %v, want c1 %s", tc.state, tc.status, st, want)
		}
	}
}
