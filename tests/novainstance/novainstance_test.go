package novainstance_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// bootTimeout bounds a boot's wait for ACTIVE or ERROR.
const bootTimeout = 120 * time.Second

// Provider is what the tests read of a resource provider.
type Provider struct {
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	ParentUUID string `json:"parent_provider_uuid"`
	RootUUID   string `json:"root_provider_uuid"`
}

// providersNamed lists the providers named name.
func (e *Env) providersNamed(t testing.TB, tok, name string) []Provider {
	t.Helper()
	var out struct {
		Providers []Provider `json:"resource_providers"`
	}
	e.placement(t, "/resource_providers?name="+name, tok, http.StatusOK, &out)
	return out.Providers
}

// inventoryOf is provider uuid's inventory total of class (0 when it
// has none).
func (e *Env) inventoryOf(t testing.TB, tok, uuid, class string) int {
	t.Helper()
	var out struct {
		Inventories map[string]struct {
			Total int `json:"total"`
		} `json:"inventories"`
	}
	e.placement(t, "/resource_providers/"+uuid+"/inventories", tok, http.StatusOK, &out)
	return out.Inventories[class].Total
}

// usageOf is provider uuid's usage of class.
func (e *Env) usageOf(t testing.TB, tok, uuid, class string) int {
	t.Helper()
	var out struct {
		Usages map[string]int `json:"usages"`
	}
	e.placement(t, "/resource_providers/"+uuid+"/usages", tok, http.StatusOK, &out)
	return out.Usages[class]
}

// Lease is what the tests read of a lease.
type Lease struct {
	ID           string        `json:"id"`
	Status       string        `json:"status"`
	ProjectID    string        `json:"project_id"`
	StartDate    string        `json:"start_date"`
	Degraded     bool          `json:"degraded"`
	TrustID      *string       `json:"trust_id"`
	Reservations []Reservation `json:"reservations"`
}

// Reservation is what the tests read of an instance reservation.
type Reservation struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	ResourceType  string  `json:"resource_type"`
	Amount        int     `json:"amount"`
	VCPUs         int     `json:"vcpus"`
	MemoryMB      int     `json:"memory_mb"`
	DiskGB        int     `json:"disk_gb"`
	Affinity      any     `json:"affinity"`
	FlavorID      string  `json:"flavor_id"`
	ServerGroupID *string `json:"server_group_id"`
	AggregateID   *int64  `json:"aggregate_id"`
}

func (e *Env) getLease(t testing.TB, tok, id string) Lease {
	t.Helper()
	var out struct{ Lease Lease }
	e.blazar(t, "GET", "/leases/"+id, tok, http.StatusOK, nil, &out)
	return out.Lease
}

// waitLease polls lease id until ok accepts it (bounded).
func (e *Env) waitLease(t testing.TB, tok, id string, timeout time.Duration, what string, ok func(Lease) bool) Lease {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := e.getLease(t, tok, id)
		if ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s not %s after %s: %+v", id, what, timeout, l)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitFor polls cond every 200 ms until it holds, failing after timeout
// with what.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nextMinute is the lease date of the first whole minute at least lead
// from now.
func nextMinute(lead time.Duration) string {
	return time.Now().UTC().Add(lead).Truncate(time.Minute).Add(time.Minute).Format("2006-01-02 15:04")
}

// reservationClass is the Placement class of reservation id.
func reservationClass(id string) string {
	return "CUSTOM_RESERVATION_" + strings.ReplaceAll(strings.ToUpper(id), "-", "_")
}

// registered makes sure Leasehold manages compute1 and compute2 (once for
// the package) and returns their child providers' uuids by host name.
func (e *Env) registered(t *testing.T, admin string) map[string]string {
	t.Helper()
	children := map[string]string{}
	for _, h := range []string{"compute1", "compute2"} {
		if ps := e.providersNamed(t, admin, "blazar_"+h); len(ps) == 1 {
			children[h] = ps[0].UUID
			continue
		}
		e.blazar(t, "POST", "/os-hosts", admin, http.StatusCreated, map[string]any{"name": h}, nil)
		ps := e.providersNamed(t, admin, "blazar_"+h)
		if len(ps) != 1 {
			t.Fatalf("child providers blazar_%s: %+v, want one", h, ps)
		}
		children[h] = ps[0].UUID
	}
	return children
}

// TestInstanceReservationOnNova: Nova's computes are providers in
// Leasehold's Placement, which Leasehold's hosts reuse (one provider per
// name, Nova's uuid) with their blazar_<host> children under them; a
// member's virtual:instance lease of 3 slots over 2 hosts gives a private
// flavor with which 3 servers boot, each on a reserved host's slot,
// while the 4th finds no valid host and another project cannot see the
// flavor; at the lease's end the servers, the flavor, the inventories
// and the class are gone. No scheduler filter but a pass-all one runs:
// Placement alone keeps the servers on the slots.
func TestInstanceReservationOnNova(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	admin := e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin")
	demo := e.KS.MustIssue(t, "demo", e.KS.DemoPassword, "demo")
	other := e.KS.MustIssue(t, e.OtherUser, e.OtherPassword, "other")

	// Nova's compute nodes are providers here, with Nova's uuids.
	hvs, err := n.Hypervisors(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	hvUUID := map[string]string{}
	for _, hv := range hvs {
		hvUUID[hv.Hostname] = hv.ID
	}
	for _, h := range novaHosts {
		var ps []Provider
		waitFor(t, 60*time.Second, "Nova's provider "+h+" in Leasehold's Placement", func() bool {
			ps = e.providersNamed(t, admin, h)
			return len(ps) == 1
		})
		if ps[0].UUID != hvUUID[h] || ps[0].ParentUUID != "" {
			t.Errorf("provider %s: %+v, want the root provider of Nova's hypervisor %s", h, ps[0], hvUUID[h])
		}
	}
	children := e.registered(t, admin)
	for h, child := range children {
		if ps := e.providersNamed(t, admin, h); len(ps) != 1 || ps[0].UUID != hvUUID[h] {
			t.Errorf("providers named %s after the host's registration: %+v, want only Nova's %s", h, ps, hvUUID[h])
		}
		var c Provider
		e.placement(t, "/resource_providers/"+child, admin, http.StatusOK, &c)
		if c.ParentUUID != hvUUID[h] {
			t.Errorf("blazar_%s: %+v, want a child of Nova's provider %s", h, c, hvUUID[h])
		}
	}

	// The lease: 3 slots, any split, over the 2 hosts.
	const amount = 3
	var created struct{ Lease Lease }
	e.blazar(t, "POST", "/leases", demo, http.StatusCreated, map[string]any{
		"name": "slots", "start_date": "now", "end_date": "2099-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "virtual:instance", "amount": amount,
			"vcpus": 1, "memory_mb": 512, "disk_gb": 1, "affinity": "None", "resource_properties": ""}},
		"events": []any{},
	}, &created)
	lease := e.waitLease(t, demo, created.Lease.ID, 60*time.Second, "active", func(l Lease) bool {
		return l.Status == "ACTIVE" && len(l.Reservations) == 1 && l.Reservations[0].Status == "active"
	})
	res := lease.Reservations[0]
	class := reservationClass(res.ID)
	if res.FlavorID != res.ID || res.AggregateID != nil {
		t.Errorf("reservation %+v: want flavor_id = its id and aggregate_id null", res)
	}

	// Placement: the class, and one unit per slot on the children.
	e.placement(t, "/resource_classes/"+class, admin, http.StatusOK, nil)
	slots := map[string]int{}
	total := 0
	for h, child := range children {
		if k := e.inventoryOf(t, admin, child, class); k > 0 {
			slots[h] = k
			total += k
		}
	}
	if total != amount {
		t.Fatalf("inventories of %s: %v, want %d units in all", class, slots, amount)
	}
	t.Logf("reservation %s holds %v", res.ID, slots)

	// The private flavor: the member sees it once access is given, the
	// other project never.
	flavor := "/flavors/" + res.FlavorID
	waitFor(t, 60*time.Second, "the member's access to flavor "+res.FlavorID, func() bool {
		return n.Call(ctx, "GET", flavor, demo, nil, nil) == nil
	})
	var fl struct {
		Flavor struct {
			Name   string `json:"name"`
			VCPUs  int    `json:"vcpus"`
			RAM    int    `json:"ram"`
			Disk   int    `json:"disk"`
			Public bool   `json:"os-flavor-access:is_public"`
			Extra  map[string]string
		} `json:"flavor"`
	}
	if err := n.Call(ctx, "GET", flavor, admin, nil, &fl); err != nil {
		t.Fatal(err)
	}
	if fl.Flavor.Name != "reservation:"+res.ID || fl.Flavor.VCPUs != 1 || fl.Flavor.RAM != 512 || fl.Flavor.Disk != 1 || fl.Flavor.Public {
		t.Errorf("flavor %+v, want the private reservation:%s of 1 VCPU, 512 MB, 1 GB", fl.Flavor, res.ID)
	}
	var specs struct {
		ExtraSpecs map[string]string `json:"extra_specs"`
	}
	if err := n.Call(ctx, "GET", flavor+"/os-extra_specs", admin, nil, &specs); err != nil || specs.ExtraSpecs["resources:"+class] != "1" {
		t.Errorf("flavor extra specs %v (%v), want resources:%s=1", specs.ExtraSpecs, err, class)
	}
	if err := n.Call(ctx, "GET", flavor, other, nil, nil); novatest.StatusOf(err) != http.StatusNotFound {
		t.Errorf("another project reading the flavor: %v, want 404", err)
	}
	if _, err := n.Boot(ctx, other, "stranger", res.FlavorID, nil); novatest.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("another project booting with the flavor: %v, want 400 (flavor not found)", err)
	}

	// amount servers land on the slots; one more finds no valid host.
	var servers []string
	on := map[string]int{}
	for i := range amount {
		s, err := n.BootAndWait(ctx, demo, "slot", res.FlavorID, nil, bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s.ID)
		h, err := n.ServerHost(ctx, admin, s.ID)
		if s.Status != "ACTIVE" || err != nil || slots[h] == 0 {
			t.Fatalf("server %d: %+v on %q (%v), want ACTIVE on a reserved host of %v\n%s", i, s, h, err, slots, n.LogTail(3000))
		}
		on[h]++
	}
	if !maps.Equal(on, slots) {
		t.Errorf("servers per host %v, want the slots %v", on, slots)
	}
	for h, k := range slots {
		if u := e.usageOf(t, admin, children[h], class); u != k {
			t.Errorf("usage of %s on blazar_%s: %d, want %d", class, h, u, k)
		}
	}
	extra, err := n.BootAndWait(ctx, demo, "one-too-many", res.FlavorID, nil, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	servers = append(servers, extra.ID)
	if extra.Status != "ERROR" || !strings.Contains(extra.Fault, "No valid host") {
		t.Errorf("server %d of a %d-slot reservation: %+v, want ERROR with no valid host", amount+1, amount, extra)
	}

	// The end, moved to the next whole minute: servers, flavor,
	// inventories and class go.
	end := nextMinute(5 * time.Second)
	e.blazar(t, "PUT", "/leases/"+lease.ID, demo, http.StatusOK, map[string]any{"end_date": end}, nil)
	for _, id := range servers {
		if err := n.WaitGone(ctx, admin, id, 150*time.Second); err != nil {
			t.Fatalf("a server of the flavor after the lease's end (%s): %v", end, err)
		}
	}
	e.waitLease(t, demo, lease.ID, 60*time.Second, "terminated", func(l Lease) bool {
		return l.Status == "TERMINATED" && !l.Degraded
	})
	waitFor(t, 60*time.Second, "flavor "+res.FlavorID+" deleted", func() bool {
		return novatest.StatusOf(n.Call(ctx, "GET", flavor, admin, nil, nil)) == http.StatusNotFound
	})
	// Placement is released once Nova removed the servers' allocations.
	waitFor(t, 60*time.Second, "inventories and class "+class+" removed", func() bool {
		for _, child := range children {
			if e.inventoryOf(t, admin, child, class) != 0 {
				return false
			}
		}
		code, _ := call(t, "GET", e.LH+"/placement/resource_classes/"+class, admin,
			map[string]string{"OpenStack-API-Version": placementVersion}, nil, nil)
		return code == http.StatusNotFound
	})
}

// TestFlavorInstanceWithAffinity: a flavor:instance lease made from
// Nova's m1.tiny with affinity true gets a private copy of the flavor and
// the server group reservation:<id> of policy affinity, shown as its
// server_group_id, made with the lease's Keystone trust so that it
// belongs to the member's project; the member's servers booted with the
// flavor and the hint group=<server_group_id> run on the one reserved
// host and are the group's members; deleting the lease deletes the
// servers, the flavor and the group.
func TestFlavorInstanceWithAffinity(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	admin := e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin")
	demo := e.KS.MustIssue(t, "demo", e.KS.DemoPassword, "demo")
	children := e.registered(t, admin)

	const amount = 2
	var created struct{ Lease Lease }
	e.blazar(t, "POST", "/leases", demo, http.StatusCreated, map[string]any{
		"name": "tiny", "start_date": "now", "end_date": "2099-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "flavor:instance", "flavor_id": "1", "amount": amount, "affinity": "True"}},
		"events":       []any{},
	}, &created)
	lease := e.waitLease(t, demo, created.Lease.ID, 60*time.Second, "active with its server group", func(l Lease) bool {
		return l.Status == "ACTIVE" && len(l.Reservations) == 1 && l.Reservations[0].Status == "active" && l.Reservations[0].ServerGroupID != nil
	})
	res := lease.Reservations[0]
	if res.ResourceType != "flavor:instance" || res.FlavorID != res.ID || res.VCPUs != 1 || res.MemoryMB != 512 || res.DiskGB != 1 || res.Affinity != true {
		t.Errorf("reservation %+v: want m1.tiny's 1 VCPU, 512 MB, 1 GB, affinity true, flavor_id = its id", res)
	}
	group := *res.ServerGroupID
	var sg struct {
		ServerGroup struct {
			Name   string `json:"name"`
			Policy string `json:"policy"`
		} `json:"server_group"`
	}
	if err := n.Call(ctx, "GET", "/os-server-groups/"+group, admin, nil, &sg); err != nil {
		t.Fatal(err)
	}
	if sg.ServerGroup.Name != "reservation:"+res.ID || sg.ServerGroup.Policy != "affinity" {
		t.Errorf("server group %+v, want reservation:%s with policy affinity", sg.ServerGroup, res.ID)
	}
	e.checkMemberGroup(t, demo, group, lease)
	class := reservationClass(res.ID)
	reserved := ""
	for h, child := range children {
		if k := e.inventoryOf(t, admin, child, class); k == amount {
			reserved = h
		} else if k != 0 {
			t.Errorf("blazar_%s has %d of %s, want all %d slots on one host", h, k, class, amount)
		}
	}
	if reserved == "" {
		t.Fatalf("no host holds the %d slots of %s", amount, class)
	}
	flavor := "/flavors/" + res.FlavorID
	waitFor(t, 60*time.Second, "the member's access to flavor "+res.FlavorID, func() bool {
		return n.Call(ctx, "GET", flavor, demo, nil, nil) == nil
	})
	var servers []string
	for range amount {
		s, err := n.BootAndWait(ctx, demo, "grouped", res.FlavorID, map[string]any{"group": group}, bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s.ID)
		if h, err := n.ServerHost(ctx, admin, s.ID); s.Status != "ACTIVE" || err != nil || h != reserved {
			t.Fatalf("server %+v on %q (%v), want ACTIVE on %s\n%s", s, h, err, reserved, n.LogTail(3000))
		}
	}
	if members := e.groupMembers(t, admin, group); !cmp.Equal(members, sorted(servers)) {
		t.Errorf("members of group %s: %v, want the member's servers %v", group, members, sorted(servers))
	}

	e.blazar(t, "DELETE", "/leases/"+lease.ID, demo, http.StatusNoContent, nil, nil)
	for _, id := range servers {
		if err := n.WaitGone(ctx, admin, id, 150*time.Second); err != nil {
			t.Fatalf("a server of the flavor after the lease's deletion: %v", err)
		}
	}
	waitFor(t, 60*time.Second, "flavor and server group deleted", func() bool {
		return novatest.StatusOf(n.Call(ctx, "GET", flavor, admin, nil, nil)) == http.StatusNotFound &&
			novatest.StatusOf(n.Call(ctx, "GET", "/os-server-groups/"+group, admin, nil, nil)) == http.StatusNotFound
	})
	waitFor(t, 60*time.Second, "class "+class+" removed", func() bool {
		code, _ := call(t, "GET", e.LH+"/placement/resource_classes/"+class, admin,
			map[string]string{"OpenStack-API-Version": placementVersion}, nil, nil)
		return code == http.StatusNotFound
	})
}

// TestAntiAffinityGroupInMemberProject: a virtual:instance lease of 2
// slots with affinity false gets the server group reservation:<id> of
// policy anti-affinity in the member's project (made with the lease's
// trust); the member boots 2 servers with the flavor and the hint
// group=<server_group_id>, and they run on different hosts as the
// group's members; deleting the lease deletes the servers, the group and
// the lease's trust.
func TestAntiAffinityGroupInMemberProject(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	ctx := context.Background()
	admin := e.KS.MustIssue(t, "admin", e.KS.AdminPassword, "admin")
	demo := e.KS.MustIssue(t, "demo", e.KS.DemoPassword, "demo")
	e.registered(t, admin)

	const amount = 2
	var created struct{ Lease Lease }
	e.blazar(t, "POST", "/leases", demo, http.StatusCreated, map[string]any{
		"name": "spread", "start_date": "now", "end_date": "2099-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "virtual:instance", "amount": amount, "vcpus": 1, "memory_mb": 512,
			"disk_gb": 1, "affinity": false, "resource_properties": ""}},
		"events": []any{},
	}, &created)
	lease := e.waitLease(t, demo, created.Lease.ID, 60*time.Second, "active with its server group", func(l Lease) bool {
		return l.Status == "ACTIVE" && len(l.Reservations) == 1 && l.Reservations[0].Status == "active" && l.Reservations[0].ServerGroupID != nil
	})
	if lease.TrustID == nil {
		t.Fatalf("lease %+v has no trust_id", lease)
	}
	res := lease.Reservations[0]
	group := *res.ServerGroupID
	var sg struct {
		ServerGroup struct {
			Policy string `json:"policy"`
		} `json:"server_group"`
	}
	if err := n.Call(ctx, "GET", "/os-server-groups/"+group, admin, nil, &sg); err != nil || sg.ServerGroup.Policy != "anti-affinity" {
		t.Errorf("server group %s: %+v, %v; want policy anti-affinity", group, sg.ServerGroup, err)
	}
	e.checkMemberGroup(t, demo, group, lease)
	waitFor(t, 60*time.Second, "the member's access to flavor "+res.FlavorID, func() bool {
		return n.Call(ctx, "GET", "/flavors/"+res.FlavorID, demo, nil, nil) == nil
	})
	var servers []string
	hosts := map[string]bool{}
	for range amount {
		s, err := n.BootAndWait(ctx, demo, "spread", res.FlavorID, map[string]any{"group": group}, bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s.ID)
		h, err := n.ServerHost(ctx, admin, s.ID)
		if s.Status != "ACTIVE" || err != nil || h == "" {
			t.Fatalf("server %+v on %q (%v), want ACTIVE\n%s", s, h, err, n.LogTail(3000))
		}
		hosts[h] = true
	}
	if len(hosts) != amount {
		t.Errorf("the %d servers of an anti-affinity group run on hosts %v, want %d different ones", amount, hosts, amount)
	}
	if members := e.groupMembers(t, admin, group); !cmp.Equal(members, sorted(servers)) {
		t.Errorf("members of group %s: %v, want the member's servers %v", group, members, sorted(servers))
	}

	e.blazar(t, "DELETE", "/leases/"+lease.ID, demo, http.StatusNoContent, nil, nil)
	for _, id := range servers {
		if err := n.WaitGone(ctx, admin, id, 150*time.Second); err != nil {
			t.Fatalf("a server of the flavor after the lease's deletion: %v", err)
		}
	}
	waitFor(t, 60*time.Second, "server group and trust deleted", func() bool {
		return novatest.StatusOf(n.Call(ctx, "GET", "/os-server-groups/"+group, admin, nil, nil)) == http.StatusNotFound &&
			e.KS.Call("GET", "/OS-TRUST/trusts/"+*lease.TrustID, admin, nil, nil) != nil
	})
}

// checkMemberGroup checks that server group id belongs to the lease's
// project and that the lease's member reads it.
func (e *Env) checkMemberGroup(t *testing.T, member, id string, l Lease) {
	t.Helper()
	var sg struct {
		ServerGroup struct {
			ProjectID string `json:"project_id"`
		} `json:"server_group"`
	}
	if err := e.Nova.Call(context.Background(), "GET", "/os-server-groups/"+id, member, nil, &sg); err != nil {
		t.Fatalf("the lease's member reading server group %s: %v", id, err)
	}
	if sg.ServerGroup.ProjectID != l.ProjectID || l.ProjectID != e.KS.DemoProjectID {
		t.Errorf("server group %s is in project %s, want the lease's project %s (demo's %s)", id, sg.ServerGroup.ProjectID, l.ProjectID, e.KS.DemoProjectID)
	}
}

// groupMembers are the sorted server ids of server group id.
func (e *Env) groupMembers(t *testing.T, admin, id string) []string {
	t.Helper()
	var sg struct {
		ServerGroup struct {
			Members []string `json:"members"`
		} `json:"server_group"`
	}
	if err := e.Nova.Call(context.Background(), "GET", "/os-server-groups/"+id, admin, nil, &sg); err != nil {
		t.Fatal(err)
	}
	return sorted(sg.ServerGroup.Members)
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
