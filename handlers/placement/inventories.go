package placement

import (
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/pyjsonschema"
)

func (a *API) registerInventoryRoutes(v func(int) microversion.Version) {
	a.route("GET", "/resource_providers/{uuid}/inventories", v(0), a.getInventories)
	a.route("POST", "/resource_providers/{uuid}/inventories", v(0), a.createInventory)
	a.route("PUT", "/resource_providers/{uuid}/inventories", v(0), a.setInventories)
	a.route("DELETE", "/resource_providers/{uuid}/inventories", v(0), a.deleteInventories)
	a.route("GET", "/resource_providers/{uuid}/inventories/{rc}", v(0), a.getInventory)
	a.route("PUT", "/resource_providers/{uuid}/inventories/{rc}", v(0), a.updateInventory)
	a.route("DELETE", "/resource_providers/{uuid}/inventories/{rc}", v(0), a.deleteInventory)
}

// inventoryJSON is one inventory as the API shows it, in upstream's field
// order; Generation is only set on single-inventory responses.
type inventoryJSON struct {
	Total           int64   `json:"total"`
	Reserved        int64   `json:"reserved"`
	MinUnit         int64   `json:"min_unit"`
	MaxUnit         int64   `json:"max_unit"`
	StepSize        int64   `json:"step_size"`
	AllocationRatio pyFloat `json:"allocation_ratio"`
	Generation      *int64  `json:"resource_provider_generation,omitempty"`
}

func toInventoryJSON(inv placement.Inventory) inventoryJSON {
	return inventoryJSON{Total: inv.Total, Reserved: inv.Reserved, MinUnit: inv.MinUnit, MaxUnit: inv.MaxUnit,
		StepSize: inv.StepSize, AllocationRatio: pyFloat(inv.AllocationRatio)}
}

// sendInventories writes {"resource_provider_generation", "inventories"};
// Last-Modified is the newest inventory's, absent when there is none.
func sendInventories(w http.ResponseWriter, r *http.Request, gen int64, invs []placement.Inventory) error {
	out := map[string]inventoryJSON{}
	var lm time.Time
	for _, inv := range invs {
		out[inv.ResourceClass] = toInventoryJSON(inv)
		lm = latest(lm, inv.CreatedAt, inv.UpdatedAt)
	}
	body := map[string]any{"resource_provider_generation": gen, "inventories": out}
	return writeJSONLM(w, r, http.StatusOK, body, lm, len(invs) > 0)
}

// sendInventory writes one inventory with the provider generation
// (omitted when 0, as upstream's "if generation:" does).
func sendInventory(w http.ResponseWriter, r *http.Request, status int, gen int64, inv placement.Inventory) error {
	j := toInventoryJSON(inv)
	if gen != 0 {
		j.Generation = &gen
	}
	return writeJSONLM(w, r, status, j, latest(inv.CreatedAt, inv.UpdatedAt), true)
}

// providerNotFound rewords the provider 404 as the inventory handlers do:
// "No resource provider with uuid X found : <error>".
func providerNotFound(err error, uuid, sep string) error {
	if placement.IsNotFoundErr(err) {
		return placement.NotFound("No resource provider with uuid %s found%s%s", uuid, sep, errMsg(err))
	}
	return err
}

func errMsg(err error) string {
	if pe := errs.As(err); pe != nil {
		return pe.Msg
	}
	return err.Error()
}

// getInventories handles GET /resource_providers/{uuid}/inventories.
func (a *API) getInventories(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:inventories:list", ""); err != nil {
		return err
	}
	uuid := chi.URLParam(r, "uuid")
	p, invs, err := a.svc.ProviderInventories(r.Context(), uuid)
	if err != nil {
		return providerNotFound(err, uuid, " : ")
	}
	return sendInventories(w, r, p.Generation, invs)
}

// getInventory handles GET /resource_providers/{uuid}/inventories/{rc}.
func (a *API) getInventory(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:inventories:show", ""); err != nil {
		return err
	}
	uuid, rc := chi.URLParam(r, "uuid"), chi.URLParam(r, "rc")
	p, invs, err := a.svc.ProviderInventories(r.Context(), uuid)
	if err != nil {
		return providerNotFound(err, uuid, " : ")
	}
	for _, inv := range invs {
		if inv.ResourceClass == rc {
			return sendInventory(w, r, http.StatusOK, p.Generation, inv)
		}
	}
	return placement.NotFound("No inventory of class %s for %s", rc, uuid)
}

// inventoryFromValue builds an inventory of class rc from a validated
// JSON object, with upstream's defaults for absent fields.
func inventoryFromValue(rc string, v pyjsonschema.Value) placement.Inventory {
	inv := placement.DefaultInventory(rc)
	ints := []struct {
		key string
		dst *int64
	}{{"total", &inv.Total}, {"reserved", &inv.Reserved}, {"min_unit", &inv.MinUnit}, {"max_unit", &inv.MaxUnit}, {"step_size", &inv.StepSize}}
	for _, f := range ints {
		if x, ok := v.Get(f.key); ok {
			if n, ok := x.AsInt64(); ok {
				*f.dst = n
			}
		}
	}
	if x, ok := v.Get("allocation_ratio"); ok {
		if f, ok := x.AsFloat64(); ok {
			inv.AllocationRatio = f
		}
	}
	return inv
}

// generationFromValue reads resource_provider_generation. A value that
// is no int64 can match no provider: it is reported as -1.
func generationFromValue(v pyjsonschema.Value) int64 {
	x, _ := v.Get("resource_provider_generation")
	n, ok := x.AsInt64()
	if !ok {
		return -1
	}
	return n
}

// reservedCanBeTotal is microversion ≥ 1.26 (capacity may be 0).
func reservedCanBeTotal(r *http.Request) bool { return ctxVersion(r.Context()).AtLeast(1, 26) }

// createInventory handles POST /resource_providers/{uuid}/inventories:
// 201 with a Location and the inventory. The body's generation, if any,
// is not compared.
func (a *API) createInventory(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	p, err := a.authorizedProvider(r, "placement:resource_providers:inventories:create")
	if err != nil {
		return err
	}
	v, _, err := readJSONValue(r, schemaPostInventory)
	if err != nil {
		return err
	}
	rcv, _ := v.Get("resource_class")
	rc, _ := rcv.AsString()
	inv := inventoryFromValue(rc, v)
	if err := placement.CheckCapacity(p.UUID, reservedCanBeTotal(r), inv); err != nil {
		return placement.BadRequest("Unable to create inventory for resource provider %s: %s", p.UUID, errMsg(err))
	}
	p2, out, err := a.svc.AddInventory(r.Context(), p, inv)
	if err != nil {
		var ic *placement.InventoryConflict
		if errors.As(err, &ic) {
			return placement.Conflict(placement.CodeConcurrentUpdate, "%s", ic.Msg)
		}
		if placement.IsNotFoundErr(err) {
			return placement.BadRequest("Unable to create inventory for resource provider %s: %s", p.UUID, errMsg(err))
		}
		return err
	}
	w.Header().Set("Location", absURL(r, "/resource_providers/"+p.UUID+"/inventories/"+rc))
	return sendInventory(w, r, http.StatusCreated, p2.Generation, out)
}

// setInventories handles PUT /resource_providers/{uuid}/inventories: the
// provider's inventory becomes exactly the body's.
func (a *API) setInventories(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	uuid := chi.URLParam(r, "uuid")
	p, err := a.authorizedProvider(r, "placement:resource_providers:inventories:update")
	if err != nil {
		return err
	}
	v, _, err := readJSONValue(r, schemaPutInventories)
	if err != nil {
		return err
	}
	gen := generationFromValue(v)
	if gen != p.Generation {
		return placement.Conflict(placement.CodeConcurrentUpdate, "resource provider generation conflict")
	}
	invsV, _ := v.Get("inventories")
	var invs []placement.Inventory
	for _, m := range invsV.Members() {
		invs = append(invs, inventoryFromValue(m.Key, m.Value))
	}
	check := func(p *placement.Provider) error {
		if err := placement.CheckCapacity(p.UUID, reservedCanBeTotal(r), invs...); err != nil {
			return placement.BadRequest("Unable to update inventory for resource provider %s: %s", p.UUID, errMsg(err))
		}
		return nil
	}
	p2, _, err := a.svc.SetInventories(r.Context(), uuid, &gen, invs, check)
	if err != nil {
		var ic *placement.InventoryConflict
		switch {
		case errors.As(err, &ic):
			return placement.Conflict(ic.Code, "update conflict: %s", ic.Msg)
		case placement.IsNotFoundErr(err):
			if msg, ok := placement.IsNoInventoryOfClass(err); ok {
				return placement.Conflict("", "Race condition detected when setting inventory. No inventory record with resource class for resource provider %s: %s", uuid, msg)
			}
			if placement.IsNoSuchResourceClass(err) {
				return placement.BadRequest("Unknown resource class in inventory for resource provider %s: %s", uuid, errMsg(err))
			}
		}
		return err
	}
	// Upstream answers with the inventories it was sent (defaults filled
	// in), the new generation, and no stored timestamp.
	now := time.Now().UTC()
	for i := range invs {
		invs[i].UpdatedAt = now
	}
	return sendInventories(w, r, p2.Generation, invs)
}

// deleteInventories handles DELETE /resource_providers/{uuid}/inventories
// (1.5; 405 before).
func (a *API) deleteInventories(w http.ResponseWriter, r *http.Request) error {
	if !ctxVersion(r.Context()).AtLeast(1, 5) {
		return errOf(errs.MethodNotAllowed, "")
	}
	uuid := chi.URLParam(r, "uuid")
	if _, err := a.authorizedProvider(r, "placement:resource_providers:inventories:delete"); err != nil {
		return err
	}
	_, _, err := a.svc.SetInventories(r.Context(), uuid, nil, nil, nil)
	if err != nil {
		var ic *placement.InventoryConflict
		if errors.As(err, &ic) {
			if ic.Code == placement.CodeInventoryInUse {
				return placement.Conflict(ic.Code, "%s", ic.Msg)
			}
			return placement.Conflict(placement.CodeConcurrentUpdate, "Unable to delete inventory for resource provider %s because the inventory was updated by another process. Please retry your request.", uuid)
		}
		return err
	}
	return noContent(w)
}

// updateInventory handles PUT /resource_providers/{uuid}/inventories/{rc}.
func (a *API) updateInventory(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	uuid, rc := chi.URLParam(r, "uuid"), chi.URLParam(r, "rc")
	p, err := a.authorizedProvider(r, "placement:resource_providers:inventories:update")
	if err != nil {
		return err
	}
	v, _, err := readJSONValue(r, schemaPutInventory)
	if err != nil {
		return err
	}
	gen := generationFromValue(v)
	if gen != p.Generation {
		return placement.Conflict(placement.CodeConcurrentUpdate, "resource provider generation conflict")
	}
	inv := inventoryFromValue(rc, v)
	check := func(p *placement.Provider) error {
		if err := placement.CheckCapacity(p.UUID, reservedCanBeTotal(r), inv); err != nil {
			return placement.BadRequest("Unable to update inventory for resource provider %s: %s", p.UUID, errMsg(err))
		}
		return nil
	}
	p2, out, err := a.svc.UpdateInventory(r.Context(), uuid, gen, inv, check)
	if err != nil {
		var ic *placement.InventoryConflict
		switch {
		case errors.As(err, &ic):
			return placement.Conflict(placement.CodeConcurrentUpdate, "update conflict: %s", ic.Msg)
		default:
			if msg, ok := placement.IsNoInventoryOfClass(err); ok {
				return placement.BadRequest("No inventory record with resource class for resource provider %s: %s", uuid, msg)
			}
		}
		return escapedNotFound(err)
	}
	out.UpdatedAt = time.Now().UTC()
	return sendInventory(w, r, http.StatusOK, p2.Generation, out)
}

// deleteInventory handles DELETE /resource_providers/{uuid}/inventories/{rc}.
func (a *API) deleteInventory(w http.ResponseWriter, r *http.Request) error {
	uuid, rc := chi.URLParam(r, "uuid"), chi.URLParam(r, "rc")
	if _, err := a.authorizedProvider(r, "placement:resource_providers:inventories:delete"); err != nil {
		return err
	}
	err := a.svc.DeleteInventory(r.Context(), uuid, rc)
	if err != nil {
		var ic *placement.InventoryConflict
		switch {
		case errors.As(err, &ic):
			return placement.Conflict(placement.CodeConcurrentUpdate, "Unable to delete inventory of class %s: %s", rc, ic.Msg)
		case placement.IsNotFoundErr(err):
			return placement.NotFound("No inventory of class %s found for delete: %s", rc, errMsg(err))
		}
		return err
	}
	return noContent(w)
}
