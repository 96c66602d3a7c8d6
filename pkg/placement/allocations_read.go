package placement

import (
	"context"
	"database/sql"
	"time"
)

// ProviderResources is what a consumer holds on one provider.
type ProviderResources struct {
	ProviderUUID       string
	ProviderGeneration int64
	Resources          map[string]int64
}

// ConsumerAllocations is a consumer's allocations, by provider uuid.
type ConsumerAllocations struct {
	// Consumer is nil when the consumer holds nothing.
	Consumer  *Consumer
	Providers map[string]*ProviderResources
	// LastModified is the newest allocation's timestamp (zero if none).
	LastModified time.Time
}

// GetConsumerAllocations returns what consumerUUID holds; an unknown
// consumer simply holds nothing.
func (s *Service) GetConsumerAllocations(ctx context.Context, consumerUUID string) (*ConsumerAllocations, error) {
	rows, err := s.conn(ctx).Raw(`SELECT rp.uuid, rp.generation, rc.name, a.used, a.created_at, a.updated_at,
 c.project_id, c.user_id, c.generation, ct.name
 FROM allocations a
 JOIN consumers c ON c.uuid = a.consumer_id
 JOIN resource_providers rp ON rp.id = a.resource_provider_id
 JOIN resource_classes rc ON rc.id = a.resource_class_id
 LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
 WHERE a.consumer_id = ?`, consumerUUID).Rows()
	if err != nil {
		return nil, wrap("get allocations", err)
	}
	defer rows.Close()
	out := &ConsumerAllocations{Providers: map[string]*ProviderResources{}}
	for rows.Next() {
		var rpUUID, class, project, user string
		var rpGen, used, cGen int64
		var created, updated time.Time
		var typeName sql.NullString
		if err := rows.Scan(&rpUUID, &rpGen, &class, &used, &created, &updated, &project, &user, &cGen, &typeName); err != nil {
			return nil, wrap("get allocations", err)
		}
		if out.Consumer == nil {
			out.Consumer = &Consumer{UUID: consumerUUID, ProjectID: project, UserID: user, Generation: cGen, Type: typeName.String}
		}
		p := out.Providers[rpUUID]
		if p == nil {
			p = &ProviderResources{ProviderUUID: rpUUID, ProviderGeneration: rpGen, Resources: map[string]int64{}}
			out.Providers[rpUUID] = p
		}
		p.Resources[class] = used
		out.LastModified = allocLatest(out.LastModified, created, updated)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("get allocations", err)
	}
	return out, nil
}

// ConsumerResources is what one consumer holds on a provider.
type ConsumerResources struct {
	Generation int64
	Resources  map[string]int64
}

// ProviderAllocations is every allocation against one provider.
type ProviderAllocations struct {
	ProviderGeneration int64
	Consumers          map[string]*ConsumerResources
	LastModified       time.Time
}

// GetProviderAllocations returns the allocations against provider
// rpUUID, read together with its generation in one statement.
func (s *Service) GetProviderAllocations(ctx context.Context, rpUUID string) (*ProviderAllocations, error) {
	rows, err := s.conn(ctx).Raw(`SELECT rp.generation, a.consumer_id, rc.name, a.used, a.created_at, a.updated_at, c.generation
 FROM resource_providers rp
 LEFT JOIN allocations a ON a.resource_provider_id = rp.id
 LEFT JOIN consumers c ON c.uuid = a.consumer_id
 LEFT JOIN resource_classes rc ON rc.id = a.resource_class_id
 WHERE rp.uuid = ?`, rpUUID).Rows()
	if err != nil {
		return nil, wrap("get provider allocations", err)
	}
	defer rows.Close()
	var out *ProviderAllocations
	for rows.Next() {
		var gen int64
		var consumer, class sql.NullString
		var used, cGen sql.NullInt64
		var created, updated sql.NullTime
		if err := rows.Scan(&gen, &consumer, &class, &used, &created, &updated, &cGen); err != nil {
			return nil, wrap("get provider allocations", err)
		}
		if out == nil {
			out = &ProviderAllocations{ProviderGeneration: gen, Consumers: map[string]*ConsumerResources{}}
		}
		if !consumer.Valid || !cGen.Valid || !class.Valid {
			continue // no allocations, or a row without its consumer
		}
		c := out.Consumers[consumer.String]
		if c == nil {
			c = &ConsumerResources{Generation: cGen.Int64, Resources: map[string]int64{}}
			out.Consumers[consumer.String] = c
		}
		c.Resources[class.String] = used.Int64
		out.LastModified = allocLatest(out.LastModified, created.Time, updated.Time)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("get provider allocations", err)
	}
	if out == nil {
		return nil, NotFound("Resource provider '%s' not found: No resource provider with uuid %s found", rpUUID, rpUUID)
	}
	return out, nil
}

func allocLatest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
