package nova

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// migratingNova serves one server whose successive GETs show states[0],
// states[1], … (the last one repeats) and records the live-migrate
// requests it gets.
type migratingNova struct {
	mu       sync.Mutex
	states   []map[string]any
	seen     int
	migrated []string
}

func (m *migratingNova) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/servers/"):
		if m.states == nil {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		st := m.states[min(m.seen, len(m.states)-1)]
		m.seen++
		writeJSON(w, 200, map[string]any{"server": st})
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/action"):
		var body map[string]map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		lm := body["os-migrateLive"]
		m.migrated = append(m.migrated, lm["host"].(string)+" "+lm["block_migration"].(string))
		w.WriteHeader(202)
	default:
		writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
	}
}

func server(status, host string, task any) map[string]any {
	return map[string]any{"id": "s1", "status": status, "OS-EXT-SRV-ATTR:host": host, "OS-EXT-STS:task_state": task}
}

func TestLiveMigrateOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		states   []map[string]any
		wantKind errs.Kind // -1: success
		migrated int
	}{
		{"moves", []map[string]any{server("ACTIVE", "c1", nil), server("MIGRATING", "c1", "migrating"), server("ACTIVE", "c2", nil)}, -1, 1},
		{"already there", []map[string]any{server("ACTIVE", "c2", nil)}, -1, 0},
		{"still migrating from an earlier call", []map[string]any{server("MIGRATING", "c1", "migrating"), server("ACTIVE", "c2", nil)}, -1, 0},
		{"rolled back", []map[string]any{server("ACTIVE", "c1", nil), server("MIGRATING", "c1", "migrating"), server("ACTIVE", "c1", nil)}, errs.Internal, 1},
		{"error", []map[string]any{server("ACTIVE", "c1", nil), server("ERROR", "c1", nil)}, errs.Internal, 1},
		{"no such server", nil, errs.NotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &migratingNova{states: tc.states}
			srv := httptest.NewServer(m)
			t.Cleanup(srv.Close)
			d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"},
				Config{PollInterval: time.Millisecond, MigrateTimeout: time.Minute}, nil)
			err := d.LiveMigrate(context.Background(), "s1", "c2")
			if got := kind(err); got != tc.wantKind {
				t.Errorf("LiveMigrate: %v (kind %v), want kind %v", err, got, tc.wantKind)
			}
			if len(m.migrated) != tc.migrated || (tc.migrated > 0 && m.migrated[0] != "c2 auto") {
				t.Errorf("live-migrate requests %v, want %d to c2 with block_migration auto", m.migrated, tc.migrated)
			}
		})
	}
}

// TestServersOnHostTags: both server listings report each server's
// owner, status, flavor size and tags (none when Nova gives none).
func TestServersOnHostTags(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.URL.Path != "/servers/detail" {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404}})
			return
		}
		queries = append(queries, r.URL.RawQuery)
		flavor := map[string]any{"vcpus": 2, "ram": 4096, "disk": 20}
		writeJSON(w, 200, map[string]any{"servers": []map[string]any{
			{"id": "s1", "tenant_id": "p1", "status": "ACTIVE", "OS-EXT-SRV-ATTR:host": "c1", "flavor": flavor, "tags": []string{"svc:db", "team-a"}},
			{"id": "s2", "tenant_id": "p2", "status": "SHUTOFF", "OS-EXT-SRV-ATTR:host": "c1", "flavor": flavor, "tags": []string{}},
		}})
	}))
	t.Cleanup(srv.Close)
	d := New(&gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"},
		Config{PollInterval: time.Millisecond, MigrateTimeout: time.Minute}, nil)
	want := []compute.Server{
		{ID: "s1", ProjectID: "p1", Status: "ACTIVE", FlavorVCPUs: 2, FlavorRAM: 4096, FlavorDisk: 20, Tags: []string{"svc:db", "team-a"}},
		{ID: "s2", ProjectID: "p2", Status: "SHUTOFF", FlavorVCPUs: 2, FlavorRAM: 4096, FlavorDisk: 20, Tags: []string{}},
	}
	got, err := d.ServersOnHostDetail(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServersOnHostDetail (-want +got):\n%s", diff)
	}
	byHost, err := d.ServersByHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]compute.Server{"c1": want}, byHost); diff != "" {
		t.Errorf("ServersByHost (-want +got):\n%s", diff)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], "host=c1") {
		t.Errorf("listing queries %q, want one on host c1, then one of every server", queries)
	}
}
