package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	placementapi "github.com/leasehold/leasehold/handlers/placement"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/external"
)

// The client is tested against a real Placement API: Leasehold's own
// (its gabbi conformance runs the upstream suite), served over HTTP from
// a database of its own, so every call crosses the wire as it does to an
// upstream Placement. tests/extplacement runs it against the upstream
// Placement itself.

// remote is a Placement served over HTTP and a client of it.
type remote struct {
	url    string
	client *external.Client
}

func newRemote(t *testing.T) *remote {
	t.Helper()
	d := dbtest.Open(t)
	api := placementapi.New(placement.NewService(d, placement.Config{}), config.Placement{PolicyMode: "legacy"}, config.CORS{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	pc := &gophercloud.ProviderClient{HTTPClient: *srv.Client()}
	pc.SetToken("admin")
	sc := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: srv.URL + "/", Type: "placement"}
	return &remote{url: srv.URL, client: external.New(sc)}
}

// call is one raw Placement call (noauth admin, microversion 1.39); it
// returns the status, decoding a 2xx body into out.
func (r *remote) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.url+path, rd)
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

// host makes a compute node provider named name with inventories invs
// and returns its uuid.
func (r *remote) host(t *testing.T, name string, invs map[string]any) string {
	t.Helper()
	var rp struct {
		UUID       string `json:"uuid"`
		Generation int    `json:"generation"`
	}
	if c := r.call(t, "POST", "/resource_providers", map[string]any{"name": name}, &rp); c != http.StatusOK {
		t.Fatalf("create provider %s: %d", name, c)
	}
	if invs != nil {
		body := map[string]any{"resource_provider_generation": rp.Generation, "inventories": invs}
		if c := r.call(t, "PUT", "/resource_providers/"+rp.UUID+"/inventories", body, nil); c != http.StatusOK {
			t.Fatalf("inventories of %s: %d", name, c)
		}
	}
	return rp.UUID
}

type inventory struct {
	Total           int64   `json:"total"`
	Reserved        int64   `json:"reserved"`
	MinUnit         int64   `json:"min_unit"`
	MaxUnit         int64   `json:"max_unit"`
	StepSize        int64   `json:"step_size"`
	AllocationRatio float64 `json:"allocation_ratio"`
}

// inventories are provider uuid's inventories and generation.
func (r *remote) inventories(t *testing.T, uuid string) (map[string]inventory, int) {
	t.Helper()
	var out struct {
		Generation  int                  `json:"resource_provider_generation"`
		Inventories map[string]inventory `json:"inventories"`
	}
	if c := r.call(t, "GET", "/resource_providers/"+uuid+"/inventories", nil, &out); c != http.StatusOK {
		t.Fatalf("inventories of %s: %d", uuid, c)
	}
	return out.Inventories, out.Generation
}

// allocate makes n consumers hold one unit of class each on provider
// uuid (max_unit is 1), and the others none.
func (r *remote) allocate(t *testing.T, uuid, class string, n int) {
	t.Helper()
	for i, consumer := range consumers {
		if i >= n {
			if c := r.call(t, "DELETE", "/allocations/"+consumer, nil, nil); c != http.StatusNoContent && c != http.StatusNotFound {
				t.Fatalf("delete allocations of %s: %d", consumer, c)
			}
			continue
		}
		var cur struct {
			Generation *int `json:"consumer_generation"`
		}
		r.call(t, "GET", "/allocations/"+consumer, nil, &cur)
		body := map[string]any{"allocations": map[string]any{uuid: map[string]any{"resources": map[string]int{class: 1}}},
			"consumer_generation": cur.Generation, "project_id": "p1", "user_id": "u1", "consumer_type": "INSTANCE"}
		if c := r.call(t, "PUT", "/allocations/"+consumer, body, nil); c != http.StatusNoContent {
			t.Fatalf("allocate one %s to %s on %s: %d", class, consumer, uuid, c)
		}
	}
}

var consumers = []string{"11111111-2222-3333-4444-555555555550", "11111111-2222-3333-4444-555555555551"}

func TestReservationProviderAndInventory(t *testing.T) {
	r := newRemote(t)
	ctx := context.Background()
	c := r.client
	hostUUID := r.host(t, "h1", map[string]any{"VCPU": map[string]any{"total": 8}})
	class := placement.ReservationClass("0b9c7d2e-1f3a-4c5b-8d6e-7f8091a2b3c4")

	child, err := c.EnsureReservationProvider(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.EnsureReservationProvider(ctx, "h1")
	if err != nil || again != child {
		t.Fatalf("second EnsureReservationProvider = %q, %v; want %q (the same child)", again, err, child)
	}
	var rp struct {
		Name   string `json:"name"`
		Parent string `json:"parent_provider_uuid"`
	}
	r.call(t, "GET", "/resource_providers/"+child, nil, &rp)
	if rp.Name != "blazar_h1" || rp.Parent != hostUUID {
		t.Errorf("child provider %+v, want blazar_h1 under %s", rp, hostUUID)
	}
	if _, err := c.EnsureReservationProvider(ctx, "h-missing"); !errors.Is(err, external.ErrNoHostProvider) {
		t.Errorf("EnsureReservationProvider of a host Placement lacks: %v, want ErrNoHostProvider", err)
	}

	slot := func(total, reserved int64) inventory {
		return inventory{Total: total, Reserved: reserved, MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}
	}
	steps := []struct {
		name     string
		run      func() error
		want     map[string]inventory
		wantErr  error
		sameGen  bool // the step changes nothing
		allocate int  // units the consumer holds before the step
	}{
		{name: "set 3 (class and inventory made)", run: func() error { return c.SetReservationInventory(ctx, "h1", class, 3) }, want: map[string]inventory{class: slot(3, 0)}},
		{name: "set 3 again", run: func() error { return c.SetReservationInventory(ctx, "h1", class, 3) }, want: map[string]inventory{class: slot(3, 0)}, sameGen: true},
		{name: "grow to 4", run: func() error { return c.SetReservationInventory(ctx, "h1", class, 4) }, want: map[string]inventory{class: slot(4, 0)}},
		{name: "below use keeps the use, reserved", allocate: 2, run: func() error { return c.SetReservationInventory(ctx, "h1", class, 1) }, want: map[string]inventory{class: slot(2, 2)}},
		{name: "removal while allocated", allocate: 1, run: func() error { return c.SetReservationInventory(ctx, "h1", class, 0) }, want: map[string]inventory{class: slot(2, 2)}, wantErr: external.ErrInUse, sameGen: true},
		{name: "class deletion while used", allocate: 1, run: func() error { return c.DeleteClass(ctx, class) }, want: map[string]inventory{class: slot(2, 2)}, wantErr: external.ErrInUse, sameGen: true},
		{name: "removal", run: func() error { return c.SetReservationInventory(ctx, "h1", class, 0) }, want: map[string]inventory{}},
		{name: "removal again", run: func() error { return c.SetReservationInventory(ctx, "h1", class, 0) }, want: map[string]inventory{}, sameGen: true},
		{name: "class deletion", run: func() error { return c.DeleteClass(ctx, class) }, want: map[string]inventory{}, sameGen: true},
		{name: "class deletion again", run: func() error { return c.DeleteClass(ctx, class) }, want: map[string]inventory{}, sameGen: true},
	}
	for _, s := range steps {
		r.allocate(t, child, class, s.allocate)
		_, before := r.inventories(t, child)
		err := s.run()
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: error %v, want %v", s.name, err, s.wantErr)
		}
		got, after := r.inventories(t, child)
		if got == nil {
			got = map[string]inventory{}
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: inventories (-want +got):\n%s", s.name, diff)
		}
		if s.sameGen != (before == after) {
			t.Errorf("%s: generation %d → %d (want unchanged: %v)", s.name, before, after, s.sameGen)
		}
	}
	if code := r.call(t, "GET", "/resource_classes/"+class, nil, nil); code != http.StatusNotFound {
		t.Errorf("class after deletion: %d, want 404", code)
	}
	// Removing from a host whose child was never made is nothing to do.
	r.host(t, "h2", nil)
	if err := c.SetReservationInventory(ctx, "h2", class, 0); err != nil {
		t.Errorf("removal without a child: %v", err)
	}
}

// TestConcurrentInventoryWriters: writers of one child provider (four
// reservations' classes at once) each read the generation, conflict
// with one another, read again and succeed; nothing is lost.
func TestConcurrentInventoryWriters(t *testing.T) {
	r := newRemote(t)
	ctx := context.Background()
	r.host(t, "h1", nil)
	if _, err := r.client.EnsureReservationProvider(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	const n = 4 // each conflict is another writer's success: at most n-1 < the retries
	classes := make([]string, n)
	for i := range classes {
		classes[i] = placement.ReservationClass(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		if err := r.client.EnsureClass(ctx, classes[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i, class := range classes {
		wg.Go(func() { errc <- r.client.SetReservationInventory(ctx, "h1", class, int64(i+1)) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("concurrent writer: %v", err)
		}
	}
	var child struct {
		Providers []struct{ UUID string } `json:"resource_providers"`
	}
	r.call(t, "GET", "/resource_providers?name=blazar_h1", nil, &child)
	got, gen := r.inventories(t, child.Providers[0].UUID)
	for i, class := range classes {
		if got[class].Total != int64(i+1) {
			t.Errorf("%s: total %d, want %d", class, got[class].Total, i+1)
		}
	}
	if gen != n {
		t.Errorf("generation %d after %d writes, want %d", gen, n, n)
	}
}

// TestHostCapacities: capacities with allocation ratios and reserved,
// less the use of servers outside any reservation; a reserved server's
// use (it holds a unit of the child's class) is not taken off, its slot
// is booked in Leasehold.
func TestHostCapacities(t *testing.T) {
	r := newRemote(t)
	ctx := context.Background()
	big := r.host(t, "big", map[string]any{
		"VCPU":      map[string]any{"total": 16, "reserved": 2, "allocation_ratio": 4.0},
		"MEMORY_MB": map[string]any{"total": 65536, "reserved": 512, "allocation_ratio": 1.5},
		"DISK_GB":   map[string]any{"total": 1000, "allocation_ratio": 0.9},
	})
	r.host(t, "nodisk", map[string]any{"VCPU": map[string]any{"total": 4}, "MEMORY_MB": map[string]any{"total": 2048}})
	class := placement.ReservationClass("0b9c7d2e-1f3a-4c5b-8d6e-7f8091a2b3c4")
	if err := r.client.SetReservationInventory(ctx, "big", class, 2); err != nil {
		t.Fatal(err)
	}
	child, err := r.client.EnsureReservationProvider(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	for consumer, allocs := range map[string]map[string]any{
		consumers[0]: {big: map[string]any{"resources": map[string]int{"VCPU": 6, "MEMORY_MB": 1024}}},
		consumers[1]: {big: map[string]any{"resources": map[string]int{"VCPU": 2, "MEMORY_MB": 4096}},
			child: map[string]any{"resources": map[string]int{class: 1}}},
	} {
		body := map[string]any{"allocations": allocs, "consumer_generation": nil, "project_id": "p1", "user_id": "u1", "consumer_type": "INSTANCE"}
		if c := r.call(t, "PUT", "/allocations/"+consumer, body, nil); c != http.StatusNoContent {
			t.Fatalf("allocations of %s: %d", consumer, c)
		}
	}
	got, err := r.client.HostCapacities(ctx, []string{"big", "nodisk", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]placement.ComputeCapacity{
		"big":    {VCPUs: 56 - 6, MemoryMB: 97536 - 1024, DiskGB: 900, Has: [3]bool{true, true, true}},
		"nodisk": {VCPUs: 4, MemoryMB: 2048, Has: [3]bool{true, true, false}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HostCapacities (-want +got):\n%s", diff)
	}
}

func TestNewClientRefusesIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.ExternalPlacement
		want string
	}{
		{"not configured", config.ExternalPlacement{Timeout: 1}, "no external Placement is configured"},
		{"endpoint only", config.ExternalPlacement{EndpointOverride: "http://127.0.0.1:1", Timeout: 1}, "auth_url, auth_type, username, password, project_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := external.NewClient(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewClient: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
