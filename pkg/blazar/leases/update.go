package leases

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// UpdateKeys are the keys a lease update may carry.
var UpdateKeys = []string{"name", "start_date", "end_date", "before_end_date", "reservations", "tags"}

// UpdateRequest is a PUT /v1/leases/{id} body. A nil field was absent
// (dates also when null); the handler has already refused unknown keys and
// values of the wrong JSON type.
type UpdateRequest struct {
	Name          *string
	StartDate     *string
	EndDate       *string
	BeforeEndDate *string
	Reservations  []ReservationUpdate
	// Tags is the JSON value of "tags" when TagsGiven (null clears
	// them): the lease's new tags (a Leasehold extension).
	Tags      any
	TagsGiven bool
}

// ReservationUpdate is one entry of an update's reservations: the
// reservation id and the plugin values to change.
type ReservationUpdate struct {
	ID     string
	Values plugins.Values
}

func (r *UpdateRequest) empty() bool {
	return r.Name == nil && r.StartDate == nil && r.EndDate == nil && r.BeforeEndDate == nil && r.Reservations == nil && !r.TagsGiven
}

// updateDates are an update's parsed dates (nil: unchanged).
type updateDates struct {
	start, end, beforeEnd *time.Time
}

func (d updateDates) given() bool { return d.start != nil || d.end != nil || d.beforeEnd != nil }

// Update changes a lease: rename, move/extend/shorten its window, change
// its reservations' parameters. The enforcement filters (which may call an
// external service) run before the write transaction, on the lease as it
// was read; the transaction re-checks that the lease has not changed
// since, and runs again otherwise.
func (s *Service) Update(ctx context.Context, c Caller, id string, req UpdateRequest) (*View, error) {
	if req.Name != nil {
		if n := len([]rune(*req.Name)); n > maxNameLength {
			return nil, plugins.BadRequest("Lease name is too long: %d characters, at most %d", n, maxNameLength)
		}
	}
	dates, err := parseUpdateDates(req, s.now())
	if err != nil {
		return nil, err
	}
	var tags []string
	if req.TagsGiven {
		if tags, err = parseTags(req.Tags); err != nil {
			return nil, err
		}
	}
	resUpdates := map[string]plugins.Values{}
	for _, r := range req.Reservations {
		resUpdates[r.ID] = r.Values
	}
	// seen is the lease the filters approved in this attempt.
	var seen *models.Lease
	checkFilters := func(ctx context.Context, _ attempt) error {
		seen = nil
		if len(s.cfg.Filters) == 0 || (!dates.given() && len(resUpdates) == 0) {
			return nil
		}
		var l models.Lease
		if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&l).Error; err != nil {
			return nil // the transaction reports a missing lease
		}
		if c.check(&l, "blazar:leases:put") != nil || !CanTransition(l.Status, StatusUpdating) {
			return nil // the transaction refuses it
		}
		if _, _, err := updatedWindow(s.now(), l.StartDate.UTC(), l.EndDate.UTC(), dates); err != nil {
			return nil // likewise
		}
		seen = &l
		return s.filterUpdate(ctx, c, &l, req.Name, dates)
	}
	eventsMoved := false
	err = s.write(ctx, checkFilters, func(tx *plugins.Tx, _ attempt) error {
		var err error
		var stopped bool
		eventsMoved, stopped, err = s.update(ctx, tx, c, id, req, dates, tags, resUpdates, seen)
		if err != nil || req.empty() || !s.notifying() {
			return err
		}
		// Blazar notifies an update while the lease is UPDATING, and a
		// before_end_lease that had run and must run again.
		types := []string{NotifyUpdate}
		if stopped {
			types = append(types, NotifyBeforeEndLeaseEnd)
		}
		return s.notifyStored(ctx, tx, id, StatusUpdating, types...)
	})
	if err != nil {
		return nil, err
	}
	if eventsMoved {
		s.eventsChanged()
	}
	return s.view(ctx, s.db.DB, id)
}

func parseUpdateDates(req UpdateRequest, now time.Time) (updateDates, error) {
	var d updateDates
	for _, x := range []struct {
		in  *string
		out **time.Time
	}{{req.StartDate, &d.start}, {req.EndDate, &d.end}, {req.BeforeEndDate, &d.beforeEnd}} {
		if x.in == nil {
			continue
		}
		t, err := ParseDate(*x.in, now)
		if err != nil {
			return d, err
		}
		*x.out = &t
	}
	return d, nil
}

// filterUpdate runs the enforcement filters on the update of lease l.
func (s *Service) filterUpdate(ctx context.Context, c Caller, l *models.Lease, name *string, d updateDates) error {
	oldStart, oldEnd := l.StartDate.UTC(), l.EndDate.UTC()
	newStart, newEnd := oldStart, oldEnd
	if d.start != nil {
		newStart = *d.start
	}
	if d.end != nil {
		newEnd = *d.end
	}
	cur := leaseValues(l.ID, l.Name, l.ProjectID, l.UserID, oldStart, oldEnd, nil)
	nv := cur
	nv.StartDate, nv.EndDate, nv.start, nv.end = FormatDate(newStart), FormatDate(newEnd), newStart, newEnd
	if name != nil {
		nv.Name = *name
	}
	ec := EnforcementContext{UserID: c.UserID, ProjectID: c.ProjectID}
	for _, f := range s.cfg.Filters {
		if err := f.CheckUpdate(ctx, ec, cur, nv); err != nil {
			return err
		}
	}
	return nil
}

// update is one attempt of an update, in tx. It reports whether events
// moved, and whether a before_end_lease that had run was set to run
// again. New tags (req.TagsGiven) are stored and are the lease's tags
// for the reservations placed again by this update; hosts already
// chosen are not moved for them.
func (s *Service) update(ctx context.Context, tx *plugins.Tx, c Caller, id string, req UpdateRequest, d updateDates,
	tags []string, resUpdates map[string]plugins.Values, seen *models.Lease) (moved, stopped bool, err error) {
	l, err := lockLease(ctx, tx, id)
	if err != nil {
		return false, false, err
	}
	if err := c.check(l, "blazar:leases:put"); err != nil {
		return false, false, err
	}
	if req.empty() {
		return false, false, nil
	}
	if !CanTransition(l.Status, StatusUpdating) {
		return false, false, errs.Conflictf("Invalid lease status: lease %s is %s and cannot be updated now.", l.ID, l.Status)
	}
	updates := map[string]any{"updated_at": Stamp(tx.Now)}
	if req.Name != nil {
		updates["name"] = *req.Name
	}
	if req.TagsGiven {
		updates["tags"] = encodeTags(tags)
	}
	ress, err := reservations(ctx, tx.DB, id)
	if err != nil {
		return false, false, err
	}
	if err := checkReservationUpdates(ress, resUpdates); err != nil {
		return false, false, err
	}
	if !d.given() && len(resUpdates) == 0 {
		return false, false, tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", id).Updates(updates).Error
	}
	if len(s.cfg.Filters) > 0 && (seen == nil || !seen.StartDate.Equal(l.StartDate) || !seen.EndDate.Equal(l.EndDate)) {
		return false, false, plugins.ErrRetry // the filters judged another version of the lease
	}
	oldStart, oldEnd := l.StartDate.UTC(), l.EndDate.UTC()
	newStart, newEnd, err := updatedWindow(tx.Now, oldStart, oldEnd, d)
	if err != nil {
		return false, false, err
	}
	old := pluginLease(l, c.Admin)
	nl := old
	nl.Start, nl.End = newStart, newEnd
	if req.TagsGiven {
		nl.Tags = tags
		if nl.Tags == nil {
			nl.Tags = []string{}
		}
	}
	err = s.eachLive(ress, func(st string) bool { return st != ResDeleted }, func(p plugins.Plugin, r *models.Reservation) error {
		vals := resUpdates[r.ID]
		if vals == nil {
			vals = plugins.Values{}
		}
		return p.Update(ctx, tx, old, nl, r, vals)
	})
	if err != nil {
		return false, false, err
	}
	updates["start_date"], updates["end_date"] = newStart, newEnd
	moved, stopped, err = moveEvents(ctx, tx, id, oldEnd, newStart, newEnd, d.beforeEnd)
	if err != nil {
		return false, false, err
	}
	// A successful update recovers a lease left in ERROR.
	if l.Status == StatusError {
		if st, err := s.derived(ctx, tx.DB, id); err == nil {
			updates["status"] = st
		}
	}
	return moved, stopped, tx.WithContext(ctx).Model(&models.Lease{}).Where("id = ?", id).Updates(updates).Error
}

// checkReservationUpdates refuses updates of reservations the lease does
// not have, and changes of resource type (a same type is dropped).
func checkReservationUpdates(ress []models.Reservation, resUpdates map[string]plugins.Values) error {
	var bad []string
	for rid, vals := range resUpdates {
		i := slices.IndexFunc(ress, func(r models.Reservation) bool { return r.ID == rid })
		if i < 0 {
			bad = append(bad, rid)
			continue
		}
		if rt, ok := vals["resource_type"]; ok {
			if rt != ress[i].ResourceType {
				return errs.Conflictf("Cannot change the resource type of reservation %s from %s", rid, ress[i].ResourceType)
			}
			delete(vals, "resource_type")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return plugins.BadRequest("Please enter valid reservation IDs. Invalid reservation IDs are: %s", strings.Join(bad, ", "))
	}
	return nil
}

// updatedWindow is the lease's new window, checked with upstream's rules.
func updatedWindow(now, oldStart, oldEnd time.Time, d updateDates) (time.Time, time.Time, error) {
	newStart, newEnd := oldStart, oldEnd
	if d.start != nil {
		newStart = *d.start
	}
	if d.end != nil {
		newEnd = *d.end
	}
	nowMin := now.Truncate(time.Minute)
	started := !now.Before(oldStart)
	switch {
	case started && !newStart.Equal(oldStart):
		return newStart, newEnd, plugins.BadRequest("Cannot modify the start date of already started leases")
	case !started && newStart.Before(nowMin):
		return newStart, newEnd, plugins.BadRequest("Start date must be later than current date")
	case oldEnd.Before(now):
		return newStart, newEnd, plugins.BadRequest("Terminated leases can only be renamed")
	case newEnd.Before(nowMin) || newEnd.Before(newStart):
		return newStart, newEnd, plugins.BadRequest("End date must be later than current and start date")
	case d.beforeEnd != nil && (!d.beforeEnd.After(newStart) || !d.beforeEnd.Before(newEnd)):
		return newStart, newEnd, errs.Forbiddenf("Datetime is out of lease limits")
	}
	return newStart, newEnd, nil
}

// moveEvents moves the lease's start, end and before-end events to the new
// window (the before-end keeps its distance to the end unless given) and
// reports whether any moved, and whether a before-end that had run was
// set to run again.
func moveEvents(ctx context.Context, tx *plugins.Tx, id string, oldEnd, newStart, newEnd time.Time, beforeEnd *time.Time) (moved, stopped bool, err error) {
	var evs []models.Event
	if err := tx.WithContext(ctx).Where("lease_id = ?", id).Find(&evs).Error; err != nil {
		return false, false, err
	}
	for _, e := range evs {
		ev := map[string]any{}
		switch e.EventType {
		case EventStart:
			if !e.Time.Equal(newStart) {
				ev["time"] = newStart
			}
		case EventEnd:
			if !e.Time.Equal(newEnd) {
				ev["time"] = newEnd
			}
		case EventBeforeEnd:
			t := newEnd.Add(-oldEnd.Sub(e.Time.UTC()))
			if beforeEnd != nil {
				t = *beforeEnd
			}
			if t.Before(newStart) {
				t = newStart
			}
			if !t.Equal(e.Time.UTC()) {
				ev["time"] = t
				if e.Status == EventDone {
					ev["status"] = EventUndone
					stopped = true
				}
			}
		}
		if len(ev) == 0 {
			continue
		}
		ev["updated_at"] = Stamp(tx.Now)
		moved = true
		if err := tx.WithContext(ctx).Model(&models.Event{}).Where("id = ?", e.ID).Updates(ev).Error; err != nil {
			return false, false, err
		}
	}
	return moved, stopped, nil
}
