package placement

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/microversion"
)

func (a *API) registerResourceClassRoutes(v func(int) microversion.Version) {
	a.route("GET", "/resource_classes", v(2), a.listResourceClasses)
	a.route("POST", "/resource_classes", v(2), a.createResourceClass)
	a.route("GET", "/resource_classes/{name}", v(2), a.getResourceClass)
	a.route("PUT", "/resource_classes/{name}", v(2), a.putResourceClass)
	a.route("DELETE", "/resource_classes/{name}", v(2), a.deleteResourceClass)
}

// resourceClassJSON renders a class with its self link.
func resourceClassJSON(r *http.Request, name string) map[string]any {
	return map[string]any{"name": name, "links": []link{{"self", prefix(r) + "/resource_classes/" + name}}}
}

// listResourceClasses handles GET /resource_classes (1.2): the standard
// classes in their order, then the custom ones.
func (a *API) listResourceClasses(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_classes:list", ""); err != nil {
		return err
	}
	rcs, err := a.svc.ListResourceClasses(r.Context())
	if err != nil {
		return err
	}
	list := make([]map[string]any, 0, len(rcs))
	for _, rc := range rcs {
		list = append(list, resourceClassJSON(r, rc.Name))
	}
	// The standard classes have no meaningful timestamp: "now".
	return writeJSON(w, r, http.StatusOK, map[string]any{"resource_classes": list}, timeNow())
}

// getResourceClass handles GET /resource_classes/{name} (1.2).
func (a *API) getResourceClass(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_classes:show", ""); err != nil {
		return err
	}
	rc, err := a.svc.GetResourceClass(r.Context(), chi.URLParam(r, "name"))
	if err != nil {
		return escapedNotFound(err)
	}
	lm := latest(rc.CreatedAt, rc.UpdatedAt)
	if rc.IsStandard() {
		lm = timeNow()
	}
	return writeJSON(w, r, http.StatusOK, resourceClassJSON(r, rc.Name), lm)
}

// createResourceClass handles POST /resource_classes (1.2): 201, a
// Location and no body.
func (a *API) createResourceClass(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_classes:create", ""); err != nil {
		return err
	}
	v, _, err := readJSONValue(r, schemaResourceClass)
	if err != nil {
		return err
	}
	nv, _ := v.Get("name")
	name, _ := nv.AsString()
	rc, err := a.svc.CreateResourceClass(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", absURL(r, "/resource_classes/"+rc.Name))
	w.WriteHeader(http.StatusCreated)
	return nil
}

// putResourceClass handles PUT /resource_classes/{name}: 1.2–1.6 renames
// a custom class (body {"name"}, 200 with the class); from 1.7 it creates
// the class if needed (201) or confirms it (204), without a body.
func (a *API) putResourceClass(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if !ctxVersion(r.Context()).AtLeast(1, 7) {
		if err := requireJSONContent(r); err != nil {
			return err
		}
		if err := a.policy.Authorize(r.Context(), "placement:resource_classes:update", ""); err != nil {
			return err
		}
		v, _, err := readJSONValue(r, schemaResourceClass)
		if err != nil {
			return err
		}
		nv, _ := v.Get("name")
		newName, _ := nv.AsString()
		rc, err := a.svc.RenameResourceClass(r.Context(), name, newName)
		if err != nil {
			return escapedNotFound(err)
		}
		b, _ := marshalJSON(resourceClassJSON(r, rc.Name))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, err = w.Write(b)
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_classes:update", ""); err != nil {
		return err
	}
	// Upstream validates the name by validating {"name": "<name>"}.
	if _, err := validateJSONBytes([]byte(`{"name": "`+name+`"}`), schemaResourceClass); err != nil {
		return err
	}
	rc, created, err := a.svc.EnsureResourceClass(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", absURL(r, "/resource_classes/"+rc.Name))
	if created {
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	return noContent(w)
}

// deleteResourceClass handles DELETE /resource_classes/{name} (1.2).
func (a *API) deleteResourceClass(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:resource_classes:delete", ""); err != nil {
		return err
	}
	if err := a.svc.DeleteResourceClass(r.Context(), chi.URLParam(r, "name")); err != nil {
		return escapedNotFound(err)
	}
	return noContent(w)
}
