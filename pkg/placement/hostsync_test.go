package placement

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
)

func TestHostProviders(t *testing.T) {
	d := dbtest.Open(t)
	var hp *HostProviders
	err := d.Transaction(func(tx *gorm.DB) error {
		var err error
		hp, err = CreateHostProvidersTx(tx, HostResources{Hostname: "c1", VCPUs: 8, MemoryMB: 4096, DiskGB: 0})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !hp.CreatedCompute {
		t.Error("CreatedCompute false for a new provider")
	}
	type inv struct {
		Class                   string
		Total, MinUnit, MaxUnit int64
		Ratio                   float64
	}
	var invs []inv
	d.Raw(`SELECT rc.name AS class, i.total, i.min_unit, i.max_unit, i.allocation_ratio AS ratio FROM inventories i
 JOIN resource_classes rc ON rc.id = i.resource_class_id JOIN resource_providers rp ON rp.id = i.resource_provider_id
 WHERE rp.uuid = ? ORDER BY rc.name`, hp.ComputeUUID).Scan(&invs)
	if diff := cmp.Diff([]inv{{"MEMORY_MB", 4096, 1, 4096, 1}, {"VCPU", 8, 1, 8, 1}}, invs); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
	var rps []models.ResourceProvider
	d.Order("id").Find(&rps)
	if len(rps) != 2 || rps[0].Name != "c1" || rps[0].Generation != 1 || rps[1].Name != "blazar_c1" ||
		rps[1].ParentProviderID == nil || *rps[1].ParentProviderID != rps[0].ID || rps[1].RootProviderID != rps[0].ID {
		t.Fatalf("providers %+v", rps)
	}

	conflict := func(err error) {
		t.Helper()
		var pe *errs.Error
		if !errors.As(err, &pe) || pe.Kind != errs.Conflict {
			t.Fatalf("err = %v, want a conflict", err)
		}
	}
	// The child exists already: conflict, nothing written.
	conflict(d.Transaction(func(tx *gorm.DB) error {
		_, err := CreateHostProvidersTx(tx, HostResources{Hostname: "c1", VCPUs: 1})
		return err
	}))
	// Another child under the compute node blocks deleting it.
	other, err := CreateProviderTx(d.DB, "other", "33333333-3333-3333-3333-333333333333", &hp.ComputeUUID)
	if err != nil {
		t.Fatal(err)
	}
	conflict(d.Transaction(func(tx *gorm.DB) error { return DeleteHostProvidersTx(tx, *hp) }))
	var n int64
	d.Model(&models.ResourceProvider{}).Count(&n)
	if n != 3 {
		t.Fatalf("refused delete removed providers: %d left", n)
	}
	// Not created by us: only the child goes.
	keep := *hp
	keep.CreatedCompute = false
	if err := d.Transaction(func(tx *gorm.DB) error { return DeleteHostProvidersTx(tx, keep) }); err != nil {
		t.Fatal(err)
	}
	var names []string
	d.Model(&models.ResourceProvider{}).Order("id").Pluck("name", &names)
	if diff := cmp.Diff([]string{"c1", "other"}, names); diff != "" {
		t.Errorf("after delete (-want +got):\n%s", diff)
	}
	// Gone providers are skipped; with the other child removed the
	// compute node goes with its inventory.
	if err := d.Exec("DELETE FROM resource_providers WHERE id = ?", other.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := d.Transaction(func(tx *gorm.DB) error { return DeleteHostProvidersTx(tx, *hp) }); err != nil {
		t.Fatal(err)
	}
	d.Model(&models.ResourceProvider{}).Count(&n)
	var ni int64
	d.Model(&models.Inventory{}).Count(&ni)
	if n != 0 || ni != 0 {
		t.Errorf("%d providers, %d inventories left", n, ni)
	}
}
