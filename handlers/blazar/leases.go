package blazar

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
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

// leaseRule checks Blazar's default lease policies for the caller's own
// project: reads need reader (or member), writes member; admin passes.
// Whether the lease belongs to the caller's project is checked by the
// service (403 with the same message).
func leaseRule(r *http.Request, rule string, write bool) (leases.Caller, error) {
	id := auth.FromContext(r.Context())
	if id == nil {
		return leases.Caller{}, leases.Forbidden(rule)
	}
	c := leases.Caller{UserID: id.UserID, ProjectID: id.ProjectID, Admin: id.IsAdmin()}
	if c.Admin {
		return c, nil
	}
	ok := id.HasRole("member") || (!write && id.HasRole("reader"))
	if !ok || id.ProjectID == "" {
		return c, leases.Forbidden(rule)
	}
	return c, nil
}

func (h *leaseHandlers) list(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:get", false)
	if err != nil {
		return err
	}
	ls, err := h.svc.List(r.Context(), c)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"leases": ls})
}

func (h *leaseHandlers) show(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:get", false)
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
	c, err := leaseRule(r, "blazar:leases:post", true)
	if err != nil {
		return err
	}
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	if body == nil {
		return Errorf(http.StatusBadRequest, "The request body must be a JSON object.")
	}
	req := leases.CreateRequest{
		Name: body["name"], StartDate: body["start_date"], EndDate: body["end_date"],
		BeforeEndDate: body["before_end_date"],
	}
	if v, ok := body["reservations"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return Errorf(http.StatusBadRequest, "Malformed parameter reservations")
		}
		for _, x := range list {
			m, ok := x.(map[string]any)
			if !ok {
				return Errorf(http.StatusBadRequest, "Malformed parameter reservations")
			}
			req.Reservations = append(req.Reservations, m)
		}
	}
	if v, ok := body["events"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return Errorf(http.StatusBadRequest, "Malformed parameter events")
		}
		for _, x := range list {
			m, ok := x.(map[string]any)
			if !ok {
				return Errorf(http.StatusBadRequest, "Malformed parameter events")
			}
			req.Events = append(req.Events, m)
		}
	}
	l, err := h.svc.Create(r.Context(), c, req)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, map[string]any{"lease": l})
}

func (h *leaseHandlers) update(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:put", true)
	if err != nil {
		return err
	}
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	l, err := h.svc.Update(r.Context(), c, chi.URLParam(r, "lease_id"), leases.UpdateRequest(body))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"lease": l})
}

func (h *leaseHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:delete", true)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), c, chi.URLParam(r, "lease_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
