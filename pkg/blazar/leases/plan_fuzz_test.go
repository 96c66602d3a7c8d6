package leases_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/blazar/leases/leasestest"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/floatingip"
	hostplugin "github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/instance"
)

// createRequest reads a lease-create body into a request the way the
// API's decoding does (a value of the wrong type for a string field is
// left out here: the decoding refuses it before the service sees it).
func createRequest(body map[string]any) leases.CreateRequest {
	str := func(k string) *string {
		if s, ok := body[k].(string); ok {
			return &s
		}
		return nil
	}
	req := leases.CreateRequest{Name: str("name"), StartDate: str("start_date"), EndDate: str("end_date"),
		BeforeEndDate: str("before_end_date"), LeaseType: str("lease_type"), Timeout: body["timeout"], Tags: body["tags"]}
	list, _ := body["reservations"].([]any)
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			req.Reservations = append(req.Reservations, leasestest.Reservation(m))
		}
	}
	evs, _ := body["events"].([]any)
	for _, x := range evs {
		if m, ok := x.(map[string]any); ok {
			e := leases.EventRequest{}
			e.EventType, _ = m["event_type"].(string)
			e.Time, _ = m["time"].(string)
			req.Events = append(req.Events, e)
		}
	}
	return req
}

// FuzzPlanCreate: the domain side of a lease create (name, kind, timeout,
// tags, dates, events and every plugin's Parse of its reservation, with
// the host, instance and floating-IP plugins) refuses any body as a bad
// request, or as upstream's 403 for a before_end date outside the lease,
// never with a panic or an internal error.
func FuzzPlanCreate(f *testing.F) {
	host := `{"resource_type":"physical:host","min":1,"max":2,"hypervisor_properties":"","resource_properties":"[\"==\",\"$gpu\",\"true\"]"}`
	inst := `{"resource_type":"virtual:instance","vcpus":1,"memory_mb":512,"disk_gb":0,"amount":1,"affinity":null,"resource_properties":""}`
	fip := `{"resource_type":"virtual:floatingip","network_id":"n","amount":1,"required_floatingips":["172.24.4.10"]}`
	for _, s := range []string{
		`{"name":"l","start_date":"now","end_date":"2030-01-02 10:00","reservations":[` + host + `,` + inst + `,` + fip + `]}`,
		`{"name":"l","start_date":"2030-01-01 11:00","end_date":"2030-01-01 12:00","before_end_date":"2030-01-01 13:00"}`,
		`{"name":"l","start_date":"2030-01-01 11:00","end_date":"2030-01-01 12:00","events":[{"event_type":"x","time":"bad"}]}`,
		`{"name":"l","lease_type":"BEST-EFFORT","timeout":600,"end_date":"2030-01-01 12:00","tags":["a","a"]}`,
		`{"name":"l","lease_type":"BEST-EFFORT","timeout":"x","end_date":"2030-01-01 12:00"}`,
		`{"name":"l","lease_type":"?","start_date":"now","end_date":"now"}`,
		`{"name":"l","start_date":"now","end_date":"2030-01-02 10:00","reservations":[{"resource_type":"physical:host","min":"2","max":1}]}`,
		`{"name":"l","start_date":"now","end_date":"2030-01-02 10:00","reservations":[{"resource_type":"nope"},{}]}`,
		`{"name":"l","start_date":"now","end_date":"2030-01-02 10:00","reservations":[{"resource_type":"physical:host","min":1e400}]}`,
		`{"name":"` + string(bytes.Repeat([]byte("x"), 81)) + `","start_date":"now","end_date":"9999-12-31 23:59"}`,
		`{}`,
	} {
		f.Add(s)
	}
	d := dbtest.Open(f)
	clock := leasestest.NewClock(t0)
	hp := hostplugin.New(leasestest.NewHosts(2, nil), d.DB, hostplugin.Config{}, clock.Now)
	reg, err := plugins.NewRegistry(hp, instance.New(nil, instance.Config{}), floatingip.New(&leasestest.FIPs{}))
	if err != nil {
		f.Fatal(err)
	}
	svc := leases.New(d, reg, leases.Config{MinutesBeforeEndLease: 60}, clock.Now, nil)
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var body map[string]any
		if dec.Decode(&body) != nil || body == nil {
			return
		}
		err := leases.PlanCreate(svc, owner, createRequest(body))
		if err == nil {
			return
		}
		e := errs.As(err)
		if e == nil || e.Msg == "" || (e.Kind != errs.BadRequest && e.Kind != errs.Forbidden) {
			t.Fatalf("%s: error %v (%T) is neither a bad request nor upstream's 403", s, err, err)
		}
	})
}
