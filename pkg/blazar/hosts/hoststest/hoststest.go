// Package hoststest writes the lease rows that hold hosts and floating
// IPs (leases, reservations, computehost_reservations,
// computehost_allocations, floatingip_allocations) straight into a test
// database, so tests of pkg/blazar/hosts and its handlers see real
// reservations without the lease engine.
package hoststest

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
)

// Lease is one lease with one reservation.
type Lease struct {
	ID            string
	ReservationID string
	Start, End    time.Time
	// HypervisorProperties and ResourceProperties are a host
	// reservation's requirements (hostquery text, "" for none).
	HypervisorProperties string
	ResourceProperties   string
}

// ReserveHosts inserts l as an active physical:host lease holding the
// hosts (API ids).
func ReserveHosts(t testing.TB, d *db.DB, l Lease, hostIDs ...string) {
	t.Helper()
	rows := []any{
		&models.ComputeHostReservation{ID: l.ReservationID, ReservationID: l.ReservationID, CountRange: "1-1",
			HypervisorProperties: l.HypervisorProperties, ResourceProperties: l.ResourceProperties, CreatedAt: l.Start},
	}
	for _, h := range hostIDs {
		rows = append(rows, &models.ComputeHostAllocation{ID: uuid.NewString(), ReservationID: l.ReservationID,
			ComputeHostID: h, StartDate: l.Start, EndDate: l.End, CreatedAt: l.Start})
	}
	insert(t, d, l, "physical:host", rows)
}

// ReserveFloatingIP inserts l as an active virtual:floatingip lease
// holding the floating IP.
func ReserveFloatingIP(t testing.TB, d *db.DB, l Lease, fipID string) {
	t.Helper()
	insert(t, d, l, "virtual:floatingip", []any{&models.FloatingIPAllocation{ID: uuid.NewString(),
		ReservationID: l.ReservationID, FloatingIPID: fipID, StartDate: l.Start, EndDate: l.End, CreatedAt: l.Start}})
}

// Release deletes l's allocations (its lease and reservation rows stay),
// as when the lease is deleted.
func Release(t testing.TB, d *db.DB, l Lease) {
	t.Helper()
	for _, q := range []string{"DELETE FROM computehost_allocations WHERE reservation_id = ?", "DELETE FROM floatingip_allocations WHERE reservation_id = ?"} {
		if err := d.Exec(q, l.ReservationID).Error; err != nil {
			t.Fatal(err)
		}
	}
}

func insert(t testing.TB, d *db.DB, l Lease, resourceType string, rows []any) {
	t.Helper()
	rows = append([]any{
		&models.Lease{ID: l.ID, Name: l.ID, ProjectID: "p1", UserID: "u1", StartDate: l.Start, EndDate: l.End, Status: "ACTIVE", CreatedAt: l.Start},
		&models.Reservation{ID: l.ReservationID, LeaseID: l.ID, ResourceID: l.ReservationID, ResourceType: resourceType, Status: "active", CreatedAt: l.Start},
	}, rows...)
	for _, r := range rows {
		if err := d.Create(r).Error; err != nil {
			t.Fatalf("insert %T: %v", r, err)
		}
	}
}
