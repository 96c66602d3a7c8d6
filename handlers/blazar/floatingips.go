package blazar

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/errs"
)

// RegisterFloatingIPs adds /v1/floatingips (the virtual:floatingip pool).
func RegisterFloatingIPs(rt *Router, svc *hosts.Service) {
	h := &fipHandlers{svc: svc}
	rt.Handle(http.MethodGet, "/floatingips", h.list)
	rt.Handle(http.MethodPost, "/floatingips", h.create)
	rt.Handle(http.MethodGet, "/floatingips/{floatingip_id}", h.get)
	rt.Handle(http.MethodDelete, "/floatingips/{floatingip_id}", h.delete)
}

type fipHandlers struct {
	svc *hosts.Service
}

func fipView(f *hosts.FloatingIP) map[string]any {
	return map[string]any{
		"id": f.ID, "floating_network_id": f.FloatingNetworkID, "subnet_id": f.SubnetID,
		"floating_ip_address": f.FloatingIPAddress, "reservable": f.Reservable,
		"created_at": stamp(f.CreatedAt), "updated_at": stampPtr(f.UpdatedAt),
	}
}

func (h *fipHandlers) list(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:floatingips:get", ""); err != nil {
		return err
	}
	list, err := h.svc.ListFloatingIPs(r.Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(list))
	for i := range list {
		out[i] = fipView(&list[i])
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"floatingips": out})
}

func (h *fipHandlers) get(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:floatingips:get", ""); err != nil {
		return err
	}
	f, err := h.svc.GetFloatingIP(r.Context(), chi.URLParam(r, "floatingip_id"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"floatingip": fipView(f)})
}

func (h *fipHandlers) create(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:floatingips:post", ""); err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	vals := map[string]string{}
	var unknown []string
	for k, raw := range body {
		if k != "floating_network_id" && k != "floating_ip_address" {
			unknown = append(unknown, k)
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return errs.BadRequestf("Malformed parameter `%s`: it must be a string", k)
		}
		vals[k] = s
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return errs.BadRequestf("Unknown parameter `%s`: a floating IP takes floating_network_id and floating_ip_address", unknown[0])
	}
	f, err := h.svc.CreateFloatingIP(r.Context(), vals["floating_network_id"], vals["floating_ip_address"])
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, map[string]any{"floatingip": fipView(f)})
}

func (h *fipHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:floatingips:delete", ""); err != nil {
		return err
	}
	if err := h.svc.DeleteFloatingIP(r.Context(), chi.URLParam(r, "floatingip_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
