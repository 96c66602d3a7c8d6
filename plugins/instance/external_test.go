package instance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	placementapi "github.com/leasehold/leasehold/handlers/placement"
	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/external"
	"github.com/leasehold/leasehold/plugins/instance"
)

// extPlacement is another Placement (a database of its own, served over
// HTTP) standing for the external one, with a client of it.
type extPlacement struct {
	url    string
	client *external.Client
}

func newExtPlacement(t *testing.T) *extPlacement {
	t.Helper()
	d := dbtest.Open(t)
	api := placementapi.New(placement.NewService(d, placement.Config{}), config.Placement{PolicyMode: "legacy"}, config.CORS{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	pc := &gophercloud.ProviderClient{HTTPClient: *srv.Client()}
	pc.SetToken("admin")
	return &extPlacement{url: srv.URL, client: external.New(&gophercloud.ServiceClient{ProviderClient: pc, Endpoint: srv.URL + "/", Type: "placement"})}
}

func (x *extPlacement) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, x.url+path, rd)
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.39")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// slots are the reservation class's inventories on the blazar_<host>
// children of the external Placement, by host.
func (x *extPlacement) slots(t *testing.T, class string) map[string]int64 {
	t.Helper()
	var rps struct {
		Providers []struct{ UUID, Name string } `json:"resource_providers"`
	}
	x.call(t, "GET", "/resource_providers", nil, &rps)
	out := map[string]int64{}
	for _, rp := range rps.Providers {
		var invs struct {
			Inventories map[string]struct {
				Total int64 `json:"total"`
			} `json:"inventories"`
		}
		x.call(t, "GET", "/resource_providers/"+rp.UUID+"/inventories", nil, &invs)
		if inv, ok := invs.Inventories[class]; ok {
			out[rp.Name[len("blazar_"):]] = inv.Total
		}
	}
	return out
}

// drain runs the outbox until nothing is due (bounded).
func drain(t *testing.T, w *outbox.Worker) {
	t.Helper()
	for range 20 {
		n, err := w.RunDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the outbox still had due actions after 20 passes")
}

// TestExternalPlacement: with an external Placement, the capacities come
// from its inventories (4 VCPUs a host, not the hosts' record of 8; none
// for a host it has no provider of), no
// class or inventory is written in the built-in Placement, and the
// outbox actions (keyed per host provider and per class) make the class
// and children at create, set the inventories at start and on an active
// update, and remove them and the class at the end.
func TestExternalPlacement(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		x := newExtPlacement(t)
		for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
			var rp struct {
				UUID string `json:"uuid"`
			}
			x.call(t, "POST", "/resource_providers", map[string]any{"name": h}, &rp)
			x.call(t, "PUT", "/resource_providers/"+rp.UUID+"/inventories", map[string]any{"resource_provider_generation": 0,
				"inventories": map[string]any{"VCPU": map[string]any{"total": 4}, "MEMORY_MB": map[string]any{"total": 16384}, "DISK_GB": map[string]any{"total": 800}}}, nil)
		}
		// compute-4 is not in the external Placement: it takes no slot
		// (with its record's 8 VCPUs, 7 slots would fit).
		e := newEnvWith(t, d, 4, nil, instance.Config{External: x.client})
		handlers := instance.ExternalHandlers(x.client)
		maps.Copy(handlers, hosts.OutboxHandlers(standalone.New(nil))) // the hosts' freepool actions
		w := outbox.NewWorker(d, handlers, outbox.Config{}, e.clock.Now)
		drain(t, w)

		if _, err := e.create(t, "too-big", "2030-01-01 11:00", "2030-01-02 00:00", instanceRes(7, 2, 1024, 10, nil)); kindOf(err) != errs.NotEnoughResources {
			t.Fatalf("7 slots of 2 VCPUs on 3 hosts of 4 VCPUs in the external Placement: %v, want not enough", err)
		}
		v := e.mustCreate(t, "l", "2030-01-01 11:00", "2030-01-02 00:00", instanceRes(4, 2, 1024, 10, nil))
		resID := v.Reservations[0]["id"].(string)
		class := placement.ReservationClass(resID)

		var rows []models.OutboxAction
		if err := d.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Kind+" "+r.OrderKey)
		}
		want := []string{instance.KindExtEnsureClass + " placement:class:" + class}
		for h := range e.slots(t, resID) {
			want = append(want, instance.KindExtEnsureProvider+" placement:provider:"+h)
		}
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("outbox at create (-want +got):\n%s", diff)
		}
		var builtin int64
		d.Raw("SELECT COUNT(*) FROM resource_classes WHERE name = ?", class).Scan(&builtin)
		if builtin != 0 {
			t.Errorf("class %s made in the built-in Placement", class)
		}
		drain(t, w)
		if code := x.call(t, "GET", "/resource_classes/"+class, nil, nil); code != http.StatusOK {
			t.Errorf("class in the external Placement after create: %d", code)
		}

		e.clock.Set(time.Date(2030, 1, 1, 11, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		drain(t, w)
		wantSlots := map[string]int64{}
		for h, n := range e.slots(t, resID) {
			wantSlots[h] = int64(n)
		}
		if diff := cmp.Diff(wantSlots, x.slots(t, class)); diff != "" {
			t.Errorf("external inventories at start (-want +got):\n%s", diff)
		}
		// Active: two more slots.
		if _, err := e.svc.Update(ctx, owner, v.ID, leasestest.Update(map[string]any{"id": resID, "amount": 6})); err != nil {
			t.Fatal(err)
		}
		drain(t, w)
		if s := e.slots(t, resID); s["compute-4"] != 0 {
			t.Errorf("slots on compute-4, which the external Placement does not know: %v", s)
		}
		wantSlots = map[string]int64{}
		for h, n := range e.slots(t, resID) {
			wantSlots[h] = int64(n)
		}
		if diff := cmp.Diff(wantSlots, x.slots(t, class)); diff != "" {
			t.Errorf("external inventories after the active update (-want +got):\n%s", diff)
		}
		d.Raw("SELECT COUNT(*) FROM inventories i JOIN resource_classes c ON c.id = i.resource_class_id WHERE c.name = ?", class).Scan(&builtin)
		if builtin != 0 {
			t.Errorf("%d inventories of %s in the built-in Placement", builtin, class)
		}

		held := e.slots(t, resID)
		e.clock.Set(time.Date(2030, 1, 2, 0, 0, 1, 0, time.UTC))
		if _, err := e.events.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		// The clean-up never gives up (it waits for the servers' deletion).
		rows = nil
		if err := d.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, r := range rows {
			got = append(got, r.Kind+" "+r.OrderKey)
			if !instance.ExternalKeepRetrying(r.Kind) {
				t.Errorf("end action %s gives up after its attempts", r.Kind)
			}
		}
		want = []string{instance.KindExtDeleteClass + " placement:class:" + class}
		for h := range held {
			want = append(want, instance.KindExtRemoveInventory+" placement:provider:"+h)
		}
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("outbox at end (-want +got):\n%s", diff)
		}
		drain(t, w)
		if s := x.slots(t, class); len(s) != 0 {
			t.Errorf("external inventories after the end: %v", s)
		}
		if code := x.call(t, "GET", "/resource_classes/"+class, nil, nil); code != http.StatusNotFound {
			t.Errorf("class in the external Placement after the end: %d, want 404", code)
		}
		var left int64
		d.Model(&models.OutboxAction{}).Count(&left)
		if left != 0 {
			t.Errorf("%d outbox actions left", left)
		}
	})
}
