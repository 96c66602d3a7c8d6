package hosts

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
)

// statusDriver is a standalone driver whose compute service reports
// the statuses in st.
type statusDriver struct {
	*standalone.Driver
	st map[string]string
}

func (d *statusDriver) HostStatuses(context.Context) (map[string]string, error) { return d.st, nil }

// TestSyncComputeStatus: a host reported down or disabled gets the
// compute_status capability and is no longer reservable; back up, it
// reads up and is reservable again; a host the operator made not
// reservable, and one the service does not list, are left alone.
func TestSyncComputeStatus(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		drv := &statusDriver{Driver: standalone.New(nil), st: map[string]string{}}
		s := New(d, drv)
		for _, b := range []map[string]any{body("name", "c1"), body("name", "c2"), body("name", "c3", "reservable", "false"), body("name", "c4")} {
			if _, err := s.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		state := func() map[string]string {
			out := map[string]string{}
			all, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range all {
				r := "reservable"
				if !h.Reservable {
					r = "not reservable"
				}
				out[h.HypervisorHostname] = r + " " + h.ExtraCapabilities[compute.StatusKey]
			}
			return out
		}
		sync := func(want int) {
			t.Helper()
			n, err := s.SyncComputeStatus(ctx)
			if err != nil || n != want {
				t.Fatalf("SyncComputeStatus = %d, %v; want %d changes", n, err, want)
			}
		}
		drv.st = map[string]string{"c1": compute.StatusUp, "c2": compute.StatusDown, "c3": compute.StatusUp}
		sync(1)
		sync(0) // nothing new
		want := map[string]string{"c1": "reservable ", "c2": "not reservable down", "c3": "not reservable ", "c4": "reservable "}
		if diff := cmp.Diff(want, state()); diff != "" {
			t.Errorf("after c2 went down (-want +got):\n%s", diff)
		}
		drv.st = map[string]string{"c1": compute.StatusDisabled, "c2": compute.StatusUp, "c3": compute.StatusUp}
		sync(2)
		want = map[string]string{"c1": "not reservable disabled", "c2": "reservable up", "c3": "not reservable ", "c4": "reservable "}
		if diff := cmp.Diff(want, state()); diff != "" {
			t.Errorf("after c1 was disabled and c2 came back (-want +got):\n%s", diff)
		}
		// The standalone driver reports nothing: nothing changes.
		s2 := New(d, standalone.New(nil))
		if n, err := s2.SyncComputeStatus(ctx); n != 0 || err != nil {
			t.Errorf("standalone: %d, %v", n, err)
		}
	})
}
