package nova

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/config"
)

// TestNewClientCatalogMicroversionReauth: NewClient logs in with the
// [nova] user and scope, takes Nova's endpoint of the configured
// interface and region from the catalog, pins the microversion on every
// call, and logs in again when Nova refuses an expired token.
func TestNewClientCatalogMicroversionReauth(t *testing.T) {
	var mu sync.Mutex
	logins := 0
	var nova *httptest.Server
	var got []string
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v3/auth/tokens" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Auth struct {
				Identity struct {
					Password struct {
						User struct {
							Name     string `json:"name"`
							Password string `json:"password"`
							Domain   struct {
								Name string `json:"name"`
							} `json:"domain"`
						} `json:"user"`
					} `json:"password"`
				} `json:"identity"`
				Scope struct {
					Project struct {
						Name   string `json:"name"`
						Domain struct {
							Name string `json:"name"`
						} `json:"domain"`
					} `json:"project"`
				} `json:"scope"`
			} `json:"auth"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		u, p := body.Auth.Identity.Password.User, body.Auth.Scope.Project
		if u.Name != "blazar" || u.Password != "pw" || u.Domain.Name != "Default" || p.Name != "service" || p.Domain.Name != "Default" {
			writeJSON(w, 401, map[string]any{"error": map[string]any{"code": 401}})
			return
		}
		mu.Lock()
		logins++
		tok := fmt.Sprintf("tok-%d", logins)
		mu.Unlock()
		w.Header().Set("X-Subject-Token", tok)
		ep := func(iface, region, url string) map[string]any {
			return map[string]any{"interface": iface, "region": region, "region_id": region, "url": url, "id": iface + region}
		}
		writeJSON(w, 201, map[string]any{"token": map[string]any{
			"expires_at": "2099-01-01T00:00:00.000000Z", "methods": []string{"password"},
			"catalog": []any{map[string]any{"type": "compute", "name": "nova", "id": "c", "endpoints": []any{
				ep("public", "RegionOne", "http://public.invalid/v2.1"),
				ep("internal", "RegionTwo", "http://other-region.invalid/v2.1"),
				ep("internal", "RegionOne", nova.URL+"/v2.1"),
			}}},
		}})
	}))
	t.Cleanup(ks.Close)
	nova = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Auth-Token")+" "+r.Header.Get("OpenStack-API-Version")+" "+r.URL.Path)
		mu.Unlock()
		if r.Header.Get("X-Auth-Token") == "tok-1" { // expired
			writeJSON(w, 401, map[string]any{"error": map[string]any{"code": 401}})
			return
		}
		h := hypervisor(1, "c1", 4)
		h["status"] = "disabled"
		writeJSON(w, 200, map[string]any{"hypervisors": []any{h}})
	}))
	t.Cleanup(nova.Close)

	c, err := NewClient(context.Background(), config.Nova{AuthType: "password", AuthURL: ks.URL + "/v3", Username: "blazar", Password: "pw",
		ProjectName: "service", UserDomainName: "Default", ProjectDomainName: "Default", RegionName: "RegionOne", EndpointType: "internal", Timeout: 10})
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != nova.URL+"/v2.1/" {
		t.Errorf("endpoint %s, want the internal RegionOne one %s/v2.1/", c.Endpoint, nova.URL)
	}
	st, err := New(c, Config{}, nil).HostStatuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st["c1"] != compute.StatusDisabled {
		t.Errorf("statuses %v", st)
	}
	want := []string{"tok-1 compute " + Microversion + " /v2.1/os-hypervisors/detail", "tok-2 compute " + Microversion + " /v2.1/os-hypervisors/detail"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Nova saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A wrong password stops NewClient with a message naming the login.
	_, err = NewClient(context.Background(), config.Nova{AuthType: "password", AuthURL: ks.URL + "/v3", Username: "blazar", Password: "wrong",
		ProjectName: "service", UserDomainName: "Default", ProjectDomainName: "Default", EndpointType: "internal", Timeout: 10})
	if err == nil || !strings.Contains(err.Error(), "logging in to Keystone") {
		t.Errorf("wrong password: %v", err)
	}
}

// TestRequestLog: every call's debug line names Nova's request id, also
// when the call succeeded; without debug logging nothing is written.
func TestRequestLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Openstack-Request-Id", "req-5ee0")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	prev := slog.Default()
	defer slog.SetDefault(prev)
	for _, tc := range []struct {
		level slog.Level
		want  []string // substrings of the log; nil: no log at all
	}{
		{slog.LevelDebug, []string{`msg="nova: call"`, "method=DELETE", "status=204", "request_id=req-5ee0", "/os-aggregates/7"}},
		{slog.LevelInfo, nil},
	} {
		var buf bytes.Buffer
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
		hc := &http.Client{Transport: requestLog{http.DefaultTransport}}
		req, err := http.NewRequest(http.MethodDelete, srv.URL+"/os-aggregates/7", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tc.want == nil && buf.Len() != 0 {
			t.Errorf("level %v: logged %q, want nothing", tc.level, buf.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("level %v: log %q lacks %q", tc.level, buf.String(), w)
			}
		}
	}
}
