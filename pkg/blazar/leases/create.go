package leases

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// CreateRequest is a POST /v1/leases body. A nil field was absent or
// null; the handler has already refused values of the wrong JSON type.
type CreateRequest struct {
	Name          *string
	StartDate     *string
	EndDate       *string
	BeforeEndDate *string
	Reservations  []ReservationRequest
	Events        []EventRequest
	// LeaseType (SCHEDULE, IMMEDIATE, BEST-EFFORT; nil: SCHEDULE) and
	// Timeout (the JSON value of "timeout", nil when absent) are the
	// lease kind (kinds.go).
	LeaseType *string
	Timeout   any
	// Tags is the JSON value of "tags" (nil when absent): the lease's
	// tags (tags.go).
	Tags any
}

// ReservationRequest is one reservation of a new lease: its type and the
// plugin's values (every other key of the object).
type ReservationRequest struct {
	// ResourceType is nil when the object had none (or not a string).
	ResourceType *string
	Values       plugins.Values
}

// EventRequest is an extra event given with a new lease (stored, never
// run).
type EventRequest struct {
	EventType string
	// Time is the "time" (or "event_date") value.
	Time string
}

// maxNameLength is the longest lease name (Blazar's column size).
const maxNameLength = 80

// newReservation is one reservation of a create, parsed by its plugin.
type newReservation struct {
	p   plugins.Plugin
	req plugins.Request
	// prepared is the plugin's choice for the coming attempt
	// (plugins.Preparer), nil otherwise.
	prepared any
}

// createPlan is a checked create request: what will be written.
type createPlan struct {
	caller Caller
	name   string
	lease  plugins.Lease
	res    []newReservation
	events []models.Event // start, end, before_end, then the extra ones
	kind   leaseKind
	// now is the request's clock reading; a lease that starts now
	// (IMMEDIATE, BEST-EFFORT) is ACTIVE at once, unless clearing: then it
	// is IN-PROGRESS until deadline (the scavenger hunt, kinds.go).
	now      time.Time
	clearing bool
	deadline time.Time
	// trustID is the lease's Keystone trust ("" without one).
	trustID string
}

// Create creates a lease with its reservations and events: validate,
// choose the resources (outside the transaction), then persist them,
// locking and re-checking the chosen resources.
func (s *Service) Create(ctx context.Context, c Caller, req CreateRequest) (*View, error) {
	plan, err := s.planCreate(ctx, c, req)
	if err != nil {
		return nil, err
	}
	// The trust is made before the transaction (Keystone is never called
	// inside one) and removed again if the lease is not written.
	if plan.trustID, err = s.createTrust(ctx, c); err != nil {
		return nil, err
	}
	var l models.Lease
	var ress []models.Reservation
	persist := func(tx *plugins.Tx, _ attempt) error {
		var err error
		l, ress, err = plan.persist(ctx, tx)
		if err != nil || !s.notifying() {
			return err
		}
		ets := []string{NotifyCreate}
		if plan.kind.typ != KindSchedule && !plan.clearing {
			ets = append(ets, NotifyStartLease) // started in this transaction
		}
		return s.enqueueNotifications(ctx, tx, plan.view(&l, ress), ets...)
	}
	err = s.write(ctx, plan.prepare, persist)
	if err != nil && plan.kind.typ == KindBestEffort && errs.Is(err, errs.NotEnoughResources) {
		// Too few hosts free now: the scavenger hunt.
		plan.clearing = true
		plan.deadline = plan.now.Add(time.Duration(plan.kind.timeout) * time.Second)
		plan.events = clearingEvents(plan.events, plan.deadline)
		err = s.write(ctx, plan.prepareClearing, persist)
	}
	if err != nil {
		s.dropTrust(ctx, c, plan.trustID)
		return nil, err
	}
	s.eventsChanged()
	return plan.view(&l, ress), nil
}

// planCreate validates a create request: the lease fields, each
// reservation with its plugin, the enforcement filters, the events.
func (s *Service) planCreate(ctx context.Context, c Caller, req CreateRequest) (*createPlan, error) {
	if req.Name == nil {
		return nil, plugins.MissingParameter("name")
	}
	if n := len([]rune(*req.Name)); n > maxNameLength {
		return nil, plugins.BadRequest("Lease name is too long: %d characters, at most %d", n, maxNameLength)
	}
	kind, err := parseKind(req.LeaseType, req.Timeout)
	if err != nil {
		return nil, err
	}
	tags, err := parseTags(req.Tags)
	if err != nil {
		return nil, err
	}
	now := s.now()
	startS := req.StartDate
	if kind.typ != KindSchedule {
		s, err := startsNow(kind, startS, now)
		if err != nil {
			return nil, err
		}
		startS = &s
	}
	if startS == nil {
		return nil, plugins.MissingParameter("start_date")
	}
	if req.EndDate == nil {
		return nil, plugins.MissingParameter("end_date")
	}
	for _, r := range req.Reservations {
		if r.ResourceType == nil {
			return nil, plugins.MissingParameter("resource_type")
		}
	}
	start, end, err := newWindow(*startS, *req.EndDate, now)
	if err != nil {
		return nil, err
	}
	if kind.typ == KindBestEffort && !now.Add(time.Duration(kind.timeout)*time.Second).Before(end) {
		return nil, plugins.BadRequest("The timeout (%d s) must end before the lease does", kind.timeout)
	}
	plan := &createPlan{caller: c, name: *req.Name, kind: kind, now: now,
		lease: plugins.Lease{ProjectID: c.ProjectID, UserID: c.UserID, Start: start, End: end, Status: StatusPending, Admin: c.Admin, Tags: tags}}
	for _, r := range req.Reservations {
		p, err := s.plugins.Get(*r.ResourceType)
		if err != nil {
			return nil, err
		}
		pr, err := p.Parse(r.Values, plan.lease)
		if err != nil {
			return nil, err
		}
		plan.res = append(plan.res, newReservation{p: p, req: pr})
	}
	lv := leaseValues("", plan.name, c.ProjectID, c.UserID, start, end, plan.fields())
	for _, f := range s.cfg.Filters {
		if err := f.CheckCreate(ctx, EnforcementContext{UserID: c.UserID, ProjectID: c.ProjectID}, lv); err != nil {
			return nil, err
		}
	}
	if plan.events, err = s.newEvents(req, start, end, now); err != nil {
		return nil, err
	}
	return plan, nil
}

// newWindow parses and checks a new lease's dates.
func newWindow(startS, endS string, now time.Time) (start, end time.Time, err error) {
	if start, err = ParseDate(startS, now); err != nil {
		return
	}
	if end, err = ParseDate(endS, now); err != nil {
		return
	}
	if start.Before(now.Truncate(time.Minute)) {
		return start, end, plugins.BadRequest("Start date must be later than current date")
	}
	if !end.After(start) {
		return start, end, plugins.BadRequest("End date must be later than start date.")
	}
	return start, end, nil
}

// newEvents are a new lease's events: start, end, before_end (given, or
// [manager] minutes_before_end_lease before the end), then the extra ones.
func (s *Service) newEvents(req CreateRequest, start, end, now time.Time) ([]models.Event, error) {
	var beforeEnd *time.Time
	if req.BeforeEndDate != nil {
		t, err := ParseDate(*req.BeforeEndDate, now)
		if err != nil {
			return nil, err
		}
		if !t.After(start) || !t.Before(end) {
			return nil, errs.Forbiddenf("Datetime is out of lease limits")
		}
		beforeEnd = &t
	}
	evs := []models.Event{{EventType: EventStart, Time: start}, {EventType: EventEnd, Time: end}}
	if be, ok := s.beforeEndTime(beforeEnd, start, end); ok {
		evs = append(evs, models.Event{EventType: EventBeforeEnd, Time: be})
	}
	for _, e := range req.Events {
		ev, err := extraEvent(e, now)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// fields are the reservations as the enforcement filters see them.
func (p *createPlan) fields() []map[string]any {
	out := make([]map[string]any, 0, len(p.res))
	for _, r := range p.res {
		m := map[string]any{"resource_type": r.p.ResourceType()}
		for k, x := range r.req.Fields() {
			m[k] = x
		}
		out = append(out, m)
	}
	return out
}

// prepare chooses the resources of every reservation whose plugin is a
// Preparer, from the plugins' views, before an attempt's transaction.
func (p *createPlan) prepare(ctx context.Context, a attempt) error {
	for i := range p.res {
		r := &p.res[i]
		pp, ok := r.p.(plugins.Preparer)
		if !ok {
			continue
		}
		var earlier []any
		for j := range i {
			if p.res[j].p == r.p {
				earlier = append(earlier, p.res[j].prepared)
			}
		}
		c, err := pp.Prepare(ctx, p.lease, r.req, a.fresh, earlier)
		if err != nil {
			return err
		}
		r.prepared = c
	}
	return nil
}

// persist writes the lease, its events and its reservations in tx. The
// events go first: the plugins lock their resources as late as possible
// (MySQL row locks are held until the commit).
func (p *createPlan) persist(ctx context.Context, tx *plugins.Tx) (models.Lease, []models.Reservation, error) {
	stamp := Stamp(tx.Now)
	l := models.Lease{ID: uuid.NewString(), Name: p.name, UserID: p.caller.UserID, ProjectID: p.caller.ProjectID,
		StartDate: p.lease.Start, EndDate: p.lease.End, Status: StatusPending, CreatedAt: stamp, UpdatedAt: &stamp,
		LeaseType: p.kind.typ, Tags: encodeTags(p.lease.Tags), TrustID: p.trustID}
	startNow := p.kind.typ != KindSchedule && !p.clearing
	switch {
	case p.clearing:
		l.Status = StatusInProgress
	case startNow:
		l.Status = StatusActive
	}
	if p.kind.typ == KindBestEffort {
		l.Timeout = &p.kind.timeout
	}
	if err := insertLease(tx, &l); err != nil {
		return l, nil, err
	}
	for i := range p.events {
		e := &p.events[i]
		e.ID, e.LeaseID, e.Status, e.CreatedAt = uuid.NewString(), l.ID, EventUndone, stamp
		if startNow && e.EventType == EventStart {
			e.Status = EventDone // started below, in this transaction
		}
	}
	if err := insertEvents(tx, p.events); err != nil {
		return l, nil, err
	}
	pl := pluginLease(&l, p.caller.Admin)
	ress := make([]models.Reservation, 0, len(p.res))
	for _, r := range p.res {
		res := models.Reservation{ID: uuid.NewString(), LeaseID: l.ID, ResourceType: r.p.ResourceType(),
			Status: ResPending, CreatedAt: stamp, UpdatedAt: &stamp}
		var rid string
		var err error
		if pp, ok := r.p.(plugins.Preparer); ok && r.prepared != nil {
			rid, err = pp.ReservePrepared(ctx, tx, pl, &res, r.req, r.prepared)
		} else {
			rid, err = r.p.Reserve(ctx, tx, pl, &res, r.req)
		}
		if err != nil {
			return l, nil, err
		}
		res.ResourceID = rid
		if startNow {
			if err := r.p.OnStart(ctx, tx, pl, &res); err != nil {
				return l, nil, err
			}
			res.Status = ResActive
		}
		ress = append(ress, res)
	}
	return l, ress, insertReservations(tx, ress)
}

// view is the answer to a create, built from what was written (the plugin
// fields are the parsed requests, which is what Describe reads back).
func (p *createPlan) view(l *models.Lease, ress []models.Reservation) *View {
	v := newView(l)
	for i := range ress {
		m := reservationView(&ress[i])
		for k, x := range p.res[i].req.Fields() {
			m[k] = x
		}
		v.Reservations = append(v.Reservations, m)
	}
	evs := append([]models.Event(nil), p.events...)
	sortEvents(evs)
	for i := range evs {
		v.Events = append(v.Events, eventView(&evs[i]))
	}
	return v
}

// insertLease, insertReservations and insertEvents write new rows with
// one plain statement each (no GORM reflection on the creation path).
func insertLease(tx *plugins.Tx, l *models.Lease) error {
	_, err := tx.ExecSQL(`INSERT INTO leases
		(id, name, user_id, project_id, start_date, end_date, trust_id, status, degraded, created_at, updated_at, lease_type, timeout, tags)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		l.ID, l.Name, l.UserID, l.ProjectID, l.StartDate, l.EndDate, l.TrustID, l.Status, l.Degraded, l.CreatedAt, l.UpdatedAt, leaseType(l.LeaseType), l.Timeout, l.Tags)
	return err
}

func insertReservations(tx *plugins.Tx, ress []models.Reservation) error {
	if len(ress) == 0 {
		return nil
	}
	q := []byte(`INSERT INTO reservations
		(id, lease_id, resource_id, resource_type, status, missing_resources, resources_changed, created_at, updated_at)
		VALUES `)
	q = db.Placeholders(q, len(ress), 9)
	args := make([]any, 0, 9*len(ress))
	for i := range ress {
		r := &ress[i]
		args = append(args, r.ID, r.LeaseID, r.ResourceID, r.ResourceType, r.Status, r.MissingResources, r.ResourcesChanged, r.CreatedAt, r.UpdatedAt)
	}
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

func insertEvents(tx *plugins.Tx, evs []models.Event) error {
	if len(evs) == 0 {
		return nil
	}
	q := []byte(`INSERT INTO events
		(id, lease_id, event_type, time, status, claimed_by, claimed_at, attempts, created_at, updated_at)
		VALUES `)
	q = db.Placeholders(q, len(evs), 10)
	args := make([]any, 0, 10*len(evs))
	for i := range evs {
		e := &evs[i]
		args = append(args, e.ID, e.LeaseID, e.EventType, e.Time, e.Status, e.ClaimedBy, e.ClaimedAt, e.Attempts, e.CreatedAt, e.UpdatedAt)
	}
	_, err := tx.ExecSQL(string(q), args...)
	return err
}

// beforeEndTime places the before_end_lease event.
func (s *Service) beforeEndTime(given *time.Time, start, end time.Time) (time.Time, bool) {
	if given != nil {
		return *given, true
	}
	if s.cfg.MinutesBeforeEndLease <= 0 {
		return time.Time{}, false
	}
	t := end.Add(-time.Duration(s.cfg.MinutesBeforeEndLease) * time.Minute)
	if t.Before(start) {
		t = start
	}
	return t, true
}

// extraEvent stores an event given in the request as given; it never runs.
func extraEvent(e EventRequest, now time.Time) (models.Event, error) {
	if e.EventType == "" {
		return models.Event{}, plugins.MissingParameter("event_type")
	}
	if e.EventType == EventStart || e.EventType == EventEnd || e.EventType == EventBeforeEnd {
		return models.Event{}, plugins.BadRequest("Event type %s is managed by the lease and cannot be given", e.EventType)
	}
	if e.Time == "" {
		return models.Event{}, plugins.MissingParameter("event_date")
	}
	t, err := ParseDate(e.Time, now)
	if err != nil {
		return models.Event{}, err
	}
	return models.Event{EventType: e.EventType, Time: t}, nil
}
