package leases

// Lease statuses (Blazar's blazar/status.py).
const (
	StatusPending     = "PENDING"
	StatusActive      = "ACTIVE"
	StatusTerminated  = "TERMINATED"
	StatusError       = "ERROR"
	StatusCreating    = "CREATING"
	StatusStarting    = "STARTING"
	StatusUpdating    = "UPDATING"
	StatusTerminating = "TERMINATING"
	StatusDeleting    = "DELETING"

	// StatusInProgress is a BEST-EFFORT lease whose hosts are being
	// cleared (the scavenger hunt); StatusTimedOut one whose timeout
	// passed first (capacity-leasing seed). Leasehold extensions.
	StatusInProgress = "IN-PROGRESS"
	StatusTimedOut   = "TIMEDOUT"
)

// Reservation statuses.
const (
	ResPending = "pending"
	ResActive  = "active"
	ResDeleted = "deleted"
	ResError   = "error"
)

// Event statuses and types.
const (
	EventUndone     = "UNDONE"
	EventInProgress = "IN_PROGRESS"
	EventDone       = "DONE"
	EventError      = "ERROR"

	EventStart     = "start_lease"
	EventEnd       = "end_lease"
	EventBeforeEnd = "before_end_lease"
)

var stable = map[string]bool{StatusPending: true, StatusActive: true, StatusTerminated: true, StatusError: true, StatusTimedOut: true}

// IsStable reports whether status is a stable lease status.
func IsStable(status string) bool { return stable[status] }

// transitions is Blazar's lease status machine.
var transitions = map[string][]string{
	StatusPending:     {StatusStarting, StatusUpdating, StatusDeleting},
	StatusActive:      {StatusTerminating, StatusUpdating, StatusDeleting},
	StatusTerminated:  {StatusUpdating, StatusDeleting},
	StatusError:       {StatusTerminating, StatusUpdating, StatusDeleting},
	StatusCreating:    {StatusPending, StatusDeleting},
	StatusStarting:    {StatusActive, StatusError, StatusDeleting},
	StatusUpdating:    {StatusPending, StatusActive, StatusTerminated, StatusError, StatusDeleting},
	StatusTerminating: {StatusTerminated, StatusError, StatusDeleting},
	StatusDeleting:    {StatusError},
	StatusInProgress:  {StatusActive, StatusTimedOut, StatusDeleting},
	StatusTimedOut:    {StatusDeleting},
}

// CanTransition reports whether a lease may move from one status to
// another.
func CanTransition(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Derive is the lease status after an operation, from the statuses of its
// start_lease and end_lease events and whether every live reservation is
// active (needed for ACTIVE).
func Derive(start, end string, allActive bool) string {
	switch {
	case start == EventUndone && end == EventUndone:
		return StatusPending
	case start == EventDone && end == EventUndone:
		if allActive {
			return StatusActive
		}
		return StatusError
	case start == EventDone && end == EventDone:
		return StatusTerminated
	}
	return StatusError
}

// ReservationCanTransition is the reservation status machine.
func ReservationCanTransition(from, to string) bool {
	switch from {
	case ResPending:
		return to == ResActive || to == ResDeleted || to == ResError
	case ResActive:
		return to == ResDeleted || to == ResError
	case ResError:
		return to == ResDeleted
	}
	return false
}
