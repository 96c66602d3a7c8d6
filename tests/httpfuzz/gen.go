// Package httpfuzz generates HTTP requests over Leasehold's two APIs
// (Blazar /v1 and Placement, at the root of its own listener and under
// /placement) for a black-box fuzzer: random methods, paths from both
// route tables with known, random and junk ids, random headers
// (credentials, microversions, media types) and bodies built from each
// endpoint's shape and then mutated. A Generator is a pure function of
// its seed and of the ids it has been told about (Learn), so a run is
// reproducible from the seed it prints.
package httpfuzz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// API names which API a request is for, and so which error body it must
// get back.
type API string

// The APIs.
const (
	Blazar    API = "blazar"
	Placement API = "placement"
)

// Target is where a request is sent: the main listener (Blazar at /v1,
// Placement under /placement) or the Placement listener (Placement at /).
type Target int

// The targets.
const (
	Main Target = iota
	PlacementRoot
)

// Request is one generated request.
type Request struct {
	API    API
	Target Target
	Method string
	// Path is the raw request target (path and query), already escaped.
	Path   string
	Header http.Header
	Body   []byte
	// Route is the route template it came from ("" for a junk path), for
	// the report.
	Route string
}

// String is the request as an HTTP/1.1 head and body, to reproduce it.
func (r Request) String() string {
	var b strings.Builder
	tgt := "main"
	if r.Target == PlacementRoot {
		tgt = "placement listener"
	}
	fmt.Fprintf(&b, "[%s, %s, route %q]\n%s %s HTTP/1.1\n", r.API, tgt, r.Route, r.Method, r.Path)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	const show = 2048
	if len(r.Body) > show {
		fmt.Fprintf(&b, "%s… (%d bytes in all)", r.Body[:show], len(r.Body))
	} else {
		b.Write(r.Body)
	}
	return b.String()
}

// endpoint is one route of a route table with the shape of a valid body.
type endpoint struct {
	api    API
	method string
	// path has {kind} placeholders filled from the id pools.
	path string
	body func(g *Generator) any
}

// Id kinds the placeholders name.
const (
	kLease    = "lease"
	kHost     = "host"
	kFIP      = "fip"
	kProperty = "property"
	kRP       = "rp"
	kConsumer = "consumer"
	kRC       = "rc"
	kTrait    = "trait"
	// The ownership extension's consumers, resource groups and projects,
	// and the host names the scheduler filter is asked about.
	kOwner    = "owner"
	kGroup    = "group"
	kProject  = "project"
	kHostName = "hostname"
)

var endpoints = []endpoint{
	// Blazar.
	{Blazar, "GET", "/v1/leases", nil},
	{Blazar, "POST", "/v1/leases", (*Generator).leaseBody},
	{Blazar, "GET", "/v1/leases/{lease}", nil},
	{Blazar, "PUT", "/v1/leases/{lease}", (*Generator).leaseUpdateBody},
	{Blazar, "DELETE", "/v1/leases/{lease}", nil},
	{Blazar, "GET", "/v1/os-hosts", nil},
	{Blazar, "POST", "/v1/os-hosts", (*Generator).hostBody},
	{Blazar, "GET", "/v1/os-hosts/allocations", nil},
	{Blazar, "GET", "/v1/os-hosts/{host}", nil},
	{Blazar, "PUT", "/v1/os-hosts/{host}", (*Generator).hostUpdateBody},
	{Blazar, "DELETE", "/v1/os-hosts/{host}", nil},
	{Blazar, "GET", "/v1/os-hosts/{host}/allocation", nil},
	{Blazar, "GET", "/v1/os-hosts/properties", nil},
	{Blazar, "PATCH", "/v1/os-hosts/properties/{property}", (*Generator).propertyBody},
	{Blazar, "GET", "/v1/floatingips", nil},
	{Blazar, "POST", "/v1/floatingips", (*Generator).fipBody},
	{Blazar, "GET", "/v1/floatingips/{fip}", nil},
	{Blazar, "DELETE", "/v1/floatingips/{fip}", nil},
	// Leasehold's extensions of /v1 (etc/openapi/ownership.yaml,
	// blazar-v1.yaml).
	{Blazar, "POST", "/v1/leases/earliest", (*Generator).earliestBody},
	{Blazar, "POST", "/v1/scheduler/filter", (*Generator).filterBody},
	{Blazar, "GET", "/v1/ownership", nil},
	{Blazar, "GET", "/v1/ownership/plan", nil},
	{Blazar, "PUT", "/v1/ownership/plan", (*Generator).planBody},
	{Blazar, "POST", "/v1/ownership/recompute", (*Generator).generationBody},
	{Blazar, "PUT", "/v1/ownership/consumers/{owner}", (*Generator).ownerBody},
	{Blazar, "DELETE", "/v1/ownership/consumers/{owner}", nil},
	{Blazar, "PUT", "/v1/ownership/groups/{group}", (*Generator).groupBody},
	{Blazar, "DELETE", "/v1/ownership/groups/{group}", nil},
	{Blazar, "PUT", "/v1/ownership/consumers/{owner}/groups/{group}", (*Generator).entryBody},
	{Blazar, "DELETE", "/v1/ownership/consumers/{owner}/groups/{group}", nil},
	{Blazar, "GET", "/v1/ownership/projects/{project}", nil},
	{Blazar, "POST", "/v1/ownership/explain", (*Generator).explainBody},
	{Blazar, "GET", "/", nil},
	{Blazar, "GET", "/versions", nil},
	// Placement.
	{Placement, "GET", "/", nil},
	{Placement, "GET", "/resource_providers", nil},
	{Placement, "POST", "/resource_providers", (*Generator).rpBody},
	{Placement, "GET", "/resource_providers/{rp}", nil},
	{Placement, "PUT", "/resource_providers/{rp}", (*Generator).rpUpdateBody},
	{Placement, "DELETE", "/resource_providers/{rp}", nil},
	{Placement, "GET", "/resource_providers/{rp}/inventories", nil},
	{Placement, "POST", "/resource_providers/{rp}/inventories", (*Generator).inventoryPostBody},
	{Placement, "PUT", "/resource_providers/{rp}/inventories", (*Generator).inventoriesBody},
	{Placement, "DELETE", "/resource_providers/{rp}/inventories", nil},
	{Placement, "GET", "/resource_providers/{rp}/inventories/{rc}", nil},
	{Placement, "PUT", "/resource_providers/{rp}/inventories/{rc}", (*Generator).inventoryPutBody},
	{Placement, "DELETE", "/resource_providers/{rp}/inventories/{rc}", nil},
	{Placement, "GET", "/resource_providers/{rp}/aggregates", nil},
	{Placement, "PUT", "/resource_providers/{rp}/aggregates", (*Generator).aggregatesBody},
	{Placement, "GET", "/resource_providers/{rp}/traits", nil},
	{Placement, "PUT", "/resource_providers/{rp}/traits", (*Generator).rpTraitsBody},
	{Placement, "DELETE", "/resource_providers/{rp}/traits", nil},
	{Placement, "GET", "/resource_providers/{rp}/usages", nil},
	{Placement, "GET", "/resource_providers/{rp}/allocations", nil},
	{Placement, "GET", "/usages", nil},
	{Placement, "GET", "/allocations/{consumer}", nil},
	{Placement, "PUT", "/allocations/{consumer}", (*Generator).allocationsPutBody},
	{Placement, "DELETE", "/allocations/{consumer}", nil},
	{Placement, "POST", "/allocations", (*Generator).allocationsPostBody},
	{Placement, "GET", "/allocation_candidates", nil},
	{Placement, "GET", "/resource_classes", nil},
	{Placement, "POST", "/resource_classes", (*Generator).rcBody},
	{Placement, "GET", "/resource_classes/{rc}", nil},
	{Placement, "PUT", "/resource_classes/{rc}", nil},
	{Placement, "DELETE", "/resource_classes/{rc}", nil},
	{Placement, "GET", "/traits", nil},
	{Placement, "GET", "/traits/{trait}", nil},
	{Placement, "PUT", "/traits/{trait}", nil},
	{Placement, "DELETE", "/traits/{trait}", nil},
	{Placement, "POST", "/reshaper", (*Generator).reshaperBody},
}

// since is the first Placement microversion (1.N) of a route, where it
// is above 1.0, so most requests ask for a version that has it.
var since = map[string]int{
	"/allocation_candidates": 10, "/allocations": 13, "/reshaper": 30, "/usages": 9,
	"/resource_classes": 2, "/resource_classes/{rc}": 2, "/traits": 6, "/traits/{trait}": 6,
	"/resource_providers/{rp}/traits": 6,
}

// Generator makes requests from a seeded random source.
type Generator struct {
	rng *rand.Rand
	// ids are the known ids per kind: a few fixed ones, and those the
	// server handed out (Learn).
	ids map[string][]string
	// planGen is the ownership plan's generation as last seen, which
	// most ownership writes name (the others are stale or junk).
	planGen int
}

// maxIDs bounds each id pool (the oldest are replaced).
const maxIDs = 64

// New returns a generator seeded with seed.
func New(seed uint64) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ids: map[string][]string{}}
	g.ids[kRC] = []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_FUZZ", "SRIOV_NET_VF", "IPV4_ADDRESS"}
	g.ids[kTrait] = []string{"HW_CPU_X86_AVX2", "CUSTOM_FUZZ", "COMPUTE_STATUS_DISABLED", "STORAGE_DISK_SSD"}
	g.ids[kProperty] = []string{"gpu", "rack", "vcpus", "ssd"}
	g.ids[kOwner] = []string{"domain-a", "project-a", "project-b"}
	g.ids[kGroup] = []string{"gpu-rack", "all"}
	g.ids[kProject] = []string{"admin", "project", "project-a"}
	g.ids[kHostName] = []string{"compute1", "unknown-host"}
	return g
}

// Learn records an id of kind the server created, so later requests
// address existing resources too.
func (g *Generator) Learn(kind, id string) {
	if id == "" {
		return
	}
	p := g.ids[kind]
	for _, x := range p {
		if x == id {
			return
		}
	}
	if len(p) >= maxIDs {
		p[g.rng.IntN(len(p))] = id
	} else {
		g.ids[kind] = append(p, id)
	}
}

// LearnFrom records the ids in a successful response to req: the body's
// id/uuid of a created resource, or the consumer whose allocations were
// written.
func (g *Generator) LearnFrom(req Request, status int, body []byte) {
	if status < 200 || status >= 300 {
		return
	}
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		doc = nil
	}
	str := func(m map[string]any, k string) string {
		if m == nil {
			return ""
		}
		switch v := m[k].(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
	obj := func(k string) map[string]any {
		m, _ := doc[k].(map[string]any)
		return m
	}
	switch {
	case req.Route == "/v1/leases" && req.Method == "POST":
		g.Learn(kLease, str(obj("lease"), "id"))
	case req.Route == "/v1/os-hosts" && req.Method == "POST":
		g.Learn(kHost, str(obj("host"), "id"))
		g.Learn(kHostName, str(obj("host"), "hypervisor_hostname"))
	case strings.HasPrefix(req.Route, "/v1/ownership"):
		if gen, ok := obj("plan")["generation"].(float64); ok {
			g.planGen = int(gen)
		}
	case req.Route == "/v1/floatingips" && req.Method == "POST":
		g.Learn(kFIP, str(obj("floatingip"), "id"))
	case req.Route == "/resource_providers" && req.Method == "POST":
		g.Learn(kRP, str(doc, "uuid"))
	case req.Route == "/resource_classes" && req.Method == "POST":
		// 201 with no body: the name is in the request.
		var in map[string]any
		if json.Unmarshal(req.Body, &in) == nil {
			g.Learn(kRC, str(in, "name"))
		}
	case req.Route == "/allocations/{consumer}" && req.Method == "PUT":
		g.Learn(kConsumer, lastSegment(req.Path))
	}
}

func lastSegment(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

func (g *Generator) pct(p int) bool { return g.rng.IntN(100) < p }

func pick[T any](g *Generator, xs []T) T { return xs[g.rng.IntN(len(xs))] }

// UUID returns a random (version 4) UUID from the generator's source.
func (g *Generator) UUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Next returns the next request.
func (g *Generator) Next() Request {
	if g.pct(2) {
		return g.junkPathRequest()
	}
	ep := pick(g, endpoints)
	req := Request{API: ep.api, Method: ep.method, Route: ep.path, Header: http.Header{}}
	if g.pct(10) {
		req.Method = pick(g, []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "FUZZ"})
	}
	path := g.fillPath(ep.path)
	switch ep.api {
	case Blazar:
		if strings.HasPrefix(path, "/v1/") && g.pct(15) {
			path += ".json"
		}
	case Placement:
		if g.pct(50) {
			req.Target = PlacementRoot
		} else if path == "/" {
			path = "/placement"
			if g.pct(50) {
				path += "/"
			}
		} else {
			path = "/placement" + path
		}
	}
	if q := g.query(ep); q != "" {
		path += "?" + q
	}
	req.Path = path
	g.headers(&req)
	if ep.body != nil && req.Method != "GET" && req.Method != "HEAD" || g.pct(5) {
		req.Body = g.body(ep)
	}
	return req
}

// junkPathRequest is a request for a path in neither route table.
func (g *Generator) junkPathRequest() Request {
	req := Request{Method: pick(g, []string{"GET", "POST", "PUT", "DELETE", "PATCH"}), Header: http.Header{}}
	paths := []string{"/v1", "/v1/", "/v1/leases/", "/v1//leases", "/v1/nope", "/v2/leases", "/v1/os-hosts/1/2/3",
		"/placement/nope", "/placement//resource_providers", "/nope", "/%ff", "/v1/%00", "/v1/leases/%2e%2e",
		"/placement/resource_providers/%2F", "/v1/" + strings.Repeat("a", 5000), "/placement/traits/" + strings.Repeat("%C3%A9", 300)}
	req.Path = pick(g, paths)
	switch {
	case strings.HasPrefix(req.Path, "/placement"):
		req.API = Placement
	case g.pct(30):
		req.API, req.Target = Placement, PlacementRoot
	default:
		req.API = Blazar
	}
	g.headers(&req)
	if g.pct(30) {
		req.Body = g.body(endpoint{})
	}
	return req
}

// fillPath replaces each {kind} with an id: a known one mostly, a fresh
// uuid, or junk.
func (g *Generator) fillPath(p string) string {
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			return p
		}
		j := strings.IndexByte(p[i:], '}') + i
		p = p[:i] + g.id(p[i+1:j]) + p[j+1:]
	}
}

func (g *Generator) id(kind string) string {
	known := g.ids[kind]
	switch n := g.rng.IntN(100); {
	case n < 65 && len(known) > 0:
		return escapePath(pick(g, known))
	case n < 80:
		switch kind {
		case kHost:
			return strconv.Itoa(g.rng.IntN(50))
		case kRC:
			return "CUSTOM_" + strings.ToUpper(g.word())
		case kTrait:
			return "CUSTOM_" + strings.ToUpper(g.word())
		case kProperty:
			return g.word()
		}
		return g.UUID()
	default:
		return escapePath(g.junkID())
	}
}

func (g *Generator) junkID() string {
	return pick(g, []string{"", "0", "-1", "99999999999999999999999", "1e3", "null", "ab cd", "é", "名前",
		"%", "..", "a;b", "'; DROP TABLE leases;--", strings.Repeat("x", 300), strings.Repeat("9", 40),
		"00000000-0000-0000-0000-000000000000", "ZZZZZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZZZZZZZZZ", g.UUID() + "x",
		strings.ToUpper(g.UUID()), strings.ReplaceAll(g.UUID(), "-", ""), "\x00", "CUSTOM_", "custom_lower", "\u202e"})
}

// escapePath escapes s for one path segment.
func escapePath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~:", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func (g *Generator) word() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789_"
	n := 1 + g.rng.IntN(10)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[g.rng.IntN(len(letters))]
	}
	return string(b)
}

// query returns a query string for GET listings (valid and not).
func (g *Generator) query(ep endpoint) string {
	if ep.method == "DELETE" && strings.HasPrefix(ep.path, "/v1/ownership/") && g.pct(90) {
		return "generation=" + escapeQuery(fmt.Sprint(g.generation()))
	}
	if ep.method != "GET" || !g.pct(40) && (ep.path != "/allocation_candidates" || g.pct(10)) {
		if g.pct(3) {
			return pick(g, []string{"%zz", "a=%", "&&&", "=", "x=" + strings.Repeat("y", 3000)})
		}
		return ""
	}
	if (ep.path == "/allocation_candidates" || ep.path == "/resource_providers") && g.pct(70) {
		return g.candidatesQuery(ep.path == "/allocation_candidates")
	}
	var keys []string
	switch ep.path {
	case "/resource_providers":
		keys = []string{"name", "uuid", "member_of", "resources", "in_tree", "required"}
	case "/allocation_candidates":
		keys = []string{"resources", "required", "member_of", "in_tree", "limit", "group_policy",
			"resources1", "required1", "member_of1", "in_tree1", "resources_X", "root_required", "same_subtree"}
	case "/usages":
		keys = []string{"project_id", "user_id", "consumer_type"}
	case "/traits":
		keys = []string{"name", "associated"}
	case "/v1/leases", "/v1/os-hosts", "/v1/floatingips", "/v1/os-hosts/allocations":
		keys = []string{"name", "status", "project_id", "lease_id", "reservation_id", "terminated", "detail", "sort_key"}
	case "/v1/os-hosts/properties":
		keys = []string{"detail", "all", "resource_type"}
	case "/v1/ownership", "/v1/ownership/projects/{project}":
		keys = []string{"start_date", "end_date"}
	default:
		keys = []string{"x", "limit"}
	}
	var parts []string
	for range 1 + g.rng.IntN(3) {
		k := pick(g, keys)
		parts = append(parts, escapeQuery(k)+"="+escapeQuery(g.queryValue(k)))
	}
	return strings.Join(parts, "&")
}

// candidatesQuery is a mostly valid query of GET /allocation_candidates
// (groups, policies, traits, aggregates, trees) or of GET
// /resource_providers (the unnumbered filters), one value sometimes junk.
func (g *Generator) candidatesQuery(groups bool) string {
	res := func() string {
		r := fmt.Sprintf("VCPU:%d", 1+g.rng.IntN(4))
		if g.pct(60) {
			r += fmt.Sprintf(",MEMORY_MB:%d", 256*(1+g.rng.IntN(8)))
		}
		if g.pct(30) {
			r += fmt.Sprintf(",DISK_GB:%d", 1+g.rng.IntN(100))
		}
		if g.pct(10) {
			r += "," + pick(g, g.ids[kRC]) + ":1"
		}
		return r
	}
	q := [][2]string{{"resources", res()}}
	add := func(p int, k, v string) {
		if g.pct(p) {
			q = append(q, [2]string{k, v})
		}
	}
	add(20, "required", pick(g, []string{pick(g, g.ids[kTrait]), "!" + pick(g, g.ids[kTrait]), "in:" + pick(g, g.ids[kTrait]) + "," + pick(g, g.ids[kTrait])}))
	add(15, "member_of", pick(g, []string{g.UUID(), "in:" + g.UUID() + "," + g.UUID(), "!" + g.UUID()}))
	if len(g.ids[kRP]) > 0 {
		add(15, "in_tree", pick(g, g.ids[kRP]))
	}
	if groups {
		add(30, "limit", strconv.Itoa(1+g.rng.IntN(10)))
		if g.pct(40) {
			for _, sfx := range []string{"1", "_A", "2"}[:1+g.rng.IntN(3)] {
				q = append(q, [2]string{"resources" + sfx, res()})
				add(20, "required"+sfx, pick(g, g.ids[kTrait]))
				add(10, "member_of"+sfx, g.UUID())
			}
			q = append(q, [2]string{"group_policy", pick(g, []string{"none", "isolate"})})
			add(10, "same_subtree", "1,_A")
		}
		add(10, "root_required", pick(g, []string{"!COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX2"}))
	}
	if g.pct(20) {
		i := g.rng.IntN(len(q))
		q[i][1] = pick(g, []string{g.junkID(), g.queryValue(q[i][0]), q[i][1] + ",", q[i][1] + ":1"})
	}
	parts := make([]string, len(q))
	for i, kv := range q {
		parts[i] = escapeQuery(kv[0]) + "=" + escapeQuery(kv[1])
	}
	return strings.Join(parts, "&")
}

func (g *Generator) queryValue(k string) string {
	if g.pct(25) {
		return g.junkID()
	}
	switch {
	case strings.HasPrefix(k, "resources"):
		var rs []string
		for range 1 + g.rng.IntN(3) {
			rs = append(rs, pick(g, g.ids[kRC])+":"+pick(g, []string{"1", "0", "-1", "1024", "99999999999999999999", "x", ""}))
		}
		return strings.Join(rs, ",")
	case strings.HasPrefix(k, "required") || k == "root_required":
		return pick(g, []string{pick(g, g.ids[kTrait]), "!" + pick(g, g.ids[kTrait]), "in:" + pick(g, g.ids[kTrait]) + "," + pick(g, g.ids[kTrait]), "!", "in:"})
	case strings.HasPrefix(k, "member_of"):
		return pick(g, []string{g.UUID(), "in:" + g.UUID() + "," + g.UUID(), "!" + g.UUID(), "!in:" + g.UUID(), "in:"})
	case strings.HasPrefix(k, "in_tree") || k == "uuid":
		return pick(g, append([]string{g.UUID()}, g.ids[kRP]...))
	case k == "limit":
		return pick(g, []string{"1", "0", "-1", "10", "99999999999999999999", "a"})
	case k == "group_policy":
		return pick(g, []string{"none", "isolate", "x"})
	case k == "same_subtree":
		return "_X,_Y"
	case k == "associated":
		return pick(g, []string{"true", "false", "maybe"})
	case k == "start_date" || k == "end_date":
		return pick(g, []string{"2030-01-01 00:00", "2030-01-02T00:00:00Z", "2030-01-02T00:00:00+14:00", "now",
			"2030-13-01 00:00", "0001-01-01 00:00", "9999-12-31 23:59", "2030-01-01T00:00:00+25:00"})
	}
	return g.word()
}

func escapeQuery(s string) string {
	return strings.ReplaceAll(escapePath(s), "%3A", ":")
}

// headers sets credentials, microversion, media types and a few others.
func (g *Generator) headers(req *Request) {
	h := req.Header
	switch n := g.rng.IntN(100); {
	case n < 82:
		h.Set("X-Auth-Token", "admin")
	case n < 91:
		h.Set("X-Auth-Token", "user:project")
	case n < 95:
		h.Set("X-Auth-Token", pick(g, []string{"junk", ":", "::", "user:", ":project", "é:ü", strings.Repeat("t", 2000)}))
	}
	if g.pct(5) {
		h.Set("X-Roles", pick(g, []string{"", "admin", "reader", "member,reader", ",,,", "service"}))
	}
	if g.pct(3) {
		h.Set("X-Project-Id", pick(g, []string{"other", "", "admin"}))
	}
	if g.pct(3) {
		h.Set("Openstack-System-Scope", pick(g, []string{"all", "ALL", "none"}))
	}
	svc := "placement"
	if req.API == Blazar {
		svc = "reservation"
	}
	switch n := g.rng.IntN(100); {
	case n < 25:
	case n < 75:
		if req.API == Placement {
			lo := since[req.Route]
			if g.pct(20) {
				lo = 0
			}
			h.Set("OpenStack-API-Version", fmt.Sprintf("placement 1.%d", lo+g.rng.IntN(40-lo)))
		} else {
			h.Set("OpenStack-API-Version", "reservation 1.0")
		}
	case n < 85:
		h.Set("OpenStack-API-Version", svc+" latest")
	default:
		h.Set("OpenStack-API-Version", pick(g, []string{svc + " 1.40", svc + " 2.0", svc + " 1.x", svc, svc + " 0.9",
			svc + " 1.99999999999999999999", "compute 2.1", "", svc + " 1.", svc + " -1.0", svc + "  1.10", "placement 1.1, placement 1.2"}))
	}
	switch n := g.rng.IntN(100); {
	case n < 80:
		h.Set("Content-Type", "application/json")
	case n < 85:
		h.Set("Content-Type", "application/json; charset=UTF-8")
	case n < 90:
	default:
		h.Set("Content-Type", pick(g, []string{"text/plain", "a/b/c", "", ";;", "application/json; charset", "multipart/form-data"}))
	}
	switch n := g.rng.IntN(100); {
	case n < 40:
	case n < 70:
		h.Set("Accept", "application/json")
	case n < 80:
		h.Set("Accept", "*/*")
	case n < 88:
		h.Set("Accept", "text/html")
	default:
		h.Set("Accept", pick(g, []string{"text/plain", "application/xml", "junk", "text/html;q=0.1, application/json;q=0.9", "*/*;q=0", ";"}))
	}
}

// body returns ep's body: the valid shape, or it mutated, or junk bytes.
func (g *Generator) body(ep endpoint) []byte {
	var v any = map[string]any{}
	if ep.body != nil {
		v = ep.body(g)
	}
	switch n := g.rng.IntN(100); {
	case n < 40:
	case n < 92:
		for range 1 + g.rng.IntN(3) {
			v = g.mutate(v, 0)
		}
	default:
		return g.junkBytes()
	}
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	if g.pct(5) && len(b) > 1 {
		b = b[:g.rng.IntN(len(b))] // truncated JSON
	}
	return b
}

// marshal is json.Marshal without HTML escaping, deterministic (map keys
// sorted).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (g *Generator) junkBytes() []byte {
	switch g.rng.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))
	case 2:
		return []byte(strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000))
	case 3:
		b := make([]byte, 1+g.rng.IntN(200))
		for i := range b {
			b[i] = byte(g.rng.UintN(256))
		}
		return b
	case 4:
		return []byte(pick(g, []string{"null", "[]", "1", `"x"`, "true", "{}{}", "{} x", `{"a":1,"a":2}`, "\ufeff{}", `{"x": NaN}`}))
	default:
		return []byte(`{"name": "` + strings.Repeat("é", 100000) + `"}`)
	}
}

// mutate changes v at a random place: a value of the wrong type, a key
// removed or added, or deep nesting.
func (g *Generator) mutate(v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 && g.pct(70) && depth < 6 {
			keys := sortedKeys(x)
			k := pick(g, keys)
			switch g.rng.IntN(5) {
			case 0:
				delete(x, k)
			default:
				x[k] = g.mutate(x[k], depth+1)
			}
			return x
		}
		if g.pct(50) {
			x[pick(g, []string{"extra", "id", "uuid", "name", "", "é", strings.Repeat("k", 300)})] = g.randomValue()
			return x
		}
	case int, float64:
		if g.pct(60) {
			return json.RawMessage(g.edgeNumber())
		}
	case string:
		if g.pct(30) {
			return g.edgeString(x)
		}
	case []any:
		if len(x) > 0 && g.pct(70) && depth < 6 {
			i := g.rng.IntN(len(x))
			x[i] = g.mutate(x[i], depth+1)
			return x
		}
		if g.pct(50) {
			return append(x, g.randomValue())
		}
	}
	return g.randomValue()
}

// edgeNumber is a number at the edge of what the server may store or
// compute with.
func (g *Generator) edgeNumber() string {
	return pick(g, []string{"0", "-1", "1", "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "1e308", "1.7976931348623157e308", "4.9e-324", "0.0001",
		"3.4e38", "1e19", "0.5", "65535", "65536", "1e400", "100000000000000000000000000000000000000"})
}

// edgeString is s changed at its edges: empty, very long, unicode,
// whitespace, case.
func (g *Generator) edgeString(s string) string {
	switch g.rng.IntN(8) {
	case 0:
		return ""
	case 1:
		return s + strings.Repeat("é", 300)
	case 2:
		return " " + s + " "
	case 3:
		return strings.ToUpper(s)
	case 4:
		return strings.ToLower(s)
	case 5:
		return s + "\u0000"
	case 6:
		return strings.Repeat(s, 100)
	default:
		if len(s) > 1 {
			return s[:len(s)/2]
		}
		return s + s
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (g *Generator) randomValue() any {
	switch g.rng.IntN(16) {
	case 0:
		return nil
	case 1:
		return g.pct(50)
	case 2:
		return json.RawMessage(pick(g, []string{"0", "-1", "1.5", "-0", "1e400", "-1e400", "1e-400", "9223372036854775807",
			"9223372036854775808", "-9223372036854775809", "18446744073709551616", "123456789012345678901234567890", "2147483648", "1E2"}))
	case 3:
		return g.rng.IntN(1 << 20)
	case 4:
		return ""
	case 5:
		return strings.Repeat("x", 70000)
	case 6:
		return pick(g, []string{"é", "名前", "\u0000", "\ud7ff", "\U0001F600", "\u202e", "<script>", "%s%n", "a\nb", "\\"})
	case 7:
		return []any{}
	case 8:
		return map[string]any{}
	case 9:
		var v any = 1
		for range 200 + g.rng.IntN(2000) {
			v = []any{v}
		}
		return v
	case 10:
		var v any = 1
		for range 200 + g.rng.IntN(2000) {
			v = map[string]any{"a": v}
		}
		return v
	case 11:
		return g.UUID()
	case 12:
		return pick(g, []string{"2030-01-01 12:00", "now", "2030-13-45 25:61", "2030-01-01T12:00:00Z", "0001-01-01 00:00",
			"9999-12-31 23:59", "1970-01-01 00:00", "2030-02-30 00:00", "-1", ""})
	case 13:
		return []any{g.UUID(), 1, nil}
	case 14:
		return map[string]any{g.word(): g.word()}
	default:
		return g.word()
	}
}

// ---- valid shapes ----------------------------------------------------

func (g *Generator) date(offsetHours int) string {
	return fmt.Sprintf("2030-%02d-%02d %02d:00", 1+g.rng.IntN(12), 1+g.rng.IntN(28), offsetHours%24)
}

func (g *Generator) leaseBody() any {
	start := 2030 + g.rng.IntN(3)
	sd := fmt.Sprintf("%d-%02d-%02d %02d:%02d", start, 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60))
	ed := fmt.Sprintf("%d-%02d-%02d %02d:%02d", start+1, 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60))
	switch n := g.rng.IntN(100); {
	case n < 10:
		sd = "now"
	case n < 14:
		sd, ed = pick(g, []string{"0001-01-01 00:00", "1970-01-01 00:00", "2000-02-29 00:00"}), pick(g, []string{"9999-12-31 23:59", "2262-04-12 00:00", "2300-01-01 00:00"})
	case n < 16:
		ed = sd
	}
	var res []any
	for range 1 + g.rng.IntN(2) {
		res = append(res, g.reservation())
	}
	body := map[string]any{"name": "lease-" + g.word(), "start_date": sd, "end_date": ed, "reservations": res, "events": []any{}}
	if g.pct(20) {
		body["before_end_date"] = nil
	}
	return body
}

func (g *Generator) reservation() any {
	switch g.rng.IntN(4) {
	case 0, 1:
		props := pick(g, []any{"", `[">=", "$vcpus", "2"]`, `["and", [">=", "$vcpus", "4"], ["==", "$gpu", "true"]]`,
			`["=", "$rack", "r1"]`, `[`, `["<in>", "$x"]`, `{"a": 1}`})
		mn := 1 + g.rng.IntN(2)
		return map[string]any{"resource_type": "physical:host", "min": mn, "max": mn + g.rng.IntN(2),
			"hypervisor_properties": props, "resource_properties": pick(g, []any{"", `["==", "$gpu", "true"]`, "vcpus>=2"})}
	case 2:
		return map[string]any{"resource_type": "virtual:instance", "amount": 1 + g.rng.IntN(3), "vcpus": 1, "memory_mb": 512,
			"disk_gb": 10, "affinity": pick(g, []any{true, false, nil, "None"})}
	default:
		return map[string]any{"resource_type": "virtual:floatingip", "network_id": g.UUID(), "amount": 1}
	}
}

func (g *Generator) leaseUpdateBody() any {
	switch g.rng.IntN(5) {
	case 0:
		return map[string]any{"name": "renamed-" + g.word()}
	case 1:
		return map[string]any{"end_date": g.date(12)}
	case 2:
		return map[string]any{"prolong_for": pick(g, []string{"1h", "2d", "30m", "1w", "0h", "-1d", "99999999999d", "9223372036854775807m", "1y", "h", "1.5h"})}
	case 3:
		return map[string]any{"reduce_by": pick(g, []string{"1h", "1d"}), "defer_by": "1h"}
	default:
		return map[string]any{"start_date": g.date(10), "end_date": g.date(12), "reservations": []any{g.reservation()}}
	}
}

func (g *Generator) hostBody() any {
	body := map[string]any{"name": "host-" + g.word()}
	for range g.rng.IntN(3) {
		body[pick(g, g.ids[kProperty])] = pick(g, []string{"true", "8", "r1", ""})
	}
	return body
}

func (g *Generator) hostUpdateBody() any {
	return map[string]any{pick(g, g.ids[kProperty]): pick(g, []any{"r2", "true", nil, 3})}
}

func (g *Generator) propertyBody() any {
	return map[string]any{"private": g.pct(50)}
}

func (g *Generator) fipBody() any {
	return map[string]any{"floating_network_id": g.UUID(),
		"floating_ip_address": fmt.Sprintf("192.0.2.%d", g.rng.IntN(256))}
}

func (g *Generator) rpBody() any {
	b := map[string]any{"name": "rp-" + g.word()}
	if g.pct(50) {
		b["uuid"] = g.UUID()
	}
	if g.pct(20) && len(g.ids[kRP]) > 0 {
		b["parent_provider_uuid"] = pick(g, g.ids[kRP])
	}
	return b
}

func (g *Generator) rpUpdateBody() any {
	b := map[string]any{"name": "rp-" + g.word()}
	if g.pct(30) && len(g.ids[kRP]) > 0 {
		b["parent_provider_uuid"] = pick(g, g.ids[kRP])
	}
	return b
}

func (g *Generator) generation() any { return g.rng.IntN(4) }

func (g *Generator) inventory() map[string]any {
	inv := map[string]any{"total": 1 + g.rng.IntN(64)}
	if g.pct(10) {
		inv["total"] = json.RawMessage(pick(g, []string{"2147483647", "9223372036854775807", "4294967296"}))
	}
	if g.pct(50) {
		inv["reserved"] = g.rng.IntN(2)
		inv["min_unit"] = 1
		inv["max_unit"] = 1 + g.rng.IntN(64)
		inv["step_size"] = 1
		inv["allocation_ratio"] = pick(g, []any{1.0, 16.0, 1.5, json.RawMessage("1e308"), json.RawMessage("3.4e38"), 0.0001})
	}
	return inv
}

func (g *Generator) inventoryPostBody() any {
	b := g.inventory()
	b["resource_class"] = pick(g, g.ids[kRC])
	return b
}

func (g *Generator) inventoriesBody() any {
	invs := map[string]any{}
	for range 1 + g.rng.IntN(3) {
		invs[pick(g, g.ids[kRC])] = g.inventory()
	}
	return map[string]any{"resource_provider_generation": g.generation(), "inventories": invs}
}

func (g *Generator) inventoryPutBody() any {
	b := g.inventory()
	b["resource_provider_generation"] = g.generation()
	return b
}

func (g *Generator) aggregatesBody() any {
	aggs := []any{g.UUID()}
	if g.pct(50) {
		aggs = append(aggs, g.UUID())
	}
	if g.pct(30) {
		return aggs // the pre-1.19 shape
	}
	return map[string]any{"aggregates": aggs, "resource_provider_generation": g.generation()}
}

func (g *Generator) rpTraitsBody() any {
	return map[string]any{"traits": []any{pick(g, g.ids[kTrait])}, "resource_provider_generation": g.generation()}
}

func (g *Generator) rpID() string {
	if len(g.ids[kRP]) > 0 && g.pct(80) {
		return pick(g, g.ids[kRP])
	}
	return g.UUID()
}

func (g *Generator) allocationsOf() map[string]any {
	return map[string]any{g.rpID(): map[string]any{"resources": map[string]any{pick(g, g.ids[kRC]): pick(g, []any{1, 2, 3, json.RawMessage("2147483647"), json.RawMessage("9223372036854775807")})}}}
}

func (g *Generator) allocationsPutBody() any {
	b := map[string]any{"allocations": g.allocationsOf(), "project_id": g.UUID(), "user_id": g.UUID()}
	if g.pct(60) {
		b["consumer_generation"] = pick(g, []any{nil, 0, 1})
	}
	if g.pct(70) {
		b["consumer_type"] = pick(g, []string{"INSTANCE", "INSTANCE", "MIGRATION", "lower"})
	}
	return b
}

func (g *Generator) allocationsPostBody() any {
	b := map[string]any{}
	for range 1 + g.rng.IntN(2) {
		c := g.UUID()
		if len(g.ids[kConsumer]) > 0 && g.pct(50) {
			c = pick(g, g.ids[kConsumer])
		}
		b[c] = g.allocationsPutBody()
	}
	return b
}

func (g *Generator) rcBody() any {
	return map[string]any{"name": "CUSTOM_" + strings.ToUpper(g.word())}
}

func (g *Generator) reshaperBody() any {
	invs := map[string]any{}
	if len(g.ids[kRP]) > 0 {
		invs[g.rpID()] = g.inventoriesBody()
	}
	allocs := map[string]any{}
	for range g.rng.IntN(2) {
		allocs[g.UUID()] = g.allocationsPutBody()
	}
	return map[string]any{"inventories": invs, "allocations": allocs}
}

// planRef is the plan generation an ownership write names: the current
// one mostly, a stale one, or junk.
func (g *Generator) planRef() any {
	switch n := g.rng.IntN(100); {
	case n < 75:
		return g.planGen
	case n < 90:
		return max(g.planGen-1-g.rng.IntN(3), 0)
	default:
		return pick(g, []any{nil, "1", -1, 1.5})
	}
}

func (g *Generator) generationBody() any { return map[string]any{"generation": g.planRef()} }

// consumer is a consumer of the ownership plan (schema Consumer).
func (g *Generator) consumer(id string) map[string]any {
	c := map[string]any{"id": id, "rank": g.rng.IntN(3), "borrow_grace_seconds": pick(g, []int{0, 60, 3600}),
		"lending_limit": pick(g, []any{nil, 0, 1, 2})}
	if g.pct(50) {
		c["parent_id"] = pick(g, g.ids[kOwner])
	}
	if g.pct(60) {
		c["project_id"] = pick(g, g.ids[kProject])
	}
	return c
}

// group is a resource group (schema Group): hosts by name or by
// properties.
func (g *Generator) group(name string) map[string]any {
	gr := map[string]any{"name": name}
	if g.pct(50) {
		gr["hosts"] = []any{pick(g, g.ids[kHostName]), pick(g, g.ids[kHostName])}
	} else {
		gr["properties"] = map[string]any{pick(g, g.ids[kProperty]): pick(g, []string{"true", "8", "r1"})}
	}
	return gr
}

// entry is a plan entry's fields (schema EntryFields).
func (g *Generator) entry() map[string]any {
	return map[string]any{"amount": g.rng.IntN(4), "partial": g.pct(50), "preference": g.rng.IntN(3),
		"share_ratio": pick(g, []float64{0, 0.25, 0.5, 1}), "lend": g.pct(50), "lend_grace_seconds": pick(g, []int{0, 60}),
		"reclaim": g.pct(30)}
}

func (g *Generator) planBody() any {
	var cs, gs, es []any
	for _, id := range g.ids[kOwner][:1+g.rng.IntN(len(g.ids[kOwner]))] {
		cs = append(cs, g.consumer(id))
	}
	for _, name := range g.ids[kGroup] {
		gs = append(gs, g.group(name))
	}
	for range g.rng.IntN(3) {
		e := g.entry()
		e["consumer"], e["group"] = pick(g, g.ids[kOwner]), pick(g, g.ids[kGroup])
		es = append(es, e)
	}
	return map[string]any{"generation": g.planRef(), "consumers": cs, "groups": gs, "entries": es}
}

func (g *Generator) ownerBody() any {
	c := g.consumer("")
	delete(c, "id")
	c["generation"] = g.planRef()
	return c
}

func (g *Generator) groupBody() any {
	gr := g.group("")
	delete(gr, "name")
	gr["generation"] = g.planRef()
	return gr
}

func (g *Generator) entryBody() any {
	e := g.entry()
	e["generation"] = g.planRef()
	return e
}

func (g *Generator) explainBody() any {
	return map[string]any{"project_id": pick(g, g.ids[kProject])}
}

// earliestBody asks POST /v1/leases/earliest where a lease of some
// reservations would fit.
func (g *Generator) earliestBody() any {
	b := map[string]any{"duration": pick(g, []any{3600, 86400, 60, 7 * 86400}), "reservations": []any{g.reservation()}}
	if g.pct(60) {
		b["after"] = pick(g, []string{"now", g.date(10)})
	}
	if g.pct(40) {
		b["not_after"] = fmt.Sprintf("%d-01-01 00:00", 2031+g.rng.IntN(5))
	}
	return b
}

// filterBody is Nova's LeaseholdFilter asking which candidate hosts an
// instance may boot on (POST /v1/scheduler/filter).
func (g *Generator) filterBody() any {
	var hosts []any
	for range 1 + g.rng.IntN(4) {
		hosts = append(hosts, pick(g, g.ids[kHostName]))
	}
	b := map[string]any{"project_id": pick(g, g.ids[kProject]), "user_id": "u-" + g.word(), "hosts": hosts, "explain": g.pct(30)}
	switch g.rng.IntN(4) {
	case 0:
		b["scheduler_hints"] = map[string]any{"reservation": pick(g, []any{g.UUID(), []any{g.UUID()}})}
	case 1:
		res := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(g.UUID(), "-", "_"))
		b["flavor"] = map[string]any{"extra_specs": map[string]any{"resources:" + res: "1"}, "resources": map[string]any{res: 1, "VCPU": 2}}
	case 2:
		b["flavor"] = map[string]any{"extra_specs": map[string]any{"aggregate_instance_extra_specs:reservation": g.UUID()}}
	}
	return b
}
