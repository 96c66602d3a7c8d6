package hosts

import (
	"context"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Property is a resource property (a capability name) of physical:host.
type Property struct {
	ID           string
	ResourceType string
	Name         string
	Private      bool
	// Values are the distinct values hosts have for it, sorted.
	Values    []string
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// Properties lists the host properties by name. Private ones are
// included only when includePrivate is set (the API sets it for an admin
// asking with all=True).
func (s *Service) Properties(ctx context.Context, includePrivate bool) ([]Property, error) {
	conn := s.db.WithContext(ctx)
	var rows []models.ResourceProperty
	q := conn.Where("resource_type = ?", ResourceType).Order("property_name")
	if !includePrivate {
		q = q.Where("private = ?", false)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, err
	}
	type valRow struct {
		PropertyID      string `gorm:"column:property_id"`
		CapabilityValue string `gorm:"column:capability_value"`
	}
	var vals []valRow
	if err := conn.Raw(`SELECT DISTINCT c.property_id, c.capability_value FROM computehost_extra_capabilities c
 JOIN resource_properties p ON p.id = c.property_id WHERE p.resource_type = ?`, ResourceType).Scan(&vals).Error; err != nil {
		return nil, err
	}
	byProp := map[string][]string{}
	for _, v := range vals {
		byProp[v.PropertyID] = append(byProp[v.PropertyID], v.CapabilityValue)
	}
	out := make([]Property, len(rows))
	for i, r := range rows {
		v := byProp[r.ID]
		sort.Strings(v)
		if v == nil {
			v = []string{}
		}
		out[i] = toProperty(&r, v)
	}
	return out, nil
}

func toProperty(r *models.ResourceProperty, values []string) Property {
	return Property{ID: r.ID, ResourceType: r.ResourceType, Name: r.PropertyName, Private: r.Private,
		Values: values, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: utcPtr(r.UpdatedAt)}
}

// SetPropertyPrivate marks a host property private or public
// (errs.NotFound when there is no such property).
func (s *Service) SetPropertyPrivate(ctx context.Context, name string, private bool) (*Property, error) {
	var out *Property
	err := s.db.Write(ctx, func(tx *gorm.DB) error {
		t := s.now()
		res := tx.Model(&models.ResourceProperty{}).Where("resource_type = ? AND property_name = ?", ResourceType, name).
			Updates(map[string]any{"private": private, "updated_at": t})
		if res.Error != nil {
			return res.Error
		}
		var rows []models.ResourceProperty
		if err := tx.Where("resource_type = ? AND property_name = ?", ResourceType, name).Limit(1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return errs.NotFoundf("Resource property %s not found for %s.", name, ResourceType)
		}
		p := toProperty(&rows[0], nil)
		out = &p
		return nil
	}, s.txOptions()...)
	return out, err
}
