package ownership_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkLeaseCreate measures a one-host lease create over HTTP at 1,000
// hosts with ownership off (no plan) and on (10 domains of 10 projects,
// each project owning 5 hosts), each lease in its own window so the
// project's owned hosts are free. It reports the p50 latency; the
// difference between the two is the extra cost of ownership. In "lends"
// every project also lends its hosts under a lending limit, so each
// create reads the loans of its lenders over the window.
func BenchmarkLeaseCreate(b *testing.B) {
	for _, name := range []string{"off", "on", "lends"} {
		on := name != "off"
		b.Run(name, func(b *testing.B) {
			ts := benchCloud(b, name)
			var first string
			base := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				st := base.Add(time.Duration(i) * 24 * time.Hour)
				body := fmt.Sprintf(`{"name": "l%d", "start_date": "%s", "end_date": "%s", "events": [],
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`,
					i, st.Format("2006-01-02 15:04"), st.Add(time.Hour).Format("2006-01-02 15:04"))
				t0 := time.Now()
				status, out := do(b, ts, "u:P37", "POST", "/v1/leases", body)
				lat = append(lat, time.Since(t0))
				if status != 201 && status != 200 {
					b.Fatalf("lease: %d %v", status, out)
				}
				if i == 0 {
					first = out["lease"].(map[string]any)["id"].(string)
				}
				i++
			}
			if on {
				// The measured leases did go through ownership: P37's first
				// lease took one of its own hosts.
				_, ex := do(b, ts, "admin", "GET", "/v1/ownership/projects/P37", "")
				pool := ex["explanation"].(map[string]any)["pools"].([]any)[0].(map[string]any)
				h := hostOf(b, ts, first)
				if pool["kind"] != "owned" || !slices.Contains(pool["hosts"].([]any), any(h)) {
					b.Fatalf("first lease took host %s, not one of P37's owned %v", h, pool)
				}
			}
			reportP50(b, lat)
		})
	}
}

// BenchmarkEarliest measures POST /v1/leases/earliest for one host for
// an hour over HTTP at 1,000 hosts with ownership off and on (the plan of
// BenchmarkLeaseCreate; "lends": every project also lends its hosts with
// an hour's grace under a lending limit, so each search reads the
// project's loans for the reclaim sweep). The asking project holds five
// hosts for the first week (with ownership on: the five it owns), and
// each search starts at a random hour of that week. It reports the p50
// latency.
func BenchmarkEarliest(b *testing.B) {
	for _, name := range []string{"off", "on", "lends"} {
		b.Run(name, func(b *testing.B) {
			ts := benchCloud(b, name)
			base := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			body := fmt.Sprintf(`{"name": "week", "start_date": "%s", "end_date": "%s", "events": [],
 "reservations": [{"resource_type": "physical:host", "min": 5, "max": 5, "hypervisor_properties": "", "resource_properties": ""}]}`,
				base.Format("2006-01-02 15:04"), base.Add(7*24*time.Hour).Format("2006-01-02 15:04"))
			if status, out := do(b, ts, "u:P37", "POST", "/v1/leases", body); status != 201 {
				b.Fatalf("week: %d %v", status, out)
			}
			r := rand.New(rand.NewPCG(15, 1))
			var lat []time.Duration
			for b.Loop() {
				after := base.Add(time.Duration(r.IntN(7*24)) * time.Hour).Format("2006-01-02 15:04")
				body := fmt.Sprintf(`{"duration": 3600, "after": %q,
 "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`, after)
				t0 := time.Now()
				status, out := do(b, ts, "u:P37", "POST", "/v1/leases/earliest", body)
				lat = append(lat, time.Since(t0))
				if status != 200 || out["earliest"].(map[string]any)["start_date"] != strings.Replace(after, " ", "T", 1)+":00.000000" {
					b.Fatalf("earliest after %s: %d %v", after, status, out)
				}
			}
			reportP50(b, lat)
		})
	}
}

// BenchmarkInstanceLeaseCreate is BenchmarkLeaseCreate for a one-slot
// instance lease (2 VCPU/4 GiB/10 GB) at 1,000 hosts of 8 VCPU/16 GiB:
// ownership off, on (each project owning 5 whole hosts) and "slots"
// (hosts counting 4 slots, each project owning 20 slots with partial, so
// its hosts are partly owned and their parts' bookings are read).
func BenchmarkInstanceLeaseCreate(b *testing.B) {
	for _, name := range []string{"off", "on", "slots"} {
		on := name != "off"
		b.Run(name, func(b *testing.B) {
			ts := benchCloud(b, name)
			base := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			var lat []time.Duration
			var first string
			i := 0
			for b.Loop() {
				st := base.Add(time.Duration(i) * 24 * time.Hour)
				body := fmt.Sprintf(`{"name": "l%d", "start_date": "%s", "end_date": "%s", "events": [],
 "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10, "affinity": null, "resource_properties": ""}]}`,
					i, st.Format("2006-01-02 15:04"), st.Add(time.Hour).Format("2006-01-02 15:04"))
				t0 := time.Now()
				status, out := do(b, ts, "u:P37", "POST", "/v1/leases", body)
				lat = append(lat, time.Since(t0))
				if status != 201 && status != 200 {
					b.Fatalf("lease: %d %v", status, out)
				}
				if i == 0 {
					first = out["lease"].(map[string]any)["id"].(string)
				}
				i++
			}
			if on {
				// The measured leases went through ownership: the first
				// one's slot came from P37's own capacity.
				_, l := do(b, ts, "admin", "GET", "/v1/leases/"+first, "")
				r := l["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)
				es, _ := r["ownership"].([]any)
				if len(es) != 1 || es[0].(map[string]any)["pool"] != "owned" {
					b.Fatalf("first lease's ownership entries %v, want one owned", r["ownership"])
				}
			}
			reportP50(b, lat)
		})
	}
}

// BenchmarkInstanceEarliest is BenchmarkEarliest for one instance slot
// (2 VCPU/4 GiB/10 GB) for an hour at 1,000 hosts, in the modes of
// BenchmarkInstanceLeaseCreate: the asking project holds 20 slots for
// the first week (with ownership on, all it owns), so each search, at a
// random hour of that week, is served by the create's choice from its
// parent's private pool. It reports the p50 latency.
func BenchmarkInstanceEarliest(b *testing.B) {
	for _, name := range []string{"off", "on", "slots"} {
		b.Run(name, func(b *testing.B) {
			ts := benchCloud(b, name)
			base := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			res := func(n int) string {
				return fmt.Sprintf(`[{"resource_type": "virtual:instance", "amount": %d, "vcpus": 2, "memory_mb": 4096, "disk_gb": 10, "affinity": null, "resource_properties": ""}]`, n)
			}
			body := fmt.Sprintf(`{"name": "week", "start_date": "%s", "end_date": "%s", "events": [], "reservations": %s}`,
				base.Format("2006-01-02 15:04"), base.Add(7*24*time.Hour).Format("2006-01-02 15:04"), res(20))
			if status, out := do(b, ts, "u:P37", "POST", "/v1/leases", body); status != 201 {
				b.Fatalf("week: %d %v", status, out)
			}
			r := rand.New(rand.NewPCG(15, 2))
			var lat []time.Duration
			for b.Loop() {
				after := base.Add(time.Duration(r.IntN(7*24)) * time.Hour).Format("2006-01-02 15:04")
				body := fmt.Sprintf(`{"duration": 3600, "after": %q, "reservations": %s}`, after, res(1))
				t0 := time.Now()
				status, out := do(b, ts, "u:P37", "POST", "/v1/leases/earliest", body)
				lat = append(lat, time.Since(t0))
				if status != 200 || out["earliest"].(map[string]any)["start_date"] != strings.Replace(after, " ", "T", 1)+":00.000000" {
					b.Fatalf("earliest after %s: %d %v", after, status, out)
				}
			}
			reportP50(b, lat)
		})
	}
}

// benchCloud starts a server with 1,000 hosts of 8 VCPU/16 GiB/800 GB
// counting 4 ownership slots each on rack r1 and, unless mode is "off",
// the benchmarks' plan: 10 domains owning 90 hosts each, of 10 projects
// each (P00 … P99) owning 5 hosts ("on"), also lending them with an
// hour's grace under a lending limit of 2 ("lends"), or owning 20 slots
// with partial, so their hosts are partly owned ("slots").
func benchCloud(b *testing.B, mode string) *httptest.Server {
	b.Helper()
	ts, s := startServer(b)
	ctx := context.Background()
	for i := range 1000 {
		if _, err := s.Hosts.Create(ctx, map[string]any{"name": fmt.Sprintf("c%04d", i), "rack": "r1",
			"vcpus": "8", "memory_mb": "16384", "local_gb": "800", "ownership_slots": "4"}); err != nil {
			b.Fatal(err)
		}
	}
	entry, limit := `"amount": 5`, ""
	switch mode {
	case "off":
		return ts
	case "lends":
		entry, limit = `"amount": 5, "lend": true, "lend_grace_seconds": 3600`, `, "lending_limit": 2`
	case "slots":
		entry = `"amount": 20, "partial": true`
	}
	var cons, entries []string
	for d := range 10 {
		cons = append(cons, fmt.Sprintf(`{"id": "d%d", "rank": %d}`, d, d))
		entries = append(entries, fmt.Sprintf(`{"consumer": "d%d", "group": "all", "amount": 90}`, d))
		for p := range 10 {
			cons = append(cons, fmt.Sprintf(`{"id": "d%d-p%d", "parent_id": "d%d", "rank": %d, "project_id": "P%d%d"%s}`, d, p, d, p, d, p, limit))
			entries = append(entries, fmt.Sprintf(`{"consumer": "d%d-p%d", "group": "all", %s}`, d, p, entry))
		}
	}
	plan := fmt.Sprintf(`{"generation": 0, "consumers": [%s], "groups": [{"name": "all", "properties": {"rack": "r1"}}], "entries": [%s]}`,
		strings.Join(cons, ","), strings.Join(entries, ","))
	if status, body := do(b, ts, "admin", "PUT", "/v1/ownership/plan", plan); status != 200 {
		b.Fatalf("plan: %d %v", status, body)
	}
	return ts
}

// reportP50 reports the median of lat as the benchmark's p50-ms.
func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
