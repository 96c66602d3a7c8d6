// Package openapi_test checks the OpenAPI 3.1 descriptions in etc/openapi
// against what Leasehold really answers.
//
// TestBlazarDocument validates etc/openapi/blazar-v1.yaml against the
// OpenAPI 3.1 schema. TestBlazarRecordedTraffic starts the whole service
// (pkg/server, noauth, a fresh database) on loopback, drives it with real
// HTTP requests through every operation the description lists (hosts,
// properties, allocations, leases of the host, floating IP and instance
// reservation types, floating IPs, and Leasehold's extensions: the
// earliest window, forced host deletes with healing, Nova's scheduler
// filter; and the error answers of each), records every exchange and
// validates each request and answer against the description with
// libopenapi-validator; an operation the scenario never got a success
// from fails the test, so the description cannot list what the server
// does not serve. It then validates the same traffic against copies of
// the description each broken in one field or operation
// (broken_test.go), each of which must fail: the check would catch such
// a mistake. TestBlazarErrorGolden validates every /v1 answer pinned
// in tests/blazar/testdata/errorbodies.golden (recorded from a real
// server by tests/blazar) the same way: answers of routes the description
// lists against their operation, answers of unknown routes and methods
// against the werkzeug error schema.
package openapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// blazarSpecPath is the description, relative to this package.
var blazarSpecPath = filepath.Join("..", "..", "etc", "openapi", "blazar-v1.yaml")

// spec is a parsed description with its validator.
type spec struct {
	doc   libopenapi.Document
	model *v3.Document
	val   validator.Validator
}

var (
	blazarOnce sync.Once
	blazarSpec *spec
	blazarErr  error
)

// loadBlazar parses etc/openapi/blazar-v1.yaml once per run.
func loadBlazar(t *testing.T) *spec {
	t.Helper()
	blazarOnce.Do(func() {
		raw, err := os.ReadFile(blazarSpecPath)
		if err != nil {
			blazarErr = err
			return
		}
		blazarSpec, blazarErr = parseSpec(raw)
	})
	if blazarErr != nil {
		t.Fatal(blazarErr)
	}
	return blazarSpec
}

// parseSpec builds a description and its validator from its YAML text.
func parseSpec(raw []byte) (*spec, error) {
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", blazarSpecPath, err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", blazarSpecPath, err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator for %s: %v", blazarSpecPath, errs)
	}
	return &spec{doc: doc, model: &m.Model, val: v}, nil
}

// TestBlazarDocument checks the description is a valid OpenAPI 3.1
// document and that every operation names its id and its answers.
func TestBlazarDocument(t *testing.T) {
	s := loadBlazar(t)
	if v := s.doc.GetVersion(); v != "3.1.0" {
		t.Errorf("openapi version %q, want 3.1.0", v)
	}
	if ok, errs := s.val.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s: %v", blazarSpecPath, e)
		}
	}
	ops := operations(s.model)
	if len(ops) < 17+len(extensionOps) {
		t.Errorf("%d operations, want the 17 Blazar ones and the %d extensions at least", len(ops), len(extensionOps))
	}
	for key, op := range ops {
		if op.OperationId == "" {
			t.Errorf("%s has no operationId", key)
		}
		if op.Responses == nil || op.Responses.Codes.Len() == 0 {
			t.Errorf("%s lists no responses", key)
		}
	}
	for _, key := range extensionOps {
		op, ok := ops[key]
		if !ok {
			t.Errorf("%s: the extension is not described", key)
			continue
		}
		if _, ok := op.Extensions.Get("x-leasehold"); !ok {
			t.Errorf("%s: an operation upstream Blazar lacks is not marked x-leasehold", key)
		}
	}
}

// extensionOps are the operations Leasehold serves beyond upstream
// Blazar's.
var extensionOps = []string{"POST /v1/leases/earliest", "POST /v1/scheduler/filter"}

// operations lists the description's operations by "METHOD /path".
func operations(m *v3.Document) map[string]*v3.Operation {
	out := map[string]*v3.Operation{}
	for p, item := range m.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			out[strings.ToUpper(method)+" "+p] = op
		}
	}
	return out
}

// exchange is one recorded request and its answer.
type exchange struct {
	name       string
	method     string
	path       string // as sent, query included
	header     http.Header
	reqBody    []byte
	status     int
	respHeader http.Header
	respBody   []byte
	// badRequest marks a request that is wrong on purpose (its answer is
	// still validated, the request is not).
	badRequest bool
}

// specPath maps a request path to the form the description lists:
// every route is also served with a ".json" suffix, which the
// description states once instead of doubling every path.
func specPath(p string) string {
	path, query, hasQuery := strings.Cut(p, "?")
	path = strings.TrimSuffix(path, ".json")
	if hasQuery {
		return path + "?" + query
	}
	return path
}

// requests rebuilds the exchange as http.Request and http.Response for
// the validator (bodies readable once each).
func (e *exchange) requests(base string) (*http.Request, *http.Response) {
	req, err := http.NewRequest(e.method, base+specPath(e.path), bytes.NewReader(e.reqBody))
	if err != nil {
		panic(err) // the recorded path was sent, so it parses
	}
	req.Header = e.header.Clone()
	if len(e.reqBody) > 0 && req.Header.Get("Content-Type") == "" {
		// A missing Content-Type counts as JSON (the description says so).
		req.Header.Set("Content-Type", "application/json")
	}
	resp := &http.Response{
		StatusCode: e.status, Header: e.respHeader.Clone(), Request: req,
		Body: io.NopCloser(bytes.NewReader(e.respBody)),
	}
	return req, resp
}

// checker validates exchanges against one description and counts the
// operations they succeeded on.
type checker struct {
	t *testing.T
	// errorf reports a mismatch (t.Errorf; a counter when a broken
	// description is expected to fail).
	errorf   func(format string, args ...any)
	s        *spec
	base     string
	ok       map[string]int // "METHOD /path" → successful answers seen
	statuses map[string]int // status → answers validated
	checked  int
}

func newChecker(t *testing.T, s *spec) *checker {
	return &checker{t: t, errorf: t.Errorf, s: s, base: "http://localhost:1234", ok: map[string]int{}, statuses: map[string]int{}}
}

// check validates e: request and answer against the operation when the
// description lists its route, the answer against the werkzeug error
// schema when it does not (unknown routes and methods).
func (c *checker) check(e *exchange) {
	c.t.Helper()
	req, resp := e.requests(c.base)
	item, perrs, tmpl := paths.FindPath(req, c.s.model, config.NewValidationOptions())
	if item == nil || len(perrs) > 0 {
		// Outside the described routes the answers are the pipeline's:
		// no token (checked first), a bad microversion (negotiated
		// before routing), an unknown route or method.
		switch e.status {
		case http.StatusUnauthorized:
			c.schema(e, "Unauthorized")
		case http.StatusBadRequest, http.StatusNotAcceptable, http.StatusNotFound, http.StatusMethodNotAllowed:
			c.schema(e, "WerkzeugError")
		default:
			c.errorf("%s: %s %s answered %d but the description has no such operation: %v", e.name, e.method, e.path, e.status, perrs)
		}
		return
	}
	var ok bool
	var verrs []error
	if e.badRequest {
		valid, errs := c.s.val.ValidateHttpResponse(req, resp)
		ok = valid
		for _, v := range errs {
			verrs = append(verrs, v)
		}
	} else {
		valid, errs := c.s.val.ValidateHttpRequestResponse(req, resp)
		ok = valid
		for _, v := range errs {
			verrs = append(verrs, v)
		}
	}
	c.checked++
	c.statuses[fmt.Sprint(e.status)]++
	if !ok {
		c.errorf("%s: %s %s → %d does not match %s:\n%v\nrequest body: %s\nanswer: %s",
			e.name, e.method, e.path, e.status, blazarSpecPath, verrs, e.reqBody, e.respBody)
		return
	}
	if e.status < 400 && !e.badRequest {
		c.ok[e.method+" "+tmpl]++
	}
}

// schema validates e's answer body against a component schema.
func (c *checker) schema(e *exchange, name string) {
	c.t.Helper()
	sp, ok := c.s.model.Components.Schemas.Get(name)
	if !ok {
		c.t.Fatalf("no schema %s in %s", name, blazarSpecPath)
	}
	c.checked++
	c.statuses[fmt.Sprint(e.status)]++
	if valid, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(sp.Schema(), e.respBody); !valid {
		c.errorf("%s: %s %s → %d: the answer is not a %s: %v\nanswer: %s", e.name, e.method, e.path, e.status, name, errs, e.respBody)
	}
}

// summary logs what was checked.
func (c *checker) summary(what string) {
	keys := make([]string, 0, len(c.statuses))
	for k := range c.statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s×%d", k, c.statuses[k])
	}
	c.t.Logf("%s: %d answers validated against %s (status×count:%s)", what, c.checked, blazarSpecPath, b.String())
}

// client sends requests to a running server and records them.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
	log  []*exchange
}

// call sends one request. token "" sends none; status is the answer the
// scenario expects (a different one fails the test at once, as the rest
// of the scenario builds on it).
func (c *client) call(name, token, method, path, body string, status int, hdr ...string) *exchange {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	e := &exchange{name: name, method: method, path: path, header: req.Header, reqBody: []byte(body),
		status: resp.StatusCode, respHeader: resp.Header, respBody: b}
	c.log = append(c.log, e)
	if resp.StatusCode != status {
		c.t.Fatalf("%s: %s %s answered %d, want %d: %s", name, method, path, resp.StatusCode, status, b)
	}
	return e
}

// bad is call for a request that is wrong on purpose.
func (c *client) bad(name, token, method, path, body string, status int, hdr ...string) *exchange {
	c.t.Helper()
	e := c.call(name, token, method, path, body, status, hdr...)
	e.badRequest = true
	return e
}

// waitFor polls GET path until cond holds on the answer (bounded).
func (c *client) waitFor(name, path string, cond func([]byte) bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := c.call(name, "admin", "GET", path, "", http.StatusOK)
		if cond(e.respBody) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %s never reached the state waited for; last answer %s", name, path, e.respBody)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
