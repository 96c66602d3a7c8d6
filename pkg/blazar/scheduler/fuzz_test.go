package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/pkg/errs"
)

// FuzzParseRequest: any JSON object as a filter request is refused with a
// *errs.Error of kind BadRequest or read within the documented bounds: a
// project, at most maxHosts non-empty host names as given, no empty
// reservation id, and a hint that names one reservation read as it.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"project_id":"p","hosts":["c1","c2"]}`, `{"project_id":"p","user_id":"u","hosts":[],"explain":true}`,
		`{"project_id":"p","hosts":["c1"],"scheduler_hints":{"reservation":"r1"}}`,
		`{"project_id":"p","hosts":["c1"],"scheduler_hints":{"reservation":["r1","r1"]}}`,
		`{"project_id":"p","hosts":["c1"],"scheduler_hints":{"reservation":["r1","r2"]}}`,
		`{"project_id":"p","hosts":["c1"],"flavor":{"extra_specs":{"resources:CUSTOM_RESERVATION_AB_CD":"1"}}}`,
		`{"project_id":"p","hosts":["c1"],"flavor":{"extra_specs":{"resources1:CUSTOM_RESERVATION_":" 2 "}}}`,
		`{"project_id":"p","hosts":["c1"],"flavor":{"extra_specs":{"aggregate_instance_extra_specs:reservation":"r"},"resources":{"CUSTOM_RESERVATION_R":1e0}}}`,
		`{"project_id":"p","hosts":["c1"],"flavor":{"resources":{"CUSTOM_RESERVATION_X":-1}}}`,
		`{"project_id":"","hosts":[""]}`, `{"project_id":1,"hosts":"c1"}`, `{"hosts":[null]}`, `{"project_id":"p","hosts":["c"],"explain":"yes"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var body map[string]any
		if dec.Decode(&body) != nil {
			return
		}
		req, err := ParseRequest(body)
		if err != nil {
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.BadRequest || e.Msg == "" {
				t.Fatalf("%s: error %v is not a bad request", s, err)
			}
			return
		}
		if req.ProjectID == "" || req.ProjectID != body["project_id"] {
			t.Fatalf("%s: project %q", s, req.ProjectID)
		}
		if e, _ := body["explain"].(bool); req.Explain != e {
			t.Fatalf("%s: explain %v", s, req.Explain)
		}
		list := body["hosts"].([]any)
		if len(req.Hosts) != len(list) || len(req.Hosts) > maxHosts {
			t.Fatalf("%s: hosts %q", s, req.Hosts)
		}
		for i, h := range req.Hosts {
			if h == "" || h != list[i] {
				t.Fatalf("%s: host %d read as %q", s, i, h)
			}
		}
		if hints, ok := body["scheduler_hints"].(map[string]any); ok {
			if id, ok := hints["reservation"].(string); ok && req.Reservation != id {
				t.Fatalf("%s: hint reservation read as %q", s, req.Reservation)
			}
		}
		if fl, ok := body["flavor"].(map[string]any); ok {
			if specs, ok := fl["extra_specs"].(map[string]any); ok {
				if id, ok := specs[upstreamFlavorKey].(string); ok && req.FlavorReservation != id {
					t.Fatalf("%s: flavor reservation read as %q", s, req.FlavorReservation)
				}
			}
		}
	})
}
