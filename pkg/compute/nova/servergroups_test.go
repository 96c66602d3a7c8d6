package nova

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"
)

// fakeGroups is the server group part of the compute API, in memory.
type fakeGroups struct {
	mu     sync.Mutex
	groups map[string]map[string]any // id → group
	n      int
	calls  []string
}

func (f *fakeGroups) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
	switch {
	case r.Method == "GET" && len(p) == 1 && p[0] == "os-server-groups":
		if r.URL.Query().Get("all_projects") == "" {
			writeJSON(w, 400, map[string]any{"badRequest": map[string]any{"message": "this fake wants all_projects"}})
			return
		}
		out := []map[string]any{}
		for _, g := range f.groups {
			out = append(out, g)
		}
		writeJSON(w, 200, map[string]any{"server_groups": out})
	case r.Method == "POST" && len(p) == 1 && p[0] == "os-server-groups":
		var body struct {
			ServerGroup map[string]any `json:"server_group"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.n++
		g := body.ServerGroup
		g["id"] = fmt.Sprint("sg-", f.n)
		f.groups[g["id"].(string)] = g
		writeJSON(w, 200, map[string]any{"server_group": g})
	case r.Method == "DELETE" && len(p) == 2 && p[0] == "os-server-groups":
		if _, ok := f.groups[p[1]]; !ok {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		delete(f.groups, p[1])
		w.WriteHeader(204)
	default:
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "no route"}})
	}
}

// TestServerGroups: creating a group twice makes one (the second run
// finds it by name, in every project), with the policy asked for;
// deleting removes every group of the name and leaves the others, and
// deleting again is done.
func TestServerGroups(t *testing.T) {
	f := &fakeGroups{groups: map[string]map[string]any{
		"other": {"id": "other", "name": "mine", "policy": "affinity"},
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"}, Config{}, nil)
	ctx := context.Background()
	var ids []string
	for range 2 {
		id, err := d.CreateServerGroup(ctx, "reservation:r1", "anti-affinity")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if diff := cmp.Diff([]string{"sg-1", "sg-1"}, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if g := f.groups["sg-1"]; g["name"] != "reservation:r1" || g["policy"] != "anti-affinity" {
		t.Errorf("group %v, want reservation:r1 anti-affinity", g)
	}
	for range 2 {
		if err := d.DeleteServerGroups(ctx, "reservation:r1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.groups["sg-1"]; ok || len(f.groups) != 1 {
		t.Errorf("groups left %v, want only other", f.groups)
	}
}
