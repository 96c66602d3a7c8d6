package keystone_test

import (
	"github.com/leasehold/leasehold/tests/internal/kstest"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/server"
)

// The four identities of the matrix, each a Keystone password login.
const (
	asAdmin   = "admin"    // admin of project admin
	asMemberA = "member-A" // demo: member of project demo (A)
	asReaderA = "reader-A" // reader: reader of project demo (A)
	asMemberB = "member-B" // memberb: member of project projb (B)
)

var identities = []string{asAdmin, asMemberA, asReaderA, asMemberB}

var (
	projB     sync.Once
	projBErr  error
	projBID   string
	memberBPW string
)

// ProjectB creates, once per package, project "projb" with user
// "memberb" holding the member role on it, and returns its id.
func (k *Keystone) ProjectB(t testing.TB) (id, password string) {
	t.Helper()
	projB.Do(func() {
		admin, err := k.Issue("admin", k.AdminPassword, "admin")
		if err != nil {
			projBErr = err
			return
		}
		var roles struct {
			Roles []struct{ ID string } `json:"roles"`
		}
		if err := k.Call("GET", "/roles?name=member", admin, nil, &roles); err != nil || len(roles.Roles) != 1 {
			projBErr = fmt.Errorf("role member: %v %+v", err, roles)
			return
		}
		var project struct {
			Project struct{ ID string } `json:"project"`
		}
		if projBErr = k.Call("POST", "/projects", admin, map[string]any{"project": map[string]any{"name": "projb", "domain_id": "default"}}, &project); projBErr != nil {
			return
		}
		pw := "memberb-" + k.Port
		var user struct {
			User struct{ ID string } `json:"user"`
		}
		body := map[string]any{"user": map[string]any{"name": "memberb", "domain_id": "default", "password": pw, "default_project_id": project.Project.ID}}
		if projBErr = k.Call("POST", "/users", admin, body, &user); projBErr != nil {
			return
		}
		projBErr = k.Call("PUT", "/projects/"+project.Project.ID+"/users/"+user.User.ID+"/roles/"+roles.Roles[0].ID, admin, nil, nil)
		projBID, memberBPW = project.Project.ID, pw
	})
	if projBErr != nil {
		t.Fatalf("project B: %v", projBErr)
	}
	return projBID, memberBPW
}

// tokens logs every identity of the matrix in.
func tokens(t testing.TB, k *Keystone) map[string]string {
	t.Helper()
	_, pwB := k.ProjectB(t)
	return map[string]string{
		asAdmin:   k.MustIssue(t, "admin", k.AdminPassword, "admin"),
		asMemberA: k.MustIssue(t, "demo", k.DemoPassword, "demo"),
		asReaderA: k.MustIssue(t, "reader", k.ReaderPassword, "demo"),
		asMemberB: k.MustIssue(t, "memberb", pwB, "projb"),
	}
}

// keystoneConf is an oslo-style config of a server with auth_strategy
// keystone (named explicitly: the matrix must not depend on the
// default), plus extra lines (other sections).
func keystoneConf(k *Keystone, dir, extra string) string {
	return "[api]\nauth_strategy = keystone\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n" +
		"[keystone_authtoken]\nwww_authenticate_uri = " + k.URL + "\nauth_url = " + k.URL + "\nauth_type = password\n" +
		"username = " + k.ServiceUser + "\npassword = " + k.ServicePassword + "\nproject_name = service\n" +
		"user_domain_name = Default\nproject_domain_name = Default\nregion_name = RegionOne\ntoken_cache_time = 5\n" + extra
}

// newServerConf builds Leasehold from keystoneConf(extra).
func newServerConf(t *testing.T, k *Keystone, extra string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	s, err := server.New(context.Background(), loadConfig(t, dir, keystoneConf(k, dir, extra)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DB().Close() })
	return s
}

// client sends requests with the matrix's tokens to a handler.
type client struct {
	h      http.Handler
	tokens map[string]string
}

// do sends one request as identity who (no token when who is "");
// Placement requests ask for microversion 1.39.
func (c client) do(who, method, path, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if who != "" {
		r.Header.Set("X-Auth-Token", c.tokens[who])
	}
	if strings.HasPrefix(path, "/placement") {
		r.Header.Set("OpenStack-API-Version", "placement 1.39")
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.Bytes()
}

// must sends a set-up request and decodes the answer's field at path
// (dot-separated keys) as a string; want is the expected status.
func (c client) must(t *testing.T, who, method, path, body string, want int, field string) string {
	t.Helper()
	code, b := c.do(who, method, path, body)
	if code != want {
		t.Fatalf("set-up %s %s as %s: %d %s, want %d", method, path, who, code, b, want)
	}
	if field == "" {
		return ""
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("set-up %s %s: %v: %s", method, path, err, b)
	}
	for _, key := range strings.Split(field, ".") {
		m, _ := v.(map[string]any)
		v = m[key]
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return fmt.Sprint(x)
	}
	t.Fatalf("set-up %s %s: no %s in %s", method, path, field, b)
	return ""
}

// fixtures makes the objects a matrix cell acts on; each cell gets its
// own, so that a cell that deletes or renames leaves the others intact.
type fixtures struct {
	c client
	n atomic.Int64
}

// next is a number unique in the test.
func (f *fixtures) next() int64 { return f.n.Add(1) }

// lease creates a lease as who (a member of the lease's project) in a
// window of its own, named with a marker that must never reach another
// project's member.
func (f *fixtures) lease(t *testing.T, who string) (id, marker string) {
	t.Helper()
	n := f.next()
	start := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(n))
	marker = fmt.Sprintf("secret-%s-%d", projectOf(who), n)
	body := fmt.Sprintf(`{"name": %q, "start_date": %q, "end_date": %q, "events": [],
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`,
		marker, start.Format("2006-01-02 15:04"), start.Add(time.Hour).Format("2006-01-02 15:04"))
	return f.c.must(t, who, "POST", "/v1/leases", body, 201, "lease.id"), marker
}

func (f *fixtures) host(t *testing.T) string {
	t.Helper()
	return f.c.must(t, asAdmin, "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "mx-%d", "rack": "r1"}`, f.next()), 201, "host.id")
}

func (f *fixtures) floatingIP(t *testing.T) string {
	t.Helper()
	n := f.next()
	body := fmt.Sprintf(`{"floating_network_id": "net-mx", "floating_ip_address": "172.24.%d.%d"}`, 4+n/200, 1+n%200)
	return f.c.must(t, asAdmin, "POST", "/v1/floatingips", body, 201, "floatingip.id")
}

// cell is one route of the matrix: its request, built from fresh
// fixtures, and the statuses each identity may get.
type cell struct {
	route string
	req   func(t *testing.T, f *fixtures) (method, path, body, marker string)
	want  map[string][]int
}

// every gives each identity the same expected statuses.
func every(codes ...int) map[string][]int {
	m := map[string][]int{}
	for _, who := range identities {
		m[who] = codes
	}
	return m
}

// adminOnly: the admin gets ok, everyone else 403.
func adminOnly(ok int) map[string][]int {
	return map[string][]int{asAdmin: {ok}, asMemberA: {403}, asReaderA: {403}, asMemberB: {403}}
}

// ownerWrite: admin and A's member may, A's reader may not, B's member
// gets 403 or 404.
func ownerWrite(ok int) map[string][]int {
	return map[string][]int{asAdmin: {ok}, asMemberA: {ok}, asReaderA: {403}, asMemberB: {403, 404}}
}

func fixed(method, path, body string) func(*testing.T, *fixtures) (string, string, string, string) {
	return func(*testing.T, *fixtures) (string, string, string, string) { return method, path, body, "" }
}

// projectOf names the project of an identity of the matrix.
func projectOf(who string) string {
	switch who {
	case asMemberA, asReaderA:
		return "A"
	case asMemberB:
		return "B"
	}
	return "admin"
}

// onLease is a request on a new lease that owner (a member) creates.
func onLease(owner, method, body string) func(*testing.T, *fixtures) (string, string, string, string) {
	return func(t *testing.T, f *fixtures) (string, string, string, string) {
		id, marker := f.lease(t, owner)
		return method, "/v1/leases/" + id, body, marker
	}
}

func onLeaseA(method, body string) func(*testing.T, *fixtures) (string, string, string, string) {
	return onLease(asMemberA, method, body)
}

func onHost(method, suffix, body string) func(*testing.T, *fixtures) (string, string, string, string) {
	return func(t *testing.T, f *fixtures) (string, string, string, string) {
		return method, "/v1/os-hosts/" + f.host(t) + suffix, body, ""
	}
}

func onFloatingIP(method string) func(*testing.T, *fixtures) (string, string, string, string) {
	return func(t *testing.T, f *fixtures) (string, string, string, string) {
		return method, "/v1/floatingips/" + f.floatingIP(t), "", ""
	}
}

// blazarCells is every Blazar route, with Blazar's default policy:
// leases admin-or-owner (readers read), hosts, allocations and
// properties admin only, floating IPs readable by project readers and
// written by admins.
func blazarCells() []cell {
	newLease := func(t *testing.T, f *fixtures) (string, string, string, string) {
		start := time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(f.next()))
		body := fmt.Sprintf(`{"name": "new-%d", "start_date": %q, "end_date": %q, "events": [],
			"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`,
			f.next(), start.Format("2006-01-02 15:04"), start.Add(time.Hour).Format("2006-01-02 15:04"))
		return "POST", "/v1/leases", body, ""
	}
	return []cell{
		{"GET /v1/leases", fixed("GET", "/v1/leases", ""), every(200)},
		{"POST /v1/leases", newLease, map[string][]int{asAdmin: {201}, asMemberA: {201}, asReaderA: {403}, asMemberB: {201}}},
		{"GET /v1/leases/{A's}", onLeaseA("GET", ""), map[string][]int{asAdmin: {200}, asMemberA: {200}, asReaderA: {200}, asMemberB: {403, 404}}},
		{"PUT /v1/leases/{A's}", onLeaseA("PUT", `{"name": "renamed"}`), ownerWrite(200)},
		{"DELETE /v1/leases/{A's}", onLeaseA("DELETE", ""), ownerWrite(204)},
		{"GET /v1/leases/{B's}", onLease(asMemberB, "GET", ""), map[string][]int{asAdmin: {200}, asMemberA: {403, 404}, asReaderA: {403, 404}, asMemberB: {200}}},
		{"PUT /v1/leases/{B's}", onLease(asMemberB, "PUT", `{"name": "renamed"}`), map[string][]int{asAdmin: {200}, asMemberA: {403, 404}, asReaderA: {403, 404}, asMemberB: {200}}},
		{"DELETE /v1/leases/{B's}", onLease(asMemberB, "DELETE", ""), map[string][]int{asAdmin: {204}, asMemberA: {403, 404}, asReaderA: {403, 404}, asMemberB: {204}}},
		{"GET /v1/os-hosts", fixed("GET", "/v1/os-hosts", ""), adminOnly(200)},
		{"POST /v1/os-hosts", func(t *testing.T, f *fixtures) (string, string, string, string) {
			return "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "mx-new-%d"}`, f.next()), ""
		}, adminOnly(201)},
		{"GET /v1/os-hosts/{id}", onHost("GET", "", ""), adminOnly(200)},
		{"PUT /v1/os-hosts/{id}", onHost("PUT", "", `{"rack": "r2"}`), adminOnly(200)},
		{"DELETE /v1/os-hosts/{id}", onHost("DELETE", "", ""), adminOnly(204)},
		{"GET /v1/os-hosts/allocations", fixed("GET", "/v1/os-hosts/allocations", ""), adminOnly(200)},
		{"GET /v1/os-hosts/{id}/allocation", onHost("GET", "/allocation", ""), adminOnly(200)},
		{"GET /v1/os-hosts/properties", fixed("GET", "/v1/os-hosts/properties", ""), adminOnly(200)},
		{"PATCH /v1/os-hosts/properties/rack", fixed("PATCH", "/v1/os-hosts/properties/rack", `{"private": false}`), adminOnly(200)},
		{"GET /v1/floatingips", fixed("GET", "/v1/floatingips", ""), every(200)},
		{"POST /v1/floatingips", func(t *testing.T, f *fixtures) (string, string, string, string) {
			n := f.next()
			return "POST", "/v1/floatingips", fmt.Sprintf(`{"floating_network_id": "net-mx", "floating_ip_address": "10.9.%d.%d"}`, n/200, 1+n%200), ""
		}, adminOnly(201)},
		{"GET /v1/floatingips/{id}", onFloatingIP("GET"), every(200)},
		{"DELETE /v1/floatingips/{id}", onFloatingIP("DELETE"), adminOnly(204)},
	}
}

// placementCells samples Placement's routes; with the default
// policy_mode (legacy) all but a project's usages are the admin's.
func placementCells(rp, consumer, projectA string) []cell {
	alloc := func(t *testing.T, f *fixtures) (string, string, string, string) {
		c := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.next())
		body := fmt.Sprintf(`{"allocations": {%q: {"resources": {"VCPU": 1}}}, "project_id": %q, "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}`, rp, projectA)
		return "PUT", "/placement/allocations/" + c, body, ""
	}
	newRP := func(t *testing.T, f *fixtures) (string, string, string, string) {
		return "POST", "/placement/resource_providers", fmt.Sprintf(`{"name": "mx-rp-%d"}`, f.next()), ""
	}
	return []cell{
		{"GET /placement/resource_providers", fixed("GET", "/placement/resource_providers", ""), adminOnly(200)},
		{"POST /placement/resource_providers", newRP, adminOnly(200)},
		{"GET /placement/resource_providers/{uuid}", fixed("GET", "/placement/resource_providers/"+rp, ""), adminOnly(200)},
		{"GET /placement/resource_providers/{uuid}/usages", fixed("GET", "/placement/resource_providers/"+rp+"/usages", ""), adminOnly(200)},
		// placement:usages is system_or_project_reader, and under legacy
		// (enforce_new_defaults off) the new rule passing is enough: A's
		// readers see A's usages, B's member does not.
		{"GET /placement/usages?project_id={A}", fixed("GET", "/placement/usages?project_id="+projectA, ""),
			map[string][]int{asAdmin: {200}, asMemberA: {200}, asReaderA: {200}, asMemberB: {403}}},
		{"GET /placement/allocations/{consumer}", fixed("GET", "/placement/allocations/"+consumer, ""), adminOnly(200)},
		{"PUT /placement/allocations/{new consumer}", alloc, adminOnly(204)},
	}
}

// result is one cell's outcome.
type result struct {
	route, who string
	got        int
	want       []int
	leak       bool // the body showed another project's lease
}

func (r result) ok() bool { return slices.Contains(r.want, r.got) && !r.leak }

// runMatrix sends one request per (cell, identity) and reports every
// mismatch with the whole matrix printed.
func runMatrix(t *testing.T, c client, f *fixtures, cells []cell, who ...string) {
	t.Helper()
	if len(who) == 0 {
		who = identities
	}
	var results []result
	for _, cl := range cells {
		for _, who := range who {
			method, path, body, marker := cl.req(t, f)
			code, b := c.do(who, method, path, body)
			r := result{route: cl.route, who: who, got: code, want: cl.want[who]}
			// The marker names the lease's project: no one outside it
			// but the admin may see it.
			if owner := strings.Split(marker, "-"); marker != "" && who != asAdmin && projectOf(who) != owner[1] && bytes.Contains(b, []byte(marker)) {
				r.leak = true
			}
			results = append(results, r)
		}
	}
	failed := 0
	for _, r := range results {
		if !r.ok() {
			failed++
			t.Errorf("%s as %s: %d, want %v (leaked content: %v)", r.route, r.who, r.got, r.want, r.leak)
		}
	}
	t.Logf("%d cells, %d failing", len(results), failed)
	if failed > 0 {
		t.Log("\n" + matrixTable(cells, results, who))
	}
}

// matrixTable renders results as route × identity, "got" or
// "got!want" where a cell failed.
func matrixTable(cells []cell, results []result, identities []string) string {
	var b strings.Builder
	width := 0
	for _, c := range cells {
		width = max(width, len(c.route))
	}
	fmt.Fprintf(&b, "%-*s", width, "route")
	for _, who := range identities {
		fmt.Fprintf(&b, " | %-12s", who)
	}
	b.WriteString("\n")
	for i, c := range cells {
		fmt.Fprintf(&b, "%-*s", width, c.route)
		for j := range identities {
			r := results[i*len(identities)+j]
			s := fmt.Sprint(r.got)
			if !r.ok() {
				s = fmt.Sprintf("%d!%v", r.got, r.want)
				if r.leak {
					s += " LEAK"
				}
			}
			fmt.Fprintf(&b, " | %-12s", s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPolicyMatrix: every Blazar route and a sample of Placement routes,
// one request per (route, identity), on a server with keystone auth and
// the default policies, against tokens of the real Keystone.
func TestPolicyMatrix(t *testing.T) {
	k := RequireKeystone(t)
	s := newServerConf(t, k, "")
	c := client{h: s.Handler(), tokens: tokens(t, k)}
	f := &fixtures{c: c}
	// Hosts for the leases (each lease has a window of its own, so one
	// would do; three keep the allocator honest).
	for range 3 {
		f.host(t)
	}

	// Placement fixtures: a provider with VCPU and one allocation of
	// project A.
	rp := "11111111-2222-4333-8444-555555555555"
	c.must(t, asAdmin, "POST", "/placement/resource_providers", `{"name": "mx-rp", "uuid": "`+rp+`"}`, 200, "")
	c.must(t, asAdmin, "PUT", "/placement/resource_providers/"+rp+"/inventories",
		`{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1000}}}`, 200, "")
	consumer := "99999999-8888-4777-8666-555555555555"
	c.must(t, asAdmin, "PUT", "/placement/allocations/"+consumer,
		fmt.Sprintf(`{"allocations": {%q: {"resources": {"VCPU": 1}}}, "project_id": %q, "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}`, rp, k.DemoProjectID), 204, "")

	t.Run("blazar", func(t *testing.T) { runMatrix(t, c, f, blazarCells()) })
	t.Run("placement", func(t *testing.T) { runMatrix(t, c, f, placementCells(rp, consumer, k.DemoProjectID)) })
	t.Run("no token", func(t *testing.T) {
		// Not one route answers without a token: the 401 comes before
		// policy, whatever the rule says.
		var cells []cell
		cells = append(cells, blazarCells()...)
		cells = append(cells, placementCells(rp, consumer, k.DemoProjectID)...)
		for _, cl := range cells {
			method, path, body, _ := cl.req(t, f)
			if code, b := c.do("", method, path, body); code != 401 {
				t.Errorf("%s without a token: %d %s, want 401", cl.route, code, b)
			}
		}
	})
}

// leaseIDs lists /v1/leases as who (with query) and returns the ids and
// the projects of the leases in the answer.
func leaseIDs(t *testing.T, c client, who, query string) (ids, projects []string) {
	t.Helper()
	code, b := c.do(who, "GET", "/v1/leases"+query, "")
	if code != 200 {
		t.Fatalf("GET /v1/leases%s as %s: %d %s", query, who, code, b)
	}
	var out struct {
		Leases []struct {
			ID        string `json:"id"`
			ProjectID string `json:"project_id"`
		} `json:"leases"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for _, l := range out.Leases {
		ids = append(ids, l.ID)
		if !slices.Contains(projects, l.ProjectID) {
			projects = append(projects, l.ProjectID)
		}
	}
	slices.Sort(ids)
	slices.Sort(projects)
	return ids, projects
}

// TestLeaseListing: GET /v1/leases lists every project's leases for an
// admin and only the caller's project's for everyone else, as upstream;
// query parameters (project_id, all_projects) neither widen a member's
// list nor narrow an admin's (upstream ignores them).
func TestLeaseListing(t *testing.T) {
	k := RequireKeystone(t)
	projectB, _ := k.ProjectB(t)
	s := newServerConf(t, k, "")
	c := client{h: s.Handler(), tokens: tokens(t, k)}
	f := &fixtures{c: c}
	f.host(t)
	leaseA, _ := f.lease(t, asMemberA)
	leaseB, _ := f.lease(t, asMemberB)
	all := []string{leaseA, leaseB}
	slices.Sort(all)
	want := map[string][]string{asAdmin: all, asMemberA: {leaseA}, asReaderA: {leaseA}, asMemberB: {leaseB}}
	for _, who := range identities {
		for _, q := range []string{"", "?all_projects=1", "?all_projects=True", "?project_id=" + k.DemoProjectID, "?project_id=" + projectB, "?project_id=" + k.DemoProjectID + "&all_projects=1"} {
			ids, projects := leaseIDs(t, c, who, q)
			if !slices.Equal(ids, want[who]) {
				t.Errorf("GET /v1/leases%s as %s: %v, want %v", q, who, ids, want[who])
			}
			if who != asAdmin && len(projects) > 1 {
				t.Errorf("GET /v1/leases%s as %s: leases of projects %v", q, who, projects)
			}
		}
	}
}

// TestPolicyFileOverrideWithKeystone: [oslo_policy] policy_file changes
// what both APIs answer to real Keystone tokens: readers may create
// leases, project members list hosts and providers, and redefining the
// "admin" rule lets the reader list every project's leases.
func TestPolicyFileOverrideWithKeystone(t *testing.T) {
	k := RequireKeystone(t)
	k.ProjectB(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	rules := `"blazar:leases:post": "rule:project_reader_or_admin"
"blazar:oshosts:get": "role:reader"
"placement:resource_providers:list": "role:member"
"admin": "is_admin:True or role:admin or user_id:` + k.ReaderUserID + `"
`
	if err := os.WriteFile(policyFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	def := client{h: newServerConf(t, k, "").Handler(), tokens: tokens(t, k)}
	over := client{h: newServerConf(t, k, "[oslo_policy]\npolicy_file = "+policyFile+"\n").Handler(), tokens: def.tokens}
	for _, c := range []client{def, over} {
		f := &fixtures{c: c}
		f.host(t)
		f.lease(t, asMemberA)
		f.lease(t, asMemberB)
	}
	newLease := `{"name": "by-reader", "start_date": "2046-01-01 00:00", "end_date": "2046-01-01 01:00", "events": [],
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`
	for _, tc := range []struct {
		who, method, path, body string
		def, over               int
	}{
		{asReaderA, "POST", "/v1/leases", newLease, 403, 201},
		{asMemberB, "GET", "/v1/os-hosts", "", 403, 200},
		{asReaderA, "GET", "/v1/os-hosts", "", 403, 200},
		{asMemberA, "GET", "/placement/resource_providers", "", 403, 200},
		{asReaderA, "GET", "/placement/resource_providers", "", 403, 403},
		// Rules the file does not name keep their defaults.
		{asMemberA, "POST", "/v1/os-hosts", `{"name": "not-by-member"}`, 403, 403},
		{asMemberB, "GET", "/placement/resource_providers/11111111-2222-4333-8444-555555555555", "", 403, 403},
	} {
		for _, side := range []struct {
			name string
			c    client
			want int
		}{{"defaults", def, tc.def}, {"policy file", over, tc.over}} {
			if code, b := side.c.do(tc.who, tc.method, tc.path, tc.body); code != side.want {
				t.Errorf("%s: %s %s as %s: %d %s, want %d", side.name, tc.method, tc.path, tc.who, code, b, side.want)
			}
		}
	}
	// The redefined "admin" rule is what GET /v1/leases asks.
	for _, side := range []struct {
		name string
		c    client
		want int
	}{{"defaults", def, 1}, {"policy file", over, 2}} {
		if _, projects := leaseIDs(t, side.c, asReaderA, ""); len(projects) != side.want {
			t.Errorf("%s: the reader lists leases of %d projects, want %d", side.name, len(projects), side.want)
		}
	}
}

// TestStartsAsKeystoneByDefault: a placement.conf-style file with a
// usable [keystone_authtoken] and no auth_strategy serves with Keystone:
// noauth's tokens are refused, Keystone's accepted.
func TestStartsAsKeystoneByDefault(t *testing.T) {
	k := RequireKeystone(t)
	dir := t.TempDir()
	conf := strings.Replace(keystoneConf(k, dir, ""), "[api]\nauth_strategy = keystone\n", "", 1)
	if strings.Contains(conf, "auth_strategy") {
		t.Fatal("the config still names a strategy")
	}
	s, err := server.New(context.Background(), loadConfig(t, dir, conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DB().Close() })
	h := s.Handler()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	for _, path := range []string{"/v1/leases", "/placement/resource_providers"} {
		if got := do(h, path, "admin"); got.status != 401 {
			t.Errorf("GET %s with noauth's admin token: %+v, want 401", path, got)
		}
		if got := do(h, path, admin); got.status != 200 {
			t.Errorf("GET %s with Keystone's admin token: %+v, want 200", path, got)
		}
	}
}

// TestStartRefusedOnBrokenPolicy: with keystone auth, a policy file that
// does not parse or names an unknown rule stops start-up, naming the
// file (and line), before the database is opened.
func TestStartRefusedOnBrokenPolicy(t *testing.T) {
	k := RequireKeystone(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"bad.yaml", "\"blazar:leases:get\": \"rule:admin\"\n\"blazar:leases:post\": \"role:member or\"\n", "bad.yaml: line 2"},
		{"bad.json", "{\n\"blazar:leases:get\": \"rule:admin\",\n}\n", "bad.json: line 3"},
		{"undefined.yaml", "\"blazar:leases:get\": \"rule:nonesuch\"\n", "nonesuch"},
		{"missing.yaml", "", "missing.yaml"},
	} {
		path := filepath.Join(dir, tc.name)
		if tc.text != "" {
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		conf := strings.Replace(keystoneConf(k, dir, "[oslo_policy]\npolicy_file = "+path+"\n"), filepath.Join(dir, "lh.db"), filepath.Join(dir, "never.db"), 1)
		s, err := server.New(context.Background(), loadConfig(t, dir, conf))
		if err == nil {
			_ = s.DB().Close()
			t.Errorf("%s: the server started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to name %q", tc.name, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		t.Error("the database was opened before the policy file was checked")
	}
}

// asSystemAdmin is admin with a system-scoped token.
const asSystemAdmin = "system-admin"

// IssueSystem returns a new system-scoped token of user.
func (k *Keystone) IssueSystem(t testing.TB, user, password string) string {
	t.Helper()
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "domain": map[string]string{"id": "default"}, "password": password}}},
		"scope": map[string]any{"system": map[string]any{"all": true}},
	}}
	b, _ := json.Marshal(body)
	resp, err := kstest.HTTP.Post(k.URL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("system token for %s: %d", user, resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token")
}

// TestPlacementSecureMatrix: the Placement sample again with
// placement.policy_mode = secure (new defaults, scope enforced), where
// a system-scoped admin may do everything, a project-scoped admin
// nothing on these system-scoped routes, and A's readers read A's usages.
func TestPlacementSecureMatrix(t *testing.T) {
	k := RequireKeystone(t)
	s := newServerConf(t, k, "[placement]\npolicy_mode = secure\n")
	tok := tokens(t, k)
	tok[asSystemAdmin] = k.IssueSystem(t, "admin", k.AdminPassword)
	c := client{h: s.Handler(), tokens: tok}
	f := &fixtures{c: c}
	rp := "33333333-2222-4333-8444-555555555555"
	c.must(t, asSystemAdmin, "POST", "/placement/resource_providers", `{"name": "mx-rp", "uuid": "`+rp+`"}`, 200, "")
	c.must(t, asSystemAdmin, "PUT", "/placement/resource_providers/"+rp+"/inventories",
		`{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1000}}}`, 200, "")
	consumer := "99999999-8888-4777-8666-444444444444"
	c.must(t, asSystemAdmin, "PUT", "/placement/allocations/"+consumer,
		fmt.Sprintf(`{"allocations": {%q: {"resources": {"VCPU": 1}}}, "project_id": %q, "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}`, rp, k.DemoProjectID), 204, "")
	who := append([]string{asSystemAdmin}, identities...)
	cells := placementCells(rp, consumer, k.DemoProjectID)
	for i := range cells {
		ok := cells[i].want[asAdmin][0]
		cells[i].want = map[string][]int{asSystemAdmin: {ok}, asAdmin: {403}, asMemberA: {403}, asReaderA: {403}, asMemberB: {403}}
		if strings.HasPrefix(cells[i].route, "GET /placement/usages") {
			cells[i].want[asMemberA], cells[i].want[asReaderA] = []int{200}, []int{200}
		}
	}
	runMatrix(t, c, f, cells, who...)
}

// TestBlazarOldDefaultsMatrix: with [oslo_policy] enforce_new_defaults =
// false a lease rule also passes on its deprecated check ("rule:admin
// or project_id:%(project_id)s"), so A's reader writes A's leases as
// A's member does; other projects and the admin-only rules are as
// before.
func TestBlazarOldDefaultsMatrix(t *testing.T) {
	k := RequireKeystone(t)
	s := newServerConf(t, k, "[oslo_policy]\nenforce_new_defaults = false\n")
	c := client{h: s.Handler(), tokens: tokens(t, k)}
	f := &fixtures{c: c}
	f.host(t)
	cells := blazarCells()
	for i := range cells {
		if strings.Contains(cells[i].route, "/v1/leases") {
			cells[i].want[asReaderA] = cells[i].want[asMemberA]
		}
	}
	runMatrix(t, c, f, cells)
}
