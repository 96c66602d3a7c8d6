package blazar

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
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
	req, err := decodeFloatingIPCreate(r)
	if err != nil {
		return err
	}
	f, err := h.svc.CreateFloatingIP(r.Context(), req.NetworkID, req.Address)
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

// floatingIPCreate is the body of POST /v1/floatingips. A missing or null
// field is "" (the service says which is missing).
type floatingIPCreate struct {
	NetworkID string `json:"floating_network_id"`
	Address   string `json:"floating_ip_address"`
}

func decodeFloatingIPCreate(r *http.Request) (floatingIPCreate, error) {
	var req floatingIPCreate
	_, err := decodeKnown(r, &req, []string{"floating_network_id", "floating_ip_address"},
		func(k string) error {
			return errs.BadRequestf("Unknown parameter `%s`: a floating IP takes floating_network_id and floating_ip_address", k)
		},
		func(k string) error { return errs.BadRequestf("Malformed parameter `%s`: it must be a string", k) })
	return req, err
}

// decodeKnown decodes a JSON object body whose keys must all be among
// known into the typed request dst (a pointer to a struct with those json
// tags) and says which keys were present. The first unknown key in
// sorted order is refused with unknown's error (so the answer does not
// depend on map order), a value of the wrong type with malformed's.
func decodeKnown(r *http.Request, dst any, known []string, unknown, malformed func(key string) error) (map[string]bool, error) {
	var body map[string]json.RawMessage
	if err := DecodeBody(r, &body); err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(body))
	var extra []string
	for k := range body {
		present[k] = true
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, unknown(extra[0])
	}
	// The object is valid JSON already: only a field's type can fail.
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, malformed(te.Field)
		}
		return nil, err
	}
	return present, nil
}
