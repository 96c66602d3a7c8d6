package placement

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/placement"
)

// tokenTable authenticates from a fixed token table; "down" is an
// identity service that cannot answer.
type tokenTable map[string]*auth.Identity

func (tt tokenTable) Authenticate(r *http.Request) (*auth.Identity, error) {
	tok := r.Header.Get("X-Auth-Token")
	if tok == "down" {
		return nil, errs.Unavailablef("The identity service is unavailable; try again later.")
	}
	if id, ok := tt[tok]; ok {
		return id, nil
	}
	return nil, &errs.Error{Kind: errs.Unauthorized, Msg: "The request you have made requires authentication."}
}

func (tokenTable) Challenge() string { return `Keystone uri="http://keystone.example/identity"` }

func TestTokenAuthMiddleware(t *testing.T) {
	svc := placement.NewService(dbtest.Open(t), placement.Config{IncompleteConsumerProjectID: testIncomplete, IncompleteConsumerUserID: testIncomplete})
	tt := tokenTable{
		"admin-token":  {UserID: "a", ProjectID: "p", Roles: []string{"admin"}},
		"member-token": {UserID: "m", ProjectID: "p", Roles: []string{"member"}},
	}
	h := New(svc, config.Placement{PolicyMode: "legacy"}, config.CORS{}, WithAuthenticator(tt)).Handler()
	tests := []struct {
		name, path, token string
		wantStatus        int
		wantBody          string // substring
		wantWWWAuth       string
	}{
		{"root needs no token", "/", "", 200, `"versions"`, ""},
		{"no token", "/resource_providers", "", 401, httpx.UnauthorizedBody, `Keystone uri="http://keystone.example/identity"`},
		{"noauth2 token is not a Keystone token", "/resource_providers", "admin", 401, httpx.UnauthorizedBody, `Keystone uri="http://keystone.example/identity"`},
		{"valid admin", "/resource_providers", "admin-token", 200, `"resource_providers":[]`, ""},
		{"valid member, legacy policy", "/resource_providers", "member-token", 403, `"errors"`, ""},
		{"identity service down", "/resource_providers", "down", 503, `"errors":[{"status":503`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.path, nil)
			if tc.token != "" {
				r.Header.Set("X-Auth-Token", tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantBody) || rec.Header().Get("WWW-Authenticate") != tc.wantWWWAuth {
				t.Errorf("got %d %s (WWW-Authenticate %q); want %d containing %s (%q)", rec.Code, rec.Body, rec.Header().Get("WWW-Authenticate"), tc.wantStatus, tc.wantBody, tc.wantWWWAuth)
			}
		})
	}
}
