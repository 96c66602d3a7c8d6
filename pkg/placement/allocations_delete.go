package placement

import (
	"context"
	"database/sql"
	"errors"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
)

// DeleteAllocations removes every allocation of a consumer and the
// consumer itself. Provider generations are not bumped (as upstream).
func (s *Service) DeleteAllocations(ctx context.Context, consumerUUID string) error {
	plan := func(tx *gorm.DB) (func(tx *gorm.DB) error, error) {
		return s.planDeleteAllocations(tx, consumerUUID)
	}
	var err error
	for attempt := 0; attempt < allocationRetries; attempt++ {
		err = s.runWrite(ctx, plan)
		var r *errRetry
		if err == nil || !(isLockConflict(err) || errors.As(err, &r)) {
			return wrap("delete allocations", err)
		}
	}
	return Conflict(CodeConcurrentUpdate, "Allocations of consumer %s changed while attempting to delete them. Please retry.", consumerUUID)
}

// planDeleteAllocations is the reading half of DeleteAllocations inside
// tx; it returns the writing half.
func (s *Service) planDeleteAllocations(tx *gorm.DB, consumerUUID string) (func(tx *gorm.DB) error, error) {
	held, nRows, c, err := s.readDeleteState(tx, consumerUUID)
	if err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return nil, NotFound("No allocations for consumer '%s'", consumerUUID)
	}
	return func(tx *gorm.DB) error {
		delta := make(map[usageKey]int64, len(held))
		for k, n := range held {
			delta[k] = -n
		}
		if c != nil && s.db.Dialect == db.MySQL {
			// The allocations and the consumer in one statement. The
			// locking read holds every row it matches, so it deletes
			// exactly the rows read plus the consumer, unless the
			// consumer's generation moved: then nothing matches.
			res := tx.Exec(`DELETE a, c FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id
 WHERE a.consumer_id = ? AND c.id = ? AND c.generation = ?`, consumerUUID, c.id, c.generation)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != nRows+1 {
				return &errRetry{msgConsumerRace}
			}
			return s.addUsage(tx, delta)
		}
		if err := tx.Exec("DELETE FROM allocations WHERE consumer_id = ?", consumerUUID).Error; err != nil {
			return err
		}
		if err := s.addUsage(tx, delta); err != nil {
			return err
		}
		if c == nil {
			// Allocations without a consumer row (left by an old
			// writer); drop a row that appeared meanwhile too.
			return tx.Exec("DELETE FROM consumers WHERE uuid = ?", consumerUUID).Error
		}
		// The consumer's generation guards the usage arithmetic: had
		// another write changed its allocations since they were read,
		// the generation moved and this attempt is rolled back.
		res := tx.Exec("DELETE FROM consumers WHERE id = ? AND generation = ?", c.id, c.generation)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return &errRetry{msgConsumerRace}
		}
		return nil
	}, nil
}

// readDeleteState reads, in one statement, what consumerUUID holds, by
// (provider, class), in how many allocation rows, and its consumer row
// (nil if it has none). On MySQL
// it is a locking read: the allocation rows (and the consumer row) stay
// as read until the transaction ends, so the usage summary can be
// corrected by exactly what the delete removes.
func (s *Service) readDeleteState(tx *gorm.DB, consumerUUID string) (held map[usageKey]int64, nRows int64, c *consumerRow, err error) {
	q := `SELECT a.resource_provider_id, a.resource_class_id, a.used, c.id, c.generation
 FROM allocations a LEFT JOIN consumers c ON c.uuid = a.consumer_id WHERE a.consumer_id = ?`
	if s.db.Dialect == db.MySQL {
		q += " FOR UPDATE"
	}
	held = map[usageKey]int64{}
	rows, err := tx.Raw(q, consumerUUID).Rows()
	if err != nil {
		return nil, 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k usageKey
		var n int64
		var id, gen sql.NullInt64
		if err := rows.Scan(&k.rp, &k.rc, &n, &id, &gen); err != nil {
			return nil, 0, nil, err
		}
		held[k] += n
		nRows++
		if id.Valid && c == nil {
			c = &consumerRow{id: id.Int64, uuid: consumerUUID, generation: gen.Int64}
		}
	}
	return held, nRows, c, rows.Err()
}
