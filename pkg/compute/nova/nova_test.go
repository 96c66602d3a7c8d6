package nova

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// fakeNova is the part of the compute API the driver uses, in memory.
type fakeNova struct {
	mu          sync.Mutex
	hypervisors []map[string]any
	servers     map[string]string // server id → host
	aggs        map[int]*fakeAgg
	nextAgg     int
	// lingering: how many listings a deleted server still shows up in.
	lingering int
	deleted   map[string]int
	calls     []string
	// landed are hosts whose add_host or remove_host has already taken
	// effect when the request arrives (an earlier run of the same call
	// whose answer was lost, or a concurrent one): Nova then refuses it.
	landed map[string]bool
	// refuseAdd are hosts Nova will not add (409, as for a host of
	// another availability zone).
	refuseAdd map[string]bool
}

type fakeAgg struct {
	ID       int               `json:"id"`
	Name     string            `json:"name"`
	AZ       *string           `json:"availability_zone"`
	Hosts    []string          `json:"hosts"`
	Metadata map[string]string `json:"metadata"`
	Created  string            `json:"created_at"`
}

func newFakeNova() *fakeNova {
	return &fakeNova{servers: map[string]string{}, aggs: map[int]*fakeAgg{}, nextAgg: 1, deleted: map[string]int{}}
}

func (f *fakeNova) addAgg(name, az string, hosts ...string) *fakeAgg {
	a := &fakeAgg{ID: f.nextAgg, Name: name, Hosts: append([]string{}, hosts...), Metadata: map[string]string{}, Created: "2020-01-01T00:00:00.000000"}
	if az != "" {
		a.AZ = &az
		a.Metadata["availability_zone"] = az
	}
	f.aggs[a.ID] = a
	f.nextAgg++
	return a
}

func hypervisor(id int, name string, vcpus int) map[string]any {
	return map[string]any{
		"id": id, "hypervisor_hostname": name, "vcpus": vcpus, "memory_mb": 16384, "local_gb": 200,
		"hypervisor_type": "QEMU", "hypervisor_version": 2010001,
		"cpu_info": `{"arch": "x86_64", "model": "Nehalem", "vendor": "Intel", "features": ["avx"], "topology": {"cores": 2, "threads": 1, "sockets": 1}}`,
		"service":  map[string]any{"host": name, "id": id, "disabled_reason": nil},
		"state":    "up", "status": "enabled", "current_workload": 0, "disk_available_least": 0, "free_disk_gb": 200,
		"free_ram_mb": 16384, "host_ip": "192.0.2.1", "local_gb_used": 0, "memory_mb_used": 0, "running_vms": 0, "vcpus_used": 0,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeNova) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/")
	f.calls = append(f.calls, r.Method+" "+path)
	parts := strings.Split(path, "/")
	switch {
	case r.Method == "GET" && path == "os-hypervisors/detail":
		f.hypervisorsDetail(w, r, parts)
	case r.Method == "GET" && len(parts) == 2 && parts[0] == "os-hypervisors":
		f.hypervisorByID(w, r, parts)
	case r.Method == "GET" && path == "servers/detail":
		f.serversDetail(w, r, parts)
	case r.Method == "DELETE" && len(parts) == 2 && parts[0] == "servers":
		f.deleteServer(w, r, parts)
	case r.Method == "GET" && path == "os-aggregates":
		f.listAggregates(w, r, parts)
	case r.Method == "POST" && path == "os-aggregates":
		f.createAggregate(w, r, parts)
	case len(parts) >= 2 && parts[0] == "os-aggregates":
		f.aggregateAction(w, r, parts)
	default:
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "no route " + path}})
	}
}

func (f *fakeNova) hypervisorsDetail(w http.ResponseWriter, r *http.Request, parts []string) {
	pat := r.URL.Query().Get("hypervisor_hostname_pattern")
	var out []map[string]any
	for _, h := range f.hypervisors {
		if strings.Contains(h["hypervisor_hostname"].(string), pat) {
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "No hypervisor matching " + pat + " could be found."}})
		return
	}
	writeJSON(w, 200, map[string]any{"hypervisors": out})
}

func (f *fakeNova) hypervisorByID(w http.ResponseWriter, r *http.Request, parts []string) {
	for _, h := range f.hypervisors {
		if strconv.Itoa(h["id"].(int)) == parts[1] {
			writeJSON(w, 200, map[string]any{"hypervisor": h})
			return
		}
	}
	writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "not found"}})
}

func (f *fakeNova) serversDetail(w http.ResponseWriter, r *http.Request, parts []string) {
	if r.URL.Query().Get("all_tenants") == "" {
		writeJSON(w, 400, map[string]any{"badRequest": map[string]any{"message": "all_tenants expected"}})
		return
	}
	host := r.URL.Query().Get("host")
	out := []map[string]any{}
	var ids []string
	for id, h := range f.servers {
		if h == host {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if n, ok := f.deleted[id]; ok {
			if n <= 0 {
				delete(f.servers, id)
				continue
			}
			f.deleted[id] = n - 1
		}
		out = append(out, map[string]any{"id": id, "name": id, "status": "ACTIVE", "tenant_id": "p", "user_id": "u"})
	}
	writeJSON(w, 200, map[string]any{"servers": out})
}

func (f *fakeNova) deleteServer(w http.ResponseWriter, r *http.Request, parts []string) {
	if _, ok := f.servers[parts[1]]; !ok {
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
		return
	}
	if _, ok := f.deleted[parts[1]]; !ok {
		f.deleted[parts[1]] = f.lingering
	}
	w.WriteHeader(204)
}

func (f *fakeNova) listAggregates(w http.ResponseWriter, r *http.Request, parts []string) {
	var ids []int
	for id := range f.aggs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := []*fakeAgg{}
	for _, id := range ids {
		out = append(out, f.aggs[id])
	}
	writeJSON(w, 200, map[string]any{"aggregates": out})
}

func (f *fakeNova) createAggregate(w http.ResponseWriter, r *http.Request, parts []string) {
	var body struct {
		Aggregate struct {
			Name string `json:"name"`
			AZ   string `json:"availability_zone"`
		} `json:"aggregate"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	for _, a := range f.aggs {
		if a.Name == body.Aggregate.Name {
			writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409}})
			return
		}
	}
	writeJSON(w, 200, map[string]any{"aggregate": f.addAgg(body.Aggregate.Name, body.Aggregate.AZ)})
}

func (f *fakeNova) aggregateAction(w http.ResponseWriter, r *http.Request, parts []string) {
	id, _ := strconv.Atoi(parts[1])
	a := f.aggs[id]
	if a == nil {
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
		return
	}
	if r.Method == "DELETE" {
		if len(a.Hosts) > 0 {
			writeJSON(w, 400, map[string]any{"badRequest": map[string]any{"message": "aggregate not empty"}})
			return
		}
		delete(f.aggs, id)
		w.WriteHeader(200)
		return
	}
	var body map[string]map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	switch {
	case body["add_host"] != nil:
		h := body["add_host"]["host"].(string)
		if f.landed[h] {
			a.Hosts = append(a.Hosts, h)
		}
		if f.refuseAdd[h] {
			writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409, "message": "host in another zone"}})
			return
		}
		for _, x := range a.Hosts {
			if x == h {
				writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409}})
				return
			}
		}
		a.Hosts = append(a.Hosts, h)
	case body["remove_host"] != nil:
		h := body["remove_host"]["host"].(string)
		if f.landed[h] {
			a.Hosts = slices.DeleteFunc(a.Hosts, func(x string) bool { return x == h })
		}
		kept := []string{}
		found := false
		for _, x := range a.Hosts {
			if x == h {
				found = true
			} else {
				kept = append(kept, x)
			}
		}
		if !found {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		a.Hosts = kept
	case body["set_metadata"] != nil:
		for k, v := range body["set_metadata"]["metadata"].(map[string]any) {
			a.Metadata[k] = v.(string)
		}
	}
	writeJSON(w, 200, map[string]any{"aggregate": a})
}

func newDriver(t *testing.T, f *fakeNova, cfg Config) *Driver {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	pc := &gophercloud.ProviderClient{HTTPClient: *srv.Client()}
	sc := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: srv.URL + "/"}
	return New(sc, cfg, nil)
}

// kind is the kind of an *errs.Error, or -1 for nil or any other error.
func kind(err error) errs.Kind {
	if e := errs.As(err); e != nil {
		return e.Kind
	}
	return -1
}

func TestDescribeHost(t *testing.T) {
	f := newFakeNova()
	f.hypervisors = []map[string]any{hypervisor(1, "compute-1", 8), hypervisor(2, "compute-10", 4), hypervisor(3, "compute-10", 4)}
	f.addAgg("az1-agg", "az1", "compute-1")
	d := newDriver(t, f, Config{AZAware: true})
	ctx := context.Background()
	det, caps, err := d.DescribeHost(ctx, map[string]string{"name": "compute-1", "gpu": "true", "vcpus": "99"})
	if err != nil {
		t.Fatal(err)
	}
	want := compute.HostDetails{ID: 1, HypervisorHostname: "compute-1", ServiceName: "compute-1", HypervisorType: "QEMU",
		HypervisorVersion: 2010001, AvailabilityZone: "az1", VCPUs: 8, MemoryMB: 16384, LocalGB: 200}
	var cpu map[string]any
	if err := json.Unmarshal([]byte(det.CPUInfo), &cpu); err != nil || cpu["arch"] != "x86_64" {
		t.Errorf("cpu_info %q: %v", det.CPUInfo, err)
	}
	det.CPUInfo = ""
	if diff := cmp.Diff(want, det); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"gpu": "true"}, caps); diff != "" {
		t.Errorf("caps (-want +got):\n%s", diff)
	}
	det, _, err = d.DescribeHost(ctx, map[string]string{"id": "2"})
	if err != nil || det.ID != 2 || det.AvailabilityZone != "" {
		t.Errorf("by id: %+v %v", det, err)
	}
	for _, tt := range []struct {
		body map[string]string
		kind errs.Kind
	}{
		{map[string]string{"name": "nope"}, errs.NotFound},
		{map[string]string{"id": "77"}, errs.NotFound},
		{map[string]string{"name": "compute-10"}, errs.Conflict},
		{map[string]string{}, errs.BadRequest},
	} {
		if _, _, err := d.DescribeHost(ctx, tt.body); kind(err) != tt.kind {
			t.Errorf("%v: err %v, want %v", tt.body, err, tt.kind)
		}
	}
}

func TestPools(t *testing.T) {
	f := newFakeNova()
	d := newDriver(t, f, Config{})
	ctx := context.Background()
	if err := d.RemoveFromFreePool(ctx, []string{"c1"}); err != nil || len(f.aggs) != 0 {
		t.Fatalf("removing from a missing freepool: %v, aggregates %v", err, f.aggs)
	}
	// A missing freepool is created.
	if err := d.AddToFreePool(ctx, []string{"c1", "c2", "c1"}); err != nil {
		t.Fatal(err)
	}
	fp := f.aggs[1]
	if fp == nil || fp.Name != "freepool" || fp.AZ != nil {
		t.Fatalf("freepool not created: %+v", f.aggs)
	}
	if err := d.AddToFreePool(ctx, []string{"c2"}); err != nil { // already there: no call, no error
		t.Fatal(err)
	}
	agg := compute.ReservationAggregate{ReservationID: "res-1", ProjectID: "p1"}
	if err := d.RemoveFromFreePool(ctx, []string{"c1", "c3"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddToReservation(ctx, agg, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddToReservation(ctx, agg, []string{"c1", "c4"}); err != nil {
		t.Fatal(err)
	}
	var res *fakeAgg
	for _, a := range f.aggs {
		if a.Name == "res-1" {
			res = a
		}
	}
	if res == nil || res.AZ == nil || *res.AZ != "blazar_res-1" || res.Metadata["blazar:owner"] != "p1" {
		t.Fatalf("reservation aggregate %+v", res)
	}
	if diff := cmp.Diff([]string{"c1", "c4"}, res.Hosts); diff != "" {
		t.Errorf("reservation hosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c2"}, fp.Hosts); diff != "" {
		t.Errorf("freepool hosts (-want +got):\n%s", diff)
	}
	if err := d.RemoveFromReservation(ctx, agg, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.aggs[res.ID]; !ok {
		t.Fatal("aggregate deleted while it still has a host")
	}
	if err := d.RemoveFromReservation(ctx, agg, []string{"c4"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.aggs[res.ID]; ok {
		t.Error("empty reservation aggregate not deleted")
	}
	if err := d.RemoveFromReservation(ctx, agg, []string{"c4"}); err != nil {
		t.Errorf("removing from a gone aggregate: %v", err)
	}
}

func TestServers(t *testing.T) {
	f := newFakeNova()
	f.servers = map[string]string{"s1": "c1", "s2": "c1", "s3": "c2"}
	f.lingering = 2
	d := newDriver(t, f, Config{PollInterval: time.Millisecond, ServerDeleteTimeout: time.Minute})
	ctx := context.Background()
	ids, err := d.ServersOnHost(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"s1", "s2"}, ids); diff != "" {
		t.Errorf("servers on c1 (-want +got):\n%s", diff)
	}
	if err := d.CleanupServers(ctx, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"s3": "c2"}, f.servers); diff != "" {
		t.Errorf("servers left (-want +got):\n%s", diff)
	}
	deletes := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, "DELETE servers/") {
			deletes++
		}
	}
	if deletes != 2 {
		t.Errorf("%d server deletes, want 2 (each once)", deletes)
	}
	// A server that never goes away times out.
	f.lingering = 1 << 30
	d.cfg.ServerDeleteTimeout = 5 * time.Millisecond
	if err := d.CleanupServers(ctx, []string{"c2"}); kind(err) != errs.Internal || !strings.Contains(err.Error(), "s3") {
		t.Errorf("timeout: %v", err)
	}
}

// TestPoolsIdempotent: a pool operation run again after its change already
// landed in Nova (the outbox retrying a call whose answer was lost) is a
// success, for Nova's 409 on add_host and 404 on remove_host; a 409 for
// another reason is still an error.
func TestPoolsIdempotent(t *testing.T) {
	f := newFakeNova()
	fp := f.addAgg("freepool", "")
	f.landed = map[string]bool{"c1": true}
	f.refuseAdd = map[string]bool{"c9": true}
	d := newDriver(t, f, Config{})
	ctx := context.Background()
	if err := d.AddToFreePool(ctx, []string{"c1", "c2"}); err != nil {
		t.Fatalf("add, c1 already landed: %v", err)
	}
	if diff := cmp.Diff([]string{"c1", "c2"}, fp.Hosts); diff != "" {
		t.Errorf("freepool after add (-want +got):\n%s", diff)
	}
	if err := d.RemoveFromFreePool(ctx, []string{"c1", "c2"}); err != nil {
		t.Fatalf("remove, c1 already landed: %v", err)
	}
	if len(fp.Hosts) != 0 {
		t.Errorf("freepool after remove: %v", fp.Hosts)
	}
	err := d.AddToFreePool(ctx, []string{"c9"})
	if kind(err) != errs.Internal || !strings.Contains(err.Error(), "c9") {
		t.Errorf("refused add: %v, want an internal error naming c9", err)
	}
	// The refusals were each checked against a fresh read of the aggregate.
	gets := 0
	for _, c := range f.calls {
		if c == "GET os-aggregates/"+strconv.Itoa(fp.ID) {
			gets++
		}
	}
	if gets != 3 {
		t.Errorf("%d aggregate reads, want 3 (one per refusal)", gets)
	}
}
