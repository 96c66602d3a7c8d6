package blazar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestInstanceReservationsCLI drives virtual:instance reservations with
// the real blazar and openstack CLIs, on SQLite and on MariaDB: create
// with each affinity value, show, list, update amount and sizes, delete,
// the refusals, and the Placement side over the Placement API.
func TestInstanceReservationsCLI(t *testing.T) {
	RequireClients(t, "blazar", "openstack")
	for _, d := range dbtest.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			srv := StartServerOn(t, dbtest.URLDialect(t, d))
			for i := 1; i <= 3; i++ {
				srv.MustRun(t, "blazar", "host-create", fmt.Sprintf("compute-%d", i),
					"--extra", "vcpus=32", "--extra", "memory_mb=65536", "--extra", "local_gb=1000")
			}
			t.Run("commands", func(t *testing.T) { instanceCommands(t, srv) })
			t.Run("errors", func(t *testing.T) { instanceErrors(t, srv) })
			t.Run("placement", func(t *testing.T) { instancePlacement(t, srv) })
		})
	}
}

const instanceWindow = "--start-date=2030-02-01 12:00"

// reservationOf is the lease's only reservation over the API.
func reservationOf(t *testing.T, srv *Server, leaseID string) map[string]any {
	t.Helper()
	rs := apiLease(t, srv, leaseID)["reservations"].([]any)
	if len(rs) != 1 {
		t.Fatalf("lease %s: %d reservations", leaseID, len(rs))
	}
	return rs[0].(map[string]any)
}

// slotHosts is the number of hosts holding a reservation
// (/v1/os-hosts/allocations).
func slotHosts(t *testing.T, srv *Server, resID string) int {
	t.Helper()
	resp, err := AdminHTTP.Get(srv.Endpoint + "/os-hosts/allocations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Allocations []struct {
			ResourceID   string `json:"resource_id"`
			Reservations []struct {
				ID string `json:"id"`
			} `json:"reservations"`
		} `json:"allocations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range body.Allocations {
		for _, r := range a.Reservations {
			if r.ID == resID {
				n++
			}
		}
	}
	return n
}

func leaseIDByName(t *testing.T, srv *Server, name string) string {
	t.Helper()
	for _, r := range ParseList(t, srv.MustRun(t, "blazar", "lease-list")) {
		if r["name"] == name {
			return r["id"]
		}
	}
	t.Fatalf("no lease %s", name)
	return ""
}

func instanceCommands(t *testing.T, srv *Server) {
	for i, tc := range []struct {
		cli      string
		affinity string // "" lets the CLI send its default "None"
		want     any
		hosts    int // 0: any
	}{
		{"blazar", "", nil, 0},
		{"blazar", ",affinity=True", true, 1},
		{"blazar", ",affinity=False", false, 2},
		{"openstack", "", nil, 0},
		{"openstack", ",affinity=True", true, 1},
		{"openstack", ",affinity=False", false, 2},
	} {
		name := fmt.Sprintf("inst-%s-%d", tc.cli, i)
		spec := "resource_type=virtual:instance,vcpus=1,memory_mb=1024,disk_gb=10,amount=2" + tc.affinity
		args := []string{"lease-create", "--reservation", spec, instanceWindow, "--end-date", "2030-02-02 12:00", name}
		if tc.cli == "openstack" {
			args = append([]string{"reservation", "lease", "create"}, args[1:]...)
		}
		srv.MustRun(t, tc.cli, args...)
		id := leaseIDByName(t, srv, name)
		r := reservationOf(t, srv, id)
		rid, _ := r["id"].(string)
		if r["resource_type"] != "virtual:instance" || r["flavor_id"] != rid || r["affinity"] != tc.want ||
			r["amount"] != 2.0 || r["vcpus"] != 1.0 || r["memory_mb"] != 1024.0 || r["disk_gb"] != 10.0 ||
			r["server_group_id"] != nil || r["status"] != "pending" {
			t.Errorf("%s %s: reservation %v", tc.cli, spec, r)
		}
		for _, k := range []string{"aggregate_id", "server_group_id", "resource_properties"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%s: reservation lacks %s", name, k)
			}
		}
		if n := slotHosts(t, srv, rid); n < 1 || (tc.hosts > 0 && n != tc.hosts) {
			t.Errorf("%s: slots on %d hosts, want %d", name, n, tc.hosts)
		}
		// show, by name and id, with both CLIs.
		f := ParseShow(t, srv.MustRun(t, "blazar", "lease-show", name))
		wantContains(t, f["reservations"], `"resource_type": "virtual:instance"`, `"flavor_id": "`+rid+`"`)
		f = ParseShow(t, srv.MustRun(t, "openstack", "reservation", "lease", "show", id))
		wantContains(t, f["reservations"], `"amount": 2`)
		// update amount and sizes while pending.
		if tc.cli == "blazar" {
			srv.MustRun(t, "blazar", "lease-update", "--reservation", "id="+rid+",amount=3,vcpus=2", name)
		} else {
			srv.MustRun(t, "openstack", "reservation", "lease", "set", "--reservation", "id="+rid+",amount=3,memory_mb=2048", name)
		}
		r = reservationOf(t, srv, id)
		if r["amount"] != 3.0 || (tc.cli == "blazar" && r["vcpus"] != 2.0) || (tc.cli == "openstack" && r["memory_mb"] != 2048.0) {
			t.Errorf("%s after update: %v", name, r)
		}
		if n := slotHosts(t, srv, rid); tc.want == false && n != 3 || tc.want == true && n != 1 {
			t.Errorf("%s after update: slots on %d hosts", name, n)
		}
	}
	rows := ParseList(t, srv.MustRun(t, "openstack", "reservation", "lease", "list"))
	names := column(rows, "name")
	sort.Strings(names)
	if len(names) != 6 || !strings.HasPrefix(names[0], "inst-") {
		t.Errorf("lease list: %v", names)
	}
	// A reserved host cannot be deleted.
	out, code := srv.Run(t, "blazar", "host-delete", "compute-1")
	if code == 0 || !strings.Contains(out, "reserved") {
		t.Errorf("host-delete of a host with instance slots: exit %d\n%s", code, out)
	}
	for _, r := range rows {
		if strings.Contains(r["name"], "openstack") {
			srv.MustRun(t, "openstack", "reservation", "lease", "delete", r["name"])
		} else {
			srv.MustRun(t, "blazar", "lease-delete", r["name"])
		}
	}
	if rows := ParseList(t, srv.MustRun(t, "blazar", "lease-list")); len(rows) != 0 {
		t.Errorf("leases left: %v", rows)
	}
}

func instanceErrors(t *testing.T, srv *Server) {
	create := func(spec string) []string {
		return []string{"lease-create", "--reservation", "resource_type=virtual:instance," + spec, instanceWindow, "--end-date", "2030-02-02 12:00", "bad"}
	}
	for i, tc := range []struct{ spec, want string }{
		{"vcpus=4,memory_mb=4096,disk_gb=10,amount=25", "Not enough hosts available: 25 slots of 4 VCPU/4 GiB/10 GB disk needed, 24 free in the window on 3 matching hosts"},
		{"vcpus=1,memory_mb=512,disk_gb=1,amount=4,affinity=False", "4 slots of 1 VCPU/512 MiB/1 GB disk needed on distinct hosts (anti-affinity), 3 of the 3 matching hosts have a free slot"},
		{"vcpus=4,memory_mb=512,disk_gb=1,amount=9,affinity=True", "on one host (affinity), at most 8 free on one host"},
		{"vcpus=0,memory_mb=512,disk_gb=1,amount=1", "Malformed parameter vcpus"},
		{"vcpus=x,memory_mb=512,disk_gb=1,amount=1", "Malformed parameter vcpus"},
		{"vcpus=1,memory_mb=-5,disk_gb=1,amount=1", "Malformed parameter memory_mb"},
		{"vcpus=1,memory_mb=512,disk_gb=1,amount=0", "Malformed parameter amount"},
		{"vcpus=1,memory_mb=512,disk_gb=1,amount=1,affinity=maybe", "Malformed parameter affinity"},
		{"vcpus=1,memory_mb=512,disk_gb=1", "Malformed parameter amount"},
	} {
		// The two CLIs send the same request: alternate to save time.
		if i%2 == 0 {
			wantFail(t, srv, tc.want, "blazar", create(tc.spec)...)
		} else {
			wantFail(t, srv, tc.want, "openstack", append([]string{"reservation", "lease", "create"}, create(tc.spec)[1:]...)...)
		}
	}
}

// placementGet GETs a Placement path as the admin at microversion 1.29.
func placementGet(t *testing.T, srv *Server, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+"/placement"+path, nil)
	req.Header.Set("OpenStack-API-Version", "placement 1.29")
	resp, err := AdminHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// instancePlacement: a lease starting now gets its class at create, the
// child inventories at start (candidates for the class are exactly its
// hosts, with one unit per slot), and loses both when deleted.
func instancePlacement(t *testing.T, srv *Server) {
	srv.MustRun(t, "blazar", "lease-create", "--reservation", "resource_type=virtual:instance,vcpus=2,memory_mb=4096,disk_gb=10,amount=5",
		"--end-date", "2030-02-02 12:00", "now-inst")
	id := leaseIDByName(t, srv, "now-inst")
	waitLeaseStatus(t, AdminHTTP, srv.URL, id, "ACTIVE")
	rid := reservationOf(t, srv, id)["id"].(string)
	class := "CUSTOM_RESERVATION_" + strings.ReplaceAll(strings.ToUpper(rid), "-", "_")
	if code := placementGet(t, srv, "/resource_classes/"+class, nil); code != 200 {
		t.Fatalf("GET class %s: %d", class, code)
	}
	var cands struct {
		AllocationRequests []struct {
			Allocations map[string]struct {
				Resources map[string]int `json:"resources"`
			} `json:"allocations"`
		} `json:"allocation_requests"`
		ProviderSummaries map[string]struct {
			Resources map[string]struct {
				Capacity int `json:"capacity"`
			} `json:"resources"`
			ParentProviderUUID *string `json:"parent_provider_uuid"`
		} `json:"provider_summaries"`
	}
	if code := placementGet(t, srv, "/allocation_candidates?resources="+class+":1", &cands); code != 200 {
		t.Fatalf("allocation candidates: %d", code)
	}
	capacity := 0
	for _, ar := range cands.AllocationRequests {
		for rp, a := range ar.Allocations {
			ps := cands.ProviderSummaries[rp]
			if a.Resources[class] != 1 || ps.ParentProviderUUID == nil {
				t.Errorf("candidate %s: %v (parent %v)", rp, a.Resources, ps.ParentProviderUUID)
			}
			var rp2 struct {
				Name string `json:"name"`
			}
			placementGet(t, srv, "/resource_providers/"+rp, &rp2)
			if !strings.HasPrefix(rp2.Name, "blazar_compute-") {
				t.Errorf("candidate provider %s is %q, not a host's child", rp, rp2.Name)
			}
			capacity += ps.Resources[class].Capacity
		}
	}
	if n := slotHosts(t, srv, rid); len(cands.AllocationRequests) != n || capacity != 5 {
		t.Errorf("candidates: %d providers with %d units, want %d hosts with 5", len(cands.AllocationRequests), capacity, n)
	}
	// Growing the active reservation grows the inventory.
	srv.MustRun(t, "blazar", "lease-update", "--reservation", "id="+rid+",amount=6", "now-inst")
	placementGet(t, srv, "/allocation_candidates?resources="+class+":1", &cands)
	capacity = 0
	for _, ps := range cands.ProviderSummaries {
		capacity += ps.Resources[class].Capacity
	}
	if capacity != 6 {
		t.Errorf("after amount=6: %d units", capacity)
	}
	wantFail(t, srv, "only amount can be changed", "blazar", "lease-update", "--reservation", "id="+rid+",vcpus=1", "now-inst")
	srv.MustRun(t, "blazar", "lease-delete", "now-inst")
	if code := placementGet(t, srv, "/resource_classes/"+class, nil); code != 404 {
		t.Errorf("class after delete: %d", code)
	}
}

// TestInstanceConcurrentReplicas: concurrent instance lease creates on
// two replicas sharing one database never book more slots than the
// hosts hold, and fill them up.
func TestInstanceConcurrentReplicas(t *testing.T) {
	for _, d := range dbtest.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			p := startPair(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for i := range 4 {
				code, b, err := p.do(ctx, "POST", p.servers[i%2].URL+"/v1/os-hosts",
					fmt.Sprintf(`{"name": "ic-%d", "vcpus": "8", "memory_mb": "16384", "local_gb": "100"}`, i))
				if err != nil || code != http.StatusCreated {
					t.Fatalf("host ic-%d: %d %v %s", i, code, err, b)
				}
			}
			// 4 hosts × 4 slots of 2 VCPU; 40 leases of 1–3 slots.
			const clients, leases, capacity = 8, 40, 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			booked := 0
			var failures []string
			for c := range clients {
				wg.Go(func() {
					base := p.servers[c%2].URL
					for i := c; i < leases; i += clients {
						// Odd leases on one host each: creates on disjoint
						// hosts run side by side (and race for class ids).
						amount, affinity := 1+i%3, []string{"null", "true"}[i%2]
						body := fmt.Sprintf(`{"name": "ic-%d", "start_date": "2030-03-01 12:00", "end_date": "2030-03-02 12:00", "reservations": [{"resource_type": "virtual:instance", "amount": %d, "vcpus": 2, "memory_mb": 1024, "disk_gb": 1, "affinity": %s, "resource_properties": ""}], "events": []}`, i, amount, affinity)
						code, b, err := p.do(ctx, "POST", base+"/v1/leases", body)
						mu.Lock()
						switch {
						case err == nil && code == http.StatusCreated:
							booked += amount
						case err == nil && code == http.StatusConflict && strings.Contains(string(b), "Not enough hosts available"):
						default:
							failures = append(failures, fmt.Sprintf("lease %d: %d %v %s", i, code, err, b))
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			// Affinity may leave a slot or so free on a host.
			if booked > capacity || booked < capacity-4 {
				t.Errorf("%d slots booked on hosts holding %d", booked, capacity)
			}
		})
	}
}
