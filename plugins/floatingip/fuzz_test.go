package floatingip

import (
	"net/netip"
	"testing"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
	"github.com/leasehold/leasehold/plugins/pluginstest"
)

// FuzzParse: any JSON object as a virtual:floatingip reservation, new or
// as an update of a parsed one, is refused as a bad request (never a
// panic or another kind of error) or read as a network, an amount of at
// least 1 and at most that many valid required addresses; an update
// keeps the network.
func FuzzParse(f *testing.F) {
	base := `{"network_id":"net1","amount":2,"required_floatingips":["172.24.4.10"]}`
	for _, s := range [][2]string{
		{base, `{"amount":3}`}, {base, `{"required_floatingips":[]}`}, {base, `{"network_id":"net2"}`},
		{`{"network_id":"n","amount":"1","required_floatingips":["::1","::1"]}`, `{"required_floatingips":["10.0.0.1"]}`},
		{`{"network_id":"","amount":1}`, `{}`}, {`{"network_id":"n","amount":0}`, `{}`},
		{`{"network_id":"n","amount":1,"required_floatingips":["300.1.1.1"]}`, `{}`},
		{`{"network_id":7,"amount":1e99,"required_floatingips":"1.2.3.4"}`, `{"amount":-1}`},
		{`{"network_id":"n","amount":1,"required_floatingips":[null]}`, `{"amount":null}`},
	} {
		f.Add(s[0], s[1])
	}
	p := New(nil)
	check := func(t *testing.T, what string, ps params, err error) bool {
		t.Helper()
		if err != nil {
			if e := errs.As(err); e == nil || e.Kind != errs.BadRequest {
				t.Fatalf("%s: error %v is not a bad request", what, err)
			}
			return false
		}
		if ps.network == "" || ps.amount < 1 || len(ps.required) > ps.amount {
			t.Fatalf("%s: read as %+v", what, ps)
		}
		for _, a := range ps.required {
			if _, err := netip.ParseAddr(a); err != nil {
				t.Fatalf("%s: required address %q accepted", what, a)
			}
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
			ps = r.(params)
		}
		if !check(t, create, ps, err) {
			return
		}
		u, ok := pluginstest.JSONObject(update)
		if !ok {
			return
		}
		next, err := parse(u, &ps)
		if check(t, create+" updated by "+update, next, err) && next.network != ps.network {
			t.Fatalf("%s updated by %s: network %q became %q", create, update, ps.network, next.network)
		}
	})
}
