package identity

import (
	"net/http"
	"strings"

	"github.com/leasehold/leasehold/pkg/auth"
)

// NoAuth authenticates without an identity service, failing closed: the
// X-Auth-Token must be "admin" (user admin, admin of project admin) or
// "user:project" (a member of project, with user and project non-empty).
// With such a token, X-User-Id and X-Project-Id rename the caller and
// X-Roles (comma-separated) replaces the roles, so that multi-tenancy is
// testable. Any other token, and no token, is Unauthorized.
type NoAuth struct{}

// Authenticate implements Authenticator.
func (NoAuth) Authenticate(r *http.Request) (*auth.Identity, error) {
	tok := r.Header.Get("X-Auth-Token")
	id := &auth.Identity{IsAdminProject: true}
	switch user, project, ok := strings.Cut(tok, ":"); {
	case tok == "admin":
		id.UserID, id.ProjectID, id.Roles = "admin", "admin", []string{"admin", "member", "reader"}
	case ok && user != "" && project != "" && !strings.Contains(project, ":"):
		id.UserID, id.ProjectID, id.Roles = user, project, []string{"member", "reader"}
		if user == "admin" {
			id.Roles = []string{"admin", "member", "reader"}
		}
	case tok == "":
		return nil, unauthorized("noauth: no X-Auth-Token")
	default:
		return nil, unauthorized(`noauth: the token is neither "admin" nor "user:project"`)
	}
	if u := r.Header.Get("X-User-Id"); u != "" {
		id.UserID = u
	}
	if p := r.Header.Get("X-Project-Id"); p != "" {
		id.ProjectID = p
	}
	if roles, ok := r.Header["X-Roles"]; ok {
		id.Roles = auth.SplitRoles(strings.Join(roles, ","))
	}
	id.UserName, id.ProjectName = id.UserID, id.ProjectID
	return id, nil
}
