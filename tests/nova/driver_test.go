package nova_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/compute/nova"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/tests/internal/novatest"
)

// driver is the nova compute driver on a client built as the server
// builds it, from the [nova] section leaseholdConf writes.
func (e *Env) driver(t *testing.T) *nova.Driver {
	t.Helper()
	nc := config.Nova{AuthType: "password", AuthURL: e.KS.URL, Username: e.KS.ServiceUser, Password: e.KS.ServicePassword,
		ProjectName: "service", UserDomainName: "Default", ProjectDomainName: "Default", RegionName: "RegionOne",
		EndpointType: "internal", Timeout: 30}
	c, err := nova.NewClient(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	return nova.New(c, nova.Config{ServerDeleteTimeout: 90 * time.Second, MigrateTimeout: 90 * time.Second}, slog.Default())
}

// TestReservationFlavor: the flavor calls of instance reservations
// against Nova: a private flavor with extra specs (created twice: one
// flavor), the lease's project given access (twice: no error), a boot
// with it, and its deletion, which first deletes that server.
func TestReservationFlavor(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	d := e.driver(t)
	ctx := context.Background()
	tok := e.Tokens(t)
	spec := compute.FlavorSpec{ID: "3f1e7c2a-0d4b-4b8e-9a7e-5c1d2e3f4a5b", Name: "reservation:3f1e7c2a", VCPUs: 1, MemoryMB: 512, DiskGB: 1,
		ExtraSpecs: map[string]string{"aggregate_instance_extra_specs:reservation": "3f1e7c2a-0d4b-4b8e-9a7e-5c1d2e3f4a5b"}}
	for range 2 {
		if err := d.CreateReservationFlavor(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	var fl struct {
		Flavor struct {
			ID         string            `json:"id"`
			Public     bool              `json:"os-flavor-access:is_public"`
			VCPUs      int               `json:"vcpus"`
			RAM        int               `json:"ram"`
			ExtraSpecs map[string]string `json:"extra_specs"`
		} `json:"flavor"`
	}
	if err := n.Call(ctx, "GET", "/flavors/"+spec.ID, tok.Admin, nil, &fl); err != nil {
		t.Fatal(err)
	}
	if fl.Flavor.Public || fl.Flavor.VCPUs != 1 || fl.Flavor.RAM != 512 || fl.Flavor.ExtraSpecs["aggregate_instance_extra_specs:reservation"] != spec.ID {
		t.Errorf("flavor %+v", fl.Flavor)
	}
	// Before access the member cannot boot with the private flavor.
	if _, err := n.Boot(ctx, tok.Demo, "no-access", spec.ID, nil); novatest.StatusOf(err) != http.StatusBadRequest && novatest.StatusOf(err) != http.StatusNotFound {
		t.Errorf("boot with a private flavor before access: %v, want a refusal", err)
	}
	for range 2 {
		if err := d.AddFlavorAccess(ctx, spec.ID, e.KS.DemoProjectID); err != nil {
			t.Fatal(err)
		}
	}
	s, err := n.BootAndWait(ctx, tok.Demo, "flavored", spec.ID, nil, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "ACTIVE" {
		t.Fatalf("boot with the reservation flavor: %+v", s)
	}
	if err := d.DeleteReservationFlavor(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.GetServer(ctx, tok.Admin, s.ID); novatest.StatusOf(err) != http.StatusNotFound {
		t.Errorf("the flavor's server after DeleteReservationFlavor: %v, want 404", err)
	}
	if err := n.Call(ctx, "GET", "/flavors/"+spec.ID, tok.Admin, nil, nil); novatest.StatusOf(err) != http.StatusNotFound {
		t.Errorf("the flavor after DeleteReservationFlavor: %v, want 404", err)
	}
	if err := d.DeleteReservationFlavor(ctx, spec.ID); err != nil {
		t.Errorf("deleting a gone flavor: %v", err)
	}
}

// TestLiveMigrate: a server moved by LiveMigrate runs on the target when
// it returns, a second call is a no-op, and ServersOnHostDetail and
// ServersByHost list it there with its owner and flavor size.
func TestLiveMigrate(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	d := e.driver(t)
	ctx := context.Background()
	tok := e.Tokens(t)
	// Hosts in no Blazar pool (the BlazarFilter runs for a targeted
	// live migration too).
	aggs, err := n.Aggregates(ctx, tok.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var free []string
	for _, h := range novaHosts {
		if membership(aggs, h) == nil {
			free = append(free, h)
		}
	}
	if len(free) < 2 {
		t.Fatalf("fewer than two hosts outside any aggregate: %+v", aggs)
	}
	from, to := free[0], free[1]
	id, err := n.BootOn(ctx, tok.Admin, "mover", "1", from)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.DeleteServer(ctx, tok.Admin, id) })
	if s, err := n.WaitServer(ctx, tok.Admin, id, bootTimeout); err != nil || s.Status != "ACTIVE" || s.Host != from {
		t.Fatalf("boot on %s: %+v %v", from, s, err)
	}
	// The BlazarFilter runs on the scheduler's copy of the aggregates,
	// which another test's host removals may have left stale; the resync
	// is itself a cast, so a refusal right after it is tried again.
	var took time.Duration
	for attempt := 1; ; attempt++ {
		if err := n.ResyncScheduler(ctx, tok.Admin); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		err := d.LiveMigrate(ctx, id, to)
		took = time.Since(t0)
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("%v\nnova-box log:\n%s", err, n.LogTail(4000))
		}
		t.Logf("attempt %d: %v", attempt, err)
		time.Sleep(time.Second)
	}
	if h, err := n.ServerHost(ctx, tok.Admin, id); err != nil || h != to {
		t.Errorf("after LiveMigrate the server is on %q (%v), want %s", h, err, to)
	}
	if err := d.LiveMigrate(ctx, id, to); err != nil {
		t.Errorf("LiveMigrate to where it runs: %v", err)
	}
	ss, err := d.ServersOnHostDetail(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ss, func(s compute.Server) bool { return s.ID == id })
	if i < 0 || ss[i].ProjectID != e.KS.AdminProjectID || ss[i].FlavorVCPUs != 1 || ss[i].FlavorRAM != 512 || ss[i].FlavorDisk != 1 {
		t.Errorf("servers on %s: %+v, want %s of the admin project with m1.tiny's size", to, ss, id)
	}
	// The one listing of every server files it under the same host, with
	// the same details.
	byHost, err := d.ServersByHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j := slices.IndexFunc(byHost[to], func(s compute.Server) bool { return s.ID == id }); j < 0 || !cmp.Equal(byHost[to][j], ss[i]) {
		t.Errorf("ServersByHost()[%s] = %+v, want %+v among them", to, byHost[to], ss[i])
	}
	if slices.ContainsFunc(byHost[from], func(s compute.Server) bool { return s.ID == id }) {
		t.Errorf("ServersByHost()[%s] still lists %s after the migration", from, id)
	}
	t.Logf("live migration %s → %s took %s", from, to, took.Round(time.Millisecond))
}

// TestSnapshotServers: the before_end snapshot asks Nova for an image of
// each server on the host and remembers it on the server, so running
// the action again takes no second one.
func TestSnapshotServers(t *testing.T) {
	e := RequireEnv(t)
	n := e.Nova
	d := e.driver(t)
	ctx := context.Background()
	tok := e.Tokens(t)
	id, err := n.BootOn(ctx, tok.Admin, "snap", "1", "compute3")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.DeleteServer(ctx, tok.Admin, id) })
	if s, err := n.WaitServer(ctx, tok.Admin, id, bootTimeout); err != nil || s.Status != "ACTIVE" {
		t.Fatalf("boot: %+v %v", s, err)
	}
	for i := range 2 {
		if err := d.SnapshotServers(ctx, []string{"compute3"}); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	var md struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := n.Call(ctx, "GET", "/servers/"+id+"/metadata", tok.Admin, nil, &md); err != nil {
		t.Fatal(err)
	}
	if want := "snap-" + id + "-before-end"; md.Metadata["leasehold_snapshot"] != want {
		t.Errorf("server metadata %v, want leasehold_snapshot = %s", md.Metadata, want)
	}
}
