package blazar

import (
	"net/http"

	"github.com/leasehold/leasehold/pkg/blazar/scheduler"
)

// RuleSchedulerFilter guards POST /v1/scheduler/filter (admin or a
// service user by default: Nova's scheduler asks with its service
// credentials).
const RuleSchedulerFilter = "leasehold:scheduler:filter"

// RegisterScheduler adds POST /v1/scheduler/filter, the endpoint of Nova's
// LeaseholdFilter (contrib/nova): the candidate hosts in, the passing ones
// and a reason for each other one out (pkg/blazar/scheduler).
func RegisterScheduler(rt *Router, svc *scheduler.Service) {
	rt.Handle(http.MethodPost, "/scheduler/filter", func(w http.ResponseWriter, r *http.Request) error {
		if err := authorize(r.Context(), RuleSchedulerFilter, ""); err != nil {
			return err
		}
		var body map[string]any
		if err := DecodeBody(r, &body); err != nil {
			return err
		}
		req, err := scheduler.ParseRequest(body)
		if err != nil {
			return err
		}
		res, err := svc.Filter(r.Context(), req)
		if err != nil {
			return err
		}
		// Result encodes itself (the bytes encoding/json would write);
		// through json.Marshal its output would be validated and compacted
		// once more, which costs more than the encoding.
		b, err := res.MarshalJSON()
		if err != nil {
			return err
		}
		return writeRawJSON(w, http.StatusOK, b)
	})
}
