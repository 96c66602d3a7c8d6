package ownership_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"
)

var specPath = filepath.Join("..", "..", "etc", "openapi", "ownership.yaml")

// TestOpenAPI: etc/openapi/ownership.yaml is a valid OpenAPI 3.1 document,
// and the server's requests and answers for every operation it lists
// (successes and errors) match it.
func TestOpenAPI(t *testing.T) {
	val := specValidator(t, specPath)
	if ok, errs := val.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s: %v", specPath, e)
		}
	}
	ts := start(t)
	for i := 1; i <= 3; i++ {
		do(t, ts, "admin", "POST", "/v1/os-hosts", `{"name": "c`+string(rune('0'+i))+`", "rack": "r1"}`)
	}
	steps := []struct {
		token, method, path, body string
		status                    int
	}{
		{"admin", "GET", "/v1/ownership/plan", "", 200},
		{"admin", "PUT", "/v1/ownership/plan", `{"generation": 0, "consumers": [{"id": "dom", "rank": 1}], "groups": [{"name": "g", "properties": {"rack": "r1"}}], "entries": [{"consumer": "dom", "group": "g", "amount": 2}]}`, 200},
		{"admin", "PUT", "/v1/ownership/consumers/p", `{"generation": 1, "parent_id": "dom", "rank": 1, "project_id": "PA", "lending_limit": 1}`, 200},
		{"admin", "PUT", "/v1/ownership/consumers/p/groups/g", `{"generation": 2, "amount": 1, "lend": true, "lend_grace_seconds": 60}`, 200},
		{"admin", "PUT", "/v1/ownership/groups/h", `{"generation": 3, "hosts": ["1"]}`, 200},
		{"admin", "PUT", "/v1/ownership/plan", `{"generation": 0}`, 409},
		{"admin", "PUT", "/v1/ownership/consumers/q/groups/g", `{"generation": 4, "amount": 1}`, 400},
		{"admin", "POST", "/v1/ownership/recompute", `{"generation": 4}`, 200},
		{"admin", "GET", "/v1/ownership", "", 200},
		{"admin", "GET", "/v1/ownership?start_date=2099-01-01%2000:00&end_date=2099-01-02%2000:00", "", 200},
		{"admin", "GET", "/v1/ownership?start_date=tomorrow", "", 400},
		{"u:PA", "GET", "/v1/ownership/projects/PA", "", 200},
		{"u:PA", "GET", "/v1/ownership/projects/PA?start_date=2099-01-01%2000:00&end_date=2099-01-02%2000:00", "", 200},
		{"u:PA", "GET", "/v1/ownership/projects/PA?start_date=tomorrow", "", 400},
		{"u:PA", "GET", "/v1/ownership/projects/PB", "", 403},
		{"u:PA", "POST", "/v1/ownership/explain", `{"project_id": "PA"}`, 200},
		{"u:PA", "POST", "/v1/ownership/explain", `{"project_id": "PA", "min": 1, "start_date": "2099-01-01 00:00", "end_date": "2099-01-02 00:00"}`, 200},
		{"u:PA", "POST", "/v1/ownership/explain", `{"min": 9, "start_date": "now", "end_date": "2099-01-02 00:00"}`, 200},
		{"u:PA", "POST", "/v1/ownership/explain", `{"min": 1}`, 400},
		{"admin", "DELETE", "/v1/ownership/consumers/dom?generation=5", "", 409},
		{"admin", "DELETE", "/v1/ownership/consumers/p/groups/g?generation=5", "", 200},
		{"admin", "DELETE", "/v1/ownership/groups/h?generation=6", "", 200},
		{"admin", "DELETE", "/v1/ownership/consumers/p?generation=7", "", 200},
		{"admin", "DELETE", "/v1/ownership/groups/nope?generation=8", "", 404},
	}
	for _, s := range steps {
		req, _ := http.NewRequest(s.method, ts.URL+s.path, bytes.NewReader([]byte(s.body)))
		req.Header.Set("X-Auth-Token", s.token)
		if s.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.status {
			t.Fatalf("%s %s: %d, want %d: %s", s.method, s.path, resp.StatusCode, s.status, body)
		}
		// Validate the exchange with fresh bodies.
		vreq, _ := http.NewRequest(s.method, "http://localhost"+s.path, bytes.NewReader([]byte(s.body)))
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.Request = vreq
		var ok bool
		var errs []error
		if s.status < 300 {
			v, es := val.ValidateHttpRequestResponse(vreq, resp)
			ok = v
			for _, e := range es {
				errs = append(errs, e)
			}
		} else {
			v, es := val.ValidateHttpResponse(vreq, resp)
			ok = v
			for _, e := range es {
				errs = append(errs, e)
			}
		}
		if !ok {
			t.Errorf("%s %s → %d does not match %s: %v\nanswer: %s", s.method, s.path, resp.StatusCode, specPath, errs, body)
		}
	}
}
