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

// leaseRule checks Blazar's lease policy rule (policy.go) for the
// caller's own project and returns the caller, whose Allowed applies the
// same rule to the project of the lease a call names.
func leaseRule(r *http.Request, rule string) (leases.Caller, error) {
	ctx := r.Context()
	if err := authorize(ctx, rule, ""); err != nil {
		return leases.Caller{}, err
	}
	id := auth.FromContext(ctx)
	return leases.Caller{
		UserID: id.UserID, ProjectID: id.ProjectID, Admin: id.IsAdmin(),
		Allowed: func(project string) error { return authorize(ctx, rule, project) },
	}, nil
}

func (h *leaseHandlers) list(w http.ResponseWriter, r *http.Request) error {
	c, err := leaseRule(r, "blazar:leases:get")
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
	c, err := leaseRule(r, "blazar:leases:put")
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
