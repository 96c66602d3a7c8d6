package placement

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

// ResourceClass is a standard or custom resource class.
type ResourceClass struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// IsStandard reports whether the class is one of the standard ones (they
// can be neither renamed nor deleted).
func (rc *ResourceClass) IsStandard() bool { return rc.ID < models.CustomResourceClassMinID }

// ListResourceClasses returns every class: the standard ones in their
// upstream order, then the custom ones in creation order.
func (s *Service) ListResourceClasses(ctx context.Context) ([]ResourceClass, error) {
	var out []ResourceClass
	err := s.conn(ctx).Raw("SELECT id, name, created_at, updated_at FROM resource_classes ORDER BY id").Scan(&out).Error
	return out, wrap("list resource classes", err)
}

// GetResourceClass returns the class called name, or a NotFound error.
func (s *Service) GetResourceClass(ctx context.Context, name string) (*ResourceClass, error) {
	return getResourceClass(s.conn(ctx), name)
}

func getResourceClass(tx *gorm.DB, name string) (*ResourceClass, error) {
	return getNamed[ResourceClass](tx, "resource_classes", name, func(n string) error { return errNoSuchResourceClass(n) })
}

// getNamed reads the row called name from table (resource_classes or
// traits); unknown is the error for a name that is not there.
func getNamed[T ResourceClass | Trait](tx *gorm.DB, table, name string, unknown func(string) error) (*T, error) {
	var out []T
	if err := tx.Raw("SELECT id, name, created_at, updated_at FROM "+table+" WHERE name = ?", name).Scan(&out).Error; err != nil {
		return nil, wrap("get from "+table, err)
	}
	if len(out) == 0 {
		return nil, unknown(name)
	}
	return &out[0], nil
}

// errNoSuchResourceClass is exception.ResourceClassNotFound (a 404 when
// it escapes to the API as is; handlers wrap it into 400s where upstream
// does).
func errNoSuchResourceClass(name string) *errs.Error {
	return NotFound("No such resource class %s.", name)
}

// resourceClassIDs maps class names to ids; the first unknown name (in
// the order given) is an errNoSuchResourceClass.
func resourceClassIDs(tx *gorm.DB, names []string) (map[string]int64, error) {
	return namedIDs(tx, "resource_classes", names, func(n string) error { return errNoSuchResourceClass(n) })
}

// namedIDs maps names to ids in table (resource_classes or traits) with one
// query; the first name (in the order given) missing from it is unknown(name).
func namedIDs(tx *gorm.DB, table string, names []string, unknown func(string) error) (map[string]int64, error) {
	out := make(map[string]int64, len(names))
	if len(names) == 0 {
		return out, nil
	}
	var rows []struct {
		ID   int64
		Name string
	}
	if err := tx.Raw("SELECT id, name FROM "+table+" WHERE name IN ?", names).Scan(&rows).Error; err != nil {
		return nil, wrap(table+" ids", err)
	}
	for _, r := range rows {
		out[r.Name] = r.ID
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, unknown(n)
		}
	}
	return out, nil
}

// resourceClassNames maps ids to names.
func resourceClassNames(tx *gorm.DB) (map[int64]string, error) {
	var rows []struct {
		ID   int64
		Name string
	}
	if err := tx.Raw("SELECT id, name FROM resource_classes").Scan(&rows).Error; err != nil {
		return nil, wrap("resource class names", err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// CreateResourceClass creates the custom class name (already validated as
// CUSTOM_…). An existing class is a Conflict.
func (s *Service) CreateResourceClass(ctx context.Context, name string) (*ResourceClass, error) {
	var out *ResourceClass
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		rc, created, err := ensureResourceClass(tx, name)
		if err != nil {
			return err
		}
		if !created {
			return Conflict("", "Conflicting resource class already exists: %s", name)
		}
		out = rc
		return nil
	})
	if err != nil && db.IsDuplicate(err) {
		return nil, Conflict("", "Conflicting resource class already exists: %s", name)
	}
	return out, err
}

// EnsureResourceClass creates the custom class name unless it exists,
// reporting whether it created it (PUT /resource_classes/{name} ≥ 1.7).
func (s *Service) EnsureResourceClass(ctx context.Context, name string) (*ResourceClass, bool, error) {
	var out *ResourceClass
	var created bool
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		rc, c, err := ensureResourceClass(tx, name)
		out, created = rc, c
		return err
	})
	if err != nil && db.IsDuplicate(err) {
		// Someone created it concurrently: it exists now.
		rc, gerr := s.GetResourceClass(ctx, name)
		return rc, false, gerr
	}
	return out, created, err
}

// ensureResourceClass returns the class name, creating it (with the next
// custom id) when missing.
func ensureResourceClass(tx *gorm.DB, name string) (*ResourceClass, bool, error) {
	rc, err := getResourceClass(tx, name)
	if err == nil {
		return rc, false, nil
	}
	if !IsNotFoundErr(err) {
		return nil, false, err
	}
	if !strings.HasPrefix(name, "CUSTOM_") {
		return nil, false, BadRequest("Object action create failed because: name must start with CUSTOM_")
	}
	var maxID *int64
	if err := tx.Raw("SELECT MAX(id) FROM resource_classes").Scan(&maxID).Error; err != nil {
		return nil, false, wrap("next resource class id", err)
	}
	id := int64(models.CustomResourceClassMinID)
	if maxID != nil && *maxID >= id {
		id = *maxID + 1
	}
	t := now()
	row := models.ResourceClass{ID: id, Name: name, CreatedAt: t, UpdatedAt: t}
	if err := tx.Create(&row).Error; err != nil {
		return nil, false, err
	}
	return &ResourceClass{ID: id, Name: name, CreatedAt: t, UpdatedAt: t}, true, nil
}

// RenameResourceClass renames the custom class oldName to newName (PUT
// /resource_classes/{name} 1.2–1.6).
func (s *Service) RenameResourceClass(ctx context.Context, oldName, newName string) (*ResourceClass, error) {
	var out *ResourceClass
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		rc, err := getResourceClass(tx, oldName)
		if err != nil {
			return err
		}
		if rc.IsStandard() {
			return BadRequest("Cannot update standard resource class %s", oldName)
		}
		if newName != oldName {
			var n int64
			if err := tx.Model(&models.ResourceClass{}).Where("name = ?", newName).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return Conflict("", "Resource class already exists: %s", newName)
			}
		}
		t := now()
		if err := tx.Model(&models.ResourceClass{}).Where("id = ?", rc.ID).
			Updates(map[string]any{"name": newName, "updated_at": t}).Error; err != nil {
			return err
		}
		rc.Name, rc.UpdatedAt = newName, t
		out = rc
		return nil
	})
	if err != nil && db.IsDuplicate(err) {
		return nil, Conflict("", "Resource class already exists: %s", newName)
	}
	return out, err
}

// DeleteResourceClass deletes a custom class that no inventory uses.
func (s *Service) DeleteResourceClass(ctx context.Context, name string) error {
	return s.wtx(ctx, func(tx *gorm.DB) error {
		rc, err := getResourceClass(tx, name)
		if err != nil {
			return err
		}
		if rc.IsStandard() {
			return BadRequest("Error in delete resource class: Cannot delete standard resource class %s.", name)
		}
		var n int64
		if err := tx.Model(&models.Inventory{}).Where("resource_class_id = ?", rc.ID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			// Allocations can only exist on inventory, but an allocation
			// written against inventory since deleted must still hold the
			// class.
			if err := tx.Model(&models.Allocation{}).Where("resource_class_id = ?", rc.ID).Count(&n).Error; err != nil {
				return err
			}
		}
		if n > 0 {
			return Conflict("", "Error in delete resource class: Cannot delete resource class %s. Class is in use in inventory.", name)
		}
		res := tx.Exec("DELETE FROM resource_classes WHERE id = ?", rc.ID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errNoSuchResourceClass(name)
		}
		return nil
	})
}
