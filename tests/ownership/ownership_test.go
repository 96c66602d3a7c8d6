// Package ownership_test drives the ownership policy end to end over HTTP
// against an in-process server: two projects under one parent draw from
// their own hosts first, then the parent's private pool, then the public
// pool, and borrow another project's hosts only once it lends them.
package ownership_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/server"
)

func start(t testing.TB) *httptest.Server {
	ts, _ := startServer(t)
	return ts
}

func startServer(t testing.TB) (*httptest.Server, *server.Server) {
	t.Helper()
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
	cfg.Listen, cfg.PlacementListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Auth = config.AuthNoAuth
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, s
}

func do(t testing.TB, ts *httptest.Server, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// hostOf returns the host a lease's single host reservation booked.
func hostOf(t testing.TB, ts *httptest.Server, leaseID string) string {
	t.Helper()
	status, body := do(t, ts, "admin", "GET", "/v1/os-hosts/allocations", "")
	if status != 200 {
		t.Fatalf("allocations: %d %v", status, body)
	}
	for _, a := range body["allocations"].([]any) {
		a := a.(map[string]any)
		for _, r := range a["reservations"].([]any) {
			if r.(map[string]any)["lease_id"] == leaseID {
				return fmt.Sprint(a["resource_id"])
			}
		}
	}
	t.Fatalf("lease %s has no host", leaseID)
	return ""
}

func lease(t *testing.T, ts *httptest.Server, project string, n int) (int, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"name": "%s-%d", "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00", "events": [],
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`, project, n)
	return do(t, ts, "u:"+project, "POST", "/v1/leases", body)
}

func TestOwnedThenPrivateThenPublic(t *testing.T) {
	ts := start(t)
	for i := 1; i <= 5; i++ {
		status, body := do(t, ts, "admin", "POST", "/v1/os-hosts", fmt.Sprintf(`{"name": "c%d", "rack": "r1"}`, i))
		if status != 201 && status != 200 {
			t.Fatalf("create host: %d %v", status, body)
		}
	}
	// dom owns three hosts: one each for a (PA) and b (PB), one private;
	// two hosts are public. The least loaded hosts go first, by id: a gets
	// c1, b c2, dom keeps c3; c4 and c5 are public.
	plan := `{"generation": 0,
 "consumers": [{"id": "dom", "rank": 1}, {"id": "a", "parent_id": "dom", "rank": 1, "project_id": "PA"},
               {"id": "b", "parent_id": "dom", "rank": 2, "project_id": "PB", "borrow_grace_seconds": 600}],
 "groups": [{"name": "rack1", "properties": {"rack": "r1"}}],
 "entries": [{"consumer": "dom", "group": "rack1", "amount": 3}, {"consumer": "a", "group": "rack1", "amount": 1},
             {"consumer": "b", "group": "rack1", "amount": 1}]}`
	if status, body := do(t, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		t.Fatalf("plan: %d %v", status, body)
	}
	status, body := do(t, ts, "u:PA", "GET", "/v1/ownership/projects/PA", "")
	if status != 200 {
		t.Fatalf("PA's pools: %d %v", status, body)
	}
	pools := map[string][]string{}
	for _, p := range body["explanation"].(map[string]any)["pools"].([]any) {
		p := p.(map[string]any)
		for _, h := range p["hosts"].([]any) {
			pools[p["kind"].(string)] = append(pools[p["kind"].(string)], h.(string))
		}
	}
	owned, private, public := pools["owned"], pools["private"], pools["public"]
	if len(owned) != 1 || len(private) != 1 || len(public) != 2 {
		t.Fatalf("PA's pools = %v", pools)
	}
	// Four leases of PA over one window: owned, private, public, public.
	var got []string
	for i := 1; i <= 4; i++ {
		status, body := lease(t, ts, "PA", i)
		if status != 201 && status != 200 {
			t.Fatalf("lease %d: %d %v", i, status, body)
		}
		got = append(got, hostOf(t, ts, body["lease"].(map[string]any)["id"].(string)))
	}
	if got[0] != owned[0] || got[1] != private[0] || !(contains(public, got[2]) && contains(public, got[3]) && got[2] != got[3]) {
		t.Fatalf("PA's leases took %v; owned %v, private %v, public %v", got, owned, private, public)
	}
	// b's host is b's: PA's fifth lease is refused.
	if status, body := lease(t, ts, "PA", 5); status != 409 {
		t.Fatalf("fifth lease: %d %v, want 409", status, body)
	}
	// Once b lends with a grace period at least PA's (0 s), PA borrows it.
	status, body = do(t, ts, "admin", "PUT", "/v1/ownership/consumers/b/groups/rack1", `{"generation": 1, "amount": 1, "lend": true, "lend_grace_seconds": 3600}`)
	if status != 200 {
		t.Fatalf("b lends: %d %v", status, body)
	}
	status, body = lease(t, ts, "PA", 6)
	if status != 201 && status != 200 {
		t.Fatalf("lease on b's lent host: %d %v", status, body)
	}
	bHost := hostOf(t, ts, body["lease"].(map[string]any)["id"].(string))
	// Five hosts: the four PA had and b's.
	if contains(got, bHost) || bHost == "" {
		t.Fatalf("borrowed host %s is one PA already had: %v", bHost, got)
	}
	// The computed view shows the loan over the window, and none now.
	status, body = do(t, ts, "admin", "GET", "/v1/ownership?start_date=2099-01-01%2000:00&end_date=2099-01-02%2000:00", "")
	if status != 200 {
		t.Fatalf("ownership over the window: %d %v", status, body)
	}
	loans := body["ownership"].(map[string]any)["loans"].([]any)
	if len(loans) != 1 {
		t.Fatalf("loans = %v", loans)
	}
	l := loans[0].(map[string]any)
	if l["host"] != bHost || l["owner"] != "b" || l["project_id"] != "PA" || l["borrower"] != "a" {
		t.Fatalf("loan = %v", l)
	}
	_, body = do(t, ts, "admin", "GET", "/v1/ownership", "")
	if loans := body["ownership"].(map[string]any)["loans"].([]any); len(loans) != 0 {
		t.Fatalf("loans now = %v", loans)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
