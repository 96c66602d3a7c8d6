package hosts

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/hostquery"
)

func TestReservableCache(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		other, _ := newService(t, d) // a second process on the same DB
		h1, _ := s.Create(ctx, body("name", "c1", "vcpus", "2", "gpu", "a"))
		list, err := other.Reservable(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("reservable %+v %v", list, err)
		}
		if _, err := s.Create(ctx, body("name", "c2", "vcpus", "8")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, h1.ID, body("gpu", "b")); err != nil {
			t.Fatal(err)
		}
		for _, svc := range []*Service{s, other} {
			list, err = svc.Reservable(ctx)
			if err != nil || len(list) != 2 || list[0].ExtraCapabilities["gpu"] != "b" {
				t.Fatalf("after writes: %+v %v", list, err)
			}
		}
		// A write outside the service that bumps the marker is seen too.
		if err := d.Transaction(func(tx *gorm.DB) error {
			if err := tx.Model(&models.ComputeHost{}).Where("id = ?", h1.ID).Update("reservable", false).Error; err != nil {
				return err
			}
			return BumpMarkerTx(tx)
		}); err != nil {
			t.Fatal(err)
		}
		list, _ = other.Reservable(ctx)
		if len(list) != 1 || list[0].HypervisorHostname != "c2" {
			t.Fatalf("after marker bump: %+v", list)
		}
		q, _ := hostquery.Parse(`{"vcpus": ">= 4"}`)
		if ok, reason := q.Match(list[0].Lookup); !ok {
			t.Errorf("c2 should match: %s", reason)
		}
		all, _ := s.List(ctx)
		if ok, reason := q.Match(all[0].Lookup); ok || reason != "vcpus >= 4 (host has 2)" {
			t.Errorf("c1: %v %q", ok, reason)
		}
	})
}

func TestReservableTx(t *testing.T) {
	eachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, _ := newService(t, d)
		h1, _ := s.Create(ctx, body("name", "c1"))
		h2, _ := s.Create(ctx, body("name", "c2", "reservable", "false"))
		h3, _ := s.Create(ctx, body("name", "c3"))
		if err := s.Delete(ctx, h3.ID); err != nil {
			t.Fatal(err)
		}
		got, err := ReservableTx(d.DB, []string{h1.ID, h2.ID, h3.ID, "x", "0"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]bool{h1.ID: true}, got); diff != "" {
			t.Errorf("ReservableTx (-want +got):\n%s", diff)
		}
	})
}

// TestReservableSingleLoad: callers arriving together after a write share
// one load.
func TestReservableSingleLoad(t *testing.T) {
	d := dbtest.Open(t)
	ctx := context.Background()
	s, _ := newService(t, d)
	for i := 0; i < 3; i++ {
		if _, err := s.Create(ctx, body("name", fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	before := s.loads.Load()
	var wg sync.WaitGroup
	results := make([][]Host, 16)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			hs, err := s.Reservable(ctx)
			if err != nil {
				t.Error(err)
			}
			results[i] = hs
		}(i)
	}
	wg.Wait()
	if n := s.loads.Load() - before; n != 1 {
		t.Errorf("%d loads for 16 concurrent callers, want 1", n)
	}
	for _, r := range results {
		if len(r) != 3 || &r[0] != &results[0][0] {
			t.Fatalf("callers got different copies")
		}
	}
}
