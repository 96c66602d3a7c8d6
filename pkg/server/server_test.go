package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
)

// startServer builds the whole service on a fresh SQLite database, runs
// it on two loopback listeners (main and Placement) and stops it at the
// end of the test.
func startServer(t *testing.T) *Server { return startServerWith(t, nil) }

// startServerWith is startServer with the configuration changed by edit
// first.
func startServerWith(t *testing.T, edit func(*config.Config)) *Server {
	t.Helper()
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
	cfg.Listen, cfg.PlacementListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Auth = config.AuthNoAuth
	if edit != nil {
		edit(cfg)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not return after its context ended")
		}
	})
	select {
	case <-s.Ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the server did not start listening")
	}
	return s
}

// TestBareLFRequestsAnswered: a request whose head ends its lines with a
// bare LF (which Go's HTTP server accepts) gets an answer on both
// listeners, with and without a body.
func TestBareLFRequestsAnswered(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		name, addr, req, want string
	}{
		{"main GET", s.Addrs[0], "GET /healthcheck HTTP/1.1\nHost: x\n\n", "HTTP/1.1 200"},
		{"main POST", s.Addrs[0], "POST /v1/leases HTTP/1.1\nHost: x\nX-Auth-Token: admin\nContent-Type: application/json\nContent-Length: 2\n\n{}", "HTTP/1.1 400"},
		{"placement GET", s.Addrs[1], "GET / HTTP/1.1\nHost: x\n\n", "HTTP/1.1 200"},
		{"placement bad length", s.Addrs[1], "POST /resource_providers HTTP/1.1\nHost: x\nX-Auth-Token: admin\nContent-Length: hi mom\n\n", "HTTP/1.1 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if !strings.HasPrefix(line, tc.want) {
				t.Errorf("answer %q, want %q", line, tc.want)
			}
		})
	}
}

// TestRoutesOnce: each API answers on its paths once wired, unknown paths
// get the 404 body, and the composition root's services are reachable.
func TestRoutesOnce(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		url    string
		status int
	}{
		{"http://" + s.Addrs[0] + "/v1/leases", 200},
		{"http://" + s.Addrs[0] + "/v1/os-hosts", 200},
		{"http://" + s.Addrs[0] + "/v1/floatingips", 200},
		{"http://" + s.Addrs[0] + "/placement/resource_providers", 200},
		{"http://" + s.Addrs[1] + "/resource_providers", 200},
		{"http://" + s.Addrs[0] + "/nowhere", 404},
		{"http://" + s.Addrs[0] + "/healthcheck", 200},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		req.Header.Set("X-Auth-Token", "admin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s = %d, want %d", tc.url, resp.StatusCode, tc.status)
		}
	}
	if s.Hosts == nil || s.Leases == nil || s.Events == nil || s.Outbox == nil {
		t.Error("a service of the composition root is missing")
	}
}
