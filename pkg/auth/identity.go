// Package auth carries the caller's identity through a request context.
// Authenticators (noauth now, Keystone later) fill it in; policy checks
// and services read it. Nothing else should parse auth headers.
package auth

import (
	"context"
	"slices"
	"strings"
)

// Identity is who is calling: what oslo.context calls a RequestContext.
type Identity struct {
	UserID    string
	ProjectID string
	Roles     []string
	// SystemScope is "all" when the token is system-scoped.
	SystemScope string

	// Names and domains, as Keystone's token shows them (empty in noauth).
	UserName          string
	UserDomainID      string
	UserDomainName    string
	ProjectName       string
	ProjectDomainID   string
	ProjectDomainName string
	// DomainID and DomainName are set for a domain-scoped token.
	DomainID   string
	DomainName string
	// IsAdminProject is Keystone's is_admin_project (true when Keystone
	// does not say, as oslo.context assumes).
	IsAdminProject bool
	// ServiceUserID, ServiceProjectID and ServiceRoles come from a valid
	// X-Service-Token that carries one of the configured service roles.
	ServiceUserID    string
	ServiceProjectID string
	ServiceRoles     []string
}

// HasRole reports whether the identity holds role (case-insensitive, as
// Keystone role names are matched by oslo.policy).
func (id *Identity) HasRole(role string) bool {
	if id == nil {
		return false
	}
	return slices.ContainsFunc(id.Roles, func(r string) bool { return strings.EqualFold(r, role) })
}

// IsAdmin reports whether the identity holds the admin role.
func (id *Identity) IsAdmin() bool { return id.HasRole("admin") }

// IsSystem reports whether the identity is system-scoped.
func (id *Identity) IsSystem() bool { return id != nil && id.SystemScope == "all" }

type ctxKey struct{}

// WithIdentity returns a context carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity in ctx, or nil.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}

// SplitRoles parses a comma-separated role header.
func SplitRoles(h string) []string {
	var out []string
	for _, r := range strings.Split(h, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}
