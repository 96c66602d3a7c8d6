package blazar

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/blazar/leases"
	"github.com/leasehold/leasehold/pkg/errs"
)

// badRequestOnly fails t unless err is nil or a *errs.Error of kind
// BadRequest (a 400 with Blazar's error body, never a 500).
func badRequestOnly(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if e := errs.As(err); e == nil || e.Kind != errs.BadRequest || e.Msg == "" {
		t.Fatalf("%s: error %v (%T) is not a bad request", what, err, err)
	}
}

func fuzzRequest(contentType, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/leases", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

// FuzzLeaseBodies: any body given to lease create, lease update or
// earliest (and the duration of a create at "earliest") is read or
// refused as a bad request, never a panic or another kind of error. An
// update is only ever read with its allowed keys.
func FuzzLeaseBodies(f *testing.F) {
	for _, s := range [][2]string{
		{"application/json", `{"name":"l1","start_date":"now","end_date":"2030-01-01 10:00","reservations":[{"resource_type":"physical:host","min":1,"max":1,"hypervisor_properties":"","resource_properties":""}],"events":[{"event_type":"x","time":"2030-01-01 09:00"}]}`},
		{"", `{"name":"l1","start_date":"earliest","end_date":"2030-01-01 10:00","duration":3600,"after":"now","tags":["a"]}`},
		{"application/json; charset=utf-8", `{"name":null,"reservations":[{"id":"r1","amount":2}],"tags":null}`},
		{"text/plain", `{}`}, {"application/json", ``}, {"application/json", `null`}, {"application/json", `[]`},
		{"application/json", `{"duration":1e400}`}, {"application/json", `{"duration":-1,"reservations":{}}`},
		{"application/json", `{"duration":3153600001}`}, {"application/json", `{"duration":"60","events":[1]}`},
		{"application/json", `{"reservations":[{"id":""}],"bogus":1}`}, {"application/json", `{"name":7,"lease_type":[]}`},
		{"application/json;;", `{`}, {"application/json", `{"start_date":"now"} trailing`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ct, body string) {
		what := ct + " " + body
		_, err := decodeRequest(fuzzRequest(ct, body), decodeCreate)
		badRequestOnly(t, "create "+what, err)
		if err == nil {
			var m map[string]any
			if DecodeBody(fuzzRequest(ct, body), &m) == nil {
				_, err := duration(m)
				badRequestOnly(t, "create at earliest "+what, err)
			}
		}
		_, err = decodeRequest(fuzzRequest(ct, body), decodeUpdate)
		badRequestOnly(t, "update "+what, err)
		if err == nil {
			var m map[string]any
			_ = DecodeBody(fuzzRequest(ct, body), &m)
			for k := range m {
				if !slices.Contains(leases.UpdateKeys, k) {
					t.Fatalf("update %s: key %q accepted", what, k)
				}
			}
		}
		req, err := decodeRequest(fuzzRequest(ct, body), decodeEarliest)
		badRequestOnly(t, "earliest "+what, err)
		if err == nil && (req.Duration <= 0 || req.Duration.Seconds() > maxEarliestSeconds) {
			t.Fatalf("earliest %s: duration %v accepted", what, req.Duration)
		}
	})
}

// FuzzDecodeStrict: any body given to the ownership API's writes, decoded
// into each of their body shapes (as the handlers declare them), is read
// or refused as a bad request, never a panic or another kind of error.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"generation":3}`, `{"generation":null}`, `{"generation":"3"}`, `{"generation":1e30}`,
		`{"generation":1,"consumers":[{"id":"c","parent_id":"","rank":1}],"groups":[{"name":"g","hosts":["h"]}],"entries":[]}`,
		`{"generation":1,"parent_id":"p","rank":2,"project_id":"x","borrow_grace_seconds":60,"lending_limit":null}`,
		`{"generation":1,"hosts":["a"],"properties":{"k":"v"}}`, `{"generation":1,"properties":{"k":1}}`,
		`{"generation":1,"amount":2,"partial":true,"preference":1,"share_ratio":0.5,"lend":true,"lend_grace_seconds":5,"reclaim":false}`,
		`{"generation":1,"share_ratio":1e400}`, `{"project_id":"p"}`, `{"unknown":1}`, `[]`, `null`, `"x"`, ``, `{"generation":1}{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var plan planBody
		var consumer consumerBody
		var group groupBody
		var entry entryBody
		var gen generation
		var explain explainBody
		for _, dst := range []any{&plan, &consumer, &group, &entry, &gen, &explain} {
			err := decodeStrict(fuzzRequest("application/json", body), dst)
			badRequestOnly(t, body, err)
		}
		for _, g := range []generation{plan.generation, consumer.generation, group.generation, entry.generation, gen} {
			_, err := g.get()
			badRequestOnly(t, body, err)
		}
	})
}
