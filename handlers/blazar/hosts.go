package blazar

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/errs"
)

// stamp renders created_at/updated_at as Blazar's to_dict does (Python's
// isoformat(' '), the lease engine's FormatStamp).
func stamp(t time.Time) string { return leases.FormatStamp(t) }

func stampPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return stamp(*t)
}

// RegisterHosts adds /v1/os-hosts (hosts, allocations and properties).
func RegisterHosts(rt *Router, svc *hosts.Service) {
	h := &hostHandlers{svc: svc}
	rt.Handle(http.MethodGet, "/os-hosts", h.list)
	rt.Handle(http.MethodPost, "/os-hosts", h.create)
	rt.Handle(http.MethodGet, "/os-hosts/allocations", h.allocations)
	rt.Handle(http.MethodGet, "/os-hosts/{host_id}", h.get)
	rt.Handle(http.MethodPut, "/os-hosts/{host_id}", h.update)
	rt.Handle(http.MethodDelete, "/os-hosts/{host_id}", h.delete)
	rt.Handle(http.MethodGet, "/os-hosts/{host_id}/allocation", h.allocation)
	registerPropertyRoutes(rt, h)
}

type hostHandlers struct {
	svc *hosts.Service
}

// hostView is a host with its extra capabilities flattened in (a
// capability named like a field shadows it, as upstream's dict update).
func hostView(h *hosts.Host) map[string]any {
	m := map[string]any{
		"id":                  h.ID,
		"hypervisor_hostname": h.HypervisorHostname,
		"service_name":        h.ServiceName,
		"vcpus":               h.VCPUs,
		"memory_mb":           h.MemoryMB,
		"local_gb":            h.LocalGB,
		"hypervisor_type":     h.HypervisorType,
		"hypervisor_version":  h.HypervisorVersion,
		"cpu_info":            h.CPUInfo,
		"availability_zone":   h.AvailabilityZone,
		"status":              h.Status,
		"reservable":          h.Reservable,
		"trust_id":            h.TrustID,
		"created_at":          stamp(h.CreatedAt),
		"updated_at":          stampPtr(h.UpdatedAt),
	}
	for k, v := range h.ExtraCapabilities {
		m[k] = v
	}
	return m
}

func (h *hostHandlers) list(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:get", ""); err != nil {
		return err
	}
	list, err := h.svc.List(r.Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(list))
	for i := range list {
		out[i] = hostView(&list[i])
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"hosts": out})
}

func (h *hostHandlers) get(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:get", ""); err != nil {
		return err
	}
	host, err := h.svc.Get(r.Context(), chi.URLParam(r, "host_id"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"host": hostView(host)})
}

func (h *hostHandlers) create(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:post", ""); err != nil {
		return err
	}
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	host, err := h.svc.Create(r.Context(), body)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusCreated, map[string]any{"host": hostView(host)})
}

func (h *hostHandlers) update(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:put", ""); err != nil {
		return err
	}
	var body map[string]any
	if err := DecodeBody(r, &body); err != nil {
		return err
	}
	host, err := h.svc.Update(r.Context(), chi.URLParam(r, "host_id"), body)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"host": hostView(host)})
}

func (h *hostHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:delete", ""); err != nil {
		return err
	}
	del := h.svc.Delete
	switch strings.ToLower(r.URL.Query().Get("force")) {
	case "", "false", "0":
	case "true", "1":
		// Leasehold: a failed host goes even while reserved, its
		// reservations healed first (README, "Extensions").
		del = h.svc.DeleteForce
	default:
		return errs.BadRequestf("Malformed parameter force: want true or false")
	}
	if err := del(r.Context(), chi.URLParam(r, "host_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func allocationFilter(r *http.Request) hosts.AllocationFilter {
	q := r.URL.Query()
	return hosts.AllocationFilter{LeaseID: q.Get("lease_id"), ReservationID: q.Get("reservation_id")}
}

func allocationView(a *hosts.HostAllocation) map[string]any {
	res := make([]map[string]any, len(a.Reservations))
	for i, x := range a.Reservations {
		res[i] = map[string]any{
			"id": x.ID, "lease_id": x.LeaseID,
			"start_date": leases.FormatDate(x.StartDate), "end_date": leases.FormatDate(x.EndDate),
		}
	}
	return map[string]any{"resource_id": a.ResourceID, "reservations": res}
}

func (h *hostHandlers) allocations(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:get_allocations", ""); err != nil {
		return err
	}
	// The body is what WriteJSON writes for {"allocations": [allocationView
	// of each]}, rendered from the rows without building the maps.
	list, err := h.svc.AllocationsJSON(r.Context(), allocationFilter(r))
	if err != nil {
		return err
	}
	return writeRawJSON(w, http.StatusOK, []byte(`{"allocations":`), list, []byte{'}'})
}

func (h *hostHandlers) allocation(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "blazar:oshosts:get_allocations", ""); err != nil {
		return err
	}
	a, err := h.svc.Allocation(r.Context(), chi.URLParam(r, "host_id"), allocationFilter(r))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"allocation": allocationView(a)})
}

// queryFlag reads a boolean query flag: absent, "", "0", "false", "no"
// and "off" are false, anything else true. (Upstream tests the raw
// string, so even "False" counts as true there; clients only send
// "True".)
func queryFlag(r *http.Request, name string) bool {
	v, ok := r.URL.Query()[name]
	if !ok || len(v) == 0 {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(v[0])) {
	case "", "0", "false", "no", "off":
		return false
	}
	if b, err := strconv.ParseBool(v[0]); err == nil {
		return b
	}
	return true
}

func isAdmin(r *http.Request) bool {
	return auth.FromContext(r.Context()).IsAdmin()
}
