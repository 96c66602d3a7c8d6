package hosts

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
)

// propertyIDs returns the ids of properties of resourceType named names,
// creating missing ones.
func propertyIDs(tx *gorm.DB, resourceType string, names []string, t time.Time) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	var rows []models.ResourceProperty
	if err := tx.Where("resource_type = ? AND property_name IN ?", resourceType, names).Find(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.PropertyName] = r.ID
	}
	var missing []models.ResourceProperty
	for _, n := range names {
		if _, ok := out[n]; !ok {
			missing = append(missing, models.ResourceProperty{ID: uuid.NewString(), ResourceType: resourceType, PropertyName: n, CreatedAt: t})
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&missing).Error; err != nil {
		return nil, err
	}
	rows = nil
	if err := tx.Where("resource_type = ? AND property_name IN ?", resourceType, names).Find(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.PropertyName] = r.ID
	}
	return out, nil
}

// setCapabilities creates or updates the host's capabilities. With check,
// a capability a reservation depends on cannot change (errs.Conflict).
func (s *Service) setCapabilities(ctx context.Context, tx *gorm.DB, hostID int64, caps map[string]string, check bool, t time.Time) error {
	if len(caps) == 0 {
		return nil
	}
	names := make([]string, 0, len(caps))
	for k := range caps {
		names = append(names, k)
	}
	sort.Strings(names)
	ids, err := propertyIDs(tx, ResourceType, names, t)
	if err != nil {
		return err
	}
	var existing []models.ComputeHostExtraCapability
	if err := tx.Where("computehost_id = ?", hostID).Find(&existing).Error; err != nil {
		return err
	}
	byProp := map[string]*models.ComputeHostExtraCapability{}
	for i := range existing {
		byProp[existing[i].PropertyID] = &existing[i]
	}
	apiID := strconv.FormatInt(hostID, 10)
	var inUse map[string]bool // read when a check first needs it
	for _, name := range names {
		val, pid := caps[name], ids[name]
		cur := byProp[pid]
		if cur != nil && cur.CapabilityValue == val {
			continue
		}
		if check && cur != nil {
			if inUse == nil {
				if inUse, err = s.keysInUse(ctx, tx, apiID); err != nil {
					return err
				}
			}
			if inUse[name] {
				return errs.Conflictf("Can't add extra capability %s to host %s: a current or future reservation depends on it.", name, apiID)
			}
		}
		if cur != nil {
			if err := tx.Model(&models.ComputeHostExtraCapability{}).Where("id = ?", cur.ID).
				Updates(map[string]any{"capability_value": val, "updated_at": t}).Error; err != nil {
				return err
			}
			continue
		}
		row := models.ComputeHostExtraCapability{ID: uuid.NewString(), ComputeHostID: hostID, PropertyID: pid, CapabilityValue: val, CreatedAt: t}
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
	}
	return nil
}
