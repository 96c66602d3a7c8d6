package host

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/pkg/compute"
)

// driverActions moves reserved hosts between the freepool and the
// reservation's aggregate through a compute driver.
type driverActions struct{ drv compute.Driver }

// DriverActions returns the plugin's Actions over compute driver drv.
func DriverActions(drv compute.Driver) Actions { return driverActions{drv} }

func (a driverActions) Start(ctx context.Context, reservationID, projectID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := a.drv.RemoveFromFreePool(ctx, names); err != nil {
		return err
	}
	agg := compute.ReservationAggregate{ReservationID: reservationID, ProjectID: projectID, AvailabilityZone: "blazar_" + reservationID}
	if err := a.drv.AddToReservation(ctx, agg, names); err != nil {
		_ = a.drv.AddToFreePool(ctx, names)
		return err
	}
	return nil
}

func (a driverActions) End(ctx context.Context, reservationID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := a.drv.CleanupServers(ctx, names); err != nil {
		return err
	}
	if err := a.drv.RemoveFromReservation(ctx, compute.ReservationAggregate{ReservationID: reservationID}, names); err != nil {
		return err
	}
	return a.drv.AddToFreePool(ctx, names)
}

func (a driverActions) Snapshot(ctx context.Context, reservationID string, names []string) error {
	slog.InfoContext(ctx, "before_end snapshot: the compute driver takes no snapshots", "driver", a.drv.Name(), "reservation", reservationID, "hosts", names)
	return nil
}
