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
