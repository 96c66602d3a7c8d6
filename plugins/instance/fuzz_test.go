package instance

import (
	"testing"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/pluginstest"
)

// FuzzParse: any JSON object as a virtual:instance reservation, new or as
// an update of a parsed one, is refused as a bad request (never a panic
// or another kind of error) or read within the bounds upstream checks:
// vcpus and memory_mb at least 1, disk_gb at least 0, amount at least 1,
// and a resource_properties query that parsed.
func FuzzParse(f *testing.F) {
	base := `{"vcpus":2,"memory_mb":1024,"disk_gb":10,"amount":3,"affinity":null,"resource_properties":""}`
	for _, s := range [][2]string{
		{base, `{"amount":4}`},
		{`{"vcpus":"2","memory_mb":1.0,"disk_gb":0,"amount":1,"affinity":"True","resource_properties":"[\"==\", \"$gpu\", \"true\"]"}`, `{"affinity":"maybe"}`},
		{`{"vcpus":0,"memory_mb":1,"disk_gb":0,"amount":1,"affinity":false,"resource_properties":""}`, `{}`},
		{`{"vcpus":1,"memory_mb":1,"disk_gb":-1,"amount":2147483648,"affinity":2,"resource_properties":"[\"and\""}`, `{"x":1}`},
		{`{"vcpus":1e400,"memory_mb":[],"disk_gb":{},"amount":null,"affinity":0,"resource_properties":7}`, `{"vcpus":null}`},
		{base, `{"resource_properties":"[\"or\", [\"<\", \"$mem\", \"8\"], [\">=\", \"$cpu\", \"2\"]]","disk_gb":"0x10"}`},
	} {
		f.Add(s[0], s[1])
	}
	p := New(nil, Config{})
	check := func(t *testing.T, what string, ps params, err error) bool {
		t.Helper()
		if err != nil {
			if e := errs.As(err); e == nil || e.Kind != errs.BadRequest {
				t.Fatalf("%s: error %v is not a bad request", what, err)
			}
			return false
		}
		if ps.size.VCPUs < 1 || ps.size.MemoryMB < 1 || ps.size.DiskGB < 0 || ps.amount < 1 || ps.query == nil {
			t.Fatalf("%s: read as %+v", what, ps)
		}
		return true
	}
	f.Fuzz(func(t *testing.T, create, update string) {
		v, ok := pluginstest.JSONObject(create)
		if !ok {
			return
		}
		r, err := p.Parse(v, plugins.Lease{})
		var ps params
		if err == nil {
			ps = r.(*request).params
		}
		if !check(t, create, ps, err) {
			return
		}
		u, ok := pluginstest.JSONObject(update)
		if !ok {
			return
		}
		next, _, err := parseParams(u, &ps)
		check(t, create+" updated by "+update, next, err)
	})
}
