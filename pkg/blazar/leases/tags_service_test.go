package leases_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// TestLeaseTagsExclusion: lease tags are stored and shown (Get, List,
// the listing JSON), and host choice spreads leases that overlap in time
// and share an exclusion tag over racks, also from a view reloaded from
// the database (a second service).
func TestLeaseTagsExclusion(t *testing.T) {
	rules := allocator.ParseClusterTags([]string{"htools:iextags:svc:"})
	rules.LocationPrefixes = []string{"rack"}
	racks := func(i int) map[string]string { return map[string]string{"rack": string(rune('a' + (i-1)/2))} } // 1,2:a 3,4:b 5,6:c
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			d := dbtest.OpenDialect(t, dialect)
			clock := leasestest.NewClock(t0)
			hosts := leasestest.NewHosts(6, racks)
			svc, _ := leasestest.New(d, hosts, clock, leasestest.Options{Rules: &rules})
			mk := func(svc *leases.Service, name, start, end string, tags ...any) *leases.View {
				t.Helper()
				req := leasestest.Request(name, start, end, leasestest.HostReservation(1, 1, "", ""))
				if tags != nil {
					req.Tags = tags
				}
				v, err := svc.Create(context.Background(), owner, req)
				if err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				return v
			}
			db1 := mk(svc, "db1", "2030-01-02 00:00", "2030-01-03 00:00", "svc:db", "team")
			db2 := mk(svc, "db2", "2030-01-02 12:00", "2030-01-04 00:00", "svc:db")
			web := mk(svc, "web", "2030-01-02 00:00", "2030-01-03 00:00", "svc:web")
			plain := mk(svc, "plain", "2030-01-05 00:00", "2030-01-06 00:00")
			later := mk(svc, "db-later", "2030-01-05 00:00", "2030-01-06 00:00", "svc:db")
			// A second service reads the tags back from the database.
			svc2, _ := leasestest.New(d, hosts, clock, leasestest.Options{Rules: &rules})
			db3 := mk(svc2, "db3", "2030-01-02 18:00", "2030-01-02 20:00", "svc:db")
			got := map[string][]string{}
			for _, v := range []*leases.View{db1, db2, web, plain, later, db3} {
				got[v.Name] = hostsOf(t, svc, v.ID)
			}
			want := map[string][]string{
				"db1":      {"1"}, // best fit, lowest id
				"db2":      {"3"}, // rack a holds db1 over db2's window
				"web":      {"2"}, // another service: rack a is fine
				"plain":    {"3"}, // fit in time: the host booked closest before the window
				"db-later": {"1"}, // no db lease overlaps: the plain fit in time
				"db3":      {"5"}, // racks a and b hold db leases
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
			// Shown in the body, Get, List and the listing JSON.
			if diff := cmp.Diff([]string{"svc:db", "team"}, db1.Tags); diff != "" {
				t.Errorf("create body tags (-want +got):\n%s", diff)
			}
			v, err := svc2.Get(context.Background(), owner, db1.ID)
			if err != nil || !cmp.Equal(v.Tags, []string{"svc:db", "team"}) {
				t.Errorf("Get tags = %v, %v", v.Tags, err)
			}
			ls, err := svc.List(context.Background(), owner)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string][]string{}
			for _, v := range ls {
				byName[v.Name] = v.Tags
			}
			if !cmp.Equal(byName["plain"], []string{}) || !cmp.Equal(byName["db1"], []string{"svc:db", "team"}) {
				t.Errorf("List tags = %v", byName)
			}
			b, err := svc.ListJSON(context.Background(), owner)
			if err != nil {
				t.Fatal(err)
			}
			var js []struct {
				Name string   `json:"name"`
				Tags []string `json:"tags"`
			}
			if err := json.Unmarshal(b, &js); err != nil {
				t.Fatalf("listing JSON: %v\n%s", err, b)
			}
			for _, x := range js {
				if !cmp.Equal(x.Tags, byName[x.Name]) {
					t.Errorf("listing JSON tags of %s = %v, List gives %v", x.Name, x.Tags, byName[x.Name])
				}
			}
			// A bad tags value is refused before anything is written.
			req := leasestest.Request("bad", "2030-02-01 00:00", "2030-02-02 00:00", leasestest.HostReservation(1, 1, "", ""))
			req.Tags = "svc:db"
			if _, err := svc.Create(context.Background(), owner, req); status(err) != 400 {
				t.Errorf("tags as a string: %v, want 400", err)
			}
		})
	}
}

// TestLeaseTagsExclusionUpdate: a lease update that moves a reservation
// onto a new host spreads it away from the racks of overlapping leases
// sharing an exclusion tag, and not away from the lease's own hosts.
func TestLeaseTagsExclusionUpdate(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			svc := fourHostsTwoRacks(t, dialect)
			mk := func(name, start, end string) *leases.View {
				t.Helper()
				req := leasestest.Request(name, start, end, leasestest.HostReservation(1, 1, "", ""))
				req.Tags = []any{"svc:db"}
				v, err := svc.Create(context.Background(), owner, req)
				if err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				return v
			}
			first := mk("first", "2030-01-02 00:00", "2030-01-03 00:00")
			second := mk("second", "2030-01-05 00:00", "2030-01-06 00:00")
			if got := hostsOf(t, svc, first.ID); !cmp.Equal(got, []string{"1"}) {
				t.Fatalf("first on %v, want [1]", got)
			}
			if got := hostsOf(t, svc, second.ID); !cmp.Equal(got, []string{"1"}) {
				t.Fatalf("second on %v, want [1] (no overlap, the fit in time)", got)
			}
			// Moved over first's window: host 1 is busy, rack a holds
			// first, so rack b (host 3) rather than host 2.
			if _, err := svc.Update(context.Background(), owner, second.ID, leases.UpdateRequest{
				StartDate: leasestest.Str("2030-01-02 06:00"), EndDate: leasestest.Str("2030-01-02 12:00")}); err != nil {
				t.Fatal(err)
			}
			if got := hostsOf(t, svc, second.ID); !cmp.Equal(got, []string{"3"}) {
				t.Errorf("second after the update on %v, want [3]", got)
			}
		})
	}
}

// TestLeaseTagsUpdate: "tags" in a lease update replaces the tags (null
// clears them), a bad value changes nothing, and a reservation placed
// again by the same update is placed with the new tags.
func TestLeaseTagsUpdate(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			svc := fourHostsTwoRacks(t, dialect)
			ctx := context.Background()
			req := leasestest.Request("first", "2030-01-02 00:00", "2030-01-03 00:00", leasestest.HostReservation(1, 1, "", ""))
			req.Tags = []any{"svc:db"}
			first, err := svc.Create(ctx, owner, req)
			if err != nil {
				t.Fatal(err)
			}
			second, err := svc.Create(ctx, owner, leasestest.Request("second", "2030-01-05 00:00", "2030-01-06 00:00", leasestest.HostReservation(1, 1, "", "")))
			if err != nil {
				t.Fatal(err)
			}
			tagsOf := func(id string) []string {
				t.Helper()
				v, err := svc.Get(ctx, owner, id)
				if err != nil {
					t.Fatal(err)
				}
				return v.Tags
			}
			for _, tc := range []struct {
				name string
				tags any
				want []string
				code int
			}{
				{"set", []any{"team-a", "team-a", "x"}, []string{"team-a", "x"}, 0},
				{"not a list", "team-a", []string{"team-a", "x"}, 400},
				{"an empty string", []any{""}, []string{"team-a", "x"}, 400},
				{"null clears", nil, []string{}, 0},
				{"set again", []any{"y"}, []string{"y"}, 0},
				{"empty list clears", []any{}, []string{}, 0},
			} {
				_, err := svc.Update(ctx, owner, second.ID, leases.UpdateRequest{Tags: tc.tags, TagsGiven: true})
				if status(err) != tc.code && !(tc.code == 0 && err == nil) {
					t.Errorf("%s: %v, want %d", tc.name, err, tc.code)
				}
				if got := tagsOf(second.ID); !cmp.Equal(got, tc.want) {
					t.Errorf("%s: tags %v, want %v", tc.name, got, tc.want)
				}
			}
			// Moved over first's window with first's exclusion tag: rack a
			// holds first, so rack b (host 3) rather than host 2.
			if _, err := svc.Update(ctx, owner, second.ID, leases.UpdateRequest{
				StartDate: leasestest.Str("2030-01-02 06:00"), EndDate: leasestest.Str("2030-01-02 12:00"),
				Tags: []any{"svc:db"}, TagsGiven: true}); err != nil {
				t.Fatal(err)
			}
			if got := hostsOf(t, svc, second.ID); !cmp.Equal(got, []string{"3"}) {
				t.Errorf("second after the update on %v, want [3]", got)
			}
			if got := tagsOf(second.ID); !cmp.Equal(got, []string{"svc:db"}) {
				t.Errorf("tags %v after the update", got)
			}
			_ = first
		})
	}
}

// fourHostsTwoRacks is a lease service on dialect with hosts 1 and 2 in
// rack a, 3 and 4 in rack b, and svc: tags as exclusion tags.
func fourHostsTwoRacks(t *testing.T, dialect db.Dialect) *leases.Service {
	rules := allocator.ParseClusterTags([]string{"htools:iextags:svc:"})
	rules.LocationPrefixes = []string{"rack"}
	racks := func(i int) map[string]string { return map[string]string{"rack": string(rune('a' + (i-1)/2))} }
	svc, _ := leasestest.New(dbtest.OpenDialect(t, dialect), leasestest.NewHosts(4, racks), leasestest.NewClock(t0), leasestest.Options{Rules: &rules})
	return svc
}
