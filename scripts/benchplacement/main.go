// Command benchplacement loads Placement perfload datasets over HTTP and
// measures GET /allocation_candidates latency and throughput, against
// Leasehold and the real Placement side by side (scripts/bench-placement.sh).
//
//	benchplacement load  -url URL -dataset flat|nested|wide [-n 1000] [-workers 4]
//	benchplacement bench -dataset D -target name=URL [-target …] [-c 10] [-duration 10s] [-timeout 60s]
//
// Datasets (upstream gate/perfload-*.sh):
//   - flat: n providers, VCPU 32 / MEMORY_MB 8192 / DISK_GB 8192, 1–3 of 5
//     aggregates each, trait HW_CPU_X86_AVX2; query
//     resources=VCPU:1,DISK_GB:10,MEMORY_MB:256&member_of=<agg>&required=HW_CPU_X86_AVX2
//   - nested: n trees of the 7 providers of gate/gabbits/nested-perfload.yaml;
//     query of gate/perfload-nested-runner.sh (granular groups, same_subtree)
//   - wide: one root with 8 children of CUSTOM_ACC 1 each; 8 granular
//     groups of CUSTOM_ACC:1, group_policy=none (8^8 combinations, 8! =
//     40320 candidates)
//
// Every dataset is also measured with limit=5, and every query with one
// client (latency alone) as well as with -c clients (latency under load).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const aggPrefix = "5e1b3c2a-0000-4000-8000-0000000000"

func agg(i int) string { return fmt.Sprintf("%s%02d", aggPrefix, i) }

func provUUID(kind, i int) string { return fmt.Sprintf("7a0e%04x-0000-4000-8000-%012x", kind, i) }

type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}
	return &client{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr}}
}

func (c *client) do(method, path string, body any, mv string) (int, []byte, error) {
	code, b, _, err := c.doRead(method, path, body, mv, true)
	return code, b, err
}

// doRead is do; with keep false the answer is only counted (and
// discarded), so the load client spends little of the CPU it shares with
// the server on reading it.
func (c *client) doRead(method, path string, body any, mv string, keep bool) (int, []byte, int64, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OpenStack-API-Version", "placement "+mv)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	if !keep {
		n, err := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil, n, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, int64(len(b)), err
}

func (c *client) must(method, path string, body any, mv string) {
	for attempt := 0; ; attempt++ {
		st, b, err := c.do(method, path, body, mv)
		if err == nil && st < 300 {
			return
		}
		if attempt < 5 && (err != nil || st == 409 || st >= 500) {
			time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
			continue
		}
		fmt.Fprintf(os.Stderr, "%s %s: %d %s %v\n", method, path, st, b, err)
		os.Exit(1)
	}
}

type inv map[string]map[string]int

type node struct {
	uuid, name, parent string
	inv                inv
	traits             []string
	aggs               []string
}

func dataset(name string, n int) []node {
	var out []node
	switch name {
	case "flat":
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < n; i++ {
			k := 1 + rng.IntN(3)
			perm := rng.Perm(5)
			var aggs []string
			for _, a := range perm[:k] {
				aggs = append(aggs, agg(a))
			}
			if i%5 == 0 && !contains(aggs, agg(0)) {
				aggs = append(aggs, agg(0))
			}
			out = append(out, node{uuid: provUUID(1, i), name: fmt.Sprintf("flat-cn-%d", i),
				inv:    inv{"VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192}, "DISK_GB": {"total": 8192}},
				traits: []string{"HW_CPU_X86_AVX2"}, aggs: aggs})
		}
	case "nested":
		for i := 0; i < n; i++ {
			cn, n0, n1 := provUUID(2, i*7), provUUID(2, i*7+1), provUUID(2, i*7+4)
			out = append(out,
				node{uuid: cn, name: "cn-" + cn, inv: inv{"DISK_GB": {"total": 20480}}, traits: []string{"COMPUTE_VOLUME_MULTI_ATTACH"}},
				node{uuid: n0, name: "numa0-" + n0, parent: cn, inv: inv{"VCPU": {"total": 4, "reserved": 2},
					"MEMORY_MB": {"total": 2048, "min_unit": 512, "step_size": 256}}, traits: []string{"HW_NUMA_ROOT"}},
				node{uuid: provUUID(2, i*7+2), name: "fpga0-" + cn, parent: n0, inv: inv{"FPGA": {"total": 1}}},
				node{uuid: provUUID(2, i*7+3), name: "pgpu0-" + cn, parent: n0, inv: inv{"VGPU": {"total": 8}}},
				node{uuid: n1, name: "numa1-" + n1, parent: cn, inv: inv{"VCPU": {"total": 4},
					"MEMORY_MB": {"total": 2048, "min_unit": 256, "max_unit": 1024}}, traits: []string{"HW_NUMA_ROOT", "CUSTOM_FOO"}},
				node{uuid: provUUID(2, i*7+5), name: "fpga1_0-" + cn, parent: n1, inv: inv{"FPGA": {"total": 1}}},
				node{uuid: provUUID(2, i*7+6), name: "fpga1_1-" + cn, parent: n1, inv: inv{"FPGA": {"total": 1}}},
			)
		}
	case "wide":
		root := provUUID(3, 0)
		out = append(out, node{uuid: root, name: "wide-root", inv: inv{"VCPU": {"total": 64}}})
		for c := 1; c <= 8; c++ {
			out = append(out, node{uuid: provUUID(3, c), name: fmt.Sprintf("wide-child-%d", c), parent: root,
				inv: inv{"CUSTOM_ACC": {"total": 1}}})
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown dataset", name)
		os.Exit(2)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func query(name string) string {
	switch name {
	case "flat":
		return "resources=VCPU:1,DISK_GB:10,MEMORY_MB:256&member_of=" + agg(0) + "&required=HW_CPU_X86_AVX2"
	case "nested":
		return "resources=DISK_GB:10&required=COMPUTE_VOLUME_MULTI_ATTACH&resources_COMPUTE=VCPU:1,MEMORY_MB:256&required_COMPUTE=CUSTOM_FOO&resources_FPGA=FPGA:1&group_policy=none&same_subtree=_COMPUTE,_FPGA"
	case "wide":
		var parts []string
		for g := 1; g <= 8; g++ {
			parts = append(parts, fmt.Sprintf("resources_G%d=CUSTOM_ACC:1", g))
		}
		return strings.Join(parts, "&") + "&group_policy=none"
	}
	return ""
}

func load(c *client, name string, n, workers int) {
	nodes := dataset(name, n)
	c.must("PUT", "/traits/CUSTOM_FOO", nil, "1.6")
	c.must("PUT", "/resource_classes/CUSTOM_ACC", nil, "1.7")
	// Parents first: load level by level.
	levels := [][]node{}
	depth := map[string]int{}
	for _, nd := range nodes {
		d := 0
		if nd.parent != "" {
			d = depth[nd.parent] + 1
		}
		depth[nd.uuid] = d
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], nd)
	}
	for _, lvl := range levels {
		ch := make(chan node)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for nd := range ch {
					body := map[string]any{"uuid": nd.uuid, "name": nd.name}
					if nd.parent != "" {
						body["parent_provider_uuid"] = nd.parent
					}
					c.must("POST", "/resource_providers", body, "1.20")
					gen := 0
					c.must("PUT", "/resource_providers/"+nd.uuid+"/inventories",
						map[string]any{"resource_provider_generation": gen, "inventories": nd.inv}, "1.20")
					gen++
					if len(nd.traits) > 0 {
						c.must("PUT", "/resource_providers/"+nd.uuid+"/traits",
							map[string]any{"resource_provider_generation": gen, "traits": nd.traits}, "1.20")
						gen++
					}
					if len(nd.aggs) > 0 {
						c.must("PUT", "/resource_providers/"+nd.uuid+"/aggregates",
							map[string]any{"resource_provider_generation": gen, "aggregates": nd.aggs}, "1.20")
					}
				}
			}()
		}
		for _, nd := range lvl {
			ch <- nd
		}
		close(ch)
		wg.Wait()
	}
}

type stats struct {
	Target    string  `json:"target"`
	Query     string  `json:"query"`
	Requests  int     `json:"requests"`
	Errors    int64   `json:"errors"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	RPS       float64 `json:"rps"`
	Results   int     `json:"allocation_requests"`
	TimedOut  bool    `json:"timed_out,omitempty"`
	FirstCall float64 `json:"first_ms"`
	Clients   int     `json:"clients"`
	Bytes     int64   `json:"bytes"`
}

// providerQueries are the GET /resource_providers queries measured on a
// dataset (Placement 8.0.0 takes 83–107 ms for the resources filter on
// 1,000 flat providers): resources alone, with member_of and required,
// and in_tree (on flat one provider's own tree with resources, on nested
// a whole seven-provider tree).
func providerQueries(name string) []string {
	switch name {
	case "flat":
		res := "resources=VCPU:1,DISK_GB:10,MEMORY_MB:256"
		return []string{res, res + "&member_of=" + agg(0) + "&required=HW_CPU_X86_AVX2", res + "&in_tree=" + provUUID(1, 0)}
	case "nested":
		return []string{"in_tree=" + provUUID(2, 0)}
	}
	return nil
}

func bench(name, base, path, q string, conc int, dur, timeout time.Duration, maxReq int) stats {
	c := newClient(base, conc)
	c.hc.Timeout = timeout
	st := stats{Target: name, Query: q, Clients: conc}
	t0 := time.Now()
	code, body, err := c.do("GET", path+"?"+q, nil, "1.39")
	st.FirstCall = float64(time.Since(t0).Microseconds()) / 1000
	if err != nil || code != 200 {
		st.TimedOut = err != nil
		st.Errors = 1
		fmt.Fprintf(os.Stderr, "%s: first call %d %v %.200s\n", name, code, err, body)
		return st
	}
	var parsed struct {
		AR []json.RawMessage `json:"allocation_requests"`
		RP []json.RawMessage `json:"resource_providers"`
	}
	// One-time correctness check of the first answer; later answers are
	// only checked for status and size.
	if err := json.Unmarshal(body, &parsed); err != nil {
		st.Errors = 1
		fmt.Fprintf(os.Stderr, "%s: first answer is not JSON: %v %.200s\n", name, err, body)
		return st
	}
	st.Results = len(parsed.AR) + len(parsed.RP)
	size := int64(len(body))
	st.Bytes = size
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var count atomic.Int64
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) && (maxReq <= 0 || count.Add(1) <= int64(maxReq)) {
				t := time.Now()
				code, _, n, err := c.doRead("GET", path+"?"+q, nil, "1.39", false)
				// Same query, same data: an answer of another size is wrong
				// (or truncated), unless randomized (same size anyway).
				if err != nil || code != 200 || n != size {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	st.Requests, st.Errors = len(lat), errs.Load()
	if len(lat) > 0 {
		st.P50ms = float64(lat[len(lat)/2].Microseconds()) / 1000
		st.P99ms = float64(lat[(len(lat)*99)/100].Microseconds()) / 1000
		st.RPS = float64(len(lat)) / elapsed.Seconds()
	}
	return st
}

type targets []string

func (t *targets) String() string     { return strings.Join(*t, ",") }
func (t *targets) Set(v string) error { *t = append(*t, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchplacement load|bench|query …")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	u := fs.String("url", "", "placement URL (load)")
	ds := fs.String("dataset", "flat", "flat|nested|wide")
	n := fs.Int("n", 1000, "providers (flat) or trees (nested)")
	workers := fs.Int("workers", 1, "concurrent loaders")
	conc := fs.Int("c", 10, "concurrent clients")
	dur := fs.Duration("duration", 10*time.Second, "measuring time per query and target")
	maxReq := fs.Int("max-requests", 0, "stop after this many requests (0: duration only)")
	timeout := fs.Duration("timeout", 120*time.Second, "per-request timeout")
	limitOnly := fs.Bool("limit-only", false, "measure only the limit=5 variant")
	seq := fs.Bool("sequential", true, "also measure with one client (latency without queueing)")
	path := fs.String("path", "/allocation_candidates", "what bench asks: /allocation_candidates, or /resource_providers (its filter queries)")
	var ts targets
	fs.Var(&ts, "target", "name=URL (repeatable)")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "load":
		t0 := time.Now()
		lc := newClient(*u, *workers)
		// One connection per write: keeps the loader independent of how
		// a server handles request bodies on kept-alive connections.
		lc.hc.Transport.(*http.Transport).DisableKeepAlives = true
		load(lc, *ds, *n, *workers)
		fmt.Fprintf(os.Stderr, "loaded %s (%d) into %s in %s\n", *ds, *n, *u, time.Since(t0).Round(time.Millisecond))
	case "query":
		fmt.Println(query(*ds))
	case "bench":
		qs := []string{query(*ds), query(*ds) + "&limit=5"}
		if *limitOnly {
			qs = qs[1:]
		}
		if *path == "/resource_providers" {
			qs = providerQueries(*ds)
		}
		concs := []int{*conc}
		if *seq && *conc != 1 {
			concs = []int{1, *conc}
		}
		for _, q := range qs {
			gaveUp := map[string]bool{} // targets whose first call timed out on this query
			for _, cc := range concs {
				var all []stats
				for _, t := range ts {
					name, base, _ := strings.Cut(t, "=")
					if gaveUp[name] {
						fmt.Printf("# %s %s %s, %s: skipped (timed out with fewer clients)\n", *ds, label(*path, q), name, clients(cc))
						continue
					}
					st := bench(name, base, *path, q, cc, *dur, *timeout, *maxReq)
					gaveUp[name] = st.TimedOut
					all = append(all, st)
				}
				for _, s := range all {
					b, _ := json.Marshal(s)
					fmt.Println(string(b))
					if s.P50ms > 0 {
						fmt.Printf("# %s %s %s, %s: p50 %.2f ms, p99 %.2f ms, %.1f q/s, %d %s, %s (first call %.1f ms)\n",
							*ds, label(*path, q), s.Target, clients(cc), s.P50ms, s.P99ms, s.RPS, s.Results, resultsWord(*path), sizeLabel(s.Bytes), s.FirstCall)
					} else {
						fmt.Printf("# %s %s %s, %s: no successful request (timed out: %v, first call %.0f ms)\n", *ds, label(*path, q), s.Target, clients(cc), s.TimedOut, s.FirstCall)
					}
				}
				if len(all) == 2 && all[0].P50ms > 0 && all[1].P50ms > 0 {
					fmt.Printf("# %s %s, %s: p50 %.2f ms vs %.2f ms (%.1fx faster), p99 %.2f vs %.2f ms, %.0f vs %.1f q/s (%.1fx)\n",
						*ds, label(*path, q), clients(cc), all[0].P50ms, all[1].P50ms, all[1].P50ms/all[0].P50ms,
						all[0].P99ms, all[1].P99ms, all[0].RPS, all[1].RPS, all[0].RPS/all[1].RPS)
				}
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

func clients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

func sizeLabel(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1024)
}

// label names a measured query in the report.
func label(path, q string) string {
	if path == "/resource_providers" {
		var ks []string
		for _, kv := range strings.Split(q, "&") {
			k, _, _ := strings.Cut(kv, "=")
			ks = append(ks, k)
		}
		return "GET /resource_providers?" + strings.Join(ks, "&")
	}
	if strings.Contains(q, "limit=") {
		return "limit=5"
	}
	return "unlimited"
}

func resultsWord(path string) string {
	if path == "/resource_providers" {
		return "providers"
	}
	return "allocation requests"
}
