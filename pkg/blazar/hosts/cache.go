package hosts

import (
	"context"
	"strconv"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
)

// Reservable returns every reservable host with its capabilities, by id.
// See the package documentation for the caching rules; the result is
// shared and must not be modified.
func (s *Service) Reservable(ctx context.Context) ([]Host, error) {
	_, res, err := s.snapshot(ctx)
	return res, err
}

// List returns every registered host, by id, from the same cache as
// Reservable (shared: do not modify).
func (s *Service) List(ctx context.Context) ([]Host, error) {
	all, _, err := s.snapshot(ctx)
	return all, err
}

// snapshot returns all hosts and the reservable ones, re-read when the
// change marker moved since the cached copy was taken.
func (s *Service) snapshot(ctx context.Context) (all, reservable []Host, err error) {
	conn := s.db.WithContext(ctx)
	var version int64
	if err := conn.Raw("SELECT version FROM leasehold_change_markers WHERE name = ?", hostsMarker).Scan(&version).Error; err != nil {
		return nil, nil, err
	}
	s.cacheMu.Lock()
	if s.cacheValid && s.cacheVersion == version {
		all, reservable = s.cacheAll, s.cache
		s.cacheMu.Unlock()
		return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
	}
	s.cacheMu.Unlock()
	// One loader at a time: callers arriving meanwhile wait and take its
	// copy when it is at least as new as the marker they read.
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.cacheMu.Lock()
	if s.cacheValid && s.cacheVersion >= version {
		all, reservable = s.cacheAll, s.cache
		s.cacheMu.Unlock()
		return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
	}
	s.cacheMu.Unlock()
	// Read after the marker: a write racing with this load moves the
	// marker again, so the copy below is at worst re-read next time.
	s.loads.Add(1)
	all, err = listHosts(conn, false)
	if err != nil {
		return nil, nil, err
	}
	reservable = make([]Host, 0, len(all))
	for i := range all {
		if all[i].Reservable {
			reservable = append(reservable, all[i])
		}
	}
	s.cacheMu.Lock()
	s.cacheAll, s.cache, s.cacheVersion, s.cacheValid = all, reservable, version, true
	s.cacheMu.Unlock()
	return all[:len(all):len(all)], reservable[:len(reservable):len(reservable)], nil
}

func (s *Service) invalidate() {
	s.cacheMu.Lock()
	s.cacheValid = false
	s.cache, s.cacheAll = nil, nil
	s.cacheMu.Unlock()
}

// ReservableTx returns which of the host ids (API ids) exist and are
// reservable, read inside tx. The lease engine calls it after locking the
// hosts it is about to book: a host deleted (Delete takes the same lock
// before it checks the host's allocations) or made non-reservable since
// its cached view was taken is then not booked.
func ReservableTx(tx *gorm.DB, ids []string) (map[string]bool, error) {
	var nums []int64
	for _, id := range ids {
		if n, ok := parseID(id); ok {
			nums = append(nums, n)
		}
	}
	out := make(map[string]bool, len(nums))
	if len(nums) == 0 {
		return out, nil
	}
	var found []int64
	if err := tx.Model(&models.ComputeHost{}).Where("id IN ? AND reservable = ?", nums, true).Pluck("id", &found).Error; err != nil {
		return nil, err
	}
	for _, n := range found {
		out[strconv.FormatInt(n, 10)] = true
	}
	return out, nil
}
