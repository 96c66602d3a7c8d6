package blazar

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/blazar/ownership"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// RegisterOwnership adds /v1/ownership, Leasehold's ownership policy
// extension (etc/openapi/ownership.yaml). Blazar's own routes are not
// touched; clients that ignore the extension see no difference.
//
// req answers POST /ownership/explain for a request (nil: explain takes
// only a project).
func RegisterOwnership(rt *Router, svc *ownership.Service, req RequestExplainer) {
	h := &ownershipHandlers{svc: svc, req: req}
	rt.Handle(http.MethodGet, "/ownership", h.computed)
	rt.Handle(http.MethodGet, "/ownership/plan", h.getPlan)
	rt.Handle(http.MethodPut, "/ownership/plan", h.putPlan)
	rt.Handle(http.MethodPost, "/ownership/recompute", h.recompute)
	rt.Handle(http.MethodPut, "/ownership/consumers/{consumer_id}", h.putConsumer)
	rt.Handle(http.MethodDelete, "/ownership/consumers/{consumer_id}", h.deleteConsumer)
	rt.Handle(http.MethodPut, "/ownership/groups/{group_name}", h.putGroup)
	rt.Handle(http.MethodDelete, "/ownership/groups/{group_name}", h.deleteGroup)
	rt.Handle(http.MethodPut, "/ownership/consumers/{consumer_id}/groups/{group_name}", h.putEntry)
	rt.Handle(http.MethodDelete, "/ownership/consumers/{consumer_id}/groups/{group_name}", h.deleteEntry)
	rt.Handle(http.MethodGet, "/ownership/projects/{project_id}", h.project)
	rt.Handle(http.MethodPost, "/ownership/explain", h.explain)
}

type ownershipHandlers struct {
	svc *ownership.Service
	req RequestExplainer
}

// RequestExplainer runs a physical:host request through the lease
// create's choice without booking (the host plugin).
type RequestExplainer interface {
	ExplainRequest(ctx context.Context, lease plugins.Lease, v plugins.Values) (*hostplugin.RequestExplanation, error)
}

// decodeStrict reads a JSON object body into dst, refusing unknown fields
// (an extension has no upstream quirks to tolerate).
func decodeStrict(r *http.Request, dst any) error {
	var raw json.RawMessage
	if err := DecodeBody(r, &raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errs.BadRequestf("Invalid request body: %s", err)
	}
	return nil
}

// generation is the plan generation a write is based on.
type generation struct {
	Generation *int64 `json:"generation"`
}

func (g generation) get() (int64, error) {
	if g.Generation == nil {
		return 0, errs.BadRequestf("The request must give the plan's generation (read it with GET /v1/ownership/plan).")
	}
	return *g.Generation, nil
}

// queryGeneration reads ?generation=N (deletes have no body).
func queryGeneration(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("generation")
	if s == "" {
		return 0, errs.BadRequestf("The request must give the plan's generation as ?generation=N (read it with GET /v1/ownership/plan).")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errs.BadRequestf("generation %q is not an integer.", s)
	}
	return n, nil
}

func planView(st *ownership.State) map[string]any {
	p := st.Plan
	return map[string]any{
		"generation": st.Generation,
		"consumers":  nonNilSlice(p.Consumers),
		"groups":     nonNilSlice(p.Groups),
		"entries":    nonNilSlice(p.Entries),
		"updated_at": stampPtr(st.UpdatedAt),
	}
}

func reportView(st *ownership.State) map[string]any {
	out := map[string]any{
		"changes":     nonNilSlice(st.Report.Changes),
		"shortfalls":  nonNilSlice(st.Report.Shortfalls),
		"moved_hosts": st.Report.MovedHosts,
	}
	if st.Report.Trigger != "" {
		out["trigger"] = st.Report.Trigger
	}
	return out
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (h *ownershipHandlers) write(w http.ResponseWriter, r *http.Request, gen int64, edit func(*ownership.Plan) error) error {
	st, err := h.svc.Update(r.Context(), gen, edit)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"plan": planView(st), "report": reportView(st)})
}

func (h *ownershipHandlers) getPlan(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:get", ""); err != nil {
		return err
	}
	st, err := h.svc.Get(r.Context())
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"plan": planView(st)})
}

func (h *ownershipHandlers) computed(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:get", ""); err != nil {
		return err
	}
	start, end, err := window(r)
	if err != nil {
		return err
	}
	st, err := h.svc.Get(r.Context())
	if err != nil {
		return err
	}
	loans, err := h.svc.Loans(r.Context(), start, end)
	if err != nil {
		return err
	}
	// Per host, its owners from the top of the tree down.
	type owner struct {
		Consumer string `json:"consumer"`
		Group    string `json:"group"`
		Slots    int    `json:"slots"`
	}
	byHost := map[string][]owner{}
	for c, hs := range st.Ownership {
		for hid, sh := range hs {
			byHost[hid] = append(byHost[hid], owner{c, sh.Group, sh.Slots})
		}
	}
	depth := depthOf(st.Plan)
	var hostsOut []map[string]any
	for _, hid := range sortedKeys(byHost) {
		os := byHost[hid]
		slices.SortFunc(os, func(a, b owner) int {
			if d := depth[a.Consumer] - depth[b.Consumer]; d != 0 {
				return d
			}
			return cmpString(a.Consumer, b.Consumer)
		})
		hostsOut = append(hostsOut, map[string]any{"host": hid, "owners": os})
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"ownership": map[string]any{
		"generation": st.Generation, "hosts": nonNilSlice(hostsOut), "report": reportView(st), "updated_at": stampPtr(st.UpdatedAt),
		"window": map[string]string{"start_date": start.Format(time.RFC3339), "end_date": end.Format(time.RFC3339)},
		"loans":  loans,
	}})
}

// window reads ?start_date=&end_date= (Blazar's "YYYY-MM-DD HH:MM" or
// RFC 3339; default: now, one second), the window loans are listed for.
func window(r *http.Request) (time.Time, time.Time, error) {
	parse := func(name string, def time.Time) (time.Time, error) {
		v := r.URL.Query().Get(name)
		if v == "" {
			return def, nil
		}
		return parseDate(name, v, time.Time{})
	}
	now := time.Now().UTC().Truncate(time.Second)
	start, err := parse("start_date", now)
	if err != nil {
		return start, start, err
	}
	end, err := parse("end_date", start.Add(time.Second))
	if err != nil {
		return start, end, err
	}
	if !end.After(start) {
		return start, end, errs.BadRequestf("end_date must be after start_date.")
	}
	return start, end, nil
}

func depthOf(p ownership.Plan) map[string]int {
	parent := map[string]string{}
	for _, c := range p.Consumers {
		parent[c.ID] = c.ParentID
	}
	out := map[string]int{}
	for _, c := range p.Consumers {
		d := 0
		for x := c.ParentID; x != "" && d <= len(p.Consumers); x = parent[x] {
			d++
		}
		out[c.ID] = d
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The bodies of the ownership API's writes, named so that the decoding's
// fuzz target decodes exactly what the handlers decode.
type (
	planBody struct {
		generation
		ownership.Plan
	}
	consumerBody struct {
		generation
		ParentID           string `json:"parent_id"`
		Rank               int    `json:"rank"`
		ProjectID          string `json:"project_id"`
		BorrowGraceSeconds int64  `json:"borrow_grace_seconds"`
		LendingLimit       *int   `json:"lending_limit"`
	}
	groupBody struct {
		generation
		Hosts      []string          `json:"hosts"`
		Properties map[string]string `json:"properties"`
	}
	entryBody struct {
		generation
		Amount           int     `json:"amount"`
		Partial          bool    `json:"partial"`
		Preference       int     `json:"preference"`
		ShareRatio       float64 `json:"share_ratio"`
		Lend             bool    `json:"lend"`
		LendGraceSeconds int64   `json:"lend_grace_seconds"`
		Reclaim          bool    `json:"reclaim"`
	}
	explainBody struct {
		ProjectID string `json:"project_id"`
		explainRequest
	}
)

func (h *ownershipHandlers) putPlan(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	var body planBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	gen, err := body.get()
	if err != nil {
		return err
	}
	return h.write(w, r, gen, func(p *ownership.Plan) error { *p = body.Plan; return nil })
}

func (h *ownershipHandlers) recompute(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	var body generation
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	gen, err := body.get()
	if err != nil {
		return err
	}
	return h.write(w, r, gen, func(*ownership.Plan) error { return nil })
}

func (h *ownershipHandlers) putConsumer(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	id := chi.URLParam(r, "consumer_id")
	var body consumerBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	gen, err := body.get()
	if err != nil {
		return err
	}
	c := ownership.Consumer{ID: id, ParentID: body.ParentID, Rank: body.Rank, ProjectID: body.ProjectID,
		BorrowGraceSeconds: body.BorrowGraceSeconds, LendingLimit: body.LendingLimit}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		if i := slices.IndexFunc(p.Consumers, func(x ownership.Consumer) bool { return x.ID == id }); i >= 0 {
			p.Consumers[i] = c
		} else {
			p.Consumers = append(p.Consumers, c)
		}
		return nil
	})
}

func (h *ownershipHandlers) deleteConsumer(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	id := chi.URLParam(r, "consumer_id")
	gen, err := queryGeneration(r)
	if err != nil {
		return err
	}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		i := slices.IndexFunc(p.Consumers, func(x ownership.Consumer) bool { return x.ID == id })
		if i < 0 {
			return errs.NotFoundf("Consumer %s not found.", id)
		}
		for _, c := range p.Consumers {
			if c.ParentID == id {
				return errs.Conflictf("Consumer %s has children (%s among them): delete or move them first.", id, c.ID)
			}
		}
		p.Consumers = slices.Delete(p.Consumers, i, i+1)
		p.Entries = slices.DeleteFunc(p.Entries, func(e ownership.Entry) bool { return e.Consumer == id })
		return nil
	})
}

func (h *ownershipHandlers) putGroup(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	name := chi.URLParam(r, "group_name")
	var body groupBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	gen, err := body.get()
	if err != nil {
		return err
	}
	g := ownership.Group{Name: name, Hosts: body.Hosts, Properties: body.Properties}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		if i := slices.IndexFunc(p.Groups, func(x ownership.Group) bool { return x.Name == name }); i >= 0 {
			p.Groups[i] = g
		} else {
			p.Groups = append(p.Groups, g)
		}
		return nil
	})
}

func (h *ownershipHandlers) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	name := chi.URLParam(r, "group_name")
	gen, err := queryGeneration(r)
	if err != nil {
		return err
	}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		i := slices.IndexFunc(p.Groups, func(x ownership.Group) bool { return x.Name == name })
		if i < 0 {
			return errs.NotFoundf("Resource group %s not found.", name)
		}
		p.Groups = slices.Delete(p.Groups, i, i+1)
		p.Entries = slices.DeleteFunc(p.Entries, func(e ownership.Entry) bool { return e.Group == name })
		return nil
	})
}

func (h *ownershipHandlers) putEntry(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	id, name := chi.URLParam(r, "consumer_id"), chi.URLParam(r, "group_name")
	var body entryBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	gen, err := body.get()
	if err != nil {
		return err
	}
	e := ownership.Entry{Consumer: id, Group: name, Amount: body.Amount, Partial: body.Partial, Preference: body.Preference,
		ShareRatio: body.ShareRatio, Lend: body.Lend, LendGraceSeconds: body.LendGraceSeconds, Reclaim: body.Reclaim}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		if i := slices.IndexFunc(p.Entries, func(x ownership.Entry) bool { return x.Consumer == id && x.Group == name }); i >= 0 {
			p.Entries[i] = e
		} else {
			p.Entries = append(p.Entries, e)
		}
		return nil
	})
}

func (h *ownershipHandlers) deleteEntry(w http.ResponseWriter, r *http.Request) error {
	if err := authorize(r.Context(), "leasehold:ownership:update", ""); err != nil {
		return err
	}
	id, name := chi.URLParam(r, "consumer_id"), chi.URLParam(r, "group_name")
	gen, err := queryGeneration(r)
	if err != nil {
		return err
	}
	return h.write(w, r, gen, func(p *ownership.Plan) error {
		i := slices.IndexFunc(p.Entries, func(x ownership.Entry) bool { return x.Consumer == id && x.Group == name })
		if i < 0 {
			return errs.NotFoundf("Consumer %s has no plan entry for resource group %s.", id, name)
		}
		p.Entries = slices.Delete(p.Entries, i, i+1)
		return nil
	})
}

// explainFor answers for project (default: the caller's) its pools and,
// with withLoans, its loans over the ?start_date=&end_date= window (GET
// /ownership/projects/{id}), or with req, how that request would be served.
func (h *ownershipHandlers) explainFor(w http.ResponseWriter, r *http.Request, project string, withLoans bool, req *explainRequest) error {
	ctx := r.Context()
	if project == "" {
		project = auth.FromContext(ctx).ProjectID
	}
	if err := authorize(ctx, "leasehold:ownership:get_project", project); err != nil {
		return err
	}
	var start, end time.Time
	if withLoans {
		var err error
		if start, end, err = window(r); err != nil {
			return err
		}
	}
	ex, err := h.svc.Explain(ctx, project)
	if err != nil {
		return err
	}
	out := map[string]any{"project_id": ex.ProjectID, "consumer": ex.Consumer, "pools": ex.Pools, "refused": ex.Refused}
	if ex.Note != "" {
		out["note"] = ex.Note
	}
	if withLoans {
		loans, err := h.svc.LoansOf(ctx, project, start, end)
		if err != nil {
			return err
		}
		out["window"] = map[string]string{"start_date": start.Format(time.RFC3339), "end_date": end.Format(time.RFC3339)}
		out["loans"] = loans
	}
	if req != nil {
		if h.req == nil {
			return errs.BadRequestf("Requests cannot be explained here: no physical:host plugin.")
		}
		lease, v, err := req.lease(ctx, project)
		if err != nil {
			return err
		}
		rx, err := h.req.ExplainRequest(ctx, lease, v)
		if err != nil {
			return err
		}
		out["request"] = rx
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"explanation": out})
}

// explainRequest is the optional physical:host request of POST
// /ownership/explain, in a lease create's terms.
type explainRequest struct {
	Min                  *int    `json:"min"`
	Max                  *int    `json:"max"`
	HypervisorProperties *string `json:"hypervisor_properties"`
	ResourceProperties   *string `json:"resource_properties"`
	StartDate            *string `json:"start_date"`
	EndDate              *string `json:"end_date"`
}

func (r *explainRequest) empty() bool {
	return r.Min == nil && r.Max == nil && r.HypervisorProperties == nil && r.ResourceProperties == nil && r.StartDate == nil && r.EndDate == nil
}

// lease turns r into the lease and values a lease create would pass the
// host plugin: min and max default to 1, the properties to none;
// start_date ("now" or a date) and end_date are required.
func (r *explainRequest) lease(ctx context.Context, project string) (plugins.Lease, plugins.Values, error) {
	if r.StartDate == nil || r.EndDate == nil {
		return plugins.Lease{}, nil, errs.BadRequestf("A request to explain needs start_date and end_date.")
	}
	now := time.Now().UTC().Truncate(time.Second)
	start, err := parseDate("start_date", *r.StartDate, now)
	if err != nil {
		return plugins.Lease{}, nil, err
	}
	end, err := parseDate("end_date", *r.EndDate, now)
	if err != nil {
		return plugins.Lease{}, nil, err
	}
	v := plugins.Values{"min": json.Number("1"), "max": json.Number("1"), "hypervisor_properties": "", "resource_properties": ""}
	if r.Min != nil {
		v["min"] = json.Number(strconv.Itoa(*r.Min))
		if r.Max == nil {
			v["max"] = v["min"]
		}
	}
	if r.Max != nil {
		v["max"] = json.Number(strconv.Itoa(*r.Max))
	}
	if r.HypervisorProperties != nil {
		v["hypervisor_properties"] = *r.HypervisorProperties
	}
	if r.ResourceProperties != nil {
		v["resource_properties"] = *r.ResourceProperties
	}
	id := auth.FromContext(ctx)
	return plugins.Lease{ProjectID: project, UserID: id.UserID, Start: start, End: end, Status: "PENDING",
		Admin: authorize(ctx, "admin", "") == nil}, v, nil
}

func (h *ownershipHandlers) project(w http.ResponseWriter, r *http.Request) error {
	return h.explainFor(w, r, chi.URLParam(r, "project_id"), true, nil)
}

func (h *ownershipHandlers) explain(w http.ResponseWriter, r *http.Request) error {
	var body explainBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	var req *explainRequest
	if !body.explainRequest.empty() {
		req = &body.explainRequest
	}
	return h.explainFor(w, r, body.ProjectID, false, req)
}

// parseDate reads a date as Blazar writes it ("YYYY-MM-DD HH:MM") or RFC
// 3339; "now" is now when now is not zero.
func parseDate(name, v string, now time.Time) (time.Time, error) {
	if v == "now" && !now.IsZero() {
		return now, nil
	}
	for _, layout := range []string{"2006-01-02 15:04", time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errs.BadRequestf("%s %q is not a date (YYYY-MM-DD HH:MM or RFC 3339).", name, v)
}
