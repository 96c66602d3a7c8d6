package blazar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
	"github.com/leasehold/leasehold/pkg/server"
	"github.com/leasehold/leasehold/tests/internal/lhtest"
)

// The lease kinds over HTTP (lease_type SCHEDULE, IMMEDIATE, BEST-EFFORT;
// see README "Lease kinds"), against an in-process server in standalone
// mode, where an instance is a Placement consumer of type INSTANCE on a
// host's compute provider. The Blazar CLIs cannot send lease_type (their
// lease-create builds the body from a fixed set of options), so the
// bodies go over the raw API, as curl would send them. One server per
// database dialect; each scenario registers its own hosts, grouped by the
// extra capability grp its leases ask for.

// kindsServer is a running in-process server.
type kindsServer struct {
	srv  *server.Server
	base string
}

func startKindsServer(t *testing.T, dbURL string) *kindsServer {
	t.Helper()
	dir := t.TempDir()
	conf := "[physical:host]\ncluster_tags = htools:migration:net, htools:allowmigration:net:a::net:b\n"
	path := filepath.Join(dir, "leasehold.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse([]string{"--config", path, "--listen", "127.0.0.1:0", "--database", dbURL, "--auth", "noauth"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	s := lhtest.Run(t, cfg)
	return &kindsServer{srv: s, base: "http://" + s.Addrs[0]}
}

// call sends a JSON request as the noauth admin (project "admin") and
// returns the status and the decoded body.
func (k *kindsServer) call(t *testing.T, method, path string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, k.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := AdminHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// placement calls the built-in Placement at microversion 1.38.
func (k *kindsServer) placement(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return k.call(t, method, "/placement"+path, body, "OpenStack-API-Version", "placement 1.38")
}

// host registers a Blazar host with vcpus and memory and the extra
// capabilities caps (key=value), and returns its compute provider uuid.
func (k *kindsServer) host(t *testing.T, name string, vcpus, memMB int, caps ...string) string {
	t.Helper()
	body := map[string]any{"name": name, "vcpus": fmt.Sprint(vcpus), "memory_mb": fmt.Sprint(memMB), "local_gb": "100"}
	for _, c := range caps {
		kk, v, _ := strings.Cut(c, "=")
		body[kk] = v
	}
	if code, out := k.call(t, "POST", "/v1/os-hosts", body); code != 200 && code != 201 {
		t.Fatalf("register %s: %d %v", name, code, out)
	}
	return k.provider(t, name)
}

// provider returns the uuid of the Placement provider named name.
func (k *kindsServer) provider(t *testing.T, name string) string {
	t.Helper()
	code, out := k.placement(t, "GET", "/resource_providers?name="+name, nil)
	rps, _ := out["resource_providers"].([]any)
	if code != 200 || len(rps) != 1 {
		t.Fatalf("provider %s: %d %v", name, code, out)
	}
	return rps[0].(map[string]any)["uuid"].(string)
}

// spare creates a compute node known only to Placement (no Blazar host):
// a place instances can move to.
func (k *kindsServer) spare(t *testing.T, name string, vcpus, memMB int) string {
	t.Helper()
	u := uuid.NewString()
	if code, out := k.placement(t, "POST", "/resource_providers", map[string]any{"name": name, "uuid": u}); code != 200 {
		t.Fatalf("provider %s: %d %v", name, code, out)
	}
	inv := map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{
		"VCPU": map[string]any{"total": vcpus}, "MEMORY_MB": map[string]any{"total": memMB}}}
	if code, out := k.placement(t, "PUT", "/resource_providers/"+u+"/inventories", inv); code != 200 {
		t.Fatalf("inventory of %s: %d %v", name, code, out)
	}
	return u
}

// instance runs an instance of project "other" (a consumer of type
// INSTANCE) on provider rp and returns its uuid.
func (k *kindsServer) instance(t *testing.T, rp string, vcpus, memMB int) string {
	t.Helper()
	c := uuid.NewString()
	body := map[string]any{
		"allocations":         map[string]any{rp: map[string]any{"resources": map[string]any{"VCPU": vcpus, "MEMORY_MB": memMB}}},
		"consumer_generation": nil, "project_id": "other", "user_id": "someone", "consumer_type": "INSTANCE",
	}
	if code, out := k.placement(t, "PUT", "/allocations/"+c, body); code != 204 {
		t.Fatalf("instance on %s: %d %v", rp, code, out)
	}
	return c
}

// where returns the providers an instance holds allocations on.
func (k *kindsServer) where(t *testing.T, consumer string) []string {
	t.Helper()
	code, out := k.placement(t, "GET", "/allocations/"+consumer, nil)
	if code != 200 {
		t.Fatalf("allocations of %s: %d %v", consumer, code, out)
	}
	var rps []string
	for u := range out["allocations"].(map[string]any) {
		rps = append(rps, u)
	}
	return rps
}

// lease posts a lease of kind (nil: no lease_type) for min..max hosts of
// group grp, and returns the status and the lease (or error body).
func (k *kindsServer) lease(t *testing.T, name, grp string, kind any, extra map[string]any, n int) (int, map[string]any) {
	t.Helper()
	body := map[string]any{
		"name": name, "end_date": time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02 15:04"),
		"reservations": []any{map[string]any{"resource_type": "physical:host", "min": n, "max": n,
			"hypervisor_properties": "", "resource_properties": `["==", "$grp", "` + grp + `"]`}},
		"events": []any{},
	}
	if kind != nil {
		body["lease_type"] = kind
	}
	for kk, v := range extra {
		body[kk] = v
	}
	if _, ok := body["start_date"]; !ok && (kind == nil || kind == "SCHEDULE") {
		body["start_date"] = time.Now().UTC().Add(24 * time.Hour).Format("2006-01-02 15:04")
	}
	code, out := k.call(t, "POST", "/v1/leases", body)
	if l, ok := out["lease"].(map[string]any); ok {
		return code, l
	}
	return code, out
}

// waitStatus polls lease id until its status is want (bounded).
func (k *kindsServer) waitStatus(t *testing.T, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out := k.call(t, "GET", "/v1/leases/"+id, nil)
		l, _ := out["lease"].(map[string]any)
		if code == 200 && l["status"] == want {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s: status %v after 60s, want %s (%d %v)", id, l["status"], want, code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func errorMessage(out map[string]any) string {
	s, _ := out["error_message"].(string)
	return s
}

func eventStatus(l map[string]any, typ string) string {
	for _, e := range l["events"].([]any) {
		if m := e.(map[string]any); m["event_type"] == typ {
			return m["status"].(string)
		}
	}
	return ""
}

func TestLeaseKinds(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			k := startKindsServer(t, dbtest.URLDialect(t, dialect))
			t.Run("bad values", func(t *testing.T) { testKindsBadValues(t, k) })
			t.Run("schedule is the default", func(t *testing.T) { testKindsSchedule(t, k) })
			t.Run("immediate", func(t *testing.T) { testKindsImmediate(t, k) })
			t.Run("host in use by another project is not free now", func(t *testing.T) { testKindsBusyNow(t, k) })
			t.Run("best-effort blocked by leases", func(t *testing.T) { testKindsBlocked(t, k) })
			t.Run("best-effort instance with nowhere to go", func(t *testing.T) { testKindsNowhere(t, k) })
			t.Run("best-effort timed out", func(t *testing.T) { testKindsTimedOut(t, k) })
			t.Run("best-effort clears a host", func(t *testing.T) { testKindsBestEffort(t, k) })
			t.Run("best-effort honours migration tags", func(t *testing.T) { testKindsMigrationTags(t, k) })
			t.Run("real clients", func(t *testing.T) { testKindsClients(t, k) })
		})
	}
}

func testKindsBadValues(t *testing.T, k *kindsServer) {
	k.host(t, "bad-1", 8, 16384, "grp=bad")
	for _, tc := range []struct {
		name  string
		kind  any
		extra map[string]any
		want  string
	}{
		{"unknown type", "SOMETIMES", nil, `Invalid lease_type "SOMETIMES"`},
		{"type not a string", 3, nil, "Malformed parameter lease_type"},
		{"timeout without best-effort", "IMMEDIATE", map[string]any{"timeout": 30}, "timeout is only for lease_type BEST-EFFORT"},
		{"timeout not a number", "BEST-EFFORT", map[string]any{"timeout": "soon"}, "Invalid timeout"},
		{"timeout zero", "BEST-EFFORT", map[string]any{"timeout": 0}, "Invalid timeout"},
		{"timeout past the end", "BEST-EFFORT", map[string]any{"timeout": 3 * 24 * 3600}, "must end before the lease does"},
		{"immediate in the future", "IMMEDIATE", map[string]any{"start_date": time.Now().UTC().Add(2 * time.Hour).Format("2006-01-02 15:04")}, "starts now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := k.lease(t, "bad-"+tc.name, "bad", tc.kind, tc.extra, 1)
			if code != 400 || !strings.Contains(errorMessage(out), tc.want) || out["error_code"] != float64(400) {
				t.Errorf("got %d %v, want 400 with %q", code, out, tc.want)
			}
		})
	}
	code, out := k.call(t, "GET", "/v1/leases", nil)
	if ls, _ := out["leases"].([]any); code != 200 || len(ls) != 0 {
		t.Errorf("refused requests stored leases: %d %v", code, out)
	}
}

func testKindsSchedule(t *testing.T, k *kindsServer) {
	k.host(t, "sch-1", 8, 16384, "grp=sch")
	code, l := k.lease(t, "sch", "sch", nil, nil, 1)
	if code != 201 || l["lease_type"] != "SCHEDULE" || l["status"] != "PENDING" || l["timeout"] != nil {
		t.Fatalf("schedule lease: %d %v", code, l)
	}
	code, l = k.lease(t, "sch-explicit", "sch", "SCHEDULE", map[string]any{"start_date": time.Now().UTC().Add(72 * time.Hour).Format("2006-01-02 15:04"),
		"end_date": time.Now().UTC().Add(96 * time.Hour).Format("2006-01-02 15:04")}, 1)
	if code != 201 || l["lease_type"] != "SCHEDULE" {
		t.Fatalf("explicit schedule lease: %d %v", code, l)
	}
	// Refused: the one host is booked over the first window.
	code, out := k.lease(t, "sch-refused", "sch", "SCHEDULE", nil, 1)
	if code != 409 {
		t.Errorf("overlapping schedule lease: %d %v, want 409", code, out)
	}
	// The listing shows the kind too.
	_, all := k.call(t, "GET", "/v1/leases", nil)
	for _, x := range all["leases"].([]any) {
		if m := x.(map[string]any); m["lease_type"] != "SCHEDULE" {
			t.Errorf("listed lease %v: lease_type %v", m["name"], m["lease_type"])
		}
	}
}

func testKindsImmediate(t *testing.T, k *kindsServer) {
	k.host(t, "imm-1", 8, 16384, "grp=imm")
	code, l := k.lease(t, "imm", "imm", "IMMEDIATE", nil, 1)
	if code != 201 || l["lease_type"] != "IMMEDIATE" || l["status"] != "ACTIVE" || eventStatus(l, "start_lease") != "DONE" {
		t.Fatalf("immediate lease: %d %v", code, l)
	}
	res := l["reservations"].([]any)[0].(map[string]any)
	if res["status"] != "active" {
		t.Errorf("reservation %v, want active", res)
	}
	code, out := k.lease(t, "imm-refused", "imm", "IMMEDIATE", map[string]any{"start_date": "now"}, 1)
	if code != 409 || !strings.Contains(errorMessage(out), "Not enough hosts available") {
		t.Errorf("second immediate lease: %d %v, want 409 with the reason", code, out)
	}
	_, all := k.call(t, "GET", "/v1/leases", nil)
	for _, x := range all["leases"].([]any) {
		if x.(map[string]any)["name"] == "imm-refused" {
			t.Error("a refused IMMEDIATE lease was stored")
		}
	}
}

func testKindsBusyNow(t *testing.T, k *kindsServer) {
	rp := k.host(t, "busy-1", 8, 16384, "grp=busy")
	k.instance(t, rp, 2, 2048)
	code, out := k.lease(t, "busy", "busy", "IMMEDIATE", nil, 1)
	if code != 409 || !strings.Contains(errorMessage(out), "Not enough hosts available") {
		t.Errorf("immediate lease on a host another project uses: %d %v, want 409", code, out)
	}
	// A window that starts later is not affected.
	if code, out := k.lease(t, "busy-later", "busy", nil, nil, 1); code != 201 {
		t.Errorf("scheduled lease: %d %v", code, out)
	}
}

func testKindsBlocked(t *testing.T, k *kindsServer) {
	k.host(t, "blk-1", 8, 16384, "grp=blk")
	if code, out := k.lease(t, "blk-holder", "blk", "IMMEDIATE", nil, 1); code != 201 {
		t.Fatalf("holder: %d %v", code, out)
	}
	code, out := k.lease(t, "blk", "blk", "BEST-EFFORT", map[string]any{"timeout": 60}, 1)
	if code != 409 || !strings.Contains(errorMessage(out), "blocked by leases") {
		t.Errorf("best-effort lease blocked by a lease: %d %v, want 409 blocked by leases", code, out)
	}
}

func testKindsNowhere(t *testing.T, k *kindsServer) {
	rp := k.host(t, "nw-1", 64, 262144, "grp=nw")
	big := k.instance(t, rp, 60, 200000)
	code, out := k.lease(t, "nw", "nw", "BEST-EFFORT", nil, 1)
	if code != 409 || !strings.Contains(errorMessage(out), "instance "+big+" has nowhere to go") {
		t.Errorf("best-effort lease with an instance too big to move: %d %v, want 409 naming it", code, out)
	}
}

func testKindsTimedOut(t *testing.T, k *kindsServer) {
	rp := k.host(t, "to-1", 8, 16384, "grp=to")
	k.spare(t, "to-spare", 8, 16384)
	inst := k.instance(t, rp, 2, 2048)
	// The move of inst blocks until the test is done with it: it cannot
	// finish before the 1 s timeout.
	release := make(chan struct{})
	k.srv.Mover.SetBeforeMove(func(ctx context.Context, consumer string) error {
		if consumer != inst {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	defer k.srv.Mover.SetBeforeMove(nil)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	code, l := k.lease(t, "to", "to", "BEST-EFFORT", map[string]any{"timeout": 1}, 1)
	if code != 201 || l["status"] != "IN-PROGRESS" || l["timeout"] != float64(1) || l["lease_type"] != "BEST-EFFORT" {
		t.Fatalf("best-effort lease: %d %v", code, l)
	}
	l = k.waitStatus(t, l["id"].(string), "TIMEDOUT")
	if res := l["reservations"].([]any)[0].(map[string]any); res["status"] != "deleted" {
		t.Errorf("reservation of the timed-out lease: %v, want deleted", res)
	}
	// Its host is released.
	_, allocs := k.call(t, "GET", "/v1/os-hosts/allocations", nil)
	for _, a := range allocs["allocations"].([]any) {
		for _, r := range a.(map[string]any)["reservations"].([]any) {
			if r.(map[string]any)["lease_id"] == l["id"] {
				t.Errorf("the timed-out lease still holds host %v", a.(map[string]any)["resource_id"])
			}
		}
	}
	// The blocked move goes on after the timeout: it finds the lease
	// timed out and is dropped.
	close(release)
	released = true
	deadline := time.Now().Add(60 * time.Second)
	for {
		rs, err := outbox.List(context.Background(), k.srv.DB())
		if err != nil {
			t.Fatal(err)
		}
		pending := false
		for _, r := range rs {
			pending = pending || r.LeaseID == l["id"]
		}
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease's outbox rows are still there after 60s: %+v", rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := k.where(t, inst); len(got) != 1 || got[0] != rp {
		t.Errorf("instance on %v, want still on %s (the move was dropped)", got, rp)
	}
}

func testKindsBestEffort(t *testing.T, k *kindsServer) {
	rp1 := k.host(t, "be-1", 8, 16384, "grp=be")
	rp2 := k.host(t, "be-2", 8, 16384, "grp=be")
	k.spare(t, "be-spare", 16, 32768)
	small := k.instance(t, rp1, 1, 1024)
	k.instance(t, rp2, 2, 2048)
	k.instance(t, rp2, 2, 2048)
	code, l := k.lease(t, "be", "be", "BEST-EFFORT", map[string]any{"timeout": 600}, 1)
	if code != 201 || l["status"] != "IN-PROGRESS" || l["lease_type"] != "BEST-EFFORT" {
		t.Fatalf("best-effort lease: %d %v", code, l)
	}
	l = k.waitStatus(t, l["id"].(string), "ACTIVE")
	if eventStatus(l, "start_lease") != "DONE" {
		t.Errorf("start_lease of the active lease: %v", l["events"])
	}
	// It holds exactly one of the two hosts.
	_, allocs := k.call(t, "GET", "/v1/os-hosts/allocations", nil)
	held := 0
	for _, a := range allocs["allocations"].([]any) {
		for _, r := range a.(map[string]any)["reservations"].([]any) {
			if r.(map[string]any)["lease_id"] == l["id"] {
				held++
			}
		}
	}
	if held != 1 {
		t.Errorf("the best-effort lease holds %d hosts, want 1", held)
	}
	if got := k.where(t, small); len(got) != 1 || got[0] == rp1 || got[0] == rp2 {
		t.Errorf("the instance of the cheapest host to clear is on %v, want moved off be-1 and be-2", got)
	}
	// An immediate lease now finds be-2 still in use by the other project.
	if code, out := k.lease(t, "be-after", "be", "IMMEDIATE", nil, 1); code != 409 {
		t.Errorf("immediate lease after: %d %v, want 409", code, out)
	}
}

func testKindsMigrationTags(t *testing.T, k *kindsServer) {
	rp := k.host(t, "mg-1", 8, 16384, "grp=mg", "net=a")
	// A best fit that net:a may not migrate to, and the allowed one.
	k.host(t, "mg-c", 2, 2048, "grp=mgx", "net=c")
	allowed := k.host(t, "mg-b", 16, 32768, "grp=mgx", "net=b")
	inst := k.instance(t, rp, 2, 2048)
	code, l := k.lease(t, "mg", "mg", "BEST-EFFORT", map[string]any{"timeout": 600}, 1)
	if code != 201 {
		t.Fatalf("best-effort lease: %d %v", code, l)
	}
	k.waitStatus(t, l["id"].(string), "ACTIVE")
	if got := k.where(t, inst); len(got) != 1 || got[0] != allowed {
		t.Errorf("instance moved to %v, want %s (mg-b, the only net:b host)", got, allowed)
	}
}

// kindsPy sends a lease body through python-blazarclient's own request
// manager (its LeaseClientManager.create builds the body from a fixed set
// of keys, so a caller of the library posts the body itself) and prints
// the lease, or the client's error code.
const kindsPy = `
import json, sys
from blazarclient import client, exception
c = client.Client('1', blazar_url=sys.argv[1], auth_token='admin')
try:
    resp, body = c.lease.request_manager.post('/leases', body=json.loads(sys.argv[2]))
    print(json.dumps(body['lease']))
except exception.BlazarClientException as e:
    print(json.dumps({'code': e.kwargs.get('code'), 'message': str(e)}))
`

func testKindsClients(t *testing.T, k *kindsServer) {
	srv := &Server{URL: k.base, Endpoint: k.base + "/v1"}
	RequireClients(t, "blazar", "openstack")
	python := clientPython(t)
	k.host(t, "cli-1", 8, 16384, "grp=cli")
	body := func(name string) string {
		b, _ := json.Marshal(map[string]any{"name": name, "lease_type": "IMMEDIATE",
			"end_date": time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02 15:04"), "events": []any{},
			"reservations": []any{map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
				"hypervisor_properties": "", "resource_properties": `["==", "$grp", "cli"]`}}})
		return string(b)
	}
	py := func(name string) map[string]any {
		out := srv.MustRun(t, python, "-c", kindsPy, srv.Endpoint, body(name))
		var m map[string]any
		if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &m); err != nil {
			t.Fatalf("python-blazarclient: %v\n%s", err, out)
		}
		return m
	}
	l := py("cli-immediate")
	if l["lease_type"] != "IMMEDIATE" || l["status"] != "ACTIVE" {
		t.Fatalf("IMMEDIATE through python-blazarclient: %v", l)
	}
	if e := py("cli-immediate-2"); e["code"] != float64(409) {
		t.Errorf("second IMMEDIATE through python-blazarclient: %v, want code 409", e)
	}
	// The CLIs show the kind of any lease.
	if f := ParseShow(t, srv.MustRun(t, "blazar", "lease-show", l["id"].(string))); f["lease_type"] != "IMMEDIATE" || f["status"] != "ACTIVE" {
		t.Errorf("blazar lease-show: %v", f)
	}
	start := time.Now().UTC().Add(72 * time.Hour).Format("2006-01-02 15:04")
	end := time.Now().UTC().Add(96 * time.Hour).Format("2006-01-02 15:04")
	srv.MustRun(t, "blazar", "lease-create", "--physical-reservation", `min=1,max=1,hypervisor_properties=,resource_properties=["==", "$grp", "cli"]`,
		"--start-date", start, "--end-date", end, "cli-scheduled")
	if m := showJSON(t, srv, "openstack", "reservation", "lease", "show", "cli-scheduled"); m["lease_type"] != "SCHEDULE" || m["status"] != "PENDING" {
		t.Errorf("a lease the CLI created: %v, want SCHEDULE and PENDING", m)
	}
}

// clientPython is the interpreter the blazar CLI runs with (its #! line):
// the one python-blazarclient is installed for.
func clientPython(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("blazar")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if f := strings.Fields(strings.TrimPrefix(line, "#!")); len(f) > 0 && strings.HasPrefix(line, "#!") {
		return f[0]
	}
	return "python3"
}
