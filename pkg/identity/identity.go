// Package identity authenticates API requests: it turns the token a
// request carries into an auth.Identity, or refuses it. Two strategies:
//
//   - Keystone (auth_strategy = keystone): the token is validated with
//     Keystone as the configured service user (GET /v3/auth/tokens), the
//     answers are cached for at most token_cache_time and never past the
//     token's expiry, and concurrent requests with one new token make one
//     Keystone call. A token Keystone does not know (invalid, expired,
//     revoked) is errs.Unauthorized; Keystone unreachable or failing is
//     errs.Unavailable, never a pass.
//   - NoAuth (auth_strategy = noauth): for development and tests, fail
//     closed: token "admin" is the admin of project admin, "user:project"
//     a member of project; any other token, and no token, is refused.
//
// Each API renders the errors in its own body; Challenge gives the
// WWW-Authenticate value a 401 carries.
package identity

import (
	"net"
	"net/http"
	"strings"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Authenticator turns a request's credentials into an identity. It
// returns an *errs.Error of kind Unauthorized (no or bad credentials) or
// Unavailable (the identity service cannot answer now).
type Authenticator interface {
	Authenticate(r *http.Request) (*auth.Identity, error)
}

// Challenger is implemented by authenticators whose 401 answers carry a
// WWW-Authenticate header; Challenge returns its value.
type Challenger interface {
	Challenge() string
}

// MsgUnauthorized is the message keystonemiddleware gives every 401.
const MsgUnauthorized = "The request you have made requires authentication."

func unauthorized(detail string) *errs.Error {
	return &errs.Error{Kind: errs.Unauthorized, Msg: MsgUnauthorized, Detail: detail}
}

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections only from this machine. An empty host (all interfaces) or
// a host name other than localhost is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
