package blazar

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// RegisterLeases mounts /v1/leases on rt.
func RegisterLeases(rt *Router, svc *leases.Service) {
	h := &leaseHandlers{svc: svc}
	rt.Handle(http.MethodGet, "/leases", h.list)
	rt.Handle(http.MethodPost, "/leases", h.create)
	rt.Handle(http.MethodGet, "/leases/{lease_id}", h.show)
	rt.Handle(http.MethodPut, "/leases/{lease_id}", h.update)
	rt.Handle(http.MethodDelete, "/leases/{lease_id}", h.delete)
}

type leaseHandlers struct{ svc *leases.Service }

// leaseRule checks Blazar's lease policy rule (policy.go) for the
// caller's own project and returns the caller, whose Allowed applies the
// same rule to the project of the lease a call names.
func leaseRule(r *http.Request, rule string) (leases.Caller, error) {
	ctx := r.Context()
	if err := authorize(ctx, rule, ""); err != nil {
		return leases.Caller{}, err
	}
	id := auth.FromContext(ctx)
	// Upstream decides "sees every project" by the policy rule "admin"
	// (a policy file may redefine it), not by a role name; GET /v1/leases
	// then lists all leases and ignores query parameters (project_id,
	// all_projects) as upstream does, so no parameter widens a member's
	// list beyond its project.
	return leases.Caller{
		UserID: id.UserID, ProjectID: id.ProjectID, Admin: authorize(ctx, "admin", "") == nil,
		Allowed: func(project string) error { return authorize(ctx, rule, project) },
		// A new lease's Keystone trust is made with them.
		Token: r.Header.Get("X-Auth-Token"), Roles: id.Roles,
	}, nil
}

func (h *leaseHandlers) list(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:get")
	if err != nil {
		return err
	}
	// The body is what WriteJSON writes for {"leases": svc.List(...)},
	// rendered from the typed rows without building the views; the
	// array is often the service's cached one, written as it is.
	list, err := h.svc.ListJSON(r.Context(), c)
	if err != nil {
		return err
	}
	return writeRawJSON(w, http.StatusOK, []byte(`{"leases":`), list, []byte{'}'})
}

// writeRawJSON writes an already encoded JSON body, the concatenation
// of parts, as WriteJSON does.
func writeRawJSON(w http.ResponseWriter, status int, parts ...[]byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	for _, p := range parts {
		// The status is sent: a failed write (the client went away) has
		// nothing left to render.
		if _, err := w.Write(p); err != nil {
			break
		}
	}
	return nil
}

func (h *leaseHandlers) show(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:get")
	if err != nil {
		return err
	}
	l, err := h.svc.Get(r.Context(), c, chi.URLParam(r, "lease_id"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"lease": l})
}

func (h *leaseHandlers) create(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:post")
	if err != nil {
		return err
	}
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	req, err := decodeCreate(body)
	if err != nil {
		return err
	}
	if req.StartDate != nil && *req.StartDate == "earliest" {
		return h.createEarliest(w, r, c, body, req) // earliest.go
	}
	l, err := h.svc.Create(r.Context(), c, req)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, map[string]any{"lease": l})
}

func (h *leaseHandlers) update(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:put")
	if err != nil {
		return err
	}
	req, err := decodeRequest(r, decodeUpdate)
	if err != nil {
		return err
	}
	l, err := h.svc.Update(r.Context(), c, chi.URLParam(r, "lease_id"), req)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"lease": l})
}

func (h *leaseHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:delete")
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), c, chi.URLParam(r, "lease_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeRequest reads the JSON body of r and decodes it into a typed
// request.
func decodeRequest[T any](r *http.Request, decode func(map[string]any) (T, error)) (T, error) {
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		var zero T
		return zero, err
	}
	return decode(body)
}

func malformed(key string) error { return errs.BadRequestf("Malformed parameter %s", key) }

// optString reads an optional string value: nil when absent or null.
func optString(body map[string]any, key string) (*string, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, malformed(key)
	}
	return &s, nil
}

// objects reads an optional list of JSON objects.
func objects(body map[string]any, key string) ([]map[string]any, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, malformed(key)
	}
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, malformed(key)
		}
		out = append(out, m)
	}
	return out, nil
}

// leaseFields reads the string fields a create and an update share.
func leaseFields(body map[string]any, name, start, end, beforeEnd **string) error {
	var err error
	for _, f := range []struct {
		key string
		dst **string
	}{{"name", name}, {"start_date", start}, {"end_date", end}, {"before_end_date", beforeEnd}} {
		if *f.dst, err = optString(body, f.key); err != nil {
			return err
		}
	}
	return nil
}

// except returns the values of m but key.
func except(m map[string]any, key string) plugins.Values {
	out := make(plugins.Values, len(m))
	for k, x := range m {
		if k != key {
			out[k] = x
		}
	}
	return out
}

// decodeCreate reads a POST /v1/leases body.
func decodeCreate(body map[string]any) (leases.CreateRequest, error) {
	var req leases.CreateRequest
	if body == nil {
		return req, errs.BadRequestf("The request body must be a JSON object.")
	}
	if err := leaseFields(body, &req.Name, &req.StartDate, &req.EndDate, &req.BeforeEndDate); err != nil {
		return req, err
	}
	// The lease kind (a Leasehold extension, see leases.KindSchedule).
	var err error
	if req.LeaseType, err = optString(body, "lease_type"); err != nil {
		return req, err
	}
	req.Timeout = body["timeout"]
	req.Tags = body["tags"]
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
	evs, err := objects(body, "events")
	if err != nil {
		return req, err
	}
	for _, m := range evs {
		e := leases.EventRequest{}
		e.EventType, _ = m["event_type"].(string)
		for _, k := range []string{"time", "event_date"} {
			if t, ok := m[k].(string); ok {
				e.Time = t
				break
			}
		}
		req.Events = append(req.Events, e)
	}
	return req, nil
}

// decodeUpdate reads a PUT /v1/leases/{id} body: only leases.UpdateKeys.
func decodeUpdate(body map[string]any) (leases.UpdateRequest, error) {
	var req leases.UpdateRequest
	var unknown []string
	for k := range body {
		if !slices.Contains(leases.UpdateKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return req, errs.BadRequestf("Unsupported parameter(s) for a lease update: %s (allowed: %s)",
			strings.Join(unknown, ", "), strings.Join(leases.UpdateKeys, ", "))
	}
	if v, ok := body["name"]; ok && v == nil {
		return req, errs.BadRequestf("Missing parameter name")
	}
	if err := leaseFields(body, &req.Name, &req.StartDate, &req.EndDate, &req.BeforeEndDate); err != nil {
		return req, err
	}
	ress, err := objects(body, "reservations")
	if err != nil {
		return req, err
	}
	for _, m := range ress {
		id, _ := m["id"].(string)
		if id == "" {
			return req, errs.BadRequestf("Missing parameter reservation ID")
		}
		req.Reservations = append(req.Reservations, leases.ReservationUpdate{ID: id, Values: except(m, "id")})
	}
	if req.Reservations == nil && ress != nil {
		req.Reservations = []leases.ReservationUpdate{}
	}
	req.Tags, req.TagsGiven = body["tags"]
	return req, nil
}
