package hosts

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/placement"
)

// TestHostUsesNovasComputeProvider: when the built-in Placement already
// has the compute node's provider (Nova's resource tracker created it
// under the hypervisor's name), registering the host uses it — no second
// provider of that name — and hangs blazar_<host> under it; deleting the
// host leaves Nova's provider alone.
func TestHostUsesNovasComputeProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		ps := placement.NewService(d, placement.Config{})
		novas, err := ps.CreateProvider(ctx, "compute7", uuid.NewString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := newService(t, d)
		h, err := s.Create(ctx, body("name", "compute7", "vcpus", "8", "memory_mb", "4096", "local_gb", "40"))
		if err != nil {
			t.Fatal(err)
		}
		if h.ComputeProviderUUID != novas.UUID {
			t.Errorf("host's compute provider %s, want Nova's %s", h.ComputeProviderUUID, novas.UUID)
		}
		named, err := ps.ListProviders(ctx, placement.ProviderFilter{Name: "compute7"})
		if err != nil || len(named) != 1 {
			t.Fatalf("providers named compute7: %d, %v; want Nova's only", len(named), err)
		}
		child, err := ps.GetProvider(ctx, h.ReservationProviderUUID)
		if err != nil {
			t.Fatal(err)
		}
		if child.Name != "blazar_compute7" || child.ParentProviderUUID == nil || *child.ParentProviderUUID != novas.UUID {
			t.Errorf("reservation provider %+v, want blazar_compute7 under %s", child, novas.UUID)
		}
		if err := s.Delete(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.GetProvider(ctx, novas.UUID); err != nil {
			t.Errorf("Nova's provider after the host's deletion: %v", err)
		}
		if _, err := ps.GetProvider(ctx, h.ReservationProviderUUID); err == nil {
			t.Error("blazar_compute7 left after the host's deletion")
		}
	})
}
