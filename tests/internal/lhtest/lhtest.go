// Package lhtest runs Leasehold in-process for the suites under tests/:
// the whole service (listeners, lease event manager, outbox worker) from
// a configuration, until the test ends, and one-call helpers for its
// Blazar API.
package lhtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/server"
)

// StartTimeout bounds the start and the stop of a server.
const StartTimeout = time.Minute

// Run builds the service from cfg and runs it (Run, not only its
// handler: lease events and outbox calls happen) until the test ends,
// when it is stopped and Run's error reported. It returns once the
// listeners accept connections; URL gives the main listener's base URL.
func Run(t testing.TB, cfg *config.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server Run: %v", err)
			}
		case <-time.After(StartTimeout):
			t.Errorf("the server did not stop within %s of its context ending", StartTimeout)
		}
	})
	select {
	case <-s.Ready:
	case err := <-done:
		t.Fatalf("server Run: %v", err)
	case <-time.After(StartTimeout):
		t.Fatalf("the server did not start listening within %s", StartTimeout)
	}
	return s
}

// URL is the base URL of s's main listener (Blazar under /v1).
func URL(s *server.Server) string { return "http://" + s.Addrs[0] }

// Client is the HTTP client of Call, with a bound on every request.
var Client = &http.Client{Timeout: 60 * time.Second}

// Call makes one Blazar API call on base (/v1 appended) with token tok
// and returns the status and body, decoding a 2xx body into out when out
// is not nil.
func Call(t testing.TB, base, method, path, tok string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+"/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", tok)
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// MustCall is Call, failing the test unless the status is want.
func MustCall(t testing.TB, base, method, path, tok string, want int, body, out any) string {
	t.Helper()
	code, b := Call(t, base, method, path, tok, body, out)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}
