package hostchoice_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
)

// taggedLease creates a lease of one single-host physical:host
// reservation with the given tags; it returns the lease.
func (a *api) taggedLease(name string, start, end time.Time, tags ...string) map[string]any {
	a.t.Helper()
	out := a.must(http.StatusCreated, "POST", "/v1/leases", map[string]any{
		"name": name, "start_date": start.Format("2006-01-02 15:04"), "end_date": end.Format("2006-01-02 15:04"),
		"tags": tags,
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": ""}},
	})
	return out["lease"].(map[string]any)
}

// TestExclusionTags: with cluster_tags = htools:iextags:svc: and the
// failure domain rack, three leases overlapping in time and tagged
// svc:db land on three racks (Ganeti's exclusion tags spread instances
// over failure domains), while a svc:web lease is not kept from them;
// the tags are shown in the lease and the listing.
func TestExclusionTags(t *testing.T) {
	a := startWith(t, func(cfg *config.Config) {
		cfg.Blazar.PhysicalHost.ClusterTags = []string{"htools:iextags:svc:"}
	})
	rackOf := map[string]string{}
	for i, rack := range []string{"a", "a", "b", "b", "c", "c"} {
		rackOf[a.addHost(fmt.Sprintf("compute-%d", i+1), map[string]any{"rack": rack})] = rack
	}
	web := a.taggedLease("web", future(0), future(6), "svc:web")
	var dbRacks []string
	for i, name := range []string{"db1", "db2", "db3"} {
		l := a.taggedLease(name, future(i), future(i+4), "svc:db", "team-a")
		hosts := a.hostsOf(l["id"].(string))
		if len(hosts) != 1 {
			t.Fatalf("%s hosts %v, want one", name, hosts)
		}
		dbRacks = append(dbRacks, rackOf[hosts[0]])
		if got := fmt.Sprint(l["tags"]); got != "[svc:db team-a]" {
			t.Errorf("%s tags in the create answer = %s", name, got)
		}
	}
	slices.Sort(dbRacks)
	if !slices.Equal(dbRacks, []string{"a", "b", "c"}) {
		t.Errorf("svc:db leases on racks %v, want one on each of a, b and c", dbRacks)
	}
	// The listing shows every lease's tags.
	out := a.must(http.StatusOK, "GET", "/v1/leases", nil)
	tags := map[string]string{}
	for _, x := range out["leases"].([]any) {
		l := x.(map[string]any)
		tags[fmt.Sprint(l["name"])] = fmt.Sprint(l["tags"])
	}
	if tags["web"] != "[svc:web]" || tags["db2"] != "[svc:db team-a]" {
		t.Errorf("listed tags = %v", tags)
	}
	got := a.must(http.StatusOK, "GET", "/v1/leases/"+web["id"].(string), nil)
	if fmt.Sprint(got["lease"].(map[string]any)["tags"]) != "[svc:web]" {
		t.Errorf("GET web lease = %v", got)
	}
	a.must(http.StatusBadRequest, "POST", "/v1/leases", map[string]any{
		"name": "bad", "tags": []any{"ok", 7}, "start_date": future(10).Format("2006-01-02 15:04"),
		"end_date": future(11).Format("2006-01-02 15:04"), "reservations": []any{}})
}

// TestExclusionTagsHealing: a lease healed off a host made
// non-reservable goes to a rack free of the overlapping lease that
// shares its exclusion tag (host 4 on rack b, not host 2 on rack a).
func TestExclusionTagsHealing(t *testing.T) {
	a := startWith(t, func(cfg *config.Config) {
		cfg.Blazar.PhysicalHost.ClusterTags = []string{"htools:iextags:svc:"}
	})
	for i, rack := range []string{"a", "a", "b", "b", "c", "c"} {
		if id := a.addHost(fmt.Sprintf("compute-%d", i+1), map[string]any{"rack": rack}); id != fmt.Sprint(i+1) {
			t.Fatalf("host id %s, want %d", id, i+1)
		}
	}
	db1 := a.taggedLease("db1", future(0), future(4), "svc:db")["id"].(string)
	db2 := a.taggedLease("db2", future(0), future(4), "svc:db")["id"].(string)
	if h1, h2 := a.hostsOf(db1), a.hostsOf(db2); fmt.Sprint(h1, h2) != "[1] [3]" {
		t.Fatalf("db1 on %v, db2 on %v; want [1] [3]", h1, h2)
	}
	a.must(http.StatusOK, "PUT", "/v1/os-hosts/3", map[string]any{"reservable": false})
	if got := a.hostsOf(db2); fmt.Sprint(got) != "[4]" {
		t.Errorf("db2 healed onto %v, want [4] (rack a holds db1)", got)
	}
}
