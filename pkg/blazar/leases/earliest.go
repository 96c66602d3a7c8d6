package leases

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// The earliest-window extension (POST /v1/leases/earliest): "when is the
// earliest window of this duration, after this time, in which these
// reservations fit?". It books nothing: the client creates the lease for
// the window it is given (POST /v1/leases with those dates), which then
// goes through the usual checks, so a window taken in between is a 409
// there, not a double booking.

// EarliestRequest is a POST /v1/leases/earliest body.
type EarliestRequest struct {
	// After is the earliest start ("YYYY-MM-DD HH:MM" or "now"; nil or
	// past: now).
	After *string
	// NotAfter, when set, is the latest start.
	NotAfter *string
	// Duration is the window's length (rounded up to whole minutes, as
	// lease dates are).
	Duration time.Duration
	// Reservations are the lease's reservations, as in a create.
	Reservations []ReservationRequest
}

// EarliestWindow is the answer: the window and the resources each
// reservation would get in it now.
type EarliestWindow struct {
	StartDate    string                `json:"start_date"`
	EndDate      string                `json:"end_date"`
	Reservations []EarliestReservation `json:"reservations"`
}

// EarliestReservation is one reservation of the answer.
type EarliestReservation struct {
	ResourceType string `json:"resource_type"`
	// Resources are the ids the reservation would get (host ids for
	// physical:host, the ids of the hosts with slots for
	// virtual:instance).
	Resources []string `json:"resources"`
}

// EarliestFinder is implemented by the plugins whose reservations the
// earliest-window search supports (physical:host, virtual:instance).
type EarliestFinder interface {
	// Earliest is the earliest start in [after, notAfter] (notAfter zero:
	// no limit) of a window of length d in which r fits without the
	// resources taken; false when there is none.
	Earliest(ctx context.Context, r plugins.Request, after, notAfter time.Time, d time.Duration, taken []string) (time.Time, bool, error)
	// ChooseAt is what r would get over [start, end) without taken.
	ChooseAt(ctx context.Context, r plugins.Request, start, end time.Time, taken []string) ([]string, error)
}

// maxEarliestRounds bounds the search for a window in which several
// reservations fit together (each round moves the start later).
const maxEarliestRounds = 64

// Earliest answers an earliest-window request for caller c. Each
// reservation's earliest start is found by its plugin's sweep of the
// allocation timeline; with several reservations the search starts again
// from the latest of them until all agree (their starts only move
// later), and the reservations are then chosen together, each without
// the resources of the ones before it.
func (s *Service) Earliest(ctx context.Context, c Caller, req EarliestRequest) (*EarliestWindow, error) {
	if req.Duration <= 0 {
		return nil, plugins.BadRequest("duration must be a positive number of seconds")
	}
	if len(req.Reservations) == 0 {
		return nil, plugins.MissingParameter("reservations")
	}
	d := (req.Duration + time.Minute - 1).Truncate(time.Minute)
	now := s.now()
	after := now.Truncate(time.Minute)
	var err error
	if req.After != nil {
		if after, err = ParseDate(*req.After, now); err != nil {
			return nil, err
		}
	}
	if after.Before(now.Truncate(time.Minute)) {
		// A lease cannot start in the past: the window a client can
		// create starts now at the earliest.
		after = now.Truncate(time.Minute)
	}
	var notAfter time.Time
	if req.NotAfter != nil {
		if notAfter, err = ParseDate(*req.NotAfter, now); err != nil {
			return nil, err
		}
		if notAfter.Before(after) {
			return nil, plugins.BadRequest("not_after %s is before the earliest start %s", FormatDate(notAfter), FormatDate(after))
		}
	}
	if !after.Add(d).Before(MaxDate) {
		return nil, plugins.BadRequest("The window would end after %s", FormatDate(MaxDate))
	}
	type item struct {
		rt string
		f  EarliestFinder
		r  plugins.Request
	}
	lease := plugins.Lease{ProjectID: c.ProjectID, UserID: c.UserID, Start: after, End: after.Add(d), Status: StatusPending, Admin: c.Admin}
	items := make([]item, 0, len(req.Reservations))
	for _, rr := range req.Reservations {
		if rr.ResourceType == nil {
			return nil, plugins.MissingParameter("resource_type")
		}
		p, err := s.plugins.Get(*rr.ResourceType)
		if err != nil {
			return nil, err
		}
		f, ok := p.(EarliestFinder)
		if !ok {
			return nil, plugins.BadRequest("The earliest-window search does not support resource type %s", *rr.ResourceType)
		}
		r, err := p.Parse(rr.Values, lease)
		if err != nil {
			return nil, err
		}
		items = append(items, item{rt: *rr.ResourceType, f: f, r: r})
	}
	none := func() error {
		msg := "No window of " + d.String() + " starting at or after " + FormatDate(after)
		if !notAfter.IsZero() {
			msg += " and by " + FormatDate(notAfter)
		}
		return errs.New(errs.NotEnoughResources, "%s has enough free resources for every reservation.", msg)
	}
	t := after
	for range maxEarliestRounds {
		latest, agree := t, true
		for _, it := range items {
			e, found, err := it.f.Earliest(ctx, it.r, t, notAfter, d, nil)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, none()
			}
			if e.After(latest) {
				latest, agree = e, false
			}
		}
		if !agree {
			t = latest
			continue
		}
		// Every reservation fits alone at t: choose them together.
		out := &EarliestWindow{StartDate: FormatDate(t), EndDate: FormatDate(t.Add(d))}
		var taken []string
		next := time.Time{}
		for _, it := range items {
			got, err := it.f.ChooseAt(ctx, it.r, t, t.Add(d), taken)
			if err != nil {
				if errs.Is(err, errs.NotEnoughResources) {
					// The earlier reservations took what this one needs at
					// t: its earliest start without them is the next try.
					e, found, ferr := it.f.Earliest(ctx, it.r, t.Add(time.Minute), notAfter, d, taken)
					if ferr != nil {
						return nil, ferr
					}
					if !found {
						return nil, none()
					}
					next = e
					break
				}
				return nil, err
			}
			taken = append(taken, got...)
			out.Reservations = append(out.Reservations, EarliestReservation{ResourceType: it.rt, Resources: got})
		}
		if next.IsZero() {
			return out, nil
		}
		t = next
	}
	return nil, errs.New(errs.NotEnoughResources, "No window found for these reservations together within %d rounds of the search; ask for them one at a time.", maxEarliestRounds)
}

// maxEarliestCreates bounds CreateEarliest's attempts (a window taken by
// a concurrent request between the search and the create is searched
// again).
const maxEarliestCreates = 3

// CreateEarliest creates lease req in the earliest window of duration d
// at or after after (nil: now) in which its reservations fit: POST
// /v1/leases with "start_date": "earliest" and "duration" (Leasehold's
// extension). req must give no end_date. The window is searched (Earliest)
// and the lease created for it through Create, with its usual checks; a
// window another request took in between is searched again, a few times.
func (s *Service) CreateEarliest(ctx context.Context, c Caller, req CreateRequest, after *string, d time.Duration) (*View, error) {
	if req.EndDate != nil {
		return nil, plugins.BadRequest(`A lease starting at "earliest" takes a duration (seconds), not an end_date`)
	}
	if len(req.Reservations) == 0 {
		return nil, plugins.BadRequest(`A lease starting at "earliest" needs reservations to fit`)
	}
	var err error
	for range maxEarliestCreates {
		var win *EarliestWindow
		if win, err = s.Earliest(ctx, c, EarliestRequest{After: after, Duration: d, Reservations: req.Reservations}); err != nil {
			return nil, err
		}
		start, perr := time.Parse(DateFormat, win.StartDate)
		if perr != nil {
			return nil, perr
		}
		end, perr := time.Parse(DateFormat, win.EndDate)
		if perr != nil {
			return nil, perr
		}
		r := req
		startS, endS := start.Format(inputFormats[0]), end.Format(inputFormats[0])
		if !start.After(s.now()) {
			startS = "now" // the search starts at now truncated to the minute
		}
		r.StartDate, r.EndDate = &startS, &endS
		var v *View
		v, err = s.Create(ctx, c, r)
		if errs.Is(err, errs.NotEnoughResources) {
			continue // taken since the search
		}
		return v, err
	}
	return nil, err
}
