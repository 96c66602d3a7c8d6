package openapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
)

// startServer runs the whole service on a loopback port with a fresh
// database and noauth, and returns its base URL; it stops with the test.
func startServer(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = dbtest.URL(t)
	t.Logf("database dialect %s", dbtest.DefaultDialect())
	cfg.Listen, cfg.PlacementListen = "127.0.0.1:0", ""
	cfg.Auth = "noauth"
	cfg.ShutdownTimeout = 10 * time.Second
	// The access log of every request would bury the test's output.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return lhtest.URL(lhtest.Run(t, cfg))
}

// field reads a dotted path ("lease.id") of a JSON answer as a string.
func field(t *testing.T, e *exchange, path string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(e.respBody, &v); err != nil {
		t.Fatalf("%s: answer is not JSON: %v: %s", e.name, err, e.respBody)
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				t.Fatalf("%s: no %s in %s", e.name, path, e.respBody)
			}
			v = x[i]
		default:
			t.Fatalf("%s: no %s in %s", e.name, path, e.respBody)
		}
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		t.Fatalf("%s: no %s in %s", e.name, path, e.respBody)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestBlazarRecordedTraffic drives a real server through every Blazar
// operation, records each exchange and validates it against
// etc/openapi/blazar-v1.yaml.
func TestBlazarRecordedTraffic(t *testing.T) {
	s := loadBlazar(t)
	base := startServer(t)
	c := &client{t: t, base: base, hc: &http.Client{Timeout: 30 * time.Second}}
	const admin, member = "admin", "user:project"
	now := time.Now().UTC()
	future := func(days int) string { return now.AddDate(0, 0, days).Format("2006-01-02 15:04") }
	lease := func(name string, start, end int, res string) string {
		return `{"name":"` + name + `","start_date":"` + future(start) + `","end_date":"` + future(end) +
			`","reservations":[` + res + `],"events":[],"before_end_date":null}`
	}
	hostRes := func(min, max int) string {
		b, _ := json.Marshal(map[string]any{"resource_type": "physical:host", "min": min, "max": max,
			"hypervisor_properties": `[">=", "$vcpus", "2"]`, "resource_properties": "", "before_end": "default"})
		return string(b)
	}

	const nolease = "00000000-0000-4000-8000-000000000000"

	// Discovery, without a token.
	c.call("versions at the root", "", "GET", "/", "", http.StatusMultipleChoices)
	c.call("versions", "", "GET", "/versions", "", http.StatusMultipleChoices)

	// Hosts and their properties.
	c.call("empty host list", admin, "GET", "/v1/os-hosts", "", http.StatusOK)
	h1 := c.call("create host with capabilities", admin, "POST", "/v1/os-hosts", `{"name":"compute-1","gpu":"true","rack":"r1","vcpus":"8"}`, http.StatusCreated)
	c.call("create host", admin, "POST", "/v1/os-hosts", `{"name":"compute-2","rack":"r2"}`, http.StatusCreated)
	h3 := c.call("create spare host", admin, "POST", "/v1/os-hosts", `{"name":"compute-3"}`, http.StatusCreated)
	c.call("create host for an IMMEDIATE lease", admin, "POST", "/v1/os-hosts", `{"name":"compute-4","rack":"r4"}`, http.StatusCreated)
	c.call("create host for a BEST-EFFORT lease", admin, "POST", "/v1/os-hosts", `{"name":"compute-5","rack":"r5"}`, http.StatusCreated)
	// Hosts for instance reservations (with their size: standalone reads
	// Nova's detail keys), and two for healing by a forced delete.
	c.call("create host for instances", admin, "POST", "/v1/os-hosts", `{"name":"compute-i1","pool":"inst","vcpus":"8","memory_mb":"16384","local_gb":"200"}`, http.StatusCreated)
	c.call("create second host for instances", admin, "POST", "/v1/os-hosts", `{"name":"compute-i2","pool":"inst","vcpus":"8","memory_mb":"16384","local_gb":"200"}`, http.StatusCreated)
	c.call("create host to fail", admin, "POST", "/v1/os-hosts", `{"name":"compute-h1","fd":"heal"}`, http.StatusCreated)
	c.call("create host to heal onto", admin, "POST", "/v1/os-hosts", `{"name":"compute-h2","fd":"heal"}`, http.StatusCreated)
	id1, id3 := field(t, h1, "host.id"), field(t, h3, "host.id")
	c.call("list hosts", admin, "GET", "/v1/os-hosts", "", http.StatusOK)
	c.call("list hosts with .json", admin, "GET", "/v1/os-hosts.json", "", http.StatusOK)
	c.call("show host", admin, "GET", "/v1/os-hosts/"+id1, "", http.StatusOK)
	c.call("show host with .json", admin, "GET", "/v1/os-hosts/"+id1+".json", "", http.StatusOK)
	c.call("update host capabilities", admin, "PUT", "/v1/os-hosts/"+id1, `{"rack":"r3","ssd":"true"}`, http.StatusOK)
	c.call("properties", admin, "GET", "/v1/os-hosts/properties", "", http.StatusOK)
	c.call("properties in detail", admin, "GET", "/v1/os-hosts/properties?detail=True&all=True", "", http.StatusOK)
	c.call("make a property private", admin, "PATCH", "/v1/os-hosts/properties/ssd", `{"private":true}`, http.StatusOK)
	c.call("make it public again", admin, "PATCH", "/v1/os-hosts/properties/ssd.json", `{"private":false}`, http.StatusOK)

	// Floating IPs.
	const net = "7d3c1e0a-5a2b-4c3d-8e9f-0a1b2c3d4e5f"
	c.call("empty floating IP list", admin, "GET", "/v1/floatingips", "", http.StatusOK)
	f1 := c.call("create floating IP", admin, "POST", "/v1/floatingips", `{"floating_network_id":"`+net+`","floating_ip_address":"192.0.2.10"}`, http.StatusCreated)
	c.call("create second floating IP", admin, "POST", "/v1/floatingips", `{"floating_network_id":"`+net+`","floating_ip_address":"192.0.2.11"}`, http.StatusCreated)
	fip := field(t, f1, "floatingip.id")
	c.call("list floating IPs", member, "GET", "/v1/floatingips", "", http.StatusOK)
	c.call("show floating IP", admin, "GET", "/v1/floatingips/"+fip, "", http.StatusOK)

	// Leases.
	c.call("empty lease list", admin, "GET", "/v1/leases", "", http.StatusOK)
	l1 := c.call("create host lease", member, "POST", "/v1/leases", lease("hosts", 1, 2, hostRes(1, 2)), http.StatusCreated)
	lid := field(t, l1, "lease.id")
	l2 := c.call("create floating IP lease", member, "POST", "/v1/leases",
		lease("fips", 3, 4, `{"resource_type":"virtual:floatingip","network_id":"`+net+`","amount":1,"required_floatingips":["192.0.2.11"]}`), http.StatusCreated)
	both := c.call("create lease with a before_end_date and integer-like strings", admin, "POST", "/v1/leases",
		`{"name":"both","start_date":"`+future(5)+`","end_date":"`+future(6)+`","before_end_date":"`+now.AddDate(0, 0, 5).Add(12*time.Hour).Format("2006-01-02 15:04")+`","reservations":[`+
			`{"resource_type":"physical:host","min":"1","max":"1","hypervisor_properties":"","resource_properties":"[\"==\", \"$rack\", \"r2\"]"},`+
			`{"resource_type":"virtual:floatingip","network_id":"`+net+`","amount":"1"}],"events":[]}`, http.StatusCreated)
	started := c.call("create lease starting now", admin, "POST", "/v1/leases",
		`{"name":"now","start_date":"now","end_date":"`+future(1)+`","reservations":[{"resource_type":"physical:host","min":1,"max":1,`+
			`"hypervisor_properties":"","resource_properties":"[\"==\", \"$rack\", \"r2\"]"}],"events":[]}`, http.StatusCreated)
	onRack := func(rack string) string {
		return `{"resource_type":"physical:host","min":1,"max":1,"hypervisor_properties":"","resource_properties":"[\"==\", \"$rack\", \"` + rack + `\"]"}`
	}
	imm := c.call("create IMMEDIATE lease", member, "POST", "/v1/leases",
		`{"name":"imm","lease_type":"IMMEDIATE","end_date":"`+future(1)+`","reservations":[`+onRack("r4")+`]}`, http.StatusCreated)
	best := c.call("create BEST-EFFORT lease", member, "POST", "/v1/leases",
		`{"name":"asap","lease_type":"best-effort","timeout":"600","start_date":"now","end_date":"`+future(1)+`","reservations":[`+onRack("r5")+`]}`, http.StatusCreated)
	c.call("second IMMEDIATE lease on a busy host", member, "POST", "/v1/leases",
		`{"name":"imm2","lease_type":"IMMEDIATE","end_date":"`+future(1)+`","reservations":[`+onRack("r4")+`]}`, http.StatusConflict)
	c.bad("unknown lease type", member, "POST", "/v1/leases",
		`{"name":"x","lease_type":"SOMETIME","start_date":"now","end_date":"`+future(1)+`"}`, http.StatusBadRequest)
	tagged := c.call("create lease with tags", member, "POST", "/v1/leases",
		`{"name":"tagged","tags":["svc:db","team-a"],"start_date":"`+future(20)+`","end_date":"`+future(21)+`","reservations":[`+onRack("r2")+`]}`, http.StatusCreated)
	if got := field(t, tagged, "lease.tags.1"); got != "team-a" {
		t.Errorf("lease tags[1] = %q, want team-a", got)
	}
	c.bad("tags not a list", member, "POST", "/v1/leases",
		`{"name":"x","tags":"svc:db","start_date":"`+future(20)+`","end_date":"`+future(21)+`"}`, http.StatusBadRequest)
	retagged := c.call("update lease tags", member, "PUT", "/v1/leases/"+field(t, tagged, "lease.id"), `{"tags":["svc:web"]}`, http.StatusOK)
	if got := field(t, retagged, "lease.tags.0"); got != "svc:web" {
		t.Errorf("lease tags[0] after the update = %q, want svc:web", got)
	}
	c.bad("update tags not a list", member, "PUT", "/v1/leases/"+field(t, tagged, "lease.id"), `{"tags":{"a":1}}`, http.StatusBadRequest)

	// Instance reservations (virtual:instance): slots of one size on the
	// hosts of pool inst.
	inst := func(amount int, affinity string) string {
		return `{"resource_type":"virtual:instance","amount":` + strconv.Itoa(amount) + `,"vcpus":2,"memory_mb":2048,"disk_gb":20,` +
			`"affinity":` + affinity + `,"resource_properties":"[\"==\", \"$pool\", \"inst\"]"}`
	}
	i1 := c.call("create instance lease", member, "POST", "/v1/leases", lease("slots", 12, 13, inst(3, "null")), http.StatusCreated)
	iNow := c.call("create instance lease starting now", member, "POST", "/v1/leases",
		`{"name":"slots-now","start_date":"now","end_date":"`+future(1)+`","reservations":[`+inst(1, "true")+`]}`, http.StatusCreated)
	i3 := c.call("create instance lease with anti-affinity and string values", member, "POST", "/v1/leases",
		lease("spread", 14, 15, `{"resource_type":"virtual:instance","amount":"2","vcpus":"1","memory_mb":"512","disk_gb":"0","affinity":"False","resource_properties":""}`), http.StatusCreated)
	if got, want := field(t, i1, "lease.reservations.0.flavor_id"), field(t, i1, "lease.reservations.0.id"); got != want {
		t.Errorf("instance reservation's flavor_id %s, want its id %s", got, want)
	}
	c.call("update instance reservation", member, "PUT", "/v1/leases/"+field(t, i1, "lease.id"),
		`{"reservations":[{"id":"`+field(t, i1, "lease.reservations.0.id")+`","amount":2,"affinity":false,"memory_mb":4096}]}`, http.StatusOK)
	c.call("instance reservation beyond capacity", member, "POST", "/v1/leases", lease("huge", 12, 13, inst(1000, "null")), http.StatusConflict)
	c.call("anti-affinity on more slots than hosts", member, "POST", "/v1/leases", lease("apart", 16, 17, inst(3, "false")), http.StatusConflict)
	c.call("instance reservation without its size", member, "POST", "/v1/leases",
		lease("sizeless", 12, 13, `{"resource_type":"virtual:instance","amount":1,"affinity":null,"resource_properties":""}`), http.StatusBadRequest)
	c.call("instance reservation with an unreadable affinity", member, "POST", "/v1/leases", lease("maybe", 12, 13, inst(1, `"maybe"`)), http.StatusBadRequest)
	c.call("unknown key in an instance reservation update", member, "PUT", "/v1/leases/"+field(t, i1, "lease.id"),
		`{"reservations":[{"id":"`+field(t, i1, "lease.reservations.0.id")+`","flavor_id":"x"}]}`, http.StatusBadRequest)
	// The standalone compute service offers no flavors, so flavor:instance
	// is not a resource type here.
	c.call("flavor:instance without a compute service offering flavors", member, "POST", "/v1/leases",
		lease("flavored", 12, 13, `{"resource_type":"flavor:instance","amount":1,"flavor_id":"m1.small","affinity":null}`), http.StatusBadRequest)

	// The earliest window (Leasehold), searched and booked.
	c.call("earliest window", member, "POST", "/v1/leases/earliest",
		`{"duration":7200,"after":"`+future(20)+`","reservations":[`+hostRes(1, 1)+`]}`, http.StatusOK)
	c.call("earliest window with .json and a bound", member, "POST", "/v1/leases/earliest.json",
		`{"duration":3600,"after":null,"not_after":"`+future(30)+`","reservations":[`+onRack("r2")+`]}`, http.StatusOK)
	c.call("no earliest window by not_after", member, "POST", "/v1/leases/earliest",
		`{"duration":3600,"after":"`+future(20)+`","not_after":"`+future(21)+`","reservations":[`+hostRes(99, 99)+`]}`, http.StatusConflict)
	c.call("earliest window of instance slots", member, "POST", "/v1/leases/earliest",
		`{"duration":3600,"reservations":[`+inst(1, "null")+`]}`, http.StatusOK)
	c.bad("earliest window without a duration", member, "POST", "/v1/leases/earliest", `{"reservations":[`+hostRes(1, 1)+`]}`, http.StatusBadRequest)
	c.bad("earliest window of a fractional duration", member, "POST", "/v1/leases/earliest", `{"duration":1.5,"reservations":[]}`, http.StatusBadRequest)
	c.bad("earliest window asked by nobody", "", "POST", "/v1/leases/earliest", `{"duration":60,"reservations":[]}`, http.StatusUnauthorized)
	early := c.call("create lease at the earliest window", member, "POST", "/v1/leases",
		`{"name":"early","start_date":"earliest","duration":3600,"after":"`+future(20)+`","reservations":[`+hostRes(1, 1)+`]}`, http.StatusCreated)
	c.call("create lease at the earliest window that never comes", member, "POST", "/v1/leases",
		`{"name":"never","start_date":"earliest","duration":3600,"reservations":[`+hostRes(99, 99)+`]}`, http.StatusConflict)
	c.bad("create lease at the earliest window with an end_date", member, "POST", "/v1/leases",
		`{"name":"both-ends","start_date":"earliest","duration":3600,"end_date":"`+future(21)+`","reservations":[`+hostRes(1, 1)+`]}`, http.StatusBadRequest)

	c.waitFor("lease starting now becomes active", "/v1/leases/"+field(t, started, "lease.id"), func(b []byte) bool {
		return bytes.Contains(b, []byte(`"status":"ACTIVE"`))
	})
	c.waitFor("instance lease starting now becomes active", "/v1/leases/"+field(t, iNow, "lease.id"), func(b []byte) bool {
		return bytes.Contains(b, []byte(`"status":"ACTIVE"`))
	})

	// Nova's scheduler filter (Leasehold), for the host lease and the
	// instance lease active now.
	nowRes := field(t, started, "lease.reservations.0.id")
	slotClass := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(field(t, iNow, "lease.reservations.0.id"), "-", "_"))
	c.call("filter a boot naming no reservation", admin, "POST", "/v1/scheduler/filter",
		`{"project_id":"project","user_id":"user","hosts":["compute-1","compute-2","elsewhere"]}`, http.StatusOK)
	c.call("filter with explain", admin, "POST", "/v1/scheduler/filter.json",
		`{"project_id":"project","hosts":["compute-1","compute-2","elsewhere"],"explain":true,"scheduler_hints":{"group":"g"}}`, http.StatusOK)
	byRes := c.call("filter a boot naming a host reservation", admin, "POST", "/v1/scheduler/filter",
		`{"project_id":"admin","scheduler_hints":{"reservation":["`+nowRes+`"]},"hosts":["compute-2","compute-1"]}`, http.StatusOK)
	byFlavor := c.call("filter a boot with an instance reservation's flavor", admin, "POST", "/v1/scheduler/filter",
		`{"project_id":"project","flavor":{"extra_specs":{"resources:`+slotClass+`":"1"},"resources":{"VCPU":2,"`+slotClass+`":1}},"hosts":["compute-i1","compute-i2"]}`, http.StatusOK)
	c.call("filter a boot naming an unknown reservation", admin, "POST", "/v1/scheduler/filter",
		`{"project_id":"project","scheduler_hints":{"reservation":"`+nolease+`"},"hosts":["compute-1"]}`, http.StatusOK)
	if got := field(t, byRes, "hosts"); got != `["compute-2"]` {
		t.Errorf("a boot naming the active lease's reservation passes %s, want the host it holds", got)
	}
	if got := field(t, byFlavor, "hosts"); got != `["compute-i1"]` && got != `["compute-i2"]` {
		t.Errorf("a boot with the instance reservation's flavor passes %s, want the one host holding its slot", got)
	}
	c.call("filter asked by a member", member, "POST", "/v1/scheduler/filter", `{"project_id":"project","hosts":["compute-1"]}`, http.StatusForbidden)
	c.bad("filter asked by nobody", "", "POST", "/v1/scheduler/filter", `{"project_id":"project","hosts":["compute-1"]}`, http.StatusUnauthorized)
	c.call("filter naming two reservations", admin, "POST", "/v1/scheduler/filter",
		`{"project_id":"project","scheduler_hints":{"reservation":["`+nowRes+`","`+nolease+`"]},"hosts":["compute-1"]}`, http.StatusBadRequest)
	c.bad("filter without hosts", admin, "POST", "/v1/scheduler/filter", `{"project_id":"project"}`, http.StatusBadRequest)
	c.bad("filter with a malformed explain", admin, "POST", "/v1/scheduler/filter", `{"project_id":"project","hosts":[],"explain":"yes"}`, http.StatusBadRequest)
	c.bad("filter with an empty host name", admin, "POST", "/v1/scheduler/filter", `{"project_id":"project","hosts":[""]}`, http.StatusBadRequest)

	c.call("list leases as admin", admin, "GET", "/v1/leases", "", http.StatusOK)
	c.call("list leases as member", member, "GET", "/v1/leases.json", "", http.StatusOK)
	c.call("show lease", member, "GET", "/v1/leases/"+lid, "", http.StatusOK)
	c.call("show lease with .json", member, "GET", "/v1/leases/"+lid+".json", "", http.StatusOK)
	c.call("prolong lease", member, "PUT", "/v1/leases/"+lid, `{"end_date":"`+future(3)+`"}`, http.StatusOK)
	c.call("rename lease and change its reservation", member, "PUT", "/v1/leases/"+lid,
		`{"name":"renamed","reservations":[{"id":"`+field(t, l1, "lease.reservations.0.id")+`","min":1,"max":1}]}`, http.StatusOK)
	c.call("allocations", admin, "GET", "/v1/os-hosts/allocations", "", http.StatusOK)
	c.call("allocations of a lease", admin, "GET", "/v1/os-hosts/allocations?lease_id="+lid, "", http.StatusOK)
	c.call("allocation of a host", admin, "GET", "/v1/os-hosts/"+id1+"/allocation", "", http.StatusOK)
	c.call("allocation of a host by reservation", admin, "GET", "/v1/os-hosts/"+id3+"/allocation.json?reservation_id=nope", "", http.StatusOK)

	// Errors the API answers to well-formed requests.
	c.bad("no token", "", "GET", "/v1/leases", "", http.StatusUnauthorized)
	c.call("unknown token", "nobody", "GET", "/v1/os-hosts", "", http.StatusUnauthorized)
	c.call("member lists hosts", member, "GET", "/v1/os-hosts", "", http.StatusForbidden)
	c.call("member creates a host", member, "POST", "/v1/os-hosts", `{"name":"compute-9"}`, http.StatusForbidden)
	c.call("member shows another project's lease", "other:elsewhere", "GET", "/v1/leases/"+lid, "", http.StatusForbidden)
	c.call("unknown lease", admin, "GET", "/v1/leases/"+nolease, "", http.StatusNotFound)
	c.call("update unknown lease", admin, "PUT", "/v1/leases/"+nolease, `{"name":"x"}`, http.StatusNotFound)
	c.call("delete unknown lease", admin, "DELETE", "/v1/leases/"+nolease, "", http.StatusNotFound)
	c.call("unknown host", admin, "GET", "/v1/os-hosts/999", "", http.StatusNotFound)
	c.call("unknown host allocation", admin, "GET", "/v1/os-hosts/999/allocation", "", http.StatusNotFound)
	c.call("unknown property", admin, "PATCH", "/v1/os-hosts/properties/nope", `{"private":true}`, http.StatusNotFound)
	c.call("unknown floating IP", admin, "GET", "/v1/floatingips/"+nolease, "", http.StatusNotFound)
	c.call("not enough hosts", admin, "POST", "/v1/leases", lease("too-big", 1, 2, hostRes(9, 9)), http.StatusConflict)
	c.call("host already registered", admin, "POST", "/v1/os-hosts", `{"name":"compute-1"}`, http.StatusConflict)
	c.call("duplicate floating IP", admin, "POST", "/v1/floatingips", `{"floating_network_id":"`+net+`","floating_ip_address":"192.0.2.10"}`, http.StatusConflict)
	c.call("delete a reserved host", admin, "DELETE", "/v1/os-hosts/"+id1, "", http.StatusConflict)
	c.call("start date in the past", admin, "POST", "/v1/leases",
		`{"name":"past","start_date":"2001-01-01 00:00","end_date":"2001-01-02 00:00","reservations":[],"events":[]}`, http.StatusBadRequest)
	c.call("unsupported microversion", admin, "GET", "/v1/leases", "", http.StatusNotAcceptable, "OpenStack-API-Version", "reservation 2.0")
	c.call("latest microversion", admin, "GET", "/v1/leases", "", http.StatusOK, "OpenStack-API-Version", "reservation latest")
	c.call("unknown route", admin, "GET", "/v1/nope", "", http.StatusNotFound)
	c.call("wrong method", admin, "POST", "/v1/os-hosts/"+id1, `{}`, http.StatusMethodNotAllowed)

	// Requests the description itself refuses: only the answers are held
	// to it.
	c.bad("malformed microversion", admin, "GET", "/v1/leases", "", http.StatusBadRequest, "OpenStack-API-Version", "reservation one")
	c.bad("lease without a name", admin, "POST", "/v1/leases", `{"start_date":"now","end_date":"`+future(1)+`"}`, http.StatusBadRequest)
	c.bad("malformed JSON", admin, "POST", "/v1/leases", `{"name": `, http.StatusBadRequest)
	c.bad("unsupported lease update key", member, "PUT", "/v1/leases/"+lid, `{"events":[]}`, http.StatusBadRequest)
	c.bad("empty host update", admin, "PUT", "/v1/os-hosts/"+id1, `{}`, http.StatusBadRequest)
	c.bad("host without a name", admin, "POST", "/v1/os-hosts", `{"rack":"r1"}`, http.StatusBadRequest)
	c.bad("property update of another key", admin, "PATCH", "/v1/os-hosts/properties/gpu", `{"public":true}`, http.StatusBadRequest)
	c.bad("floating IP with a bad address", admin, "POST", "/v1/floatingips", `{"floating_network_id":"`+net+`","floating_ip_address":"192.0.2.300"}`, http.StatusBadRequest)

	// A failed host deleted by force (Leasehold): the active lease on it
	// moves to the other host of its failure domain (resources_changed),
	// then, that one deleted too, loses its booking (missing_resources);
	// either way the lease is degraded.
	heal := c.call("create lease to heal", admin, "POST", "/v1/leases",
		`{"name":"heal","start_date":"now","end_date":"`+future(1)+`","reservations":[{"resource_type":"physical:host","min":1,"max":1,`+
			`"hypervisor_properties":"","resource_properties":"[\"==\", \"$fd\", \"heal\"]"}],"events":[]}`, http.StatusCreated)
	healID := field(t, heal, "lease.id")
	c.waitFor("lease to heal becomes active", "/v1/leases/"+healID, func(b []byte) bool {
		return bytes.Contains(b, []byte(`"status":"ACTIVE"`))
	})
	onHost := func() string {
		a := c.call("allocations of the lease to heal", admin, "GET", "/v1/os-hosts/allocations?lease_id="+healID, "", http.StatusOK)
		var body struct {
			Allocations []struct {
				ResourceID   string `json:"resource_id"`
				Reservations []any  `json:"reservations"`
			} `json:"allocations"`
		}
		if err := json.Unmarshal(a.respBody, &body); err != nil {
			t.Fatal(err)
		}
		for _, x := range body.Allocations {
			if len(x.Reservations) > 0 {
				return x.ResourceID
			}
		}
		t.Fatalf("the lease to heal holds no host: %s", a.respBody)
		return ""
	}
	failed := onHost()
	c.call("plain delete of the reserved host", admin, "DELETE", "/v1/os-hosts/"+failed, "", http.StatusConflict)
	c.bad("delete with a malformed force", admin, "DELETE", "/v1/os-hosts/"+failed+"?force=maybe", "", http.StatusBadRequest)
	c.call("delete the reserved host by force", admin, "DELETE", "/v1/os-hosts/"+failed+"?force=true", "", http.StatusNoContent)
	healed := c.call("healed lease", admin, "GET", "/v1/leases/"+healID, "", http.StatusOK)
	if field(t, healed, "lease.degraded") != "true" || field(t, healed, "lease.reservations.0.resources_changed") != "true" {
		t.Errorf("an active lease moved off a host deleted by force is not degraded with resources_changed: %s", healed.respBody)
	}
	c.call("delete its second host by force", admin, "DELETE", "/v1/os-hosts/"+onHost()+".json?force=1", "", http.StatusNoContent)
	degraded := c.call("lease that lost its host", admin, "GET", "/v1/leases/"+healID, "", http.StatusOK)
	if field(t, degraded, "lease.degraded") != "true" || field(t, degraded, "lease.reservations.0.missing_resources") != "true" {
		t.Errorf("a lease whose every matching host was deleted by force is not degraded with missing_resources: %s", degraded.respBody)
	}
	c.call("delete unknown host by force", admin, "DELETE", "/v1/os-hosts/999?force=true", "", http.StatusNotFound)

	// Deletes.
	c.call("delete healed lease", admin, "DELETE", "/v1/leases/"+healID, "", http.StatusNoContent)
	c.call("delete instance lease", member, "DELETE", "/v1/leases/"+field(t, i1, "lease.id"), "", http.StatusNoContent)
	c.call("delete active instance lease", member, "DELETE", "/v1/leases/"+field(t, iNow, "lease.id"), "", http.StatusNoContent)
	c.call("delete anti-affinity instance lease", member, "DELETE", "/v1/leases/"+field(t, i3, "lease.id"), "", http.StatusNoContent)
	c.call("delete earliest lease", member, "DELETE", "/v1/leases/"+field(t, early, "lease.id"), "", http.StatusNoContent)
	c.call("delete floating IP lease", member, "DELETE", "/v1/leases/"+field(t, l2, "lease.id"), "", http.StatusNoContent)
	c.call("delete host lease", member, "DELETE", "/v1/leases/"+lid, "", http.StatusNoContent)
	c.call("delete the lease of both types", admin, "DELETE", "/v1/leases/"+field(t, both, "lease.id"), "", http.StatusNoContent)
	c.call("delete IMMEDIATE lease", member, "DELETE", "/v1/leases/"+field(t, imm, "lease.id"), "", http.StatusNoContent)
	c.call("delete BEST-EFFORT lease", member, "DELETE", "/v1/leases/"+field(t, best, "lease.id"), "", http.StatusNoContent)
	off := c.call("put the spare host in maintenance", admin, "PUT", "/v1/os-hosts/"+id3, `{"reservable":false}`, http.StatusOK)
	if got := field(t, off, "host.reservable"); got != "false" {
		t.Errorf("a host put in maintenance shows reservable %s", got)
	}
	c.call("make it reservable again", admin, "PUT", "/v1/os-hosts/"+id3, `{"reservable":"True"}`, http.StatusOK)
	c.bad("malformed reservable", admin, "PUT", "/v1/os-hosts/"+id3, `{"reservable":"maybe"}`, http.StatusBadRequest)
	c.call("delete spare host", admin, "DELETE", "/v1/os-hosts/"+id3, "", http.StatusNoContent)
	c.call("delete floating IP", admin, "DELETE", "/v1/floatingips/"+fip, "", http.StatusNoContent)

	ch := newChecker(t, s)
	validate(ch, c.log)
	ch.summary("recorded traffic")
	if !t.Failed() {
		t.Run("broken descriptions fail", func(t *testing.T) { checkBrokenDescriptions(t, c.log, breakages, true) })
	}
}

// validate checks every exchange of log, then that each operation of the
// description got a successful answer.
func validate(ch *checker, log []*exchange) {
	ch.t.Helper()
	for _, e := range log {
		ch.check(e)
	}
	for key := range operations(ch.s.model) {
		if ch.ok[key] == 0 {
			ch.errorf("%s: the scenario got no successful answer from it; the description lists an operation the server may not serve", key)
		}
	}
}
