package openapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/instance"
)

// flavors is a compute service's flavor list: no driver of main offers
// flavors yet (pkg/server registers flavor:instance only with one that
// does), so this test supplies the lookup and nothing else.
type flavors map[string]instance.Flavor

func (f flavors) GetFlavor(_ context.Context, id, _ string) (instance.Flavor, error) {
	fl, ok := f[id]
	if !ok {
		return instance.Flavor{}, errs.NotFoundf("Flavor %s could not be found.", id)
	}
	return fl, nil
}

// TestFlavorInstanceTraffic drives the Blazar handlers, with the
// virtual:instance and flavor:instance plugins over a real database,
// through flavor:instance leases, and validates every exchange against
// etc/openapi/blazar-v1.yaml.
func TestFlavorInstanceTraffic(t *testing.T) {
	s := loadBlazar(t)
	d := dbtest.Open(t)
	t.Logf("database dialect %s", d.Dialect)
	hs := hosts.New(d, standalone.New(slog.New(slog.NewTextHandler(io.Discard, nil))))
	inst := instance.New(hs, instance.Config{CheckHosts: hosts.ReservableTx})
	reg, err := plugins.NewRegistry(inst, instance.NewFlavor(inst, flavors{
		"m1.small": {ID: "m1.small", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20, Ephemeral: 5,
			ExtraSpecs: map[string]string{"hw:cpu_policy": "shared"}},
		"broken": {ID: "broken", Name: "broken", VCPUs: 0, RAM: 512},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ls := leases.New(d, reg, leases.Config{}, nil, func() {})
	rt := blazarapi.NewRouter()
	blazarapi.RegisterLeases(rt, ls)
	blazarapi.RegisterHosts(rt, hs)
	srv := httptest.NewServer(http.StripPrefix("/v1", rt.Handler(blazarapi.NoAuth{})))
	t.Cleanup(srv.Close)

	c := &client{t: t, base: srv.URL, hc: &http.Client{Timeout: 30 * time.Second}}
	const admin, member = "admin", "user:project"
	now := time.Now().UTC()
	future := func(days int) string { return now.AddDate(0, 0, days).Format("2006-01-02 15:04") }
	lease := func(name, res string) string {
		return `{"name":"` + name + `","start_date":"` + future(1) + `","end_date":"` + future(2) + `","reservations":[` + res + `],"events":[]}`
	}
	c.call("create host", admin, "POST", "/v1/os-hosts", `{"name":"compute-f1","vcpus":"8","memory_mb":"16384","local_gb":"200"}`, http.StatusCreated)
	c.call("create second host", admin, "POST", "/v1/os-hosts", `{"name":"compute-f2","vcpus":"8","memory_mb":"16384","local_gb":"200"}`, http.StatusCreated)
	l := c.call("create flavor:instance lease", member, "POST", "/v1/leases",
		lease("flavored", `{"resource_type":"flavor:instance","amount":2,"flavor_id":"m1.small","affinity":true}`), http.StatusCreated)
	if got := field(t, l, "lease.reservations.0.resource_type"); got != "flavor:instance" {
		t.Errorf("resource_type %s, want flavor:instance", got)
	}
	if got := field(t, l, "lease.reservations.0.disk_gb"); got != "25" {
		t.Errorf("flavor:instance slot disk_gb %s, want the flavor's disk plus ephemeral disk, 25", got)
	}
	id, rid := field(t, l, "lease.id"), field(t, l, "lease.reservations.0.id")
	c.call("create virtual:instance lease beside it", member, "POST", "/v1/leases",
		lease("sized", `{"resource_type":"virtual:instance","amount":1,"vcpus":1,"memory_mb":1024,"disk_gb":10,"affinity":null,"resource_properties":""}`), http.StatusCreated)
	c.call("show flavor:instance lease", member, "GET", "/v1/leases/"+id, "", http.StatusOK)
	c.call("list leases", member, "GET", "/v1/leases", "", http.StatusOK)
	c.call("update its amount and affinity", member, "PUT", "/v1/leases/"+id,
		`{"reservations":[{"id":"`+rid+`","amount":"1","affinity":"false"}]}`, http.StatusOK)
	c.call("update its size", member, "PUT", "/v1/leases/"+id, `{"reservations":[{"id":"`+rid+`","vcpus":2}]}`, http.StatusConflict)
	c.call("unknown flavor", member, "POST", "/v1/leases",
		lease("nope", `{"resource_type":"flavor:instance","amount":1,"flavor_id":"m9.huge","affinity":null}`), http.StatusNotFound)
	c.call("flavor without VCPUs", member, "POST", "/v1/leases",
		lease("broken", `{"resource_type":"flavor:instance","amount":1,"flavor_id":"broken","affinity":null}`), http.StatusBadRequest)
	c.call("flavor:instance without flavor_id", member, "POST", "/v1/leases",
		lease("idless", `{"resource_type":"flavor:instance","amount":1,"affinity":null}`), http.StatusBadRequest)
	c.call("more flavor slots than the hosts hold", member, "POST", "/v1/leases",
		lease("huge", `{"resource_type":"flavor:instance","amount":100,"flavor_id":"m1.small","affinity":null}`), http.StatusConflict)
	c.call("delete flavor:instance lease", member, "DELETE", "/v1/leases/"+id, "", http.StatusNoContent)

	ch := newChecker(t, s)
	for _, e := range c.log {
		ch.check(e)
	}
	ch.summary("flavor:instance traffic")
	if !t.Failed() {
		t.Run("broken descriptions fail", func(t *testing.T) { checkBrokenDescriptions(t, c.log, flavorBreakages, false) })
	}
}

// flavorBreakages break what only the flavor:instance traffic covers.
var flavorBreakages = []breakage{
	{"flavor:instance not a reservation type of answers",
		`          enum: ["virtual:instance", "flavor:instance"]`, `          enum: ["virtual:instance"]`},
	{"flavor:instance not a reservation type of requests",
		`enum: ["physical:host", "virtual:floatingip", "virtual:instance", "flavor:instance"]`,
		`enum: ["physical:host", "virtual:floatingip", "virtual:instance"]`},
	{"flavor_id of a request an integer",
		"        flavor_id:\n          description: The existing flavor a flavor:instance reservation is sized from.\n          type: string",
		"        flavor_id:\n          description: The existing flavor a flavor:instance reservation is sized from.\n          type: integer"},
}
