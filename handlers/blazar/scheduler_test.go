package blazar

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/scheduler"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestSchedulerFilterHTTP: the route's policy (admin or service role),
// its bad bodies (Blazar's 400 body with a message naming the field), and
// a decision over a registered host and an unknown one.
func TestSchedulerFilterHTTP(t *testing.T) {
	d := dbtest.Open(t)
	hs := hosts.New(d, standalone.New(nil))
	if _, err := hs.Create(t.Context(), map[string]any{"name": "compute1"}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	rt := NewRouter()
	RegisterScheduler(rt, scheduler.New(d, hs, func() time.Time { return now }))
	h := rt.Handler(NoAuth{})

	service := map[string]string{"X-Auth-Token": "nova:service", "X-Roles": "service"}
	member := map[string]string{"X-Auth-Token": "demo:p1"}
	admin := map[string]string{"X-Auth-Token": "admin"}
	good := `{"project_id": "p1", "user_id": "u1", "scheduler_hints": {"group": ["g"]}, "flavor": {"extra_specs": {"hw:cpu_policy": "dedicated"}}, "hosts": ["compute1", "other"], "future_field": 1}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		want    string // whole JSON body
	}{
		{"service", service, good, 200,
			`{"hosts":["other"],"rejected":{"compute1":"registered in Leasehold: it takes instances only through a reservation (ask with explain for the lease holding it)"}}`},
		{"admin, explained", admin, strings.Replace(good, `"hosts"`, `"explain": true, "hosts"`, 1), 200,
			`{"hosts":["other"],"rejected":{"compute1":"in Leasehold's free pool: it takes instances only through a reservation"}}`},
		{"member refused", member, good, 403,
			`{"error_code":403,"error_message":"Policy doesn't allow leasehold:scheduler:filter to be performed.","error_name":403}`},
		{"no token", nil, good, 401, ""},
		{"not JSON", service, `{"project_id": `, 400, ""},
		{"not an object", service, `["compute1"]`, 400, ""},
		{"no project", service, `{"hosts": []}`, 400,
			`{"error_code":400,"error_message":"Missing parameter ` + "`project_id`" + `.","error_name":400}`},
		{"no hosts", service, `{"project_id": "p1"}`, 400,
			`{"error_code":400,"error_message":"Missing parameter ` + "`hosts`" + `: the list of candidate host names.","error_name":400}`},
		{"hosts not a list", service, `{"project_id": "p1", "hosts": "compute1"}`, 400, ""},
		{"empty host name", service, `{"project_id": "p1", "hosts": ["compute1", ""]}`, 400,
			`{"error_code":400,"error_message":"Malformed parameter ` + "`hosts`" + `: item 1 is not a host name.","error_name":400}`},
		{"project not a string", service, `{"project_id": 7, "hosts": []}`, 400, ""},
		{"hints not an object", service, `{"project_id": "p1", "scheduler_hints": [], "hosts": []}`, 400, ""},
		{"reservation hint not a string", service, `{"project_id": "p1", "scheduler_hints": {"reservation": 5}, "hosts": []}`, 400, ""},
		{"two reservations hinted", service, `{"project_id": "p1", "scheduler_hints": {"reservation": ["a", "b"]}, "hosts": []}`, 400,
			`{"error_code":400,"error_message":"The scheduler hint ` + "`reservation`" + ` names two reservations (a and b); one is expected.","error_name":400}`},
		{"extra specs not an object", service, `{"project_id": "p1", "flavor": {"extra_specs": "x"}, "hosts": []}`, 400, ""},
		{"reservation amount not a number", service, `{"project_id": "p1", "flavor": {"extra_specs": {"resources:CUSTOM_RESERVATION_A": "one"}}, "hosts": []}`, 400, ""},
		{"two reservation classes", service, `{"project_id": "p1", "flavor": {"resources": {"CUSTOM_RESERVATION_A": 1, "CUSTOM_RESERVATION_B": 1}}, "hosts": []}`, 400, ""},
		{"explain not a boolean", service, `{"project_id": "p1", "explain": "yes", "hosts": []}`, 400, ""},
		{"form body", service, `project_id=p1`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/scheduler/filter", strings.NewReader(tc.body))
			if tc.name == "form body" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 400 {
				var e struct {
					Code int    `json:"error_code"`
					Msg  string `json:"error_message"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code != 400 || e.Msg == "" {
					t.Errorf("not Blazar's 400 body: %s", w.Body)
				}
			}
			if tc.want != "" {
				if diff := cmp.Diff(tc.want, strings.TrimSpace(w.Body.String())); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}
		})
	}
}
