package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/placement"
)

const testIncomplete = "00000000-0000-0000-0000-000000000000"

// allocServer starts the Placement API on a fresh database.
func allocServer(t *testing.T, d *db.DB) (*httptest.Server, *placement.Service) {
	t.Helper()
	svc := placement.NewService(d, placement.Config{IncompleteConsumerProjectID: testIncomplete, IncompleteConsumerUserID: testIncomplete})
	api := New(svc, config.Placement{PolicyMode: "legacy"}, config.CORS{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, svc
}

// seedProvider creates a provider with a VCPU inventory of total,
// written straight to the table so this test needs only its own API.
func seedProvider(t *testing.T, svc *placement.Service, name string, total int64) string {
	t.Helper()
	p, err := svc.CreateProvider(context.Background(), name, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	row := models.Inventory{ResourceProviderID: p.ID, ResourceClassID: 1 /* VCPU */, Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: 1}
	if err := svc.DB().Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	return p.UUID
}

type apiResult struct {
	status int
	body   []byte
}

func call(c *http.Client, method, url, mv string, body any) (apiResult, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apiResult{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return apiResult{}, err
	}
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement "+mv)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return apiResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return apiResult{resp.StatusCode, b}, err
}

// TestConcurrentAllocationWrites fires many PUT /allocations at a few
// shared providers from parallel clients and checks that capacity is
// never exceeded, every answer is 204 or 409 (never a 500), and the
// final usage is exactly what the successful writes left behind.
func TestConcurrentAllocationWrites(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			srv, svc := allocServer(t, dbtest.OpenDialect(t, dialect))
			const (
				providers = 3
				capacity  = 20
				workers   = 60
				rounds    = 6
			)
			var rps []string
			for i := 0; i < providers; i++ {
				rps = append(rps, seedProvider(t, svc, fmt.Sprintf("cn%d", i), capacity))
			}
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = workers

			// final[w] is what worker w's consumer holds after its last
			// successful write: provider index → VCPU.
			final := make([]map[int]int64, workers)
			statuses := make([]map[int]int, workers)
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					consumer := fmt.Sprintf("%08x-0000-4000-8000-%012x", w, w)
					statuses[w] = map[int]int{}
					var gen *int64
					for r := 0; r < rounds; r++ {
						// Deterministic spread: one or two providers, 1–4 VCPU each.
						want := map[int]int64{(w + r) % providers: int64(1 + (w*7+r*3)%4)}
						if (w+r)%3 == 0 {
							want[(w+r+1)%providers] = int64(1 + (w+r)%2)
						}
						if r == rounds-1 && w%5 == 0 {
							want = map[int]int64{} // clear with an empty set
						}
						allocs := map[string]any{}
						for i, n := range want {
							allocs[rps[i]] = map[string]any{"resources": map[string]int64{"VCPU": n}}
						}
						if len(allocs) == 0 && gen == nil {
							continue // nothing held, nothing to clear
						}
						res, err := call(client, "PUT", srv.URL+"/allocations/"+consumer, "1.28", map[string]any{
							"allocations": allocs, "project_id": "proj", "user_id": "user", "consumer_generation": gen,
						})
						if err != nil {
							errs <- err
							return
						}
						statuses[w][res.status]++
						switch res.status {
						case http.StatusNoContent:
							final[w] = want
							if len(want) == 0 {
								gen = nil
							} else {
								g := int64(1)
								if gen != nil {
									g = *gen + 1
								}
								gen = &g
							}
						case http.StatusConflict:
							// Capacity or a lost race: nothing changed.
						default:
							errs <- fmt.Errorf("worker %d round %d: %d %s", w, r, res.status, res.body)
							return
						}
					}
				}(w)
			}
			// Watch usage while the writers run.
			stop := make(chan struct{})
			watchErr := make(chan error, 1)
			go func() {
				defer close(watchErr)
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, rp := range rps {
						res, err := call(client, "GET", srv.URL+"/resource_providers/"+rp+"/usages", "1.28", nil)
						if err != nil || res.status != 200 {
							watchErr <- fmt.Errorf("usages: %v %d %s", err, res.status, res.body)
							return
						}
						var u struct{ Usages map[string]int64 }
						if err := json.Unmarshal(res.body, &u); err != nil {
							watchErr <- err
							return
						}
						if u.Usages["VCPU"] > capacity {
							watchErr <- fmt.Errorf("provider %s over capacity: %d", rp, u.Usages["VCPU"])
							return
						}
					}
				}
			}()
			wg.Wait()
			close(stop)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err := <-watchErr; err != nil {
				t.Error(err)
			}
			want := make([]int64, providers)
			total := map[int]int{}
			for w := range final {
				for i, n := range final[w] {
					want[i] += n
				}
				for s, n := range statuses[w] {
					total[s] += n
				}
			}
			t.Logf("statuses: %v", total)
			if total[http.StatusNoContent] == 0 || total[http.StatusConflict] == 0 {
				t.Errorf("statuses %v: want both successes and capacity conflicts", total)
			}
			for i, rp := range rps {
				u, err := svc.GetProviderUsages(context.Background(), rp)
				if err != nil {
					t.Fatal(err)
				}
				if got := u.Usages["VCPU"]; got != want[i] || got > capacity {
					t.Errorf("provider %d usage %d, want %d (the successful writes) and ≤ %d", i, got, want[i], capacity)
				}
				// The usage summary the capacity check reads agrees.
				var summary []int64
				if err := svc.DB().Raw(`SELECT u.used FROM allocation_usages u JOIN resource_providers rp ON rp.id = u.resource_provider_id
 WHERE rp.uuid = ? AND u.resource_class_id = 1`, rp).Scan(&summary).Error; err != nil {
					t.Fatal(err)
				}
				if len(summary) != 1 || summary[0] != want[i] {
					t.Errorf("provider %d allocation_usages %v, want [%d]", i, summary, want[i])
				}
			}
		})
	}
}

// TestConcurrentSharedConsumers has parallel clients fight over the same
// few consumers with PUT (1.12, no generations: last writer wins), POST
// moves and DELETE, and then checks that nothing was lost or torn: every
// answer is 204, 404 (delete of nothing) or 409, capacity holds, the usage
// summary equals the allocations, and every consumer row has allocations
// and vice versa.
func TestConcurrentSharedConsumers(t *testing.T) {
	for _, dialect := range dbtest.Dialects() {
		t.Run(string(dialect), func(t *testing.T) {
			srv, svc := allocServer(t, dbtest.OpenDialect(t, dialect))
			const capacity = 12
			rps := []string{seedProvider(t, svc, "a", capacity), seedProvider(t, svc, "b", capacity)}
			consumers := []string{
				"c0000000-0000-4000-8000-000000000000", "c1111111-0000-4000-8000-000000000000",
				"c2222222-0000-4000-8000-000000000000", "c3333333-0000-4000-8000-000000000000",
			}
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for w := 0; w < 50; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for r := 0; r < 8; r++ {
						c := consumers[(w+r)%len(consumers)]
						var res apiResult
						var err error
						switch (w + r) % 4 {
						case 0, 1:
							res, err = call(client, "PUT", srv.URL+"/allocations/"+c, "1.12", map[string]any{
								"allocations": map[string]any{rps[w%2]: map[string]any{"resources": map[string]int64{"VCPU": int64(1 + (w+r)%4)}}},
								"project_id":  "p", "user_id": "u",
							})
						case 2:
							other := consumers[(w+r+1)%len(consumers)]
							res, err = call(client, "POST", srv.URL+"/allocations", "1.13", map[string]any{
								c:     map[string]any{"allocations": map[string]any{}, "project_id": "p", "user_id": "u"},
								other: map[string]any{"allocations": map[string]any{rps[(w+1)%2]: map[string]any{"resources": map[string]int64{"VCPU": 3}}}, "project_id": "p", "user_id": "u"},
							})
						default:
							res, err = call(client, "DELETE", srv.URL+"/allocations/"+c, "1.12", nil)
						}
						if err != nil {
							errs <- err
							return
						}
						switch res.status {
						case http.StatusNoContent, http.StatusConflict, http.StatusNotFound:
						default:
							errs <- fmt.Errorf("worker %d round %d: %d %s", w, r, res.status, res.body)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			var bad []string
			if err := svc.DB().Raw(`SELECT CONCAT('usage ', u.resource_provider_id, '/', u.resource_class_id, ' ', u.used, ' vs ', COALESCE(a.used, 0))
 FROM allocation_usages u LEFT JOIN (SELECT resource_provider_id, resource_class_id, SUM(used) AS used FROM allocations GROUP BY resource_provider_id, resource_class_id) a
 ON a.resource_provider_id = u.resource_provider_id AND a.resource_class_id = u.resource_class_id WHERE u.used <> COALESCE(a.used, 0)
 UNION ALL SELECT CONCAT('over capacity ', u.resource_provider_id, ' ', u.used) FROM allocation_usages u WHERE u.used > ?
 UNION ALL SELECT CONCAT('consumer without allocations ', c.uuid) FROM consumers c WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid)
 UNION ALL SELECT CONCAT('allocation without consumer ', a.consumer_id) FROM allocations a WHERE NOT EXISTS (SELECT 1 FROM consumers c WHERE c.uuid = a.consumer_id)`,
				capacity).Scan(&bad).Error; err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Errorf("inconsistent after the fight: %v", bad)
			}
		})
	}
}

// BenchmarkPutAllocations measures durable PUT /allocations/{consumer}
// writes through the whole HTTP stack, from parallel clients, each
// creating a new consumer on one of 100 (or 5: many allocations per
// provider) providers.
func BenchmarkPutAllocations(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		for _, nProviders := range []int{100, 5} {
			b.Run(fmt.Sprintf("%s/providers=%d", dialect, nProviders), func(b *testing.B) {
				benchmarkPutAllocations(b, dialect, nProviders)
			})
		}
	}
}

func benchmarkPutAllocations(b *testing.B, dialect db.Dialect, nProviders int) {
	d := dbtest.OpenDialect(b, dialect)
	svc := placement.NewService(d, placement.Config{IncompleteConsumerProjectID: testIncomplete, IncompleteConsumerUserID: testIncomplete})
	srv := httptest.NewServer(New(svc, config.Placement{PolicyMode: "legacy"}, config.CORS{}).Handler())
	defer srv.Close()
	var rps []string
	for i := 0; i < nProviders; i++ {
		p, err := svc.CreateProvider(context.Background(), fmt.Sprintf("bench%d", i), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, inv := range []models.Inventory{
			{ResourceProviderID: p.ID, ResourceClassID: 1, Total: 1 << 30, MinUnit: 1, MaxUnit: 1 << 30, StepSize: 1, AllocationRatio: 1},
			{ResourceProviderID: p.ID, ResourceClassID: 2, Total: 1 << 30, MinUnit: 1, MaxUnit: 1 << 30, StepSize: 1, AllocationRatio: 1},
		} {
			if err := d.Create(&inv).Error; err != nil {
				b.Fatal(err)
			}
		}
		rps = append(rps, p.UUID)
	}
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	var mu sync.Mutex
	next := 0
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			n := next
			next++
			mu.Unlock()
			body := map[string]any{
				"allocations": map[string]any{rps[n%len(rps)]: map[string]any{"resources": map[string]int64{"VCPU": 1, "MEMORY_MB": 256}}},
				"project_id":  "proj", "user_id": "user", "consumer_generation": nil,
			}
			res, err := call(client, "PUT", fmt.Sprintf("%s/allocations/%08x-0000-4000-8000-000000000000", srv.URL, n), "1.28", body)
			if err != nil || res.status != http.StatusNoContent {
				b.Fatalf("PUT: %v %d %s", err, res.status, res.body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
