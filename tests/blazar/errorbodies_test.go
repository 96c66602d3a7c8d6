package blazar_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The golden error bodies pin what every reachable error path of /v1
// (and a sample of /placement) answers today: status, Content-Type, the
// version/Vary/Allow headers and the body, with volatile parts
// normalised. A change to any of them fails TestErrorBodiesGolden with a
// diff of the case; `go test ./tests/blazar -run TestErrorBodiesGolden
// -update` rewrites testdata/errorbodies.golden after a deliberate change.

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the current server's answers")

const goldenPath = "testdata/errorbodies.golden"

// ebCase is one request of the golden table. Path and Body may name
// values captured by earlier setup steps as {name}.
type ebCase struct {
	name   string
	method string
	path   string
	body   string
	// member sends the request as a plain member of project "project"
	// (noauth token "user:project"); otherwise the token is "admin".
	member bool
	// ctype is the request Content-Type; "" means application/json when
	// there is a body, and "-" sends none.
	ctype  string
	header map[string]string
	// setup steps must succeed (2xx) and are not recorded; capture takes
	// dotted JSON paths of their answer into named values.
	setup   bool
	capture map[string]string
	// waitLease makes a setup step poll GET /v1/leases/{waitLease} until
	// the lease has status waitStatus.
	waitLease, waitStatus string
	// show is what the golden file prints for a body too large to read.
	show string
}

// omit, as a leaseJSON value, removes the key from the body.
var omit = new(struct{})

func leaseJSON(over ...any) string {
	m := map[string]any{
		"name":       "bb",
		"start_date": "2040-06-01 00:00",
		"end_date":   "2040-06-02 00:00",
		"reservations": []any{map[string]any{
			"resource_type": "physical:host", "min": 1, "max": 1,
			"hypervisor_properties": "", "resource_properties": "",
		}},
		"events": []any{},
	}
	for i := 0; i+1 < len(over); i += 2 {
		k := over[i].(string)
		if over[i+1] == omit {
			delete(m, k)
			continue
		}
		m[k] = over[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// hostRes is a physical:host reservation request with overrides.
func hostRes(over ...any) []any {
	r := map[string]any{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}
	for i := 0; i+1 < len(over); i += 2 {
		if over[i+1] == omit {
			delete(r, over[i].(string))
			continue
		}
		r[over[i].(string)] = over[i+1]
	}
	return []any{r}
}

const (
	unknownUUID = "8f3a5c3e-0d9b-4a57-9a3e-5b7c1d2e4f60"
	rpUUID      = "5d6e7f80-1a2b-4c3d-8e9f-a0b1c2d3e4f5"
)

func blazarCases() []ebCase {
	long := strings.Repeat("n", 81)
	return []ebCase{
		// Setup: three hosts, a lease owned by project admin on the gpu
		// host, a lease taking every host in another window, a floating IP
		// and a placement provider.
		{name: "setup host 1", setup: true, method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1", "gpu": "true"}`},
		{name: "setup host 2", setup: true, method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2", "gpu": "false"}`},
		{name: "setup host 3", setup: true, method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-3"}`},
		{name: "setup admin lease", setup: true, method: "POST", path: "/v1/leases",
			body:    leaseJSON("name", "owned", "reservations", hostRes("resource_properties", `["==", "$gpu", "true"]`)),
			capture: map[string]string{"lease": "lease.id", "res": "lease.reservations.0.id"}},
		{name: "setup lease on every host", setup: true, method: "POST", path: "/v1/leases",
			body: leaseJSON("name", "all", "start_date", "2041-01-01 00:00", "end_date", "2041-01-02 00:00", "reservations", hostRes("min", 3, "max", 3))},
		{name: "setup floating ip", setup: true, method: "POST", path: "/v1/floatingips",
			body:    `{"floating_network_id": "net-1", "floating_ip_address": "172.24.4.10"}`,
			capture: map[string]string{"fip": "floatingip.id"}},
		{name: "setup lease starting now", setup: true, method: "POST", path: "/v1/leases",
			body:    leaseJSON("name", "active", "start_date", "now", "end_date", "2039-01-01 00:00", "reservations", hostRes("resource_properties", `["==", "$gpu", "false"]`)),
			capture: map[string]string{"active": "lease.id", "activeres": "lease.reservations.0.id"}},
		{name: "setup wait for the lease to start", setup: true, method: "GET", path: "/v1/leases/{active}", waitLease: "{active}", waitStatus: "ACTIVE"},
		{name: "setup placement provider", setup: true, method: "POST", path: "/placement/resource_providers",
			header: map[string]string{"OpenStack-API-Version": "placement 1.39"},
			body:   `{"name": "bb-rp", "uuid": "` + rpUUID + `"}`},

		// POST /v1/leases: body decoding.
		{name: "lease create: malformed JSON", method: "POST", path: "/v1/leases", body: `{"name": `},
		{name: "lease create: text/plain body", method: "POST", path: "/v1/leases", ctype: "text/plain", body: leaseJSON()},
		{name: "lease create: unparsable content type", method: "POST", path: "/v1/leases", ctype: "application/", body: leaseJSON()},
		{name: "lease create: JSON array body", method: "POST", path: "/v1/leases", body: `[]`},
		{name: "lease create: body over 4 MiB", method: "POST", path: "/v1/leases",
			body: `{"name": "` + strings.Repeat("x", 5<<20) + `"}`, show: `{"name": "xxx… (5 MiB of x)"}`},
		{name: "lease create: JSON null body", method: "POST", path: "/v1/leases", body: `null`},
		{name: "lease create: empty body", method: "POST", path: "/v1/leases", body: ``},
		// Name and dates.
		{name: "lease create: missing name", method: "POST", path: "/v1/leases", body: leaseJSON("name", omit)},
		{name: "lease create: null name", method: "POST", path: "/v1/leases", body: leaseJSON("name", nil)},
		{name: "lease create: numeric name", method: "POST", path: "/v1/leases", body: leaseJSON("name", 5)},
		{name: "lease create: name of 81 characters", method: "POST", path: "/v1/leases", body: leaseJSON("name", long)},
		{name: "lease create: missing start_date", method: "POST", path: "/v1/leases", body: leaseJSON("start_date", omit)},
		{name: "lease create: missing end_date", method: "POST", path: "/v1/leases", body: leaseJSON("end_date", omit)},
		{name: "lease create: numeric start_date", method: "POST", path: "/v1/leases", body: leaseJSON("start_date", 2040)},
		{name: "lease create: month 13", method: "POST", path: "/v1/leases", body: leaseJSON("start_date", "2040-13-01 00:00")},
		{name: "lease create: end_date not a date", method: "POST", path: "/v1/leases", body: leaseJSON("end_date", "tomorrow")},
		{name: "lease create: start in the past", method: "POST", path: "/v1/leases", body: leaseJSON("start_date", "2020-01-01 00:00")},
		{name: "lease create: end before start", method: "POST", path: "/v1/leases", body: leaseJSON("end_date", "2040-05-31 00:00")},
		{name: "lease create: end equals start", method: "POST", path: "/v1/leases", body: leaseJSON("end_date", "2040-06-01 00:00")},
		{name: "lease create: before_end_date after end", method: "POST", path: "/v1/leases", body: leaseJSON("before_end_date", "2040-06-03 00:00")},
		{name: "lease create: before_end_date before start", method: "POST", path: "/v1/leases", body: leaseJSON("before_end_date", "2040-05-01 00:00")},
		{name: "lease create: before_end_date equals start", method: "POST", path: "/v1/leases", body: leaseJSON("before_end_date", "2040-06-01 00:00")},
		{name: "lease create: before_end_date not a date", method: "POST", path: "/v1/leases", body: leaseJSON("before_end_date", "soon")},
		{name: "lease create: numeric before_end_date", method: "POST", path: "/v1/leases", body: leaseJSON("before_end_date", 7)},
		// Reservations.
		{name: "lease create: reservations not a list", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", "x")},
		{name: "lease create: reservation not an object", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{5})},
		{name: "lease create: reservation without resource_type", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"min": 1}})},
		{name: "lease create: numeric resource_type", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_type", 1))},
		{name: "lease create: unknown resource type", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_type", "physical:banana"))},
		{name: "lease create: host reservation without min", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", omit))},
		{name: "lease create: host reservation without max", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("max", omit))},
		{name: "lease create: min not a number", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", "one"))},
		{name: "lease create: min as a numeric string", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", "2", "max", "1"))},
		{name: "lease create: fractional max", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("max", 1.5))},
		{name: "lease create: min 0", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", 0))},
		{name: "lease create: max below min", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", 2, "max", 1))},
		{name: "lease create: without hypervisor_properties", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("hypervisor_properties", omit))},
		{name: "lease create: without resource_properties", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_properties", omit))},
		{name: "lease create: numeric resource_properties", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_properties", 3))},
		{name: "lease create: unterminated JSON query", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("hypervisor_properties", `["==", "$vcpus"`))},
		{name: "lease create: unknown query operator", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_properties", `["~", "$gpu", "true"]`))},
		{name: "lease create: bad before_end", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("before_end", "explode"))},
		{name: "lease create: not enough hosts", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("min", 5, "max", 5))},
		{name: "lease create: not enough hosts matching", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", hostRes("resource_properties", `["==", "$gpu", "maybe"]`))},
		{name: "lease create: every host already reserved", method: "POST", path: "/v1/leases", body: leaseJSON("start_date", "2041-01-01 06:00", "end_date", "2041-01-01 07:00")},
		{name: "lease create: floating ip without network_id", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "amount": 1}})},
		{name: "lease create: floating ip without amount", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1"}})},
		{name: "lease create: floating ip amount 0", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 0}})},
		{name: "lease create: floating ip invalid required address", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 1, "required_floatingips": []any{"300.1.1.1"}}})},
		{name: "lease create: more required floating ips than amount", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 1, "required_floatingips": []any{"172.24.4.10", "172.24.4.11"}}})},
		{name: "lease create: required floating ip not in the pool", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 1, "required_floatingips": []any{"172.24.4.99"}}})},
		{name: "lease create: not enough floating ips", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 2}})},
		// Events.
		{name: "lease create: events not a list", method: "POST", path: "/v1/leases", body: leaseJSON("events", map[string]any{})},
		{name: "lease create: event not an object", method: "POST", path: "/v1/leases", body: leaseJSON("events", []any{"x"})},
		{name: "lease create: event without event_type", method: "POST", path: "/v1/leases", body: leaseJSON("events", []any{map[string]any{"event_date": "2040-06-01 12:00"}})},
		{name: "lease create: managed event type", method: "POST", path: "/v1/leases", body: leaseJSON("events", []any{map[string]any{"event_type": "start_lease", "event_date": "2040-06-01 12:00"}})},
		{name: "lease create: event date not a date", method: "POST", path: "/v1/leases", body: leaseJSON("events", []any{map[string]any{"event_type": "notify", "event_date": "noon"}})},
		{name: "lease create: floating ip amount not a number", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": "two"}})},
		{name: "lease create: required_floatingips not a list", method: "POST", path: "/v1/leases", body: leaseJSON("reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 1, "required_floatingips": "172.24.4.10"}})},
		{name: "lease create: event without event_date", method: "POST", path: "/v1/leases", body: leaseJSON("events", []any{map[string]any{"event_type": "notify"}})},
		// Policy on create.
		{name: "setup gpu private", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private": true}`, setup: true},
		{name: "lease create: member with a private property", method: "POST", path: "/v1/leases", member: true,
			body: leaseJSON("reservations", hostRes("resource_properties", `["==", "$gpu", "false"]`))},
		{name: "setup gpu public again", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private": false}`, setup: true},

		// GET / PUT / DELETE /v1/leases/{id}.
		{name: "lease show: unknown id", method: "GET", path: "/v1/leases/" + unknownUUID},
		{name: "lease show: not a uuid", method: "GET", path: "/v1/leases/not-a-uuid"},
		{name: "lease show: unknown id, .json suffix", method: "GET", path: "/v1/leases/" + unknownUUID + ".json"},
		{name: "lease show: another project's lease", method: "GET", path: "/v1/leases/{lease}", member: true},
		{name: "lease show: another project's lease, .json suffix", method: "GET", path: "/v1/leases/{lease}.json", member: true},
		{name: "lease update: another project's lease", method: "PUT", path: "/v1/leases/{lease}", member: true, body: `{"name": "mine"}`},
		{name: "lease delete: another project's lease", method: "DELETE", path: "/v1/leases/{lease}", member: true},
		{name: "lease update: unknown id", method: "PUT", path: "/v1/leases/" + unknownUUID, body: `{"name": "x"}`},
		{name: "lease delete: unknown id", method: "DELETE", path: "/v1/leases/" + unknownUUID},
		{name: "lease delete: unknown id, .json suffix", method: "DELETE", path: "/v1/leases/" + unknownUUID + ".json"},
		{name: "lease update: malformed JSON", method: "PUT", path: "/v1/leases/{lease}", body: `{"name"`},
		{name: "lease update: text/plain body", method: "PUT", path: "/v1/leases/{lease}", ctype: "text/plain", body: `{"name": "x"}`},
		{name: "lease update: unknown keys", method: "PUT", path: "/v1/leases/{lease}", body: `{"flavor": "big", "amount": 2}`},
		{name: "lease update: numeric name", method: "PUT", path: "/v1/leases/{lease}", body: `{"name": 5}`},
		{name: "lease update: null name", method: "PUT", path: "/v1/leases/{lease}", body: `{"name": null}`},
		{name: "lease update: name of 81 characters", method: "PUT", path: "/v1/leases/{lease}", body: `{"name": "` + long + `"}`},
		{name: "lease update: numeric start_date", method: "PUT", path: "/v1/leases/{lease}", body: `{"start_date": 1}`},
		{name: "lease update: start_date not a date", method: "PUT", path: "/v1/leases/{lease}", body: `{"start_date": "2040-06-01T00:00"}`},
		{name: "lease update: start in the past", method: "PUT", path: "/v1/leases/{lease}", body: `{"start_date": "2020-01-01 00:00"}`},
		{name: "lease update: end before start", method: "PUT", path: "/v1/leases/{lease}", body: `{"end_date": "2040-05-01 00:00"}`},
		{name: "lease update: before_end_date out of limits", method: "PUT", path: "/v1/leases/{lease}", body: `{"before_end_date": "2040-07-01 00:00"}`},
		{name: "lease update: reservations not a list", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": {}}`},
		{name: "lease update: reservation not an object", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [1]}`},
		{name: "lease update: reservation without id", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"min": 1}]}`},
		{name: "lease update: unknown reservation id", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "` + unknownUUID + `", "min": 1}]}`},
		{name: "lease update: change of resource type", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "resource_type": "virtual:floatingip"}]}`},
		{name: "lease update: min 0", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "min": 0}]}`},
		{name: "lease update: max below min", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "min": 1, "max": 0}]}`},
		{name: "lease update: min not a number", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "min": "x"}]}`},
		{name: "lease update: bad query", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "hypervisor_properties": "[\"and\""}]}`},
		{name: "lease update: not enough hosts", method: "PUT", path: "/v1/leases/{lease}", body: `{"reservations": [{"id": "{res}", "min": 4, "max": 4}]}`},
		{name: "lease update: window onto reserved hosts", method: "PUT", path: "/v1/leases/{lease}", body: `{"start_date": "2041-01-01 00:00", "end_date": "2041-01-01 12:00"}`},
		{name: "active lease update: new start date", method: "PUT", path: "/v1/leases/{active}", body: `{"start_date": "2038-01-01 00:00"}`},
		{name: "active lease update: end in the past", method: "PUT", path: "/v1/leases/{active}", body: `{"end_date": "2020-01-01 00:00"}`},
		{name: "active lease update: more hosts than match", method: "PUT", path: "/v1/leases/{active}", body: `{"reservations": [{"id": "{activeres}", "min": 2, "max": 2}]}`},
		{name: "active lease update: requirement the host no longer meets", method: "PUT", path: "/v1/leases/{active}", body: `{"reservations": [{"id": "{activeres}", "resource_properties": "[\"==\", \"$gpu\", \"true\"]"}]}`},
		{name: "active lease update: unknown key", method: "PUT", path: "/v1/leases/{active}", body: `{"status": "TERMINATED"}`},

		// Hosts.
		{name: "host create: malformed JSON", method: "POST", path: "/v1/os-hosts", body: `{`},
		{name: "host create: text/plain body", method: "POST", path: "/v1/os-hosts", ctype: "text/plain", body: `{"name": "compute-9"}`},
		{name: "host create: empty body", method: "POST", path: "/v1/os-hosts", body: `{}`},
		{name: "host create: blank name", method: "POST", path: "/v1/os-hosts", body: `{"name": "  "}`},
		{name: "host create: duplicate", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`},
		{name: "host create: name too long", method: "POST", path: "/v1/os-hosts", body: `{"name": "` + strings.Repeat("h", 300) + `"}`},
		{name: "host create: empty capability key", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "": "x"}`},
		{name: "host create: capability key too long", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "` + strings.Repeat("k", 65) + `": "x"}`},
		{name: "host create: object capability", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "rack": {"row": 1}}`},
		{name: "host create: bad reservable", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "reservable": "maybe"}`},
		{name: "host create: bad vcpus", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "vcpus": "many"}`},
		{name: "host create: negative memory_mb", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "memory_mb": -1}`},
		{name: "host create: cpu_info not JSON", method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-9", "cpu_info": "x86"}`},
		{name: "host show: unknown id", method: "GET", path: "/v1/os-hosts/999"},
		{name: "host show: not a number", method: "GET", path: "/v1/os-hosts/compute-1"},
		{name: "host show: unknown id, .json suffix", method: "GET", path: "/v1/os-hosts/999.json"},
		{name: "host update: empty body", method: "PUT", path: "/v1/os-hosts/1", body: `{}`},
		{name: "host update: no body", method: "PUT", path: "/v1/os-hosts/1", body: ``, ctype: "-"},
		{name: "host update: malformed JSON", method: "PUT", path: "/v1/os-hosts/1", body: `{"a"`},
		{name: "host update: unknown id", method: "PUT", path: "/v1/os-hosts/999", body: `{"rack": "r1"}`},
		{name: "host update: id key", method: "PUT", path: "/v1/os-hosts/1", body: `{"id": "7"}`},
		{name: "host update: bad reservable", method: "PUT", path: "/v1/os-hosts/1", body: `{"reservable": "perhaps"}`},
		{name: "host update: empty capability key", method: "PUT", path: "/v1/os-hosts/1", body: `{"": "x"}`},
		{name: "host update: list capability", method: "PUT", path: "/v1/os-hosts/1", body: `{"racks": [1, 2]}`},
		{name: "host update: capability a reservation depends on", method: "PUT", path: "/v1/os-hosts/1", body: `{"gpu": "false"}`},
		{name: "host delete: unknown id", method: "DELETE", path: "/v1/os-hosts/999"},
		{name: "host delete: reserved host", method: "DELETE", path: "/v1/os-hosts/2"},
		{name: "host allocation: unknown id", method: "GET", path: "/v1/os-hosts/999/allocation"},

		// Resource properties.
		{name: "property update: unknown property", method: "PATCH", path: "/v1/os-hosts/properties/nope", body: `{"private": true}`},
		{name: "property update: missing private", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{}`},
		{name: "property update: private not a boolean", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private": "yes"}`},
		{name: "property update: other key", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private": true, "name": "x"}`},
		{name: "property update: malformed JSON", method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private":`},

		// Floating IPs.
		{name: "floating ip create: empty body", method: "POST", path: "/v1/floatingips", body: `{}`},
		{name: "floating ip create: numeric network", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": 5, "floating_ip_address": "172.24.4.20"}`},
		{name: "floating ip create: missing address", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "net-1"}`},
		{name: "floating ip create: invalid address", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "net-1", "floating_ip_address": "172.24.4.300"}`},
		{name: "floating ip create: loopback address", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "net-1", "floating_ip_address": "127.0.0.1"}`},
		{name: "floating ip create: unknown parameter", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "net-1", "floating_ip_address": "172.24.4.20", "subnet_id": "s"}`},
		{name: "floating ip create: network id too long", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "` + strings.Repeat("n", 256) + `", "floating_ip_address": "172.24.4.20"}`},
		{name: "floating ip create: duplicate", method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "net-1", "floating_ip_address": "172.24.4.10"}`},
		{name: "floating ip create: malformed JSON", method: "POST", path: "/v1/floatingips", body: `[`},
		{name: "setup lease on the floating ip", setup: true, method: "POST", path: "/v1/leases",
			body: leaseJSON("name", "fip", "start_date", "2042-01-01 00:00", "end_date", "2042-01-02 00:00", "reservations", []any{map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 1}})},
		{name: "floating ip delete: reserved", method: "DELETE", path: "/v1/floatingips/{fip}"},
		{name: "floating ip show: unknown id", method: "GET", path: "/v1/floatingips/" + unknownUUID},
		{name: "floating ip delete: unknown id", method: "DELETE", path: "/v1/floatingips/" + unknownUUID},

		// Routing and microversions.
		{name: "route: unknown path", method: "GET", path: "/v1/nope"},
		{name: "route: /v1 itself", method: "GET", path: "/v1"},
		{name: "route: unknown nested path", method: "GET", path: "/v1/leases/" + unknownUUID + "/events"},
		{name: "route: double .json suffix", method: "GET", path: "/v1/leases.json.json"},
		{name: "method: PATCH /v1/leases", method: "PATCH", path: "/v1/leases", body: `{}`},
		{name: "method: POST /v1/leases/{id}", method: "POST", path: "/v1/leases/" + unknownUUID, body: `{}`},
		{name: "method: DELETE /v1/os-hosts", method: "DELETE", path: "/v1/os-hosts"},
		{name: "method: PUT /v1/floatingips/{id}", method: "PUT", path: "/v1/floatingips/" + unknownUUID, body: `{}`},
		{name: "method: PUT /v1/leases.json", method: "PUT", path: "/v1/leases.json", body: `{}`},
		{name: "microversion: unsupported 1.1", method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation 1.1"}},
		{name: "microversion: unsupported 2.0", method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation 2.0"}},
		{name: "microversion: malformed", method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation one"}},
		{name: "microversion: malformed on an unknown route", method: "GET", path: "/v1/nope", header: map[string]string{"OpenStack-API-Version": "reservation 1.x"}},

		// Policy refusals for members on admin routes.
		{name: "policy: member lists hosts", method: "GET", path: "/v1/os-hosts", member: true},
		{name: "policy: member shows a host", method: "GET", path: "/v1/os-hosts/1", member: true},
		{name: "policy: member creates a host", method: "POST", path: "/v1/os-hosts", member: true, body: `{"name": "compute-9"}`},
		{name: "policy: member updates a host", method: "PUT", path: "/v1/os-hosts/1", member: true, body: `{"rack": "r1"}`},
		{name: "policy: member deletes a host", method: "DELETE", path: "/v1/os-hosts/1", member: true},
		{name: "policy: member lists allocations", method: "GET", path: "/v1/os-hosts/allocations", member: true},
		{name: "policy: member shows a host allocation", method: "GET", path: "/v1/os-hosts/1/allocation", member: true},
		{name: "policy: member lists properties", method: "GET", path: "/v1/os-hosts/properties", member: true},
		{name: "policy: member updates a property", method: "PATCH", path: "/v1/os-hosts/properties/gpu", member: true, body: `{"private": true}`},
		{name: "policy: member creates a floating ip", method: "POST", path: "/v1/floatingips", member: true, body: `{"floating_network_id": "net-1", "floating_ip_address": "172.24.4.30"}`},
		{name: "policy: member deletes a floating ip", method: "DELETE", path: "/v1/floatingips/" + unknownUUID, member: true},
		{name: "policy: member, .json suffix", method: "GET", path: "/v1/os-hosts.json", member: true},
	}
}

// placementCases are a sample of Placement's error paths at microversion v.
func placementCases(v string) []ebCase {
	h := map[string]string{"OpenStack-API-Version": "placement " + v}
	p := "placement " + v + ": "
	// The allocation body's consumer fields by version (1.28 generation,
	// 1.38 type).
	consumer := ""
	if minor, _ := strconv.Atoi(strings.TrimPrefix(v, "1.")); minor >= 38 {
		consumer = `, "consumer_generation": null, "consumer_type": "INSTANCE"`
	}
	return []ebCase{
		{name: p + "unknown provider", method: "GET", path: "/placement/resource_providers/" + unknownUUID, header: h},
		{name: p + "provider uuid malformed", method: "GET", path: "/placement/resource_providers/not-a-uuid", header: h},
		{name: p + "create provider without name", method: "POST", path: "/placement/resource_providers", header: h, body: `{"nam": "x"}`},
		{name: p + "create provider, malformed JSON", method: "POST", path: "/placement/resource_providers", header: h, body: `{"name":`},
		{name: p + "create provider, duplicate name", method: "POST", path: "/placement/resource_providers", header: h, body: `{"name": "bb-rp"}`},
		{name: p + "create provider, text/plain", method: "POST", path: "/placement/resource_providers", header: h, ctype: "text/plain", body: `{"name": "y"}`},
		{name: p + "inventories, stale generation", method: "PUT", path: "/placement/resource_providers/" + rpUUID + "/inventories", header: h,
			body: `{"resource_provider_generation": 99, "inventories": {"VCPU": {"total": 4}}}`},
		{name: p + "inventories, bad body", method: "PUT", path: "/placement/resource_providers/" + rpUUID + "/inventories", header: h,
			body: `{"inventories": {"VCPU": {"total": 4}}}`},
		{name: p + "inventories, unknown provider", method: "PUT", path: "/placement/resource_providers/" + unknownUUID + "/inventories", header: h,
			body: `{"resource_provider_generation": 0, "inventories": {}}`},
		{name: p + "allocations, bad body", method: "PUT", path: "/placement/allocations/" + unknownUUID, header: h, body: `{"allocations": []}`},
		{name: p + "allocations over capacity", method: "PUT", path: "/placement/allocations/" + unknownUUID, header: h,
			body: `{"allocations": {"` + rpUUID + `": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u"` + consumer + `}`},
		{name: p + "delete unknown allocations", method: "DELETE", path: "/placement/allocations/" + unknownUUID, header: h},
		{name: p + "body without content type", method: "POST", path: "/placement/resource_providers", header: h, ctype: "-", body: `{"name": "z"}`},
		{name: p + "resource class, bad name", method: "POST", path: "/placement/resource_classes", header: h, body: `{"name": "NOT_CUSTOM"}`},
		{name: p + "trait, bad name", method: "PUT", path: "/placement/traits/lower_case", header: h},
		{name: p + "allocation candidates, bad resources", method: "GET", path: "/placement/allocation_candidates?resources=VCPU:x", header: h},
		{name: p + "unknown resource class", method: "GET", path: "/placement/resource_classes/CUSTOM_NOPE", header: h},
		{name: p + "unknown route", method: "GET", path: "/placement/nope", header: h},
		{name: p + "wrong method", method: "PATCH", path: "/placement/resource_providers", header: h, body: `{}`},
		{name: p + "bad query parameter", method: "GET", path: "/placement/resource_providers?bogus=1", header: h},
		{name: p + "unsupported microversion", method: "GET", path: "/placement/resource_providers",
			header: map[string]string{"OpenStack-API-Version": "placement " + strings.Replace(v, "1.", "9.", 1)}},
		{name: p + "malformed microversion", method: "GET", path: "/placement/resource_providers",
			header: map[string]string{"OpenStack-API-Version": "placement " + v + ".x"}},
	}
}

func errorBodyCases() []ebCase {
	cs := blazarCases()
	cs = append(cs, placementCases("1.22")...)
	cs = append(cs, placementCases("1.39")...)
	return cs
}

var (
	reqIDRE  = regexp.MustCompile(`req-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	uuidRE   = regexp.MustCompile(`[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}`)
	stampRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	varRE    = regexp.MustCompile(`\{[a-z]+\}`)
	recorded = []string{"Content-Type", "OpenStack-API-Version", "Vary", "Allow"}
)

// normalise replaces the parts of a request or answer that change from
// run to run: request ids, uuids (and the CUSTOM_RESERVATION_ form),
// and timestamps with seconds (request dates, given to the minute,
// stay).
func normalise(s string) string {
	s = reqIDRE.ReplaceAllString(s, "<req>")
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	return stampRE.ReplaceAllString(s, "<date>")
}

// substitute fills {name} placeholders from captured values.
func substitute(t *testing.T, s string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := vars[m[1:len(m)-1]]
		if !ok {
			t.Fatalf("no captured value for %s", m)
		}
		return v
	})
}

// dig follows a dotted path (map keys, list indexes) in a decoded body.
func dig(v any, path string) (string, bool) {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok
}

// sendCase sends c to base and returns the response (body read).
func sendCase(t *testing.T, client *http.Client, base string, c ebCase, vars map[string]string) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if c.body != "" || c.method == "POST" || c.method == "PUT" || c.method == "PATCH" {
		body = strings.NewReader(substitute(t, c.body, vars))
	}
	req, err := http.NewRequest(c.method, base+substitute(t, c.path, vars), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	if c.member {
		req.Header.Set("X-Auth-Token", "user:project")
	}
	switch {
	case c.ctype == "-":
	case c.ctype != "":
		req.Header.Set("Content-Type", c.ctype)
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	return resp, b
}

// waitLeaseStatus polls the lease until it has status want (bounded:
// the event manager starts a lease due now within moments).
func waitLeaseStatus(t *testing.T, client *http.Client, base, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(base + "/v1/leases/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Lease struct {
				Status string `json:"status"`
			} `json:"lease"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err == nil && doc.Lease.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s: status %q after 30 s, want %s (%v)", id, doc.Lease.Status, want, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// renderCase is a case's block in the golden file.
func renderCase(c ebCase, path, reqBody string, resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n", c.name)
	fmt.Fprintf(&b, "%s %s\n", c.method, path)
	if c.member {
		b.WriteString("X-Auth-Token: user:project\n")
	}
	if c.ctype != "" && c.ctype != "-" {
		fmt.Fprintf(&b, "Content-Type: %s\n", c.ctype)
	}
	keys := make([]string, 0, len(c.header))
	for k := range c.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, c.header[k])
	}
	if reqBody != "" {
		fmt.Fprintf(&b, "> %s\n", reqBody)
	}
	fmt.Fprintf(&b, "< %d\n", resp.StatusCode)
	for _, h := range recorded {
		for _, v := range resp.Header.Values(h) {
			fmt.Fprintf(&b, "< %s: %s\n", h, v)
		}
	}
	fmt.Fprintf(&b, "< %s\n", bytes.TrimRight(body, "\n"))
	return normalise(b.String())
}

// parseGolden splits the golden file into blocks by case name, in order.
func parseGolden(text string) (names []string, blocks map[string]string) {
	blocks = map[string]string{}
	for _, blk := range strings.Split(text, "\n\n") {
		blk = strings.Trim(blk, "\n")
		if !strings.HasPrefix(blk, "### ") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(blk, "### "), "\n")
		names = append(names, name)
		blocks[name] = blk + "\n"
	}
	return names, blocks
}

// TestErrorBodiesGolden sends every case in order to one server and
// compares each answer with its block in testdata/errorbodies.golden.
func TestErrorBodiesGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	srv := StartServer(t)
	client := &http.Client{Timeout: 30 * time.Second, Transport: AdminHTTP.Transport}
	cases := errorBodyCases()
	vars := map[string]string{}
	var got []string
	var gotNames []string
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
		if c.waitLease != "" {
			waitLeaseStatus(t, client, srv.URL, substitute(t, c.waitLease, vars), c.waitStatus)
		}
		resp, body := sendCase(t, client, srv.URL, c, vars)
		if c.setup {
			if resp.StatusCode/100 != 2 {
				t.Fatalf("setup %q: %d %s", c.name, resp.StatusCode, body)
			}
			if len(c.capture) > 0 {
				var doc any
				if err := json.Unmarshal(body, &doc); err != nil {
					t.Fatalf("setup %q: %v", c.name, err)
				}
				for name, path := range c.capture {
					v, ok := dig(doc, path)
					if !ok {
						t.Fatalf("setup %q: no %s in %s", c.name, path, body)
					}
					vars[name] = v
				}
			}
			continue
		}
		if resp.StatusCode < 400 {
			t.Errorf("%s: status %d, every recorded case must be an error: %s", c.name, resp.StatusCode, body)
		}
		var reqBody string
		switch {
		case c.show != "":
			reqBody = c.show
		case c.body != "":
			reqBody = substitute(t, c.body, vars)
		}
		gotNames = append(gotNames, c.name)
		got = append(got, renderCase(c, substitute(t, c.path, vars), reqBody, resp, body))
	}
	text := strings.Join(got, "\n")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d cases", goldenPath, len(got))
		return
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	wantNames, want := parseGolden(string(raw))
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("case list differs from %s (-golden +now); rerun with -update after a deliberate change:\n%s", goldenPath, diff)
	}
	for i, name := range gotNames {
		w, ok := want[name]
		if !ok {
			continue
		}
		// Lines, not one string, so the diff shows the changed line whole.
		if diff := cmp.Diff(strings.Split(w, "\n"), strings.Split(got[i], "\n")); diff != "" {
			t.Errorf("%s: answer differs from %s (-golden +now):\n%s", name, goldenPath, diff)
		}
	}
}

// TestErrorBodiesGoldenParses guards the golden file's format: blocks
// round-trip through parseGolden and the case count stays above the
// floor the table was written for.
func TestErrorBodiesGoldenParses(t *testing.T) {
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	names, blocks := parseGolden(string(raw))
	if len(names) < 60 {
		t.Errorf("%s has %d cases, want at least 60", goldenPath, len(names))
	}
	if len(blocks) != len(names) {
		t.Errorf("%s: %d blocks for %d names (duplicate names?)", goldenPath, len(blocks), len(names))
	}
	var rebuilt []string
	for _, n := range names {
		rebuilt = append(rebuilt, blocks[n])
	}
	if diff := cmp.Diff(string(raw), strings.Join(rebuilt, "\n")); diff != "" {
		t.Errorf("golden file does not round-trip:\n%s", diff)
	}
}
