package blazar

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/errs"
)

// RegisterEarliest mounts Leasehold's earliest-window extension, POST
// /v1/leases/earliest (README, "Extensions"). It is asked under the
// lease-create rule: it tells a caller where a lease it may create
// would fit.
func RegisterEarliest(rt *Router, svc *leases.Service) {
	rt.Handle(http.MethodPost, "/leases/earliest", func(w http.ResponseWriter, r *http.Request) error {
		c, err := leaseRule(r, "blazar:leases:post")
		if err != nil {
			return err
		}
		req, err := decodeRequest(r, decodeEarliest)
		if err != nil {
			return err
		}
		win, err := svc.Earliest(r.Context(), c, req)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]any{"earliest": win})
	})
}

const maxEarliestSeconds = 100 * 365 * 86400

// decodeEarliest reads {"duration": seconds, "after": date, "not_after":
// date, "reservations": [...]}.
func decodeEarliest(body map[string]any) (leases.EarliestRequest, error) {
	var req leases.EarliestRequest
	if body == nil {
		return req, errs.BadRequestf("The request body must be a JSON object.")
	}
	var err error
	if req.After, err = optString(body, "after"); err != nil {
		return req, err
	}
	if req.NotAfter, err = optString(body, "not_after"); err != nil {
		return req, err
	}
	if req.Duration, err = duration(body); err != nil {
		return req, err
	}
	ress, err := objects(body, "reservations")
	if err != nil {
		return req, err
	}
	for _, m := range ress {
		rr := leases.ReservationRequest{Values: except(m, "resource_type")}
		if rt, ok := m["resource_type"].(string); ok {
			rr.ResourceType = &rt
		}
		req.Reservations = append(req.Reservations, rr)
	}
	return req, nil
}

// duration reads "duration", a whole number of seconds.
func duration(body map[string]any) (time.Duration, error) {
	var secs float64
	switch v := body["duration"].(type) {
	case nil:
		return 0, errs.BadRequestf("Missing parameter duration (seconds)")
	case float64:
		secs = v
	case json.Number:
		var err error
		if secs, err = v.Float64(); err != nil {
			return 0, malformed("duration")
		}
	default:
		return 0, malformed("duration")
	}
	// At most about a century: beyond, the window passes the last date a
	// lease may carry anyway.
	if secs <= 0 || secs > maxEarliestSeconds || secs != math.Trunc(secs) {
		return 0, errs.BadRequestf("Malformed parameter duration: want a whole number of seconds from 1 to %d", maxEarliestSeconds)
	}
	return time.Duration(secs) * time.Second, nil
}

// createEarliest serves POST /v1/leases with "start_date": "earliest"
// (Leasehold's extension): the lease is created in the earliest window of
// "duration" seconds, at or after "after" (default now), in which its
// reservations fit.
func (h *leaseHandlers) createEarliest(w http.ResponseWriter, r *http.Request, c leases.Caller, body map[string]any, req leases.CreateRequest) error {
	d, err := duration(body)
	if err != nil {
		return err
	}
	after, err := optString(body, "after")
	if err != nil {
		return err
	}
	l, err := h.svc.CreateEarliest(r.Context(), c, req, after, d)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, map[string]any{"lease": l})
}
