package blazar

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
)

// withNoAuthToken gives a test request without a token the noauth token
// of the caller its headers name: "user:project" when X-User-Id or
// X-Project-Id is set, else "admin". The golden transcripts record the
// steps' own headers, so they do not change.
func withNoAuthToken(r *http.Request) *http.Request {
	if r.Header.Get("X-Auth-Token") != "" {
		return r
	}
	u, p := r.Header.Get("X-User-Id"), r.Header.Get("X-Project-Id")
	switch {
	case u == "" && p == "":
		r.Header.Set("X-Auth-Token", "admin")
	default:
		if u == "" {
			u = "user"
		}
		if p == "" {
			p = "project"
		}
		r.Header.Set("X-Auth-Token", u+":"+p)
	}
	return r
}

// authenticatorFunc adapts a function to Authenticator.
type authenticatorFunc func(r *http.Request) (*auth.Identity, error)

func (f authenticatorFunc) Authenticate(r *http.Request) (*auth.Identity, error) { return f(r) }

type challenging struct{ authenticatorFunc }

func (challenging) Challenge() string { return `Keystone uri="http://keystone.example/identity"` }

func TestAuthMiddleware(t *testing.T) {
	var seen *auth.Identity
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = auth.FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	refuse := func(k errs.Kind) authenticatorFunc {
		return func(*http.Request) (*auth.Identity, error) { return nil, &errs.Error{Kind: k, Msg: "m"} }
	}
	tests := []struct {
		name        string
		authn       Authenticator
		token       string
		wantStatus  int
		wantBody    string
		wantWWWAuth string
		wantUser    string
	}{
		{"noauth admin", NoAuth{}, "admin", 204, "", "", "admin"},
		{"noauth member", NoAuth{}, "u1:p1", 204, "", "", "u1"},
		{"noauth no token", NoAuth{}, "", 401, httpx.UnauthorizedBody, "", ""},
		{"noauth other token", NoAuth{}, "anything-at-all", 401, httpx.UnauthorizedBody, "", ""},
		{"keystone refuses", challenging{refuse(errs.Unauthorized)}, "x", 401, httpx.UnauthorizedBody, `Keystone uri="http://keystone.example/identity"`, ""},
		{"keystone unavailable", challenging{refuse(errs.Unavailable)}, "x", 503,
			`{"error_code":503,"error_message":"m","error_name":503}`, "", ""},
		{"nil identity, nil error", authenticatorFunc(func(*http.Request) (*auth.Identity, error) { return nil, nil }), "x", 503,
			`{"error_code":503,"error_message":"The request could not be authenticated.","error_name":503}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			r := httptest.NewRequest("GET", "/leases", nil)
			if tc.token != "" {
				r.Header.Set("X-Auth-Token", tc.token)
			}
			rec := httptest.NewRecorder()
			authMiddleware(tc.authn, next).ServeHTTP(rec, r)
			if rec.Code != tc.wantStatus || rec.Body.String() != tc.wantBody || rec.Header().Get("WWW-Authenticate") != tc.wantWWWAuth {
				t.Errorf("got %d %q WWW-Authenticate %q; want %d %q %q", rec.Code, rec.Body, rec.Header().Get("WWW-Authenticate"), tc.wantStatus, tc.wantBody, tc.wantWWWAuth)
			}
			got := ""
			if seen != nil {
				got = seen.UserID
			}
			if diff := cmp.Diff(tc.wantUser, got); diff != "" {
				t.Errorf("identity passed on (-want +got): %s", diff)
			}
		})
	}
}
