package blazar

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/blazar/hosts"
	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
)

// newLeasesServer wires hosts, floating IPs and leases on one database
// with a fixed clock (2030-01-01 10:00:30 UTC).
func newLeasesServer(t *testing.T) http.Handler {
	t.Helper()
	d := dbtest.Open(t)
	clock := leasestest.NewClock(time.Date(2030, 1, 1, 10, 0, 30, 0, time.UTC))
	drv := standalone.New(nil)
	hsvc := hosts.New(d, drv)
	hsvc.SetClock(clock.Now)
	reg, err := plugins.NewRegistry(
		hostplugin.New(hsvc, d.DB, hostplugin.Config{CheckHosts: hosts.ReservableTx}, clock.Now),
		floatingip.New(hsvc),
	)
	if err != nil {
		t.Fatal(err)
	}
	lsvc := leases.New(d, reg, leases.Config{MinutesBeforeEndLease: 60}, clock.Now, nil)
	rt := NewRouter()
	RegisterHosts(rt, hsvc)
	RegisterFloatingIPs(rt, hsvc)
	RegisterLeases(rt, lsvc)
	return rt.Handler(NoAuth{})
}

var (
	other  = map[string]string{"X-User-Id": "u2", "X-Project-Id": "p2", "X-Roles": "member"}
	reader = map[string]string{"X-User-Id": "u3", "X-Project-Id": "p1", "X-Roles": "reader"}
)

func TestLeasesGolden(t *testing.T) {
	h := newLeasesServer(t)
	hostRes := func(min, max int, hyper, res string) string {
		return `{"resource_type": "physical:host", "min": ` + itoa(min) + `, "max": ` + itoa(max) +
			`, "hypervisor_properties": ` + quote(hyper) + `, "resource_properties": ` + quote(res) + `}`
	}
	runGolden(t, h, "leases", []step{
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-1", "vcpus": "8", "gpu": "true"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-2", "vcpus": "2"}`},
		{Method: "POST", Path: "/os-hosts", Body: `{"name": "compute-3", "vcpus": "4"}`},
		{Method: "GET", Path: "/leases"},
		// blazar lease-create (lease1 of the recorded traffic).
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "lease1", "start_date": "2030-01-02 12:00", "end_date": "2030-01-03 12:00", "reservations": [` +
			hostRes(1, 2, `[">=", "$vcpus", "4"]`, "") + `], "events": [], "before_end_date": null}`},
		{Method: "GET", Path: "/leases", Headers: member},
		{Method: "GET", Path: "/leases/{uuid-B}", Headers: member},
		{Method: "GET", Path: "/leases/{uuid-B}.json", Headers: member},
		{Method: "GET", Path: "/os-hosts/allocations"},
		// Another project sees nothing and may not touch it.
		{Method: "GET", Path: "/leases", Headers: other},
		{Method: "GET", Path: "/leases/{uuid-B}", Headers: other},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: other, Body: `{"name": "mine"}`},
		{Method: "DELETE", Path: "/leases/{uuid-B}", Headers: other},
		// A reader may look but not write.
		{Method: "GET", Path: "/leases/{uuid-B}", Headers: reader},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: reader, Body: `{"name": "x"}`},
		// Errors.
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "too-many", "start_date": "2030-05-01 12:00", "end_date": "2030-05-02 12:00", "reservations": [` + hostRes(5, 5, "", "") + `], "events": [], "before_end_date": null}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "gpu2", "start_date": "2030-01-02 18:00", "end_date": "2030-01-02 20:00", "reservations": [` + hostRes(1, 1, "", `["==", "$gpu", "true"]`) + `]}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "past", "start_date": "2001-01-01 12:00", "end_date": "2001-01-02 12:00", "reservations": []}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "bad", "start_date": "2030-01-01 12:00:00.000", "end_date": "2030-01-02 12:00"}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "rev", "start_date": "2030-01-03 12:00", "end_date": "2030-01-02 12:00"}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "nomin", "start_date": "now", "end_date": "2030-01-02 12:00", "reservations": [{"resource_type": "physical:host", "min": "", "max": "", "hypervisor_properties": "", "resource_properties": ""}]}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "badprops", "start_date": "now", "end_date": "2030-01-02 12:00", "reservations": [` + hostRes(1, 1, `[">=", "$vcpus", 4]`, "") + `]}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "x", "start_date": "now"}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "x", "start_date": "now", "end_date": "2030-01-02 12:00", "reservations": {}}`},
		{Method: "POST", Path: "/leases", Headers: member, Body: `[]`},
		{Method: "POST", Path: "/leases", Headers: reader, Body: `{"name": "r", "start_date": "now", "end_date": "2030-01-02 12:00"}`},
		{Method: "GET", Path: "/leases/00000000-0000-4000-8000-000000000000", Headers: member},
		{Method: "PUT", Path: "/leases/00000000-0000-4000-8000-000000000000", Headers: member, Body: `{"name": "x"}`},
		{Method: "DELETE", Path: "/leases/00000000-0000-4000-8000-000000000000", Headers: member},
		// Updates as the client sends them.
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"end_date": "2030-01-04 12:00"}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"start_date": "2030-01-02 13:00"}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"name": "lease1b"}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"reservations": [{"id": "{uuid-E}", "min": 1, "max": 1}]}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"events": []}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"end_date": "2030-01-02 12:00"}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"start_date": "2029-12-31 12:00"}`},
		{Method: "PUT", Path: "/leases/{uuid-B}", Headers: member, Body: `{"reservations": [{"id": "nope", "max": 1}]}`},
		// A lease starting now; deletion of both.
		{Method: "POST", Path: "/leases", Headers: member, Body: `{"name": "lease-now", "start_date": "now", "end_date": "2030-01-02 05:08", "reservations": [` + hostRes(1, 1, "", "") + `], "events": [], "before_end_date": "2030-01-01 12:00"}`},
		{Method: "DELETE", Path: "/leases/{uuid-B}", Headers: member},
		{Method: "GET", Path: "/leases/{uuid-B}", Headers: member},
		{Method: "GET", Path: "/leases"},
		// lease-now holds compute-2, the smallest host (the host choice
		// keeps the bigger ones free).
		{Method: "DELETE", Path: "/os-hosts/2"},
	})
}

func itoa(n int) string {
	b, _ := jsonMarshal(n)
	return string(b)
}

func quote(s string) string {
	b, _ := jsonMarshal(s)
	return string(b)
}

var jsonMarshal = func(v any) ([]byte, error) { return json.Marshal(v) }
