package leases

import (
	"context"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
)

// View is a lease as the API returns it.
type View struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	UserID    string  `json:"user_id"`
	ProjectID string  `json:"project_id"`
	StartDate string  `json:"start_date"`
	EndDate   string  `json:"end_date"`
	TrustID   *string `json:"trust_id"`
	Status    string  `json:"status"`
	Degraded  bool    `json:"degraded"`
	// LeaseType and Timeout are the lease kind (a Leasehold extension;
	// timeout only for BEST-EFFORT).
	LeaseType string `json:"lease_type"`
	Timeout   *int   `json:"timeout,omitempty"`
	// Tags are the lease's tags (a Leasehold extension, tags.go).
	Tags         []string      `json:"tags"`
	CreatedAt    string        `json:"created_at"`
	UpdatedAt    *string       `json:"updated_at"`
	Reservations []Reservation `json:"reservations"`
	Events       []EventView   `json:"events"`
}

// Reservation is a reservation with its plugin fields merged in.
type Reservation map[string]any

// EventView is an event as the API returns it.
type EventView struct {
	ID        string  `json:"id"`
	LeaseID   string  `json:"lease_id"`
	EventType string  `json:"event_type"`
	Time      string  `json:"time"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt *string `json:"updated_at"`
}

func stampPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatStamp(*t)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Service) view(ctx context.Context, g *gorm.DB, id string) (*View, error) {
	var l models.Lease
	if err := g.WithContext(ctx).Where("id = ?", id).Take(&l).Error; err != nil {
		return nil, err
	}
	vs, err := s.views(ctx, g, []models.Lease{l})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// views renders leases with a constant number of queries (one per table
// and one per plugin), whatever the number of leases.
func (s *Service) views(ctx context.Context, g *gorm.DB, ls []models.Lease) ([]*View, error) {
	out := make([]*View, len(ls))
	if len(ls) == 0 {
		return out, nil
	}
	ids := make([]string, len(ls))
	byID := map[string]*View{}
	for i := range ls {
		ids[i] = ls[i].ID
		v := newView(&ls[i])
		out[i], byID[ls[i].ID] = v, v
	}
	var ress []*models.Reservation
	var evs []models.Event
	// Chunk the IN lists to stay under SQLite's variable limit.
	for from := 0; from < len(ids); from += 500 {
		chunk := ids[from:min(from+500, len(ids))]
		var r []*models.Reservation
		if err := g.WithContext(ctx).Where("lease_id IN ?", chunk).Order("created_at, id").Find(&r).Error; err != nil {
			return nil, err
		}
		ress = append(ress, r...)
		var e []models.Event
		if err := g.WithContext(ctx).Where("lease_id IN ?", chunk).Order("created_at, id").Find(&e).Error; err != nil {
			return nil, err
		}
		evs = append(evs, e...)
	}
	extra, err := s.describe(ctx, g, ress, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range ress {
		m := reservationView(r)
		for k, v := range extra[r.ID] {
			m[k] = v
		}
		byID[r.LeaseID].Reservations = append(byID[r.LeaseID].Reservations, m)
	}
	sortEvents(evs)
	for i := range evs {
		byID[evs[i].LeaseID].Events = append(byID[evs[i].LeaseID].Events, eventView(&evs[i]))
	}
	return out, nil
}

func newView(l *models.Lease) *View {
	return &View{
		ID: l.ID, Name: l.Name, UserID: l.UserID, ProjectID: l.ProjectID,
		StartDate: FormatDate(l.StartDate), EndDate: FormatDate(l.EndDate),
		TrustID: strPtr(l.TrustID), Status: l.Status, Degraded: l.Degraded,
		LeaseType: leaseType(l.LeaseType), Timeout: l.Timeout, Tags: decodeTags(l.Tags),
		CreatedAt: FormatStamp(l.CreatedAt), UpdatedAt: stampPtr(l.UpdatedAt),
		Reservations: []Reservation{}, Events: []EventView{},
	}
}

func reservationView(r *models.Reservation) Reservation {
	return Reservation{
		"id": r.ID, "lease_id": r.LeaseID, "resource_id": r.ResourceID, "resource_type": r.ResourceType,
		"status": r.Status, "missing_resources": r.MissingResources, "resources_changed": r.ResourcesChanged,
		"created_at": FormatStamp(r.CreatedAt), "updated_at": stampPtr(r.UpdatedAt),
	}
}

func eventView(e *models.Event) EventView {
	return EventView{
		ID: e.ID, LeaseID: e.LeaseID, EventType: e.EventType, Time: FormatDate(e.Time),
		Status: e.Status, CreatedAt: FormatStamp(e.CreatedAt), UpdatedAt: stampPtr(e.UpdatedAt),
	}
}

// eventRank orders a lease's events as upstream lists them: in the order
// they were created, start_lease, end_lease, before_end_lease, then the
// extra ones.
var eventRank = map[string]int{EventStart: 0, EventEnd: 1, EventBeforeEnd: 2}

func rank(typ string) int {
	if r, ok := eventRank[typ]; ok {
		return r
	}
	return len(eventRank)
}

// sortEvents orders events by creation, then start, end, before-end,
// extra, then id.
func sortEvents(evs []models.Event) {
	sort.SliceStable(evs, func(i, j int) bool { return lessEvent(&evs[i], &evs[j]) })
}

func lessEvent(a, b *models.Event) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	if ra, rb := rank(a.EventType), rank(b.EventType); ra != rb {
		return ra < rb
	}
	return a.ID < b.ID
}
