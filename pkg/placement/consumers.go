package placement

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
)

// UnknownConsumerType is how a consumer written without a type (before
// microversion 1.38) is shown from 1.38 on.
const UnknownConsumerType = "unknown"

// AllConsumerTypes is the GET /usages consumer_type filter that groups
// every consumer under one key.
const AllConsumerTypes = "all"

// Consumer is the owner of allocations: a UUID with a project, a user, an
// optional type and a generation bumped by every allocation write.
// Consumers exist only while they hold allocations.
type Consumer struct {
	UUID       string
	ProjectID  string
	UserID     string
	Generation int64
	// Type is the consumer type name, "" when the consumer has none.
	Type string
}

// consumerRow is a consumers row as the write path reads it.
type consumerRow struct {
	id         int64
	uuid       string
	projectID  string
	userID     string
	generation int64
	typeID     *int64
}

// readConsumers returns the existing consumers among uuids, by uuid.
func readConsumers(tx *gorm.DB, uuids []string) (map[string]*consumerRow, error) {
	out := make(map[string]*consumerRow, len(uuids))
	if len(uuids) == 0 {
		return out, nil
	}
	rows, err := tx.Raw("SELECT id, uuid, project_id, user_id, generation, consumer_type_id FROM consumers WHERE uuid IN ?", uuids).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		c := &consumerRow{}
		if err := rows.Scan(&c.id, &c.uuid, &c.projectID, &c.userID, &c.generation, &c.typeID); err != nil {
			return nil, err
		}
		out[c.uuid] = c
	}
	return out, rows.Err()
}

// NormalizeConsumerUUID accepts what Python's uuid.UUID accepts (any case,
// with or without dashes, braces or a urn:uuid: prefix) and returns the
// canonical lower-case dashed form; ok is false for anything else.
func NormalizeConsumerUUID(s string) (string, bool) {
	h := strings.ReplaceAll(s, "urn:", "")
	h = strings.ReplaceAll(h, "uuid:", "")
	h = strings.Trim(h, "{}")
	h = strings.ReplaceAll(h, "-", "")
	if len(h) != 32 {
		return "", false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", false
		}
	}
	h = strings.ToLower(h)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], true
}

// consumerTypeCache maps consumer type names to ids. Consumer types are never
// renamed or deleted, so an entry, once read, stays true for every
// process sharing the database; a miss goes to the database.
type consumerTypeCache struct {
	mu  sync.RWMutex
	ids map[string]int64
}

// consumerTypeIDs returns the ids of the consumer types ws name, by name.
func (s *Service) consumerTypeIDs(ctx context.Context, ws []ConsumerWrite) (map[string]int64, error) {
	typeIDs := map[string]int64{}
	for _, w := range ws {
		if w.Type == "" {
			continue
		}
		if _, ok := typeIDs[w.Type]; ok {
			continue
		}
		id, err := s.consumerTypeID(ctx, w.Type)
		if err != nil {
			return nil, err
		}
		typeIDs[w.Type] = id
	}
	return typeIDs, nil
}

// consumerTypeID returns the id of the consumer type name, creating the
// type if needed. Creation is a write of its own (as upstream does), so
// concurrent writers of a new type all see it and an allocation write
// that later fails leaves only a harmless unused name.
func (s *Service) consumerTypeID(ctx context.Context, name string) (int64, error) {
	cache := s.consumerTypes
	cache.mu.RLock()
	id, ok := cache.ids[name]
	cache.mu.RUnlock()
	if ok {
		return id, nil
	}
	c := s.conn(ctx)
	lookup := func() (int64, bool, error) {
		var ids []int64
		if err := c.Raw("SELECT id FROM consumer_types WHERE name = ?", name).Scan(&ids).Error; err != nil {
			return 0, false, err
		}
		if len(ids) == 0 {
			return 0, false, nil
		}
		return ids[0], true, nil
	}
	id, ok, err := lookup()
	if err != nil {
		return 0, fmt.Errorf("consumer type %s: %w", name, err)
	}
	if !ok {
		t := now()
		ct := models.ConsumerType{Name: name, CreatedAt: t, UpdatedAt: t}
		err := s.db.Write(ctx, func(tx *gorm.DB) error {
			return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&ct).Error
		})
		if err != nil {
			return 0, fmt.Errorf("create consumer type %s: %w", name, err)
		}
		id, ok, err = lookup()
		if err != nil {
			return 0, fmt.Errorf("consumer type %s: %w", name, err)
		}
		if !ok {
			return 0, fmt.Errorf("consumer type %s vanished after create", name)
		}
	}
	cache.mu.Lock()
	cache.ids[name] = id
	cache.mu.Unlock()
	return id, nil
}
