package placement

import (
	"context"
	"database/sql"
)

// ProviderUsages is the usage of every inventoried class of a provider.
type ProviderUsages struct {
	ProviderGeneration int64
	// Usages has every class the provider has inventory of, 0 if unused.
	Usages map[string]int64
}

// GetProviderUsages returns the usages of provider rpUUID, read with its
// generation in one statement.
func (s *Service) GetProviderUsages(ctx context.Context, rpUUID string) (*ProviderUsages, error) {
	// allocation_usages is kept equal to the sum of the allocations by
	// every write, in the same transaction.
	rows, err := s.conn(ctx).Raw(`SELECT rp.generation, rc.name, COALESCE(u.used, 0)
 FROM resource_providers rp
 LEFT JOIN inventories i ON i.resource_provider_id = rp.id
 LEFT JOIN resource_classes rc ON rc.id = i.resource_class_id
 LEFT JOIN allocation_usages u ON u.resource_provider_id = i.resource_provider_id AND u.resource_class_id = i.resource_class_id
 WHERE rp.uuid = ?`, rpUUID).Rows()
	if err != nil {
		return nil, wrap("get provider usages", err)
	}
	defer rows.Close()
	var out *ProviderUsages
	for rows.Next() {
		var gen int64
		var class sql.NullString
		var used sql.NullInt64
		if err := rows.Scan(&gen, &class, &used); err != nil {
			return nil, wrap("get provider usages", err)
		}
		if out == nil {
			out = &ProviderUsages{ProviderGeneration: gen, Usages: map[string]int64{}}
		}
		if class.Valid {
			out.Usages[class.String] = used.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("get provider usages", err)
	}
	if out == nil {
		return nil, NotFound("No resource provider with uuid %s found", rpUUID)
	}
	return out, nil
}

// UsageFilter selects the consumers GET /usages sums over.
type UsageFilter struct {
	ProjectID string
	// UserID, when set, restricts to that user's consumers.
	UserID string
}

// TotalUsages sums the allocations of the matching consumers by resource
// class (GET /usages before 1.38). Unused classes are absent.
func (s *Service) TotalUsages(ctx context.Context, f UsageFilter) (map[string]int64, error) {
	q := `SELECT rc.name, SUM(a.used) FROM allocations a
 JOIN consumers c ON c.uuid = a.consumer_id
 JOIN resource_classes rc ON rc.id = a.resource_class_id
 WHERE c.project_id = ?`
	args := []any{f.ProjectID}
	if f.UserID != "" {
		q += " AND c.user_id = ?"
		args = append(args, f.UserID)
	}
	q += " GROUP BY rc.name"
	rows, err := s.conn(ctx).Raw(q, args...).Rows()
	if err != nil {
		return nil, wrap("total usages", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var class string
		var used int64
		if err := rows.Scan(&class, &used); err != nil {
			return nil, wrap("total usages", err)
		}
		out[class] = used
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("total usages", err)
	}
	return out, nil
}

// TypeUsage is the usage of one consumer type group.
type TypeUsage struct {
	Resources map[string]int64
	// ConsumerCount counts the distinct consumers in the group.
	ConsumerCount int64
}

// UsagesByConsumerType is GET /usages from 1.38: usages grouped by
// consumer type (UnknownConsumerType for consumers without one).
// consumerType filters: "" for every group, AllConsumerTypes for a single
// "all" group, UnknownConsumerType for untyped consumers only, or a type
// name. Groups with no allocations are absent.
func (s *Service) UsagesByConsumerType(ctx context.Context, f UsageFilter, consumerType string) (map[string]*TypeUsage, error) {
	group := "COALESCE(ct.name, '" + UnknownConsumerType + "')"
	where := " WHERE c.project_id = ?"
	args := []any{f.ProjectID}
	if f.UserID != "" {
		where += " AND c.user_id = ?"
		args = append(args, f.UserID)
	}
	switch consumerType {
	case "":
	case AllConsumerTypes:
		group = "'" + AllConsumerTypes + "'"
	case UnknownConsumerType:
		where += " AND c.consumer_type_id IS NULL"
	default:
		where += " AND ct.name = ?"
		args = append(args, consumerType)
	}
	from := ` FROM allocations a
 JOIN consumers c ON c.uuid = a.consumer_id
 JOIN resource_classes rc ON rc.id = a.resource_class_id
 LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id`
	c := s.conn(ctx)
	out := map[string]*TypeUsage{}
	rows, err := c.Raw("SELECT "+group+" AS grp, rc.name, SUM(a.used)"+from+where+" GROUP BY grp, rc.name", args...).Rows()
	if err != nil {
		return nil, wrap("usages by consumer type", err)
	}
	defer rows.Close()
	for rows.Next() {
		var grp, class string
		var used int64
		if err := rows.Scan(&grp, &class, &used); err != nil {
			return nil, wrap("usages by consumer type", err)
		}
		u := out[grp]
		if u == nil {
			u = &TypeUsage{Resources: map[string]int64{}}
			out[grp] = u
		}
		u.Resources[class] = used
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("usages by consumer type", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	// Distinct consumers per group, counted apart from the per-class sums
	// so a consumer holding several classes counts once.
	crows, err := c.Raw("SELECT "+group+" AS grp, COUNT(DISTINCT a.consumer_id)"+from+where+" GROUP BY grp", args...).Rows()
	if err != nil {
		return nil, wrap("usages by consumer type", err)
	}
	defer crows.Close()
	for crows.Next() {
		var grp string
		var n int64
		if err := crows.Scan(&grp, &n); err != nil {
			return nil, wrap("usages by consumer type", err)
		}
		if u := out[grp]; u != nil {
			u.ConsumerCount = n
		}
	}
	if err := crows.Err(); err != nil {
		return nil, wrap("usages by consumer type", err)
	}
	return out, nil
}
