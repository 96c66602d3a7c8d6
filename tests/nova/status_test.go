package nova_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/outbox"
)

// setComputeService disables or enables the nova-compute service of host.
func setComputeService(t *testing.T, e *Env, admin, host, status string) {
	t.Helper()
	ctx := context.Background()
	var svcs struct {
		Services []struct {
			ID string `json:"id"`
		} `json:"services"`
	}
	if err := e.Nova.Call(ctx, "GET", "/os-services?binary=nova-compute&host="+host, admin, nil, &svcs); err != nil || len(svcs.Services) != 1 {
		t.Fatalf("nova-compute service of %s: %v %+v", host, err, svcs)
	}
	if err := e.Nova.Call(ctx, "PUT", "/os-services/"+svcs.Services[0].ID, admin, map[string]any{"status": status}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestHostDisabledInNova: a host whose nova-compute service is disabled
// registers as not reservable with compute_status = disabled, so a lease
// cannot get it; once Nova enables it again the periodic status read
// marks it up and reservable, and the same lease request succeeds.
func TestHostDisabledInNova(t *testing.T) {
	e := RequireEnv(t)
	tok := e.Tokens(t)
	lh := e.StartLeasehold(t, "[nova]\nhost_status_interval = 1\n")
	setComputeService(t, e, tok.Admin, "compute3", "disabled")
	t.Cleanup(func() { setComputeService(t, e, tok.Admin, "compute3", "enabled") })
	id := registerHost(t, lh.URL, tok.Admin, "compute3")
	t.Cleanup(func() {
		call(t, lh.URL, "DELETE", "/os-hosts/"+id, tok.Admin, nil, nil)
		waitDone(t, func() []outbox.Record {
			rows, err := outbox.List(context.Background(), lh.S.DB())
			if err != nil {
				t.Fatal(err)
			}
			return rows
		})
	})
	hostState := func() (bool, string) {
		var out struct {
			Host map[string]any `json:"host"`
		}
		mustCall(t, lh.URL, "GET", "/os-hosts/"+id, tok.Admin, http.StatusOK, nil, &out)
		st, _ := out.Host["compute_status"].(string)
		return out.Host["reservable"] == true, st
	}
	if r, st := hostState(); r || st != "disabled" {
		t.Fatalf("registered while disabled in Nova: reservable %v, compute_status %q; want false, disabled", r, st)
	}
	req := map[string]any{"name": "on-disabled", "start_date": "now", "end_date": "2030-01-01 00:00",
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}},
		"events":       []any{}}
	if code, body := call(t, lh.URL, "POST", "/leases", tok.Demo, req, nil); code < 400 || !strings.Contains(strings.ToLower(body), "not enough") {
		t.Errorf("a lease with only a disabled host registered: %d %s, want a refusal", code, body)
	}
	setComputeService(t, e, tok.Admin, "compute3", "enabled")
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, st := hostState()
		if r && st == "up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host not reservable and up 60s after Nova enabled it: reservable %v, compute_status %q", r, st)
		}
		time.Sleep(250 * time.Millisecond)
	}
	var out struct{ Lease Lease }
	mustCall(t, lh.URL, "POST", "/leases", tok.Demo, http.StatusCreated, req, &out)
	mustCall(t, lh.URL, "DELETE", "/leases/"+out.Lease.ID, tok.Demo, http.StatusNoContent, nil, nil)
}
