package nova

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// fakeFlavors is the flavor part of the compute API, in memory: flavors
// with extra specs and access lists, and servers by flavor (each server
// disappears on its second listing after its deletion).
type fakeFlavors struct {
	mu      sync.Mutex
	flavors map[string]map[string]any
	specs   map[string]map[string]string
	access  map[string][]string
	servers map[string]string // server → flavor
	deleted map[string]bool
	calls   []string
}

func (f *fakeFlavors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	f.calls = append(f.calls, r.Method+" "+strings.Join(p, "/"))
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	switch {
	case r.Method == "GET" && len(p) == 2 && p[0] == "flavors":
		fl, ok := f.flavors[p[1]]
		if !ok {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		writeJSON(w, 200, map[string]any{"flavor": fl})
	case r.Method == "POST" && len(p) == 1 && p[0] == "flavors":
		fl := body["flavor"].(map[string]any)
		id := fl["id"].(string)
		if _, ok := f.flavors[id]; ok {
			writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409}})
			return
		}
		f.flavors[id] = fl
		writeJSON(w, 200, map[string]any{"flavor": fl})
	case r.Method == "GET" && len(p) == 3 && p[2] == "os-extra_specs":
		writeJSON(w, 200, map[string]any{"extra_specs": f.specs[p[1]]})
	case r.Method == "GET" && len(p) == 3 && p[2] == "os-flavor-access":
		out := []map[string]string{}
		for _, x := range f.access[p[1]] {
			out = append(out, map[string]string{"flavor_id": p[1], "tenant_id": x})
		}
		writeJSON(w, 200, map[string]any{"flavor_access": out})
	case r.Method == "POST" && len(p) == 3 && p[2] == "os-extra_specs":
		for k, v := range body["extra_specs"].(map[string]any) {
			f.specs[p[1]][k] = v.(string)
		}
		writeJSON(w, 200, body)
	case r.Method == "POST" && len(p) == 3 && p[2] == "action":
		tenant := body["addTenantAccess"].(map[string]any)["tenant"].(string)
		for _, x := range f.access[p[1]] {
			if x == tenant {
				writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409}})
				return
			}
		}
		f.access[p[1]] = append(f.access[p[1]], tenant)
		writeJSON(w, 200, map[string]any{"flavor_access": []any{}})
	case r.Method == "DELETE" && len(p) == 2 && p[0] == "flavors":
		if _, ok := f.flavors[p[1]]; !ok {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		for _, fl := range f.servers {
			if fl == p[1] {
				writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"message": "flavor in use"}})
				return
			}
		}
		delete(f.flavors, p[1])
		w.WriteHeader(202)
	case r.Method == "GET" && len(p) == 2 && p[1] == "detail":
		out := []map[string]any{}
		for id, fl := range f.servers {
			if fl != r.URL.Query().Get("flavor") {
				continue
			}
			if f.deleted[id] {
				delete(f.servers, id) // gone from the next listing on
			}
			out = append(out, map[string]any{"id": id, "name": id, "status": "ACTIVE"})
		}
		writeJSON(w, 200, map[string]any{"servers": out})
	case r.Method == "DELETE" && len(p) == 2 && p[0] == "servers":
		f.deleted[p[1]] = true
		w.WriteHeader(204)
	default:
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "no route"}})
	}
}

// TestReservationFlavorCalls: creating a flavor twice makes one (the
// second run sets the extra specs again), access twice is one grant, and
// the deletion deletes the flavor's servers and waits for them before
// deleting the flavor; deleting a gone flavor is done.
func TestReservationFlavorCalls(t *testing.T) {
	f := &fakeFlavors{flavors: map[string]map[string]any{}, specs: map[string]map[string]string{"r1": {}}, access: map[string][]string{},
		servers: map[string]string{}, deleted: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"},
		Config{PollInterval: time.Millisecond, ServerDeleteTimeout: time.Minute}, nil)
	ctx := context.Background()
	spec := compute.FlavorSpec{ID: "r1", Name: "reservation:r1", VCPUs: 2, MemoryMB: 2048, DiskGB: 20,
		ExtraSpecs: map[string]string{"resources:CUSTOM_RESERVATION_R1": "1"}}
	for range 2 {
		if err := d.CreateReservationFlavor(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := d.AddFlavorAccess(ctx, "r1", "p1"); err != nil {
			t.Fatal(err)
		}
	}
	fl := f.flavors["r1"]
	if fl["os-flavor-access:is_public"] != false || fl["vcpus"] != float64(2) || fl["ram"] != float64(2048) || fl["disk"] != float64(20) {
		t.Errorf("flavor %v, want private 2/2048/20", fl)
	}
	if diff := cmp.Diff(map[string]string{"resources:CUSTOM_RESERVATION_R1": "1"}, f.specs["r1"]); diff != "" {
		t.Errorf("extra specs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p1"}, f.access["r1"]); diff != "" {
		t.Errorf("access (-want +got):\n%s", diff)
	}
	f.servers["s1"], f.servers["s2"], f.servers["other"] = "r1", "r1", "m1"
	if err := d.DeleteReservationFlavor(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.flavors["r1"]; ok {
		t.Error("flavor not deleted")
	}
	if diff := cmp.Diff(map[string]string{"other": "m1"}, f.servers); diff != "" {
		t.Errorf("servers left (-want +got):\n%s", diff)
	}
	if err := d.DeleteReservationFlavor(ctx, "r1"); err != nil {
		t.Errorf("deleting a gone flavor: %v", err)
	}
}

// TestGetFlavor: a flavor is found with its extra specs (from the flavor
// itself, or read separately when Nova's answer has none) when it is
// public or the project is on its access list; otherwise, and when it
// does not exist, it is NotFound, as Nova answers the project.
func TestGetFlavor(t *testing.T) {
	f := &fakeFlavors{
		flavors: map[string]map[string]any{
			"pub": {"id": "pub", "name": "m1.small", "vcpus": 2, "ram": 4096, "disk": 10, "OS-FLV-EXT-DATA:ephemeral": 5,
				"os-flavor-access:is_public": true, "extra_specs": map[string]string{"hw:cpu_policy": "dedicated"}},
			"priv": {"id": "priv", "name": "gold", "vcpus": 8, "ram": 16384, "disk": 80, "os-flavor-access:is_public": false},
		},
		specs:  map[string]map[string]string{"priv": {"trait:CUSTOM_GOLD": "required"}},
		access: map[string][]string{"priv": {"p1"}},
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"}, Config{}, nil)
	pub := compute.Flavor{ID: "pub", Name: "m1.small", VCPUs: 2, RAM: 4096, Disk: 10, Ephemeral: 5,
		ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated"}}
	priv := compute.Flavor{ID: "priv", Name: "gold", VCPUs: 8, RAM: 16384, Disk: 80,
		ExtraSpecs: map[string]string{"trait:CUSTOM_GOLD": "required"}}
	for _, c := range []struct {
		id, project string
		want        compute.Flavor
		notFound    bool
	}{
		{"pub", "p2", pub, false},
		{"priv", "p1", priv, false},
		{"priv", "p2", compute.Flavor{}, true},
		{"nope", "p1", compute.Flavor{}, true},
	} {
		got, err := d.GetFlavor(context.Background(), c.id, c.project)
		e := errs.As(err)
		if c.notFound != (e != nil && e.Kind == errs.NotFound) || (!c.notFound && err != nil) {
			t.Errorf("GetFlavor(%s, %s): error %v, want NotFound: %v", c.id, c.project, err, c.notFound)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("GetFlavor(%s, %s) (-want +got):\n%s", c.id, c.project, diff)
		}
	}
}
