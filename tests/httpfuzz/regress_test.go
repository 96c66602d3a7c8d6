package httpfuzz

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRegressions replays, against one server, the requests with which
// the fuzzer found a bug, and checks each answer.
func TestRegressions(t *testing.T) {
	mainURL, placementURL, _ := startServer(t)
	snd := &sender{client: &http.Client{Timeout: *flagDeadline}, mainURL: mainURL, placement: placementURL}
	send := func(api API, tgt Target, method, path, body string) *result {
		t.Helper()
		h := http.Header{"X-Auth-Token": {"admin"}, "Content-Type": {"application/json"}}
		if api == Placement {
			h.Set("OpenStack-API-Version", "placement 1.22")
		}
		req := Request{API: api, Target: tgt, Method: method, Path: path, Header: h, Body: []byte(body)}
		res, err := snd.send(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if msg := check(req, res); msg != "" {
			t.Fatalf("%s %s: %s: %s", method, path, msg, res.body)
		}
		return res
	}

	// A JSON body thousands of objects deep on a Placement write took
	// seconds (quadratic in pyjsonschema's pformat of the instance) to
	// get its 400, past the fuzzer's deadline.
	deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	for _, path := range []string{"/resource_providers", "/placement/resource_providers"} {
		tgt := PlacementRoot
		if strings.HasPrefix(path, "/placement") {
			tgt = Main
		}
		if res := send(Placement, tgt, "POST", path, deep); res.status != http.StatusBadRequest {
			t.Errorf("POST %s with a 5,000-deep body: %d, want 400", path, res.status)
		}
	}

	// A lease date past 2262-04-11 wrapped around in the allocator's Unix
	// nanoseconds: moving such a lease to start now got a 409 "Too many
	// concurrent bookings" on an idle server. Such dates are now a 400.
	for range 2 {
		send(Blazar, Main, "POST", "/v1/os-hosts", `{"name": "h-`+time.Now().Format("150405.000000000")+`"}`)
	}
	lease := func(start, end string) *result {
		return send(Blazar, Main, "POST", "/v1/leases", `{"name": "l", "start_date": "`+start+`", "end_date": "`+end+
			`", "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`)
	}
	if res := lease("2042-01-01 12:00", "2042-01-02 12:00"); res.status != http.StatusCreated {
		t.Fatalf("lease: %d %s", res.status, res.body)
	}
	res := lease("2080-01-01 12:00", "2080-01-02 12:00")
	var doc struct {
		Lease struct {
			ID string `json:"id"`
		} `json:"lease"`
	}
	if err := json.Unmarshal(res.body, &doc); err != nil || doc.Lease.ID == "" {
		t.Fatalf("lease: %d %s", res.status, res.body)
	}
	if res := send(Blazar, Main, "PUT", "/v1/leases/"+doc.Lease.ID, `{"end_date": "9999-12-31 23:59"}`); res.status != http.StatusBadRequest {
		t.Errorf("PUT end_date 9999-12-31 23:59: %d %s, want 400", res.status, res.body)
	}
	if res := lease("2080-01-01 12:00", "9999-12-31 23:59"); res.status != http.StatusBadRequest {
		t.Errorf("POST a lease ending 9999-12-31 23:59: %d %s, want 400", res.status, res.body)
	}
	if res := send(Blazar, Main, "PUT", "/v1/leases/"+doc.Lease.ID, `{"end_date": "2261-12-31 23:59"}`); res.status != http.StatusOK {
		t.Errorf("PUT end_date 2261-12-31 23:59: %d %s, want 200", res.status, res.body)
	}
	if res := send(Blazar, Main, "PUT", "/v1/leases/"+doc.Lease.ID, `{"start_date": "now"}`); res.status != http.StatusOK {
		t.Errorf("PUT start_date now over [now, 2261-12-31 23:59] with a second host free: %d %s, want 200", res.status, res.body)
	}
}
