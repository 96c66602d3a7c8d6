package blazar_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const fipNet = "1e17587e-a7ed-4b82-a17b-4beb32523e28"

func wantContains(t *testing.T, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// pick keeps the named keys of m.
func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func column(rows []map[string]string, col string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[col])
	}
	return out
}

// providers lists the Placement resource provider names of the server.
func providers(t *testing.T, srv *Server) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+"/placement/resource_providers", nil)
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.14")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		ResourceProviders []struct {
			Name string `json:"name"`
		} `json:"resource_providers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET resource_providers: %d %v", resp.StatusCode, err)
	}
	var names []string
	for _, p := range body.ResourceProviders {
		names = append(names, p.Name)
	}
	return names
}

func TestBlazarCLIHosts(t *testing.T) {
	RequireClients(t, "blazar")
	srv := StartServer(t)

	out := srv.MustRun(t, "blazar", "host-create", "compute-1", "--extra", "gpu=true", "--extra", "vcpus=8",
		"--extra", "memory_mb=16384", "--extra", "local_gb=200", "--extra", "hypervisor_type=QEMU", "--extra", `cpu_info={"arch": "x86_64"}`)
	wantContains(t, out, "Created a new host:")
	h1 := ParseShow(t, out)
	want := map[string]string{"id": "1", "hypervisor_hostname": "compute-1", "service_name": "compute-1", "vcpus": "8", "memory_mb": "16384",
		"local_gb": "200", "hypervisor_type": "QEMU", "gpu": "true", "reservable": "True", "status": "", "updated_at": "",
		"cpu_info": "{\n\"arch\": \"x86_64\"\n}"}
	if diff := cmp.Diff(want, pick(h1, "id", "hypervisor_hostname", "service_name", "vcpus", "memory_mb", "local_gb", "hypervisor_type", "gpu", "reservable", "status", "updated_at", "cpu_info")); diff != "" {
		t.Errorf("host-create compute-1 (-want +got):\n%s", diff)
	}
	srv.MustRun(t, "blazar", "host-create", "compute-2", "--extra", "rack=r1", "--extra", "vcpus=4")
	srv.MustRun(t, "blazar", "host-create", "compute-3")

	rows := ParseList(t, srv.MustRun(t, "blazar", "host-list"))
	wantRows := []map[string]string{
		{"id": "1", "hypervisor_hostname": "compute-1", "vcpus": "8", "memory_mb": "16384", "local_gb": "200"},
		{"id": "2", "hypervisor_hostname": "compute-2", "vcpus": "4", "memory_mb": "0", "local_gb": "0"},
		{"id": "3", "hypervisor_hostname": "compute-3", "vcpus": "0", "memory_mb": "0", "local_gb": "0"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("host-list (-want +got):\n%s", diff)
	}
	rows = ParseList(t, srv.MustRun(t, "blazar", "host-list", "--sort-by", "vcpus"))
	if diff := cmp.Diff([]string{"3", "2", "1"}, column(rows, "id")); diff != "" {
		t.Errorf("host-list --sort-by vcpus ids (-want +got):\n%s", diff)
	}

	byName := ParseShow(t, srv.MustRun(t, "blazar", "host-show", "compute-1"))
	if diff := cmp.Diff(h1, byName); diff != "" {
		t.Errorf("host-show by name differs from create (-create +show):\n%s", diff)
	}
	byID := ParseShow(t, srv.MustRun(t, "blazar", "host-show", "2"))
	if diff := cmp.Diff(map[string]string{"id": "2", "hypervisor_hostname": "compute-2", "rack": "r1", "vcpus": "4"}, pick(byID, "id", "hypervisor_hostname", "rack", "vcpus")); diff != "" {
		t.Errorf("host-show 2 (-want +got):\n%s", diff)
	}

	out = srv.MustRun(t, "blazar", "host-update", "compute-2", "--extra", "rack=r2", "--extra", "ssd=true")
	wantContains(t, out, "Updated host: compute-2")
	upd := ParseShow(t, srv.MustRun(t, "blazar", "host-show", "compute-2"))
	if upd["rack"] != "r2" || upd["ssd"] != "true" || upd["updated_at"] == "" {
		t.Errorf("after host-update: %v", upd)
	}

	rows = ParseList(t, srv.MustRun(t, "blazar", "host-property-list"))
	if diff := cmp.Diff([]string{"gpu", "rack", "ssd"}, column(rows, "property")); diff != "" {
		t.Errorf("host-property-list (-want +got):\n%s", diff)
	}
	rows = ParseList(t, srv.MustRun(t, "blazar", "host-property-list", "--detail", "--all"))
	wantRows = []map[string]string{
		{"property": "gpu", "private": "False", "property_values": "['true']"},
		{"property": "rack", "private": "False", "property_values": "['r2']"},
		{"property": "ssd", "private": "False", "property_values": "['true']"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("host-property-list --detail --all (-want +got):\n%s", diff)
	}
	prop := ParseShow(t, srv.MustRun(t, "blazar", "host-property-show", "gpu"))
	if diff := cmp.Diff(map[string]string{"property": "gpu", "private": "False", "property_values": "true"}, prop); diff != "" {
		t.Errorf("host-property-show gpu (-want +got):\n%s", diff)
	}
	wantContains(t, srv.MustRun(t, "blazar", "host-property-set", "gpu", "--private"), "Updated host property: gpu")
	rows = ParseList(t, srv.MustRun(t, "blazar", "host-property-list", "--detail"))
	if diff := cmp.Diff([]string{"rack", "ssd"}, column(rows, "property")); diff != "" {
		t.Errorf("private gpu still listed without --all (-want +got):\n%s", diff)
	}
	rows = ParseList(t, srv.MustRun(t, "blazar", "host-property-list", "--detail", "--all"))
	if len(rows) != 3 || rows[0]["property"] != "gpu" || rows[0]["private"] != "True" {
		t.Errorf("host-property-list --detail --all after --private: %v", rows)
	}
	wantContains(t, srv.MustRun(t, "blazar", "host-property-set", "gpu", "--public"), "Updated host property: gpu")
	if p := ParseShow(t, srv.MustRun(t, "blazar", "host-property-show", "gpu")); p["private"] != "False" {
		t.Errorf("after --public: %v", p)
	}

	// Placement got the compute node and its blazar_ child for each host.
	if diff := cmp.Diff([]string{"compute-1", "blazar_compute-1", "compute-2", "blazar_compute-2", "compute-3", "blazar_compute-3"}, providers(t, srv)); diff != "" {
		t.Errorf("placement providers (-want +got):\n%s", diff)
	}

	// Errors as the client shows them.
	out, code := srv.Run(t, "blazar", "host-create", "compute-1")
	if code == 0 || !strings.Contains(out, "Host compute-1 is already registered.") {
		t.Errorf("duplicate host-create: exit %d\n%s", code, out)
	}
	out, code = srv.Run(t, "blazar", "host-show", "no-such-host")
	if code == 0 {
		t.Errorf("host-show of an unknown host succeeded:\n%s", out)
	}
	out, code = srv.Run(t, "blazar", "host-show", "42")
	if code == 0 || !strings.Contains(out, "Object with {'host_id': '42'} not found") {
		t.Errorf("host-show 42: exit %d\n%s", code, out)
	}
	out, code = srv.Run(t, "blazar", "host-create", "c4", "--extra", strings.Repeat("k", 65)+"=v")
	if code == 0 || !strings.Contains(out, "Extra capability key too long") {
		t.Errorf("long key: exit %d\n%s", code, out)
	}

	wantContains(t, srv.MustRun(t, "blazar", "host-delete", "compute-2"), "Deleted host: compute-2")
	wantContains(t, srv.MustRun(t, "blazar", "host-delete", "3"), "Deleted host: 3")
	rows = ParseList(t, srv.MustRun(t, "blazar", "host-list"))
	if diff := cmp.Diff([]string{"compute-1"}, column(rows, "hypervisor_hostname")); diff != "" {
		t.Errorf("host-list after deletes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"compute-1", "blazar_compute-1"}, providers(t, srv)); diff != "" {
		t.Errorf("placement providers after deletes (-want +got):\n%s", diff)
	}
}

func TestBlazarCLIFloatingIPs(t *testing.T) {
	RequireClients(t, "blazar")
	srv := StartServer(t)
	out := srv.MustRun(t, "blazar", "floatingip-create", fipNet, "192.0.2.10")
	wantContains(t, out, "Created a new floatingip:")
	f := ParseShow(t, out)
	if diff := cmp.Diff(map[string]string{"floating_network_id": fipNet, "floating_ip_address": "192.0.2.10", "reservable": "True", "subnet_id": ""},
		pick(f, "floating_network_id", "floating_ip_address", "reservable", "subnet_id")); diff != "" {
		t.Errorf("floatingip-create (-want +got):\n%s", diff)
	}
	out = srv.MustRun(t, "blazar", "floatingip-create", fipNet, "192.0.2.11", "-f", "json")
	wantContains(t, out, "Created a new floatingip:")
	var js map[string]any
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &js); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if js["floating_ip_address"] != "192.0.2.11" || js["id"] == "" {
		t.Errorf("floatingip-create -f json: %v", js)
	}
	rows := ParseList(t, srv.MustRun(t, "blazar", "floatingip-list"))
	// The client sorts by id (a UUID), so compare as sets.
	if diff := cmp.Diff([]string{"192.0.2.10", "192.0.2.11"}, column(rows, "floating_ip_address"), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("floatingip-list (-want +got):\n%s", diff)
	}
	show := ParseShow(t, srv.MustRun(t, "blazar", "floatingip-show", f["id"]))
	if diff := cmp.Diff(f, show); diff != "" {
		t.Errorf("floatingip-show (-create +show):\n%s", diff)
	}
	out, code := srv.Run(t, "blazar", "floatingip-create", fipNet, "192.0.2.999")
	if code == 0 || !strings.Contains(out, "192.0.2.999 is an invalid IP format") {
		t.Errorf("invalid IP: exit %d\n%s", code, out)
	}
	out, code = srv.Run(t, "blazar", "floatingip-create", fipNet, "192.0.2.10")
	if code == 0 || !strings.Contains(out, "already exists") {
		t.Errorf("duplicate IP: exit %d\n%s", code, out)
	}
	wantContains(t, srv.MustRun(t, "blazar", "floatingip-delete", f["id"]), "Deleted floatingip: "+f["id"])
	rows = ParseList(t, srv.MustRun(t, "blazar", "floatingip-list"))
	if diff := cmp.Diff([]string{"192.0.2.11"}, column(rows, "floating_ip_address")); diff != "" {
		t.Errorf("floatingip-list after delete (-want +got):\n%s", diff)
	}
	out, code = srv.Run(t, "blazar", "floatingip-show", f["id"])
	if code == 0 || !strings.Contains(out, "not found") {
		t.Errorf("floatingip-show of a deleted IP: exit %d\n%s", code, out)
	}
}

func TestOpenStackCLIHostsAndFloatingIPs(t *testing.T) {
	RequireClients(t, "openstack")
	srv := StartServer(t)
	out := srv.MustRun(t, "openstack", "reservation", "host", "create", "compute-9", "--extra", "gpu=false", "--extra", "vcpus=2")
	h := ParseShow(t, out)
	if diff := cmp.Diff(map[string]string{"id": "1", "hypervisor_hostname": "compute-9", "gpu": "false", "vcpus": "2"}, pick(h, "id", "hypervisor_hostname", "gpu", "vcpus")); diff != "" {
		t.Errorf("host create (-want +got):\n%s", diff)
	}
	rows := ParseList(t, srv.MustRun(t, "openstack", "reservation", "host", "list"))
	if diff := cmp.Diff([]map[string]string{{"id": "1", "hypervisor_hostname": "compute-9", "vcpus": "2", "memory_mb": "0", "local_gb": "0"}}, rows); diff != "" {
		t.Errorf("host list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(h, ParseShow(t, srv.MustRun(t, "openstack", "reservation", "host", "show", "compute-9"))); diff != "" {
		t.Errorf("host show (-create +show):\n%s", diff)
	}
	srv.MustRun(t, "openstack", "reservation", "host", "set", "compute-9", "--extra", "rack=r9")
	if s := ParseShow(t, srv.MustRun(t, "openstack", "reservation", "host", "show", "1")); s["rack"] != "r9" {
		t.Errorf("host set --extra rack=r9: %v", s)
	}
	rows = ParseList(t, srv.MustRun(t, "openstack", "reservation", "host", "property", "list", "--detail"))
	wantRows := []map[string]string{
		{"property": "gpu", "private": "False", "property_values": "['false']"},
		{"property": "rack", "private": "False", "property_values": "['r9']"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("host property list --detail (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"property": "rack", "private": "False", "property_values": "r9"},
		ParseShow(t, srv.MustRun(t, "openstack", "reservation", "host", "property", "show", "rack"))); diff != "" {
		t.Errorf("host property show rack (-want +got):\n%s", diff)
	}
	srv.MustRun(t, "openstack", "reservation", "host", "property", "set", "rack", "--private")
	rows = ParseList(t, srv.MustRun(t, "openstack", "reservation", "host", "property", "list", "--detail", "--all"))
	if len(rows) != 2 || rows[1]["property"] != "rack" || rows[1]["private"] != "True" {
		t.Errorf("after property set --private: %v", rows)
	}

	f := ParseShow(t, srv.MustRun(t, "openstack", "reservation", "floatingip", "create", fipNet, "192.0.2.11"))
	if f["floating_ip_address"] != "192.0.2.11" || f["floating_network_id"] != fipNet {
		t.Errorf("floatingip create: %v", f)
	}
	rows = ParseList(t, srv.MustRun(t, "openstack", "reservation", "floatingip", "list"))
	if diff := cmp.Diff([]string{f["id"]}, column(rows, "id")); diff != "" {
		t.Errorf("floatingip list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(f, ParseShow(t, srv.MustRun(t, "openstack", "reservation", "floatingip", "show", f["id"]))); diff != "" {
		t.Errorf("floatingip show (-create +show):\n%s", diff)
	}
	srv.MustRun(t, "openstack", "reservation", "floatingip", "delete", f["id"])
	if out := srv.MustRun(t, "openstack", "reservation", "floatingip", "list"); strings.Contains(out, f["id"]) {
		t.Errorf("floating IP still listed after delete:\n%s", out)
	}

	srv.MustRun(t, "openstack", "reservation", "host", "delete", "compute-9")
	if out := srv.MustRun(t, "openstack", "reservation", "host", "list"); strings.Contains(out, "compute-9") {
		t.Errorf("host still listed after delete:\n%s", out)
	}
	out, code := srv.Run(t, "openstack", "reservation", "host", "show", "7")
	if code == 0 || !strings.Contains(out, "not found") {
		t.Errorf("host show 7: exit %d\n%s", code, out)
	}
}

// TestBlazarCLIReservedResources: a host or floating IP held by a lease
// cannot be deleted, and the host allocations show the reservation.
func TestBlazarCLIReservedResources(t *testing.T) {
	RequireClients(t, "blazar")
	srv := StartServer(t)
	srv.MustRun(t, "blazar", "host-create", "compute-1", "--extra", "vcpus=4")
	srv.MustRun(t, "blazar", "host-create", "compute-2", "--extra", "vcpus=1")
	srv.MustRun(t, "blazar", "lease-create", "--physical-reservation", `min=1,max=1,hypervisor_properties=[">=", "$vcpus", "2"],resource_properties=`,
		"--start-date", "2030-01-01 12:00", "--end-date", "2030-01-02 12:00", "lease1")
	out, code := srv.Run(t, "blazar", "host-delete", "compute-1")
	if code == 0 || !strings.Contains(out, "ERROR: Can't delete host 1. The host is reserved.") {
		t.Errorf("host-delete of a reserved host: exit %d\n%s", code, out)
	}
	resp, err := AdminHTTP.Get(srv.Endpoint + "/os-hosts/allocations")
	if err != nil {
		t.Fatal(err)
	}
	var allocs struct {
		Allocations []struct {
			ResourceID   string `json:"resource_id"`
			Reservations []struct {
				StartDate string `json:"start_date"`
				EndDate   string `json:"end_date"`
			} `json:"reservations"`
		} `json:"allocations"`
	}
	err = json.NewDecoder(resp.Body).Decode(&allocs)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs.Allocations) != 2 || allocs.Allocations[0].ResourceID != "1" || len(allocs.Allocations[0].Reservations) != 1 ||
		allocs.Allocations[0].Reservations[0].StartDate != "2030-01-01T12:00:00.000000" || len(allocs.Allocations[1].Reservations) != 0 {
		t.Errorf("allocations: %+v", allocs)
	}
	// The unreserved host goes.
	wantContains(t, srv.MustRun(t, "blazar", "host-delete", "compute-2"), "Deleted host: compute-2")

	f := ParseShow(t, srv.MustRun(t, "blazar", "floatingip-create", fipNet, "192.0.2.10"))
	srv.MustRun(t, "blazar", "lease-create", "--reservation",
		`resource_type=virtual:floatingip,network_id=`+fipNet+`,amount=1,required_floatingips=["192.0.2.10"]`,
		"--start-date", "2030-04-01 12:00", "--end-date", "2030-04-02 12:00", "lease-fip")
	out, code = srv.Run(t, "blazar", "floatingip-delete", f["id"])
	if code == 0 || !strings.Contains(out, "is reserved") {
		t.Errorf("floatingip-delete of a reserved IP: exit %d\n%s", code, out)
	}
	srv.MustRun(t, "blazar", "lease-delete", "lease-fip")
	srv.MustRun(t, "blazar", "floatingip-delete", f["id"])
	srv.MustRun(t, "blazar", "lease-delete", "lease1")
	wantContains(t, srv.MustRun(t, "blazar", "host-delete", "compute-1"), "Deleted host: compute-1")
}

func TestParseTables(t *testing.T) {
	list := `+----+---------------------+-------+
| id | hypervisor_hostname | vcpus |
+----+---------------------+-------+
| 1  | compute-1           |     8 |
| 2  | compute-2           |     4 |
+----+---------------------+-------+
`
	want := []map[string]string{{"id": "1", "hypervisor_hostname": "compute-1", "vcpus": "8"}, {"id": "2", "hypervisor_hostname": "compute-2", "vcpus": "4"}}
	if diff := cmp.Diff(want, ParseList(t, list)); diff != "" {
		t.Errorf("ParseList (-want +got):\n%s", diff)
	}
	if got := ParseList(t, "\n"); got != nil {
		t.Errorf("empty list parsed as %v", got)
	}
	show := `Created a new host:
+----------+------------------+
| Field    | Value            |
+----------+------------------+
| cpu_info | {                |
|          |     "arch": "x"  |
|          | }                |
| id       | 1                |
+----------+------------------+
`
	if diff := cmp.Diff(map[string]string{"cpu_info": "{\n\"arch\": \"x\"\n}", "id": "1"}, ParseShow(t, show)); diff != "" {
		t.Errorf("ParseShow (-want +got):\n%s", diff)
	}
}
