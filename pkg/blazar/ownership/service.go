// Package ownership stores the ownership plan (consumers, resource groups
// and plan entries) with a generation for concurrent edits, recomputes the
// ownership with pkg/allocator/ownership whenever the plan changes (or on
// request: the periodic redistribution), and answers which pools a
// project's requests draw from.
package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	own "github.com/leasehold/leasehold/pkg/allocator/ownership"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

// ConflictCode is the error code of a write with a stale generation.
const ConflictCode = "ownership.concurrent_update"

// Consumer is a consumer as the API shows it (durations in seconds).
type Consumer struct {
	ID                 string `json:"id"`
	ParentID           string `json:"parent_id,omitempty"`
	Rank               int    `json:"rank"`
	ProjectID          string `json:"project_id,omitempty"`
	BorrowGraceSeconds int64  `json:"borrow_grace_seconds"`
	// LendingLimit caps the hosts lent at once; null: no limit.
	LendingLimit *int `json:"lending_limit"`
}

// Group is a resource group as the API shows it.
type Group struct {
	Name       string            `json:"name"`
	Hosts      []string          `json:"hosts,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Entry is a plan entry as the API shows it.
type Entry struct {
	Consumer         string  `json:"consumer"`
	Group            string  `json:"group"`
	Amount           int     `json:"amount"`
	Partial          bool    `json:"partial"`
	Preference       int     `json:"preference"`
	ShareRatio       float64 `json:"share_ratio"`
	Lend             bool    `json:"lend"`
	LendGraceSeconds int64   `json:"lend_grace_seconds"`
	Reclaim          bool    `json:"reclaim"`
}

// Plan is the stored plan.
type Plan struct {
	Consumers []Consumer `json:"consumers"`
	Groups    []Group    `json:"groups"`
	Entries   []Entry    `json:"entries"`
}

// State is the plan with its generation and the ownership computed from it.
type State struct {
	Generation int64
	Plan       Plan
	Ownership  own.Ownership
	Report     Report
	UpdatedAt  *time.Time
}

// Report is what the last recomputation changed.
type Report struct {
	Changes    []own.Change    `json:"changes"`
	Shortfalls []own.Shortfall `json:"shortfalls"`
	MovedHosts int             `json:"moved_hosts"`
	// Trigger is what ran the recomputation (one of the Trigger consts).
	Trigger string `json:"trigger,omitempty"`
	// HostsDigest is own.HostsDigest of the hosts it ran over: a refresh
	// that reads other hosts recomputes.
	HostsDigest string `json:"hosts_digest,omitempty"`
}

// What ran a recomputation (Report.Trigger).
const (
	// TriggerPlan: a plan write.
	TriggerPlan = "plan"
	// TriggerRequest: POST /v1/ownership/recompute.
	TriggerRequest = "recompute"
	// TriggerHosts: a refresh found the eligible hosts changed (added,
	// removed, no longer reservable, moved between groups).
	TriggerHosts = "hosts"
	// TriggerRedistribute: the periodic redistribution of free owned
	// hosts ([ownership] redistribute_interval).
	TriggerRedistribute = "redistribute"
)

// Pure converts the stored plan to the allocator's model.
func (p *Plan) Pure() *own.Plan {
	out := &own.Plan{}
	for _, c := range p.Consumers {
		limit := -1
		if c.LendingLimit != nil {
			limit = *c.LendingLimit
		}
		out.Consumers = append(out.Consumers, own.Consumer{ID: c.ID, Parent: c.ParentID, Rank: c.Rank, Project: c.ProjectID,
			BorrowGrace: time.Duration(c.BorrowGraceSeconds) * time.Second, LendingLimit: limit})
	}
	for _, g := range p.Groups {
		out.Groups = append(out.Groups, own.Group{Name: g.Name, Hosts: g.Hosts, Properties: g.Properties})
	}
	for _, e := range p.Entries {
		out.Entries = append(out.Entries, own.Entry{Consumer: e.Consumer, Group: e.Group, Amount: e.Amount, Partial: e.Partial,
			Preference: e.Preference, ShareRatio: e.ShareRatio, Lend: e.Lend,
			LendGrace: time.Duration(e.LendGraceSeconds) * time.Second, Reclaim: e.Reclaim})
	}
	return out
}

// Validate checks the values the pure model does not see (negative
// seconds and limits, duplicate projects), then the plan's rules over
// hosts (a child's slots must fit its parent's hosts, each counting
// SlotsOf slots).
func (p *Plan) Validate(hosts []own.Host) error {
	projects := map[string]string{}
	for _, c := range p.Consumers {
		if c.BorrowGraceSeconds < 0 {
			return errs.BadRequestf("consumer %q has a negative borrow_grace_seconds", c.ID)
		}
		if c.LendingLimit != nil && *c.LendingLimit < 0 {
			return errs.BadRequestf("consumer %q has a negative lending_limit", c.ID)
		}
		if c.ProjectID != "" {
			if other, ok := projects[c.ProjectID]; ok {
				return errs.BadRequestf("consumers %q and %q both stand for project %s", other, c.ID, c.ProjectID)
			}
			projects[c.ProjectID] = c.ID
		}
	}
	for _, e := range p.Entries {
		if e.LendGraceSeconds < 0 {
			return errs.BadRequestf("consumer %q has a negative lend_grace_seconds in resource group %q", e.Consumer, e.Group)
		}
	}
	return own.Validate(p.Pure(), hosts)
}

// SlotsCapability is the host extra capability that splits a host into
// slots for partial ownership: a host with ownership_slots = N counts N
// slots in plan entries with partial (each one N-th of the host's
// capacity in every resource); without it, or with a value that is not a
// positive integer, a host counts one slot.
const SlotsCapability = "ownership_slots"

// SlotsOf is how many slots host h counts for partial ownership.
func SlotsOf(h *hosts.Host) int {
	v, ok := h.ExtraCapabilities[SlotsCapability]
	if !ok {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// HostLister lists the registered hosts (hosts.Service).
type HostLister interface {
	List(ctx context.Context) ([]hosts.Host, error)
}

// Service stores and recomputes ownership.
type Service struct {
	db    *db.DB
	hosts HostLister
	now   func() time.Time
	cur   atomic.Pointer[cache]

	// refreshMu serializes Refresh (the periodic one and those after
	// writes), and guards what follows.
	refreshMu sync.Mutex
	// redistribute is the periodic redistribution's interval (0: off);
	// redistributed is when this replica last ran one.
	redistribute  time.Duration
	redistributed time.Time
}

// SetRedistributeInterval sets how often Refresh recomputes the ownership
// to redistribute free owned hosts (0: never on a timer). The interval
// runs from the last recomputation stored by any replica or the last
// redistribution here, whichever is later.
func (s *Service) SetRedistributeInterval(d time.Duration) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.redistribute = d
}

// New returns the service; now is the clock (nil: time.Now).
func New(d *db.DB, hl HostLister, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: d, hosts: hl, now: now}
}

func (s *Service) load(tx *gorm.DB) (*State, error) {
	var row models.OwnershipPlan
	if err := tx.Take(&row, 1).Error; err != nil {
		return nil, fmt.Errorf("read ownership plan: %w", err)
	}
	st := &State{Generation: row.Generation, UpdatedAt: row.UpdatedAt}
	if err := json.Unmarshal([]byte(row.Plan), &st.Plan); err != nil {
		return nil, fmt.Errorf("decode ownership plan: %w", err)
	}
	if err := json.Unmarshal([]byte(row.Ownership), &st.Ownership); err != nil {
		return nil, fmt.Errorf("decode ownership: %w", err)
	}
	if err := json.Unmarshal([]byte(row.Report), &st.Report); err != nil {
		return nil, fmt.Errorf("decode ownership report: %w", err)
	}
	return st, nil
}

// Get returns the plan, its generation and the computed ownership.
func (s *Service) Get(ctx context.Context) (*State, error) {
	return s.load(s.db.WithContext(ctx))
}

// Update applies edit to the plan at generation gen: the edited plan is
// validated, the ownership recomputed from the stored one (least
// disruption) over the current hosts and their workload, and both stored
// with generation gen+1. A stale gen is a Conflict (ConflictCode).
func (s *Service) Update(ctx context.Context, gen int64, edit func(*Plan) error) (*State, error) {
	return s.update(ctx, gen, edit, TriggerPlan)
}

func (s *Service) update(ctx context.Context, gen int64, edit func(*Plan) error, trigger string) (*State, error) {
	cur, err := s.Get(ctx)
	if err != nil {
		return nil, err
	}
	if cur.Generation != gen {
		return nil, stale(gen, cur.Generation)
	}
	p := cur.Plan
	p.Consumers = append([]Consumer(nil), p.Consumers...)
	p.Groups = append([]Group(nil), p.Groups...)
	p.Entries = append([]Entry(nil), p.Entries...)
	if err := edit(&p); err != nil {
		return nil, err
	}
	hs, err := s.Hosts(ctx, p.Pure())
	if err != nil {
		return nil, err
	}
	if err := p.Validate(hs); err != nil {
		return nil, err
	}
	st, err := s.recompute(ctx, cur, p, trigger, false)
	if err != nil {
		return nil, err
	}
	if err := s.Refresh(ctx); err != nil {
		slog.WarnContext(ctx, "ownership: refresh the view after a write", "err", err)
	}
	return st, nil
}

// Recompute recomputes the ownership of the plan at generation gen from
// the stored ownership (the seed's periodic redistribution: free owned
// hosts go to consumers short of their ownership, by rank) and stores it
// with generation gen+1.
func (s *Service) Recompute(ctx context.Context, gen int64) (*State, error) {
	return s.update(ctx, gen, func(*Plan) error { return nil }, TriggerRequest)
}

func stale(gen, cur int64) error {
	return errs.WithCode(errs.Conflict, ConflictCode,
		"The ownership plan was changed by another request: generation %d was given, the plan is at %d. Read it again and retry.", gen, cur)
}

// recompute computes p's ownership from cur's (the fewest hosts move)
// over the current hosts and their workload, and stores it with
// generation cur.Generation+1 (a Conflict when another write came
// first). With onlyMoves a recomputation that changes nothing is not
// stored (nil, nil): the periodic redistribution does not bump the
// generation for nothing.
func (s *Service) recompute(ctx context.Context, cur *State, p Plan, trigger string, onlyMoves bool) (*State, error) {
	pure := p.Pure()
	hs, err := s.Hosts(ctx, pure)
	if err != nil {
		return nil, err
	}
	res, err := own.Recompute(pure, hs, cur.Ownership)
	if err != nil {
		return nil, err
	}
	if onlyMoves && len(res.Changes) == 0 {
		return nil, nil
	}
	digest, err := own.HostsDigest(pure, hs)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	st := &State{Generation: cur.Generation + 1, Plan: p, Ownership: res.Ownership, UpdatedAt: &now,
		Report: Report{Changes: res.Changes, Shortfalls: res.Shortfalls, MovedHosts: res.MovedHosts, Trigger: trigger, HostsDigest: digest}}
	pj, _ := json.Marshal(st.Plan)
	oj, _ := json.Marshal(st.Ownership)
	rj, _ := json.Marshal(st.Report)
	r := s.db.WithContext(ctx).Model(&models.OwnershipPlan{}).Where("id = ? AND generation = ?", 1, cur.Generation).
		Updates(map[string]any{"generation": st.Generation, "plan": string(pj), "ownership": string(oj), "report": string(rj), "updated_at": now})
	if r.Error != nil {
		return nil, fmt.Errorf("store ownership plan: %w", r.Error)
	}
	if r.RowsAffected == 0 {
		latest, err := s.Get(ctx)
		if err != nil {
			return nil, err
		}
		return nil, stale(cur.Generation, latest.Generation)
	}
	logReport(ctx, st)
	return st, nil
}

// stepNames name the seed's recomputation steps in the log.
var stepNames = map[int]string{1: "dropped", 2: "filled", 3: "trimmed", 4: "handed over after the grace period"}

// logReport logs a stored recomputation: one line for the whole, then one
// per kind of change (the seed's step) with its counts.
func logReport(ctx context.Context, st *State) {
	r := &st.Report
	slog.InfoContext(ctx, "ownership: recomputed", "trigger", r.Trigger, "generation", st.Generation,
		"moved_hosts", r.MovedHosts, "changes", len(r.Changes), "shortfalls", len(r.Shortfalls))
	type count struct{ changes, gained, lost int }
	by := map[int]*count{}
	for _, c := range r.Changes {
		n := by[c.Step]
		if n == nil {
			n = &count{}
			by[c.Step] = n
		}
		n.changes++
		if c.After > c.Before {
			n.gained++
		} else {
			n.lost++
		}
	}
	for step := 1; step <= 4; step++ {
		if n := by[step]; n != nil {
			slog.InfoContext(ctx, "ownership: "+stepNames[step], "trigger", r.Trigger, "generation", st.Generation,
				"step", step, "changes", n.changes, "gained", n.gained, "lost", n.lost)
		}
	}
}

// Hosts returns the registered hosts as ownership sees them: a host that
// is not reservable is down, extra capabilities are its properties, and
// its bookings running now or later are its workload (by the consumer of
// each lease's project): a host booked for next week is not idle, and a
// recomputation keeps it with its owner rather than handing it over.
func (s *Service) Hosts(ctx context.Context, p *own.Plan) ([]own.Host, error) {
	list, err := s.hosts.List(ctx)
	if err != nil {
		return nil, err
	}
	consumerOf := map[string]string{}
	for _, c := range p.Consumers {
		if c.Project != "" {
			consumerOf[c.Project] = c.ID
		}
	}
	type use struct {
		HostID    string
		ProjectID string
		N         int
	}
	var uses []use
	now := s.now().UTC()
	err = s.db.WithContext(ctx).Raw(`SELECT a.compute_host_id AS host_id, l.project_id AS project_id, COUNT(*) AS n
 FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id JOIN leases l ON l.id = r.lease_id
 WHERE a.end_date > ? GROUP BY a.compute_host_id, l.project_id`, now).Scan(&uses).Error
	if err != nil {
		return nil, fmt.Errorf("read host workload: %w", err)
	}
	byHost := map[string]map[string]int{}
	for _, u := range uses {
		c := consumerOf[u.ProjectID]
		if c == "" {
			c = "project:" + u.ProjectID // outside the tree: load only
		}
		if byHost[u.HostID] == nil {
			byHost[u.HostID] = map[string]int{}
		}
		byHost[u.HostID][c] += u.N
	}
	out := make([]own.Host, 0, len(list))
	for _, h := range list {
		load := 0
		for _, n := range byHost[h.ID] {
			load += n
		}
		out = append(out, own.Host{ID: h.ID, Slots: SlotsOf(&h), Properties: h.ExtraCapabilities, Down: !h.Reservable, Load: load, Users: byHost[h.ID]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// View returns the stored ownership ready for requests.
func (s *Service) View(ctx context.Context) (*own.View, *State, error) {
	st, err := s.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	pure := st.Plan.Pure()
	hs, err := s.Hosts(ctx, pure)
	if err != nil {
		return nil, nil, err
	}
	v, err := own.NewView(pure, hs, st.Ownership)
	if err != nil {
		return nil, nil, err
	}
	return v, st, nil
}

// Explanation says which pools a project's requests draw from and why,
// and which hosts it may not use.
type Explanation struct {
	ProjectID string        `json:"project_id"`
	Consumer  string        `json:"consumer"`
	Pools     []own.Pool    `json:"pools"`
	Refused   []own.Refusal `json:"refused"`
	Note      string        `json:"note,omitempty"`
}

// Explain explains project's pools.
func (s *Service) Explain(ctx context.Context, project string) (*Explanation, error) {
	v, _, err := s.View(ctx)
	if err != nil {
		return nil, err
	}
	c := v.ConsumerOf(project)
	pools, refused := v.Explain(c)
	ex := &Explanation{ProjectID: project, Consumer: c, Pools: nonNil(pools), Refused: nonNil(refused)}
	if c == "" {
		ex.Note = "the project is no consumer of the ownership plan: it uses the public pool only"
	}
	return ex, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// cache is the view requests use, rebuilt by Refresh.
type cache struct {
	view *own.View // nil: no plan (ownership off)
}

// Refresh rebuilds the in-memory view that Pools answers from: after a
// write here, and periodically (RunRefresh) for other replicas' writes and
// host changes. When the eligible hosts differ from those the stored
// ownership was computed over (a host added, removed, no longer
// reservable or in another group), or the redistribution interval has
// passed, it first recomputes and stores the ownership as a plan write
// does (from the stored ownership, at its generation: a replica that
// loses the race takes the winner's).
func (s *Service) Refresh(ctx context.Context) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	st, err := s.Get(ctx)
	if err != nil {
		return err
	}
	if len(st.Plan.Consumers) == 0 {
		s.cur.Store(&cache{})
		return nil
	}
	pure := st.Plan.Pure()
	list, err := s.hosts.List(ctx)
	if err != nil {
		return err
	}
	hs := make([]own.Host, 0, len(list))
	for _, h := range list {
		hs = append(hs, own.Host{ID: h.ID, Slots: SlotsOf(&h), Properties: h.ExtraCapabilities, Down: !h.Reservable})
	}
	if trigger, err := s.due(st, pure, hs); err != nil {
		return err
	} else if trigger != "" {
		if trigger == TriggerRedistribute {
			s.redistributed = s.now()
		}
		nst, err := s.recompute(ctx, st, st.Plan, trigger, trigger == TriggerRedistribute)
		switch {
		case errs.Is(err, errs.Conflict):
			// Another replica or a plan write came first: take its.
			if st, err = s.Get(ctx); err != nil {
				return err
			}
			pure = st.Plan.Pure()
		case err != nil:
			slog.WarnContext(ctx, "ownership: recompute", "trigger", trigger, "err", err)
		case nst != nil:
			st = nst
		}
	}
	v, err := own.NewView(pure, hs, st.Ownership)
	if err != nil {
		return err
	}
	s.cur.Store(&cache{view: v})
	return nil
}

// due says which recomputation a refresh over hs must run first ("" for
// none): TriggerHosts when the eligible hosts are not those st was
// computed over, TriggerRedistribute when the redistribution interval
// has passed since st was stored and since the last redistribution here.
func (s *Service) due(st *State, pure *own.Plan, hs []own.Host) (string, error) {
	digest, err := own.HostsDigest(pure, hs)
	if err != nil {
		return "", err
	}
	if digest != st.Report.HostsDigest {
		return TriggerHosts, nil
	}
	if s.redistribute <= 0 {
		return "", nil
	}
	last := s.redistributed
	if st.UpdatedAt != nil && st.UpdatedAt.After(last) {
		last = *st.UpdatedAt
	}
	if s.now().Sub(last) >= s.redistribute {
		return TriggerRedistribute, nil
	}
	return "", nil
}

// RunRefresh refreshes the view every period until ctx ends.
func (s *Service) RunRefresh(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			slog.WarnContext(ctx, "ownership: refresh the view", "err", err)
		}
	}
}

// HostOrder implements the host plugin's ownership hook: the pools a
// lease of project draws from, in order, from memory (no database
// access); nil when no plan is defined (ownership off) or the view has
// not been built yet.
func (s *Service) HostOrder(project string) *own.Order {
	c := s.cur.Load()
	if c == nil || c.view == nil {
		return nil
	}
	return c.view.HostOrder(c.view.ConsumerOf(project))
}

// Loan is a host one consumer holds that a lease of another project uses
// (lent capacity, borrowed).
type Loan struct {
	Host      string    `json:"host"`
	Owner     string    `json:"owner"`
	LeaseID   string    `json:"lease_id"`
	ProjectID string    `json:"project_id"`
	Borrower  string    `json:"borrower,omitempty"`
	Start     time.Time `json:"start_date"`
	End       time.Time `json:"end_date"`
}

// Loans lists the bookings over [start, end) of hosts whose holder (the
// deepest consumer owning the whole host) is neither the booking
// project's consumer nor one of its ancestors: what is lent and borrowed
// over that window.
func (s *Service) Loans(ctx context.Context, start, end time.Time) ([]Loan, error) {
	st, err := s.Get(ctx)
	if err != nil {
		return nil, err
	}
	return s.loans(ctx, st, start, end)
}

// loans is Loans over the ownership of st.
func (s *Service) loans(ctx context.Context, st *State, start, end time.Time) ([]Loan, error) {
	pure := st.Plan.Pure()
	parent, consumerOf := map[string]string{}, map[string]string{}
	for _, c := range pure.Consumers {
		parent[c.ID] = c.Parent
		if c.Project != "" {
			consumerOf[c.Project] = c.ID
		}
	}
	// The holder of each host: the deepest consumer owning all of it.
	holder := map[string]string{}
	depth := func(c string) int {
		d := 0
		for x := parent[c]; x != ""; x = parent[x] {
			d++
		}
		return d
	}
	for c, hs := range st.Ownership {
		for h := range hs {
			if cur, ok := holder[h]; !ok || depth(c) > depth(cur) {
				holder[h] = c
			}
		}
	}
	var rows []struct {
		HostID    string
		LeaseID   string
		ProjectID string
		StartDate time.Time
		EndDate   time.Time
	}
	err := s.db.WithContext(ctx).Raw(`SELECT a.compute_host_id AS host_id, l.id AS lease_id, l.project_id AS project_id, a.start_date AS start_date, a.end_date AS end_date
 FROM computehost_allocations a JOIN reservations r ON r.id = a.reservation_id JOIN leases l ON l.id = r.lease_id
 WHERE a.start_date < ? AND a.end_date > ? ORDER BY a.compute_host_id, a.start_date`, end.UTC(), start.UTC()).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read bookings: %w", err)
	}
	out := []Loan{}
	for _, r := range rows {
		owner, ok := holder[r.HostID]
		if !ok {
			continue
		}
		b := consumerOf[r.ProjectID]
		mine := false
		for x := b; x != ""; x = parent[x] {
			if x == owner {
				mine = true
				break
			}
		}
		if !mine {
			out = append(out, Loan{Host: r.HostID, Owner: owner, LeaseID: r.LeaseID, ProjectID: r.ProjectID, Borrower: b,
				Start: r.StartDate.UTC(), End: r.EndDate.UTC()})
		}
	}
	return out, nil
}

// ProjectLoans is one project's side of the loans over a window.
type ProjectLoans struct {
	// Lent: bookings by other projects of hosts the project's consumer
	// holds.
	Lent []ProjectLoan `json:"lent"`
	// Borrowed: the project's bookings of hosts other consumers hold.
	Borrowed []ProjectLoan `json:"borrowed"`
}

// ProjectLoan is a loan seen from one side: ProjectID and Consumer name
// the other side (the borrower of a host lent, the holder of a host
// borrowed; either may be "": a borrower outside the tree has no
// consumer, a holder that is an inner consumer no project).
type ProjectLoan struct {
	Host      string    `json:"host"`
	LeaseID   string    `json:"lease_id"`
	ProjectID string    `json:"project_id"`
	Consumer  string    `json:"consumer"`
	Start     time.Time `json:"start_date"`
	End       time.Time `json:"end_date"`
}

// LoansOf is Loans over [start, end) filtered to those that involve
// project: hosts held by a consumer standing for it, and its own
// bookings of hosts held outside its subtree. Nothing else is returned,
// so it may answer the project's members.
func (s *Service) LoansOf(ctx context.Context, project string, start, end time.Time) (*ProjectLoans, error) {
	st, err := s.Get(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.loans(ctx, st, start, end)
	if err != nil {
		return nil, err
	}
	projectOf := map[string]string{}
	for _, c := range st.Plan.Consumers {
		projectOf[c.ID] = c.ProjectID
	}
	out := &ProjectLoans{Lent: []ProjectLoan{}, Borrowed: []ProjectLoan{}}
	for _, l := range all {
		// Loans never lists a project's booking of a host its own
		// consumer holds, so a loan is at most one of the two.
		switch {
		case project == "":
		case projectOf[l.Owner] == project:
			out.Lent = append(out.Lent, ProjectLoan{Host: l.Host, LeaseID: l.LeaseID, ProjectID: l.ProjectID, Consumer: l.Borrower, Start: l.Start, End: l.End})
		case l.ProjectID == project:
			out.Borrowed = append(out.Borrowed, ProjectLoan{Host: l.Host, LeaseID: l.LeaseID, ProjectID: projectOf[l.Owner], Consumer: l.Owner, Start: l.Start, End: l.End})
		}
	}
	return out, nil
}
