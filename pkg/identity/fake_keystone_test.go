package identity

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeKeystone speaks the two calls the validator makes: the service
// user's password login (POST /v3/auth/tokens, with a catalog) and token
// validation (GET /v3/auth/tokens?nocatalog). It is for the cache and
// single-flight logic; tests/keystone runs the real Keystone.
type fakeKeystone struct {
	srv       *httptest.Server
	validates atomic.Int64
	logins    atomic.Int64

	mu      sync.Mutex
	tokens  map[string]map[string]any // token → its "token" document
	down    bool                      // answer 503 to everything
	gate    chan struct{}             // when set, validations wait on it
	entered chan struct{}             // a validation reached the gate
}

func newFakeKeystone(t *testing.T) *fakeKeystone {
	f := &fakeKeystone{tokens: map[string]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.tokens["service-token"] = tokenDoc("svc-user", "service-project", time.Now().Add(time.Hour), "service")
	return f
}

func tokenDoc(user, project string, expires time.Time, roles ...string) map[string]any {
	var rs []map[string]string
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

func (f *fakeKeystone) add(tok string, doc map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[tok] = doc
}

func (f *fakeKeystone) revoke(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, tok)
}

func (f *fakeKeystone) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeKeystone) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	down, gate, entered := f.down, f.gate, f.entered
	f.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v3/auth/tokens":
		f.logins.Add(1)
		doc := tokenDoc("svc-user", "service-project", time.Now().Add(time.Hour), "service")
		doc["catalog"] = []any{map[string]any{"type": "identity", "name": "keystone", "endpoints": []any{
			map[string]any{"interface": "internal", "region": "RegionOne", "region_id": "RegionOne", "url": f.srv.URL + "/v3"},
		}}}
		w.Header().Set("X-Subject-Token", "service-token")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": doc})
	case r.Method == "GET" && r.URL.Path == "/v3/auth/tokens":
		f.validates.Add(1)
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
		if r.URL.RawQuery != "nocatalog" {
			http.Error(w, "want ?nocatalog", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		_, svcOK := f.tokens[r.Header.Get("X-Auth-Token")]
		doc, ok := f.tokens[r.Header.Get("X-Subject-Token")]
		f.mu.Unlock()
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
