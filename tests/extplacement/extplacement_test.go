package extplacement_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/models"
)

// Lease is what the tests read of a lease.
type Lease struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Degraded     bool   `json:"degraded"`
	Reservations []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"reservations"`
}

// Provider is what the tests read of a resource provider.
type Provider struct {
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	ParentUUID string `json:"parent_provider_uuid"`
	Generation int    `json:"generation"`
}

// waitFor polls cond every 200 ms until it holds, failing after timeout.
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

// stamp is a lease date d from now, to the second.
func stamp(d time.Duration) string { return time.Now().UTC().Add(d).Format("2006-01-02 15:04:05") }

// reservationClass is the Placement class of reservation id.
func reservationClass(id string) string {
	return "CUSTOM_RESERVATION_" + strings.ReplaceAll(strings.ToUpper(id), "-", "_")
}

// providerNamed is the upstream Placement's provider named name (nil
// when there is none).
func (e *Env) providerNamed(t testing.TB, tok, name string) *Provider {
	t.Helper()
	var out struct {
		Providers []Provider `json:"resource_providers"`
	}
	e.mustPlacement(t, "GET", "/resource_providers?name="+url.QueryEscape(name), tok, http.StatusOK, nil, &out)
	if len(out.Providers) == 0 {
		return nil
	}
	return &out.Providers[0]
}

// inventoryOf is provider uuid's inventory total of class (0 for none).
func (e *Env) inventoryOf(t testing.TB, tok, uuid, class string) int {
	t.Helper()
	var out struct {
		Inventories map[string]struct {
			Total int `json:"total"`
		} `json:"inventories"`
	}
	e.mustPlacement(t, "GET", "/resource_providers/"+uuid+"/inventories", tok, http.StatusOK, nil, &out)
	return out.Inventories[class].Total
}

// classExists tells whether the upstream Placement has resource class name.
func (e *Env) classExists(t testing.TB, tok, name string) bool {
	t.Helper()
	code, b := e.placement(t, "GET", "/resource_classes/"+name, tok, nil, nil)
	if code != http.StatusOK && code != http.StatusNotFound {
		t.Fatalf("GET /resource_classes/%s: %d %s", name, code, b)
	}
	return code == http.StatusOK
}

// addHost makes a compute node provider named name in the upstream
// Placement (as Nova's compute service would) with vcpus, memory and
// disk, and registers the host in Leasehold with the extra capability
// suite (the leases of one test ask for their own hosts). Leasehold's
// record gives the host 64 VCPUs: the capacity must come from Placement.
func (e *Env) addHost(t testing.TB, tok, name, suite string, vcpus, memoryMB, diskGB int) *Provider {
	t.Helper()
	rp := e.hostProvider(t, tok, name, vcpus, memoryMB, diskGB)
	e.register(t, name, suite)
	return rp
}

// hostProvider makes a compute node provider named name in the upstream
// Placement with vcpus, memory and disk.
func (e *Env) hostProvider(t testing.TB, tok, name string, vcpus, memoryMB, diskGB int) *Provider {
	t.Helper()
	var rp Provider
	e.mustPlacement(t, "POST", "/resource_providers", tok, http.StatusOK, map[string]any{"name": name}, &rp)
	inv := map[string]any{
		"resource_provider_generation": rp.Generation,
		"inventories": map[string]any{
			"VCPU":      map[string]any{"total": vcpus},
			"MEMORY_MB": map[string]any{"total": memoryMB},
			"DISK_GB":   map[string]any{"total": diskGB},
		},
	}
	e.mustPlacement(t, "PUT", "/resource_providers/"+rp.UUID+"/inventories", tok, http.StatusOK, inv, nil)
	return &rp
}

// register registers host name in Leasehold with the extra capability
// suite, and 64 VCPUs in its record.
func (e *Env) register(t testing.TB, name, suite string) {
	t.Helper()
	e.blazar(t, "POST", "/os-hosts", http.StatusCreated, map[string]any{
		"name": name, "vcpus": "64", "memory_mb": "262144", "local_gb": "4000", "suite": suite,
	}, nil)
}

// createLease makes a lease of one virtual:instance reservation on the
// hosts of suite and returns it.
func (e *Env) createLease(t testing.TB, name, suite, start, end string, amount int) Lease {
	t.Helper()
	var out struct{ Lease Lease }
	e.blazar(t, "POST", "/leases", http.StatusCreated, map[string]any{
		"name": name, "start_date": start, "end_date": end,
		"reservations": []map[string]any{{
			"resource_type": "virtual:instance", "amount": amount, "vcpus": 2, "memory_mb": 1024, "disk_gb": 10,
			"affinity": nil, "resource_properties": `["=", "$suite", "` + suite + `"]`,
		}},
		"events": []any{},
	}, &out)
	if len(out.Lease.Reservations) != 1 {
		t.Fatalf("lease %s: reservations %+v", name, out.Lease.Reservations)
	}
	return out.Lease
}

func (e *Env) getLease(t testing.TB, id string) Lease {
	t.Helper()
	var out struct{ Lease Lease }
	e.blazar(t, "GET", "/leases/"+id, http.StatusOK, nil, &out)
	return out.Lease
}

// waitLease polls lease id until ok accepts it (bounded).
func (e *Env) waitLease(t testing.TB, id string, timeout time.Duration, what string, ok func(Lease) bool) Lease {
	t.Helper()
	var l Lease
	waitFor(t, timeout, "lease "+id+" "+what, func() bool {
		l = e.getLease(t, id)
		return ok(l)
	})
	return l
}

// candidates are the providers of the allocation requests the upstream
// Placement offers for one unit of class.
func (e *Env) candidates(t testing.TB, tok, class string) []string {
	t.Helper()
	var out struct {
		AllocationRequests []struct {
			Allocations map[string]any `json:"allocations"`
		} `json:"allocation_requests"`
	}
	e.mustPlacement(t, "GET", "/allocation_candidates?resources="+class+":1", tok, http.StatusOK, nil, &out)
	var uuids []string
	for _, ar := range out.AllocationRequests {
		for u := range ar.Allocations {
			uuids = append(uuids, u)
		}
	}
	slices.Sort(uuids)
	return slices.Compact(uuids)
}

// TestInstanceLeaseOnExternalPlacement runs an instance lease through
// create, start and end with the upstream Placement as the one Nova
// uses: the class appears at create, each reserved host's blazar_<host>
// child (under the host's provider) gets one unit per slot at start,
// allocation candidates for <class>:1 are exactly those children, and
// the end removes the inventories and the class.
func TestInstanceLeaseOnExternalPlacement(t *testing.T) {
	e := RequireEnv(t)
	tok := e.admin(t)
	hosts := map[string]*Provider{}
	for _, h := range []string{"life-1", "life-2", "life-3"} {
		hosts[h] = e.addHost(t, tok, h, "life", 4, 8192, 100)
	}
	// Five slots of 2 VCPUs over three hosts of 4 VCPUs: at least three
	// hosts' worth of VCPUs is not needed, but two hosts are.
	lease := e.createLease(t, "ext-life", "life", "now", stamp(time.Hour), 5)
	resID := lease.Reservations[0].ID
	class := reservationClass(resID)

	waitFor(t, 60*time.Second, "class "+class+" in the upstream Placement", func() bool { return e.classExists(t, tok, class) })
	e.waitLease(t, lease.ID, 60*time.Second, "ACTIVE", func(l Lease) bool { return l.Status == "ACTIVE" })

	children := map[string]string{} // host → child uuid
	var total int
	waitFor(t, 60*time.Second, "five slots of "+class+" on the children", func() bool {
		total = 0
		for h := range hosts {
			c := e.providerNamed(t, tok, "blazar_"+h)
			if c == nil {
				continue
			}
			children[h] = c.UUID
			total += e.inventoryOf(t, tok, c.UUID, class)
		}
		return total == 5
	})
	var reserved []string
	for h, c := range children {
		child := e.providerNamed(t, tok, "blazar_"+h)
		if child.ParentUUID != hosts[h].UUID {
			t.Errorf("blazar_%s: parent %s, want the host's provider %s", h, child.ParentUUID, hosts[h].UUID)
		}
		n := e.inventoryOf(t, tok, c, class)
		if n > 2 {
			t.Errorf("blazar_%s holds %d slots of 2 VCPUs on a host of 4 VCPUs (Placement's inventory)", h, n)
		}
		if n > 0 {
			reserved = append(reserved, c)
		}
	}
	slices.Sort(reserved)
	if got := e.candidates(t, tok, class); !slices.Equal(got, reserved) {
		t.Errorf("allocation candidates for %s:1 = %v, want exactly the reserved children %v", class, got, reserved)
	}
	if l := e.getLease(t, lease.ID); l.Degraded {
		t.Errorf("lease degraded after its Placement actions completed: %+v", l)
	}

	// The end, a few seconds from now.
	e.blazar(t, "PUT", "/leases/"+lease.ID, http.StatusOK, map[string]any{"end_date": stamp(3 * time.Second)}, nil)
	e.waitLease(t, lease.ID, 60*time.Second, "TERMINATED and not degraded", func(l Lease) bool {
		return l.Status == "TERMINATED" && !l.Degraded
	})
	waitFor(t, 60*time.Second, "inventories and class "+class+" removed", func() bool {
		for _, c := range children {
			if e.inventoryOf(t, tok, c, class) != 0 {
				return false
			}
		}
		return !e.classExists(t, tok, class)
	})
}

// TestCapacityFromExternalPlacement: the hosts' capacities are the
// upstream Placement's inventories (4 VCPUs each), less what a server
// outside any reservation uses (2 VCPUs on cap-2), not Leasehold's own
// record of the hosts (64): four slots of 2 VCPUs do not fit on the two
// hosts, three do, and a fourth next to them does not.
func TestCapacityFromExternalPlacement(t *testing.T) {
	e := RequireEnv(t)
	tok := e.admin(t)
	e.addHost(t, tok, "cap-1", "cap", 4, 8192, 100)
	cap2 := e.hostProvider(t, tok, "cap-2", 4, 8192, 100)
	server := "5e4a1c1e-0c1b-4b8e-9a55-0f3c2b1d9e01"
	e.mustPlacement(t, "PUT", "/allocations/"+server, tok, http.StatusNoContent, map[string]any{
		"allocations":         map[string]any{cap2.UUID: map[string]any{"resources": map[string]int{"VCPU": 2, "MEMORY_MB": 512}}},
		"consumer_generation": nil, "project_id": e.KS.DemoProjectID, "user_id": e.KS.DemoUserID, "consumer_type": "INSTANCE",
	}, nil)
	t.Cleanup(func() { e.placement(t, "DELETE", "/allocations/"+server, tok, nil, nil) })
	e.register(t, "cap-2", "cap")

	start, end := stamp(24*time.Hour), stamp(25*time.Hour)
	refused := func(name string, amount int, want string) {
		t.Helper()
		code, b := call(t, "POST", e.LH+"/v1/leases", map[string]string{"X-Auth-Token": "admin"}, map[string]any{
			"name": name, "start_date": start, "end_date": end,
			"reservations": []map[string]any{{
				"resource_type": "virtual:instance", "amount": amount, "vcpus": 2, "memory_mb": 1024, "disk_gb": 10,
				"affinity": nil, "resource_properties": `["=", "$suite", "cap"]`,
			}},
			"events": []any{},
		}, nil)
		if code != http.StatusConflict || !strings.Contains(b, want) {
			t.Fatalf("%s: %d %s, want 409 with %q", name, code, b, want)
		}
	}
	refused("ext-cap-4", 4, "Not enough hosts available: 4 slots of 2 VCPU/1 GiB/10 GB disk needed, 3 free in the window on 2 matching hosts")
	lease := e.createLease(t, "ext-cap-3", "cap", start, end, 3)
	refused("ext-cap-1", 1, "Not enough hosts available: 1 slot")

	class := reservationClass(lease.Reservations[0].ID)
	waitFor(t, 60*time.Second, "class "+class+" made at create", func() bool { return e.classExists(t, tok, class) })
	e.blazar(t, "DELETE", "/leases/"+lease.ID, http.StatusNoContent, nil, nil)
	waitFor(t, 60*time.Second, "class "+class+" deleted with the lease", func() bool { return !e.classExists(t, tok, class) })
}

// TestPlacementDownAtStart: with the upstream Placement stopped when the
// lease starts, the lease is ACTIVE, the inventory write waits in the
// outbox (retried with backoff, the lease shown degraded meanwhile), and
// it completes once Placement is back.
func TestPlacementDownAtStart(t *testing.T) {
	e := RequireEnv(t)
	tok := e.admin(t)
	e.addHost(t, tok, "down-1", "down", 4, 8192, 100)
	lease := e.createLease(t, "ext-down", "down", stamp(8*time.Second), stamp(time.Hour), 2)
	class := reservationClass(lease.Reservations[0].ID)
	// The create's actions (class, child provider) run while Placement is up.
	waitFor(t, 60*time.Second, "blazar_down-1 and "+class+" made at create", func() bool {
		return e.classExists(t, tok, class) && e.providerNamed(t, tok, "blazar_down-1") != nil
	})
	child := e.providerNamed(t, tok, "blazar_down-1").UUID

	e.StopPlacement()
	if l := e.getLease(t, lease.ID); l.Status != "PENDING" {
		t.Fatalf("lease %s before Placement was stopped (the create's actions took most of 8 s): the start cannot be tested", l.Status)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := e.StartPlacement(); err != nil {
				t.Errorf("restarting Placement: %v", err)
			}
		}
	})
	e.waitLease(t, lease.ID, 60*time.Second, "ACTIVE while Placement is down", func(l Lease) bool { return l.Status == "ACTIVE" })
	var row models.OutboxAction
	waitFor(t, 60*time.Second, "the inventory write failing and waiting in the outbox", func() bool {
		err := e.Server.DB().DB.Where("kind = ? AND lease_id = ?", "placement.set_reservation_inventory", lease.ID).Take(&row).Error
		return err == nil && row.Status == "PENDING" && row.Attempts >= 1 && row.LastError != ""
	})
	t.Logf("while Placement is down: attempts %d, last error %q", row.Attempts, row.LastError)
	e.waitLease(t, lease.ID, 30*time.Second, "degraded", func(l Lease) bool { return l.Degraded })

	if err := e.StartPlacement(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFor(t, 120*time.Second, "the inventory written once Placement is back", func() bool {
		var n int64
		if err := e.Server.DB().DB.Model(&models.OutboxAction{}).Where("lease_id = ?", lease.ID).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n == 0 && e.inventoryOf(t, tok, child, class) == 2
	})
	e.waitLease(t, lease.ID, 30*time.Second, "no longer degraded", func(l Lease) bool { return !l.Degraded && l.Status == "ACTIVE" })

	e.blazar(t, "DELETE", "/leases/"+lease.ID, http.StatusNoContent, nil, nil)
	waitFor(t, 60*time.Second, "inventory and class removed with the lease", func() bool {
		return e.inventoryOf(t, tok, child, class) == 0 && !e.classExists(t, tok, class)
	})
}
