// Package keystonetest is an in-process stand-in for the two Keystone
// calls pkg/identity makes: the service user's password login (POST
// /v3/auth/tokens, answering with a catalog) and token validation (GET
// /v3/auth/tokens?nocatalog). It serves unit tests of the cache and
// single-flight logic and in-process benchmarks with many distinct
// tokens; tests/keystone runs the real Keystone.
package keystonetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ServiceToken is the token the service user gets at login.
const ServiceToken = "service-token"

// Server is the stand-in Keystone.
type Server struct {
	*httptest.Server
	validations atomic.Int64
	logins      atomic.Int64

	mu     sync.Mutex
	tokens map[string]map[string]any // token → its "token" document
	// AcceptPrefix, when set, makes every token with this prefix valid
	// (user and project named after the token), for benchmarks with
	// thousands of distinct tokens.
	acceptPrefix string
	acceptRoles  []string
	down         bool
	gate         chan struct{}
	entered      chan struct{}
}

// New starts a stand-in Keystone; Close stops it.
func New() *Server {
	s := &Server{tokens: map[string]map[string]any{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	s.tokens[ServiceToken] = Token("svc-user", "service-project", time.Now().Add(time.Hour), "service")
	return s
}

// AuthURL is the identity endpoint to configure as auth_url.
func (s *Server) AuthURL() string { return s.URL + "/v3" }

// Token is the "token" document Keystone gives for a project-scoped
// token of user in project (no project for ""), with roles.
func Token(user, project string, expires time.Time, roles ...string) map[string]any {
	rs := []map[string]string{}
	for _, r := range roles {
		rs = append(rs, map[string]string{"id": r + "-id", "name": r})
	}
	doc := map[string]any{
		"expires_at": expires.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": user, "name": user + "-name", "domain": map[string]string{"id": "default", "name": "Default"}},
		"roles":      rs,
	}
	if project != "" {
		doc["project"] = map[string]any{"id": project, "name": project + "-name", "domain": map[string]string{"id": "default", "name": "Default"}}
	}
	return doc
}

// Add makes tok valid with the given document.
func (s *Server) Add(tok string, doc map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[tok] = doc
}

// AcceptPrefix makes every token starting with prefix valid: user and
// project are the token, with roles, expiring in an hour.
func (s *Server) AcceptPrefix(prefix string, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acceptPrefix, s.acceptRoles = prefix, roles
}

// Revoke makes tok invalid (404).
func (s *Server) Revoke(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
}

// SetDown makes every call answer 503 (true) or work again (false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Hold makes validations wait until the returned release is called; each
// one first sends on entered.
func (s *Server) Hold() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.entered = make(chan struct{}), make(chan struct{}, 64)
	gate := s.gate
	var once sync.Once
	return s.entered, func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// Validations is the number of GET /v3/auth/tokens calls served.
func (s *Server) Validations() int64 { return s.validations.Load() }

// Logins is the number of service-user logins served.
func (s *Server) Logins() int64 { return s.logins.Load() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down, gate, entered := s.down, s.gate, s.entered
	s.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v3/auth/tokens":
		s.logins.Add(1)
		doc := Token("svc-user", "service-project", time.Now().Add(time.Hour), "service")
		doc["catalog"] = []any{map[string]any{"type": "identity", "name": "keystone", "endpoints": []any{
			map[string]any{"interface": "internal", "region": "RegionOne", "region_id": "RegionOne", "url": s.URL + "/v3"},
			map[string]any{"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": s.URL + "/v3"},
		}}}
		w.Header().Set("X-Subject-Token", ServiceToken)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": doc})
	case r.Method == "GET" && r.URL.Path == "/v3/auth/tokens":
		s.validations.Add(1)
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
		if r.URL.RawQuery != "nocatalog" {
			http.Error(w, "want ?nocatalog", http.StatusBadRequest)
			return
		}
		subject := r.Header.Get("X-Subject-Token")
		s.mu.Lock()
		_, svcOK := s.tokens[r.Header.Get("X-Auth-Token")]
		doc, ok := s.tokens[subject]
		if !ok && s.acceptPrefix != "" && strings.HasPrefix(subject, s.acceptPrefix) {
			doc, ok = Token(subject, subject, time.Now().Add(time.Hour), s.acceptRoles...), true
		}
		s.mu.Unlock()
		if !svcOK {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":404,"title":"Not Found","message":"Could not find token"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"token": doc})
	default:
		http.NotFound(w, r)
	}
}
