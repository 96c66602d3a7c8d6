package hosts

import (
	"context"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

type modelHost struct {
	Name       string
	Reservable bool
	Caps       map[string]string
}

// TestReservableMatchesModel runs random host writes through two Services
// sharing one database (two processes) plus outside writes that bump the
// marker, and checks after every step that both Services' Reservable and
// List agree with a plain model: the cache is never stale.
func TestReservableMatchesModel(t *testing.T) {
	// The property is about caching, not SQL dialects (the service tests
	// run on both): SQLite keeps it quick.
	d := dbtest.OpenDialect(t, db.SQLite)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		for _, q := range []string{"DELETE FROM computehost_extra_capabilities", "DELETE FROM computehosts", "DELETE FROM resource_properties",
			"DELETE FROM inventories", "DELETE FROM resource_providers"} {
			if err := d.Exec(q).Error; err != nil {
				rt.Fatal(err)
			}
		}
		a, _ := newService(t, d)
		b, _ := newService(t, d)
		svcs := []*Service{a, b}
		model := map[string]*modelHost{} // by API id
		names := rapid.SampledFrom([]string{"h1", "h2", "h3", "h4"})
		keys := rapid.SampledFrom([]string{"gpu", "rack", "ssd"})
		vals := rapid.SampledFrom([]string{"a", "b", "1"})
		ids := func() []string {
			var out []string
			for id := range model {
				out = append(out, id)
			}
			sort.Strings(out)
			return out
		}
		check := func() {
			var want []modelHost
			var wantAll []modelHost
			var order []string
			for id := range model {
				order = append(order, id)
			}
			sort.Slice(order, func(i, j int) bool { x, _ := strconv.Atoi(order[i]); y, _ := strconv.Atoi(order[j]); return x < y })
			for _, id := range order {
				wantAll = append(wantAll, *model[id])
				if model[id].Reservable {
					want = append(want, *model[id])
				}
			}
			conv := func(hs []Host) []modelHost {
				var out []modelHost
				for _, h := range hs {
					out = append(out, modelHost{h.HypervisorHostname, h.Reservable, h.ExtraCapabilities})
				}
				return out
			}
			for i, s := range svcs {
				got, err := s.Reservable(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				if diff := cmp.Diff(want, conv(got)); diff != "" {
					rt.Fatalf("service %d Reservable (-model +got):\n%s", i, diff)
				}
				all, err := s.List(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				if diff := cmp.Diff(wantAll, conv(all)); diff != "" {
					rt.Fatalf("service %d List (-model +got):\n%s", i, diff)
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": func(*rapid.T) { check() },
			"create": func(rt *rapid.T) {
				s := svcs[rapid.IntRange(0, 1).Draw(rt, "svc")]
				name := names.Draw(rt, "name")
				caps := map[string]string{}
				for _, k := range rapid.SliceOfNDistinct(keys, 0, 3, rapid.ID[string]).Draw(rt, "keys") {
					caps[k] = vals.Draw(rt, "val")
				}
				body := map[string]any{"name": name}
				for k, v := range caps {
					body[k] = v
				}
				h, err := s.Create(ctx, body)
				exists := false
				for _, m := range model {
					exists = exists || m.Name == name
				}
				if exists {
					if err == nil {
						rt.Fatalf("duplicate %s created", name)
					}
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				model[h.ID] = &modelHost{Name: name, Reservable: true, Caps: caps}
			},
			"update": func(rt *rapid.T) {
				if len(model) == 0 {
					rt.Skip("no host")
				}
				s := svcs[rapid.IntRange(0, 1).Draw(rt, "svc")]
				id := rapid.SampledFrom(ids()).Draw(rt, "id")
				k, v := keys.Draw(rt, "key"), vals.Draw(rt, "val")
				if _, err := s.Update(ctx, id, map[string]any{k: v}); err != nil {
					rt.Fatal(err)
				}
				model[id].Caps[k] = v
			},
			"delete": func(rt *rapid.T) {
				if len(model) == 0 {
					rt.Skip("no host")
				}
				s := svcs[rapid.IntRange(0, 1).Draw(rt, "svc")]
				id := rapid.SampledFrom(ids()).Draw(rt, "id")
				if err := s.Delete(ctx, id); err != nil {
					rt.Fatal(err)
				}
				delete(model, id)
			},
			"toggle reservable outside": func(rt *rapid.T) {
				if len(model) == 0 {
					rt.Skip("no host")
				}
				id := rapid.SampledFrom(ids()).Draw(rt, "id")
				m := model[id]
				if err := d.Transaction(func(tx *gorm.DB) error {
					if err := tx.Model(&models.ComputeHost{}).Where("id = ?", id).Update("reservable", !m.Reservable).Error; err != nil {
						return err
					}
					return BumpMarkerTx(tx)
				}); err != nil {
					rt.Fatal(err)
				}
				m.Reservable = !m.Reservable
			},
		})
	})
}
