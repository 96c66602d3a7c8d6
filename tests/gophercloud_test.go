// Package tests holds black-box tests that drive Leasehold through real
// clients. This file uses gophercloud v2's Placement client (the library
// Go programs use to talk to OpenStack) against the Placement API served
// in-process, so any drift in our response shapes breaks a real client.
package tests

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/allocations"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceclasses"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/traits"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/usages"
	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/server"
)

// placementClient starts Leasehold in-process on a fresh database and
// returns a gophercloud Placement client for it at microversion mv, with
// the noauth admin token.
func placementClient(t *testing.T, mv string) *gophercloud.ServiceClient {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse([]string{"--database", dbtest.URL(t), "--auth", "noauth", "--log-level", "error"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Placement.PolicyMode = "legacy"
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.PlacementHandler())
	t.Cleanup(func() {
		srv.Close()
		if err := s.DB().Close(); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
	provider := &gophercloud.ProviderClient{HTTPClient: *srv.Client()}
	provider.SetToken("admin")
	return &gophercloud.ServiceClient{ProviderClient: provider, Endpoint: srv.URL + "/", Type: "placement", Microversion: mv}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func intp(n int) *int { return &n }

// TestGophercloudPlacement walks a provider's whole life through
// gophercloud: create, inventories, traits, aggregates, allocations for
// two consumers (PUT and POST), usages by provider and by project and
// consumer type, generation conflicts, and clean-up.
func TestGophercloudPlacement(t *testing.T) {
	ctx := context.Background()
	c := placementClient(t, "1.39")

	// Resource providers: a compute node and a child.
	cn, err := resourceproviders.Create(ctx, c, resourceproviders.CreateOpts{Name: "cn1", UUID: "5b6c2f40-3c61-4f1e-9a39-0d6f4b2b0c01"}).Extract()
	must(t, "create provider", err)
	if cn.UUID != "5b6c2f40-3c61-4f1e-9a39-0d6f4b2b0c01" || cn.Name != "cn1" || cn.Generation != 0 || cn.RootProviderUUID != cn.UUID || cn.ParentProviderUUID != "" {
		t.Errorf("created provider %+v", cn)
	}
	child, err := resourceproviders.Create(ctx, c, resourceproviders.CreateOpts{Name: "cn1_numa0", ParentProviderUUID: cn.UUID}).Extract()
	must(t, "create child", err)
	if child.ParentProviderUUID != cn.UUID || child.RootProviderUUID != cn.UUID {
		t.Errorf("child provider %+v", child)
	}
	pages, err := resourceproviders.List(c, resourceproviders.ListOpts{InTree: cn.UUID}).AllPages(ctx)
	must(t, "list providers", err)
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	must(t, "extract providers", err)
	var names []string
	for _, rp := range rps {
		names = append(names, rp.Name)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"cn1", "cn1_numa0"}, names); diff != "" {
		t.Errorf("providers in tree (-want +got):\n%s", diff)
	}

	// A custom resource class.
	must(t, "create resource class", resourceclasses.Create(ctx, c, resourceclasses.CreateOpts{Name: "CUSTOM_GOLD"}).ExtractErr())
	gold, err := resourceclasses.Get(ctx, c, "CUSTOM_GOLD").Extract()
	must(t, "get resource class", err)
	if gold.Name != "CUSTOM_GOLD" {
		t.Errorf("resource class %+v", gold)
	}

	// Inventories.
	invs, err := resourceproviders.UpdateInventories(ctx, c, cn.UUID, resourceproviders.UpdateInventoriesOpts{
		ResourceProviderGeneration: 0,
		Inventories: map[string]resourceproviders.Inventory{
			"VCPU":        {Total: 8, Reserved: 0, MinUnit: 1, MaxUnit: 16, StepSize: 1, AllocationRatio: 2},
			"MEMORY_MB":   {Total: 4096, Reserved: 512, MinUnit: 1, MaxUnit: 4096, StepSize: 1, AllocationRatio: 1},
			"CUSTOM_GOLD": {Total: 5, MinUnit: 1, MaxUnit: 5, StepSize: 1, AllocationRatio: 1},
		},
	}).Extract()
	must(t, "put inventories", err)
	if invs.ResourceProviderGeneration != 1 || len(invs.Inventories) != 3 || invs.Inventories["VCPU"].AllocationRatio != 2 {
		t.Errorf("inventories after put: %+v", invs)
	}
	vcpu, err := resourceproviders.GetInventory(ctx, c, cn.UUID, "VCPU").Extract()
	must(t, "get inventory", err)
	if vcpu.Total != 8 || vcpu.ResourceProviderGeneration != 1 {
		t.Errorf("VCPU inventory %+v", vcpu)
	}

	// Traits (a custom one created first) and aggregates.
	must(t, "create trait", traits.Create(ctx, c, "CUSTOM_RACK_A").ExtractErr())
	tr, err := resourceproviders.UpdateTraits(ctx, c, cn.UUID, resourceproviders.UpdateTraitsOpts{
		ResourceProviderGeneration: 1, Traits: []string{"HW_CPU_X86_AVX2", "CUSTOM_RACK_A"},
	}).Extract()
	must(t, "put traits", err)
	sort.Strings(tr.Traits)
	if diff := cmp.Diff([]string{"CUSTOM_RACK_A", "HW_CPU_X86_AVX2"}, tr.Traits); diff != "" || tr.ResourceProviderGeneration != 2 {
		t.Errorf("traits gen %d (-want +got):\n%s", tr.ResourceProviderGeneration, diff)
	}
	tpages, err := traits.List(c, traits.ListOpts{Name: "startswith:CUSTOM_"}).AllPages(ctx)
	must(t, "list traits", err)
	custom, err := traits.ExtractTraits(tpages)
	must(t, "extract traits", err)
	if diff := cmp.Diff([]string{"CUSTOM_RACK_A"}, custom); diff != "" {
		t.Errorf("custom traits (-want +got):\n%s", diff)
	}
	aggs, err := resourceproviders.UpdateAggregates(ctx, c, cn.UUID, resourceproviders.UpdateAggregatesOpts{
		ResourceProviderGeneration: intp(2), Aggregates: []string{"0f8c5a4e-7a5e-4a4f-8d61-1b3c3e0e9a11"},
	}).Extract()
	must(t, "put aggregates", err)
	if aggs.ResourceProviderGeneration == nil || *aggs.ResourceProviderGeneration != 3 || len(aggs.Aggregates) != 1 {
		t.Errorf("aggregates %+v", aggs)
	}

	// Reads of what was just written, one inventory changed alone, and a
	// rename (which does not bump the generation).
	gt, err := resourceproviders.GetTraits(ctx, c, cn.UUID).Extract()
	must(t, "get traits", err)
	if gt.ResourceProviderGeneration != 3 || len(gt.Traits) != 2 {
		t.Errorf("provider traits %+v", gt)
	}
	ga, err := resourceproviders.GetAggregates(ctx, c, cn.UUID).Extract()
	must(t, "get aggregates", err)
	if diff := cmp.Diff([]string{"0f8c5a4e-7a5e-4a4f-8d61-1b3c3e0e9a11"}, ga.Aggregates); diff != "" || ga.ResourceProviderGeneration == nil || *ga.ResourceProviderGeneration != 3 {
		t.Errorf("aggregates %+v (-want +got):\n%s", ga, diff)
	}
	gi, err := resourceproviders.GetInventories(ctx, c, cn.UUID).Extract()
	must(t, "get inventories", err)
	if gi.ResourceProviderGeneration != 3 || gi.Inventories["MEMORY_MB"].Reserved != 512 || len(gi.Inventories) != 3 {
		t.Errorf("inventories %+v", gi)
	}
	goldInv, err := resourceproviders.UpdateInventory(ctx, c, cn.UUID, "CUSTOM_GOLD", resourceproviders.UpdateInventoryOpts{
		ResourceProviderGeneration: 3,
		Inventory:                  resourceproviders.Inventory{Total: 6, MinUnit: 1, MaxUnit: 6, StepSize: 1, AllocationRatio: 1},
	}).Extract()
	must(t, "put one inventory", err)
	if goldInv.ResourceProviderGeneration != 4 || goldInv.Total != 6 {
		t.Errorf("CUSTOM_GOLD inventory %+v", goldInv)
	}
	renamed, err := resourceproviders.Update(ctx, c, cn.UUID, resourceproviders.UpdateOpts{Name: strp("cn1-renamed")}).Extract()
	must(t, "rename provider", err)
	if renamed.Name != "cn1-renamed" || renamed.Generation != 4 {
		t.Errorf("renamed provider %+v", renamed)
	}
	cpages, err := resourceclasses.List(c).AllPages(ctx)
	must(t, "list resource classes", err)
	classes, err := resourceclasses.ExtractResourceClasses(cpages)
	must(t, "extract resource classes", err)
	found := map[string]bool{}
	for _, rc := range classes {
		found[rc.Name] = true
	}
	if !found["VCPU"] || !found["CUSTOM_GOLD"] {
		t.Errorf("resource classes lack VCPU or CUSTOM_GOLD: %v", found)
	}

	// Allocations: a new consumer (generation null) with a type.
	const vm1, vm2 = "11111111-2222-4333-8444-555555555551", "11111111-2222-4333-8444-555555555552"
	must(t, "put allocations", allocations.Update(ctx, c, vm1, allocations.UpdateOpts{
		Allocations: map[string]allocations.ProviderAllocationsOpts{cn.UUID: {Resources: map[string]int{"VCPU": 2, "MEMORY_MB": 1024}}},
		ProjectID:   "proj-a", UserID: "user-a", ConsumerType: "INSTANCE",
	}).ExtractErr())
	got, err := allocations.Get(ctx, c, vm1).Extract()
	must(t, "get allocations", err)
	want := &allocations.Allocations{
		Allocations:        map[string]allocations.ProviderAllocations{cn.UUID: {Generation: 5, Resources: map[string]int{"VCPU": 2, "MEMORY_MB": 1024}}},
		ProjectID:          strp("proj-a"),
		UserID:             strp("user-a"),
		ConsumerGeneration: intp(1),
		ConsumerType:       strp("INSTANCE"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocations of %s (-want +got):\n%s", vm1, diff)
	}

	// A stale consumer generation is a 409 the client can recognise.
	err = allocations.Update(ctx, c, vm1, allocations.UpdateOpts{
		Allocations: map[string]allocations.ProviderAllocationsOpts{cn.UUID: {Resources: map[string]int{"VCPU": 1}}},
		ProjectID:   "proj-a", UserID: "user-a", ConsumerType: "INSTANCE", ConsumerGeneration: intp(7),
	}).ExtractErr()
	if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("stale consumer generation: %v, want 409", err)
	}
	// Over capacity: MEMORY_MB capacity is (4096-512)*1 = 3584, 1024 used.
	err = allocations.Update(ctx, c, vm2, allocations.UpdateOpts{
		Allocations: map[string]allocations.ProviderAllocationsOpts{cn.UUID: {Resources: map[string]int{"MEMORY_MB": 3000}}},
		ProjectID:   "proj-a", UserID: "user-b", ConsumerType: "INSTANCE",
	}).ExtractErr()
	if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("over capacity: %v, want 409", err)
	}

	// POST /allocations: rewrite vm1 (generation 1) and create vm2.
	must(t, "post allocations", allocations.Manage(ctx, c, allocations.ManageOpts{
		vm1: {Allocations: map[string]allocations.ProviderAllocationsOpts{cn.UUID: {Resources: map[string]int{"VCPU": 4, "MEMORY_MB": 1024}}},
			ProjectID: "proj-a", UserID: "user-a", ConsumerType: "INSTANCE", ConsumerGeneration: intp(1)},
		vm2: {Allocations: map[string]allocations.ProviderAllocationsOpts{cn.UUID: {Resources: map[string]int{"VCPU": 10, "CUSTOM_GOLD": 2}}},
			ProjectID: "proj-a", UserID: "user-b", ConsumerType: "MIGRATION"},
	}).ExtractErr())

	u, err := resourceproviders.GetUsages(ctx, c, cn.UUID).Extract()
	must(t, "provider usages", err)
	if diff := cmp.Diff(&resourceproviders.ResourceProviderUsage{ResourceProviderGeneration: 6,
		Usages: map[string]int{"VCPU": 14, "MEMORY_MB": 1024, "CUSTOM_GOLD": 2}}, u); diff != "" {
		t.Errorf("provider usages (-want +got):\n%s", diff)
	}
	pa, err := resourceproviders.GetAllocations(ctx, c, cn.UUID).Extract()
	must(t, "provider allocations", err)
	if diff := cmp.Diff(&resourceproviders.ResourceProviderAllocations{ResourceProviderGeneration: 6, Allocations: map[string]resourceproviders.Allocation{
		vm1: {Resources: map[string]int{"VCPU": 4, "MEMORY_MB": 1024}},
		vm2: {Resources: map[string]int{"VCPU": 10, "CUSTOM_GOLD": 2}},
	}}, pa); diff != "" {
		t.Errorf("provider allocations (-want +got):\n%s", diff)
	}

	// Usages by project, grouped by consumer type (1.38+).
	tu, err := usages.Get(ctx, c, usages.GetOpts{ProjectID: "proj-a"}).Extract()
	must(t, "usages", err)
	if diff := cmp.Diff(map[string]usages.ConsumerTypeUsage{
		"INSTANCE":  {"VCPU": 4, "MEMORY_MB": 1024, "consumer_count": 1},
		"MIGRATION": {"VCPU": 10, "CUSTOM_GOLD": 2, "consumer_count": 1},
	}, tu.Usages); diff != "" {
		t.Errorf("usages (-want +got):\n%s", diff)
	}
	tu, err = usages.Get(ctx, c, usages.GetOpts{ProjectID: "proj-a", UserID: "user-b", ConsumerType: "all"}).Extract()
	must(t, "usages all", err)
	if diff := cmp.Diff(map[string]usages.ConsumerTypeUsage{"all": {"VCPU": 10, "CUSTOM_GOLD": 2, "consumer_count": 1}}, tu.Usages); diff != "" {
		t.Errorf("usages of user-b (-want +got):\n%s", diff)
	}

	// A provider with allocations cannot be deleted; nor can its class.
	if err := resourceproviders.Delete(ctx, c, cn.UUID).ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("delete provider in use: %v, want 409", err)
	}
	if err := resourceclasses.Delete(ctx, c, "CUSTOM_GOLD").ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("delete class in use: %v, want 409", err)
	}

	// Delete both consumers; then everything can go.
	must(t, "delete vm1", allocations.Delete(ctx, c, vm1).ExtractErr())
	must(t, "delete vm2", allocations.Delete(ctx, c, vm2).ExtractErr())
	if err := allocations.Delete(ctx, c, vm2).ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("second delete: %v, want 404", err)
	}
	empty, err := allocations.Get(ctx, c, vm1).Extract()
	must(t, "get deleted allocations", err)
	if len(empty.Allocations) != 0 || empty.ProjectID != nil || empty.ConsumerGeneration != nil {
		t.Errorf("deleted consumer still shows %+v", empty)
	}
	must(t, "delete provider traits", resourceproviders.DeleteTraits(ctx, c, cn.UUID).ExtractErr())
	must(t, "delete trait", traits.Delete(ctx, c, "CUSTOM_RACK_A").ExtractErr())
	if err := traits.Get(ctx, c, "CUSTOM_RACK_A").ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("get deleted trait: %v, want 404", err)
	}
	must(t, "delete child", resourceproviders.Delete(ctx, c, child.UUID).ExtractErr())
	must(t, "delete inventories", resourceproviders.DeleteInventories(ctx, c, cn.UUID).ExtractErr())
	must(t, "delete provider", resourceproviders.Delete(ctx, c, cn.UUID).ExtractErr())
	must(t, "delete class", resourceclasses.Delete(ctx, c, "CUSTOM_GOLD").ExtractErr())
	_, err = resourceproviders.Get(ctx, c, cn.UUID).Extract()
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &unexpected) || unexpected.Actual != http.StatusNotFound {
		t.Errorf("get deleted provider: %v, want 404", err)
	}
}

// TestGophercloudOldMicroversion checks the pre-1.12 shapes decode too:
// allocations without project/user, usages without consumer types.
func TestGophercloudOldMicroversion(t *testing.T) {
	ctx := context.Background()
	c := placementClient(t, "1.28")
	rp, err := resourceproviders.Create(ctx, c, resourceproviders.CreateOpts{Name: "old"}).Extract()
	must(t, "create provider", err)
	_, err = resourceproviders.UpdateInventories(ctx, c, rp.UUID, resourceproviders.UpdateInventoriesOpts{
		Inventories: map[string]resourceproviders.Inventory{"DISK_GB": {Total: 100, MinUnit: 1, MaxUnit: 100, StepSize: 1, AllocationRatio: 1}},
	}).Extract()
	must(t, "put inventories", err)
	const vm = "99999999-2222-4333-8444-555555555551"
	must(t, "put allocations", allocations.Update(ctx, c, vm, allocations.UpdateOpts{
		Allocations: map[string]allocations.ProviderAllocationsOpts{rp.UUID: {Resources: map[string]int{"DISK_GB": 40}}},
		ProjectID:   "p", UserID: "u",
	}).ExtractErr())
	got, err := allocations.Get(ctx, c, vm).Extract()
	must(t, "get allocations", err)
	if got.ConsumerGeneration == nil || *got.ConsumerGeneration != 1 || got.ConsumerType != nil || got.Allocations[rp.UUID].Resources["DISK_GB"] != 40 {
		t.Errorf("allocations at 1.28: %+v", got)
	}
	// Below 1.38 /usages is flat: gophercloud's grouped type cannot hold
	// it, so read it raw.
	var raw struct {
		Usages map[string]int `json:"usages"`
	}
	must(t, "usages", usages.Get(ctx, c, usages.GetOpts{ProjectID: "p"}).ExtractInto(&raw))
	if diff := cmp.Diff(map[string]int{"DISK_GB": 40}, raw.Usages); diff != "" {
		t.Errorf("usages at 1.28 (-want +got):\n%s", diff)
	}
}

func strp(s string) *string { return &s }
