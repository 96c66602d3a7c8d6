package blazar

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/hosts/hoststest"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// step is one request of a golden scenario.
type step struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Body    string            `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// exchange is a step with the answer, as stored in the golden file.
type exchange struct {
	Request  step            `json:"request"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response,omitempty"`
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func newHostsServer(t *testing.T) (http.Handler, *hosts.Service, *db.DB) {
	t.Helper()
	d := dbtest.Open(t)
	svc := hosts.New(d, standalone.New(nil))
	svc.SetClock(func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) })
	rt := NewRouter()
	RegisterHosts(rt, svc)
	RegisterFloatingIPs(rt, svc)
	return rt.Handler(NoAuth{}), svc, d
}

// runGolden plays steps against h and compares the transcript with
// testdata/<name>.json (UUIDs normalised).
func runGolden(t *testing.T, h http.Handler, name string, steps []step) {
	t.Helper()
	var got []exchange
	uuids := map[string]string{}
	norm := func(s string) string {
		return uuidRE.ReplaceAllStringFunc(s, func(u string) string {
			if n, ok := uuids[u]; ok {
				return n
			}
			n := "uuid-" + string(rune('A'+len(uuids)%26)) + strings.Repeat("'", len(uuids)/26)
			uuids[u] = n
			return n
		})
	}
	denorm := func(s string) string {
		for u, n := range uuids {
			s = strings.ReplaceAll(s, "{"+n+"}", u)
		}
		return s
	}
	for _, st := range steps {
		req := httptest.NewRequest(st.Method, "/"+strings.TrimPrefix(denorm(st.Path), "/"), strings.NewReader(denorm(st.Body)))
		for k, v := range st.Headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, withNoAuthToken(req))
		ex := exchange{Request: st, Status: rec.Code}
		if b := bytes.TrimSpace(rec.Body.Bytes()); len(b) > 0 {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s %s: response is not JSON: %s", st.Method, st.Path, b)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type %q", st.Method, st.Path, ct)
			}
			pretty, _ := json.MarshalIndent(v, "", "  ")
			ex.Response = json.RawMessage(norm(string(pretty)))
		}
		if rec.Code >= 500 {
			t.Errorf("%s %s: %d %s", st.Method, st.Path, rec.Code, rec.Body)
		}
		got = append(got, ex)
	}
	file := filepath.Join("testdata", name+".json")
	out, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *update {
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(out)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", file, diff)
	}
}

var member = map[string]string{"X-User-Id": "u1", "X-Project-Id": "p1", "X-Roles": "member"}

func TestHostsGolden(t *testing.T) {
	h, _, d := newHostsServer(t)
	// Two leases hold host 3 (registered below).
	start := time.Date(2030, 2, 1, 12, 0, 0, 0, time.UTC)
	hoststest.ReserveHosts(t, d, hoststest.Lease{ID: "l2", ReservationID: "r2", Start: start.Add(48 * time.Hour), End: start.Add(72 * time.Hour)}, "3")
	hoststest.ReserveHosts(t, d, hoststest.Lease{ID: "l1", ReservationID: "r1", Start: start, End: start.Add(24 * time.Hour)}, "3")
	runGolden(t, h, "hosts", []step{
		{Method: "GET", Path: "/os-hosts"},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-1", "gpu": "true", "vcpus": "8", "memory_mb": "16384", "local_gb": "200", "hypervisor_type": "QEMU", "hypervisor_version": "2010001", "cpu_info": "{\"arch\": \"x86_64\"}"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-2", "rack": "r1", "vcpus": 4, "availability_zone": "nova"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-3"}`},
		{Method: "GET", Path: "/os-hosts"},
		{Method: "GET", Path: "/os-hosts/2"},
		{Method: "GET", Path: "/os-hosts/2.json"},
		{Method: "PUT", Path: "/os-hosts/2", Body: `{"rack": "r2", "ssd": "true"}`},
		{Method: "PUT", Path: "/os-hosts/2", Body: ``},
		{Method: "PUT", Path: "/os-hosts/2", Body: `{}`},
		{Method: "PUT", Path: "/os-hosts/99", Body: `{"a": "b"}`},
		{Method: "GET", Path: "/os-hosts/allocations"},
		{Method: "GET", Path: "/os-hosts/allocations?lease_id=l2"},
		{Method: "GET", Path: "/os-hosts/3/allocation"},
		{Method: "GET", Path: "/os-hosts/1/allocation.json"},
		{Method: "GET", Path: "/os-hosts/99/allocation"},
		{Method: "DELETE", Path: "/os-hosts/3"},
		{Method: "DELETE", Path: "/os-hosts/1"},
		{Method: "DELETE", Path: "/os-hosts/1"},
		{Method: "GET", Path: "/os-hosts/compute-1"},
		{Method: "GET", Path: "/os-hosts"},
		{Method: "PUT", Path: "/os-hosts/2", Body: `{"reservable": false}`},
		{Method: "PUT", Path: "/os-hosts/2", Body: `{"reservable": "sometimes"}`},
	})
}

func TestHostsErrorsGolden(t *testing.T) {
	h, _, _ := newHostsServer(t)
	long := strings.Repeat("k", 65)
	runGolden(t, h, "hosts_errors", []step{
		{Method: "POST", Path: "/os-hosts", Body: `{"gpu": "true"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1", "` + long + `": "x"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1", "vcpus": "lots"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1", "gpu": ["a"]}`},
		{Method: "POST", Path: "/os-hosts", Body: `[1]`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1"`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1"}`, Headers: map[string]string{"Content-Type": "text/plain"}},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1"}`},
		{Method: "PUT", Path: "/os-hosts/1", Body: `{"` + long + `": "x"}`},
		{Method: "GET", Path: "/os-hosts", Headers: member},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c2"}`, Headers: member},
		{Method: "PUT", Path: "/os-hosts/1", Body: `{"a": "b"}`, Headers: member},
		{Method: "DELETE", Path: "/os-hosts/1", Headers: member},
		{Method: "GET", Path: "/os-hosts/allocations", Headers: member},
		{Method: "GET", Path: "/os-hosts/properties", Headers: member},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu", Body: `{"private": true}`, Headers: member},
		{Method: "POST", Path: "/os-hosts/1", Body: `{}`},
		{Method: "GET", Path: "/os-hosts/1/nothing"},
	})
}

func TestPropertiesGolden(t *testing.T) {
	h, _, _ := newHostsServer(t)
	runGolden(t, h, "properties", []step{
		{Method: "GET", Path: "/os-hosts/properties"},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c1", "gpu": "true", "rack": "r1"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "c2", "gpu": "false", "ssd": true}`},
		{Method: "GET", Path: "/os-hosts/properties"},
		{Method: "GET", Path: "/os-hosts/properties?detail=True&all=True"},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu", Body: `{"private": true}`},
		{Method: "GET", Path: "/os-hosts/properties?detail=True"},
		{Method: "GET", Path: "/os-hosts/properties?detail=True&all=True"},
		{Method: "GET", Path: "/os-hosts/properties?detail=False&all=1"},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu.json", Body: `{"private": false}`},
		{Method: "PATCH", Path: "/os-hosts/properties/nope", Body: `{"private": true}`},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu", Body: `{"private": "yes"}`},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu", Body: `{}`},
		{Method: "PATCH", Path: "/os-hosts/properties/gpu", Body: `{"private": true, "name": "x"}`},
	})
}

func TestFloatingIPsGolden(t *testing.T) {
	h, svc, d := newHostsServer(t)
	net := "1e17587e-a7ed-4b82-a17b-4beb32523e28"
	steps := []step{
		{Method: "GET", Path: "/floatingips"},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": "192.0.2.10"}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": "192.0.2.10"}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": "192.0.2.300"}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `"}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_ip_address": "192.0.2.11"}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": 3}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": "192.0.2.11", "x": 1}`},
		{Method: "POST", Path: "/floatingips", Body: `{"floating_network_id": "` + net + `", "floating_ip_address": "192.0.2.11"}`, Headers: member},
		{Method: "GET", Path: "/floatingips", Headers: member},
	}
	// The first created IP is uuid-B (uuid-A is the network id).
	steps = append(steps,
		step{Method: "GET", Path: "/floatingips/{uuid-B}"},
		step{Method: "GET", Path: "/floatingips/{uuid-B}.json", Headers: member},
		step{Method: "DELETE", Path: "/floatingips/{uuid-B}", Headers: member},
		step{Method: "GET", Path: "/floatingips/nope"},
	)
	runGolden(t, h, "floatingips", steps)
	list, err := svc.ListFloatingIPs(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	l := hoststest.Lease{ID: "l1", ReservationID: "r1", Start: time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2030, 2, 2, 0, 0, 0, 0, time.UTC)}
	hoststest.ReserveFloatingIP(t, d, l, list[0].ID)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, withNoAuthToken(httptest.NewRequest("DELETE", "/floatingips/"+list[0].ID, nil)))
	if want := `{"error_code":409,"error_message":"Cannot delete floating IP ` + list[0].ID + `: it is reserved.","error_name":409}`; rec.Code != 409 || rec.Body.String() != want {
		t.Fatalf("reserved floating IP: %d %s, want 409 %s", rec.Code, rec.Body, want)
	}
	hoststest.Release(t, d, l)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, withNoAuthToken(httptest.NewRequest("DELETE", "/floatingips/"+list[0].ID, nil)))
	if rec.Code != 204 || rec.Body.Len() != 0 {
		t.Fatalf("delete: %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, withNoAuthToken(httptest.NewRequest("DELETE", "/floatingips/"+list[0].ID, nil)))
	if rec.Code != 404 {
		t.Fatalf("second delete: %d", rec.Code)
	}
}
