package scheduler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	"github.com/leasehold/leasehold/pkg/blazar/scheduler"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// BenchmarkFilterHTTP measures POST /v1/scheduler/filter as Nova's
// LeaseholdFilter sends it: over a loopback HTTP connection kept alive,
// through the router, the policy check (service role), the body's
// decoding, the decision for 1,000 candidate hosts over 100,000
// allocations and the answer's encoding (with a reason for each
// rejected host). It reports p50 and p99 of the whole round trip.
func BenchmarkFilterHTTP(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			svc, resNow, project, n := scheduler.BenchCloud(b, d)
			rt := blazarapi.NewRouter()
			blazarapi.RegisterScheduler(rt, svc)
			srv := httptest.NewServer(http.StripPrefix("/v1", rt.Handler(blazarapi.NoAuth{})))
			defer srv.Close()
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("compute%d", i+1)
			}
			for _, bc := range []struct {
				name string
				body map[string]any
				pass int
			}{
				{"no-hint", map[string]any{"project_id": "project1", "hosts": names}, 0},
				{"hint", map[string]any{"project_id": project, "hosts": names,
					"scheduler_hints": map[string]any{"reservation": []string{resNow}}}, -1},
			} {
				raw, err := json.Marshal(bc.body)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(bc.name, func(b *testing.B) {
					var lat []time.Duration
					for b.Loop() {
						t := time.Now()
						req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/scheduler/filter", bytes.NewReader(raw))
						if err != nil {
							b.Fatal(err)
						}
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-Auth-Token", "nova:service")
						req.Header.Set("X-Roles", "service")
						resp, err := srv.Client().Do(req)
						if err != nil {
							b.Fatal(err)
						}
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t))
						if resp.StatusCode != http.StatusOK {
							b.Fatalf("status %d: %s", resp.StatusCode, body)
						}
						var out struct {
							Hosts    []string          `json:"hosts"`
							Rejected map[string]string `json:"rejected"`
						}
						if err := json.Unmarshal(body, &out); err != nil {
							b.Fatal(err)
						}
						if len(out.Hosts)+len(out.Rejected) != n || (bc.pass == 0 && len(out.Hosts) != 0) || (bc.pass < 0 && len(out.Hosts) == 0) {
							b.Fatalf("unexpected answer: %d pass, %d rejected", len(out.Hosts), len(out.Rejected))
						}
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}
