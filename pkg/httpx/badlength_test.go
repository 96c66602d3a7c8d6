package httpx

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListenerWithBadContentLength sends raw requests on one keep-alive
// connection: good ones with bodies pass through intact, and a request
// whose Content-Length is not an integer reaches the handler with the
// value under BadContentLengthHeader.
func TestListenerWithBadContentLength(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bad := r.Header.Get(BadContentLengthHeader); bad != "" {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "bad length "+bad)
			return
		}
		_, _ = io.WriteString(w, "body="+string(body))
	})}
	go func() { _ = srv.Serve(ListenerWithBadContentLength(l)) }()
	t.Cleanup(func() { srv.Close() })

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	send := func(raw string) (*http.Response, string) {
		t.Helper()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	// A body that looks like a request head must not be rewritten.
	trick := "X\r\nContent-Length: nope\r\n\r\n"
	resp, body := send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + itoa(len(trick)) + "\r\n\r\n" + trick)
	if resp.StatusCode != 200 || body != "body="+trick {
		t.Fatalf("good request: %d %q", resp.StatusCode, body)
	}
	resp, body = send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || body != "body=" {
		t.Fatalf("bodiless request: %d %q", resp.StatusCode, body)
	}
	resp, body = send("POST / HTTP/1.1\r\nHost: x\r\ncontent-length: hi mom\r\n\r\n{}")
	if resp.StatusCode != 400 || body != "bad length hi mom" {
		t.Fatalf("bad length: %d %q", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Errorf("the connection should be closed after a bad length")
	}
}

func TestBadLengthValues(t *testing.T) {
	for v, bad := range map[string]bool{"12": false, "0": false, " 7 ": false, "+1": true, "-1": true, "1.0": true, "": true, "x": true} {
		c := &badLenConn{}
		head := []byte("POST / HTTP/1.1\r\nContent-Length: " + v + "\r\n\r\n")
		out := string(c.rewriteHead(head))
		if got := strings.Contains(out, BadContentLengthHeader); got != bad {
			t.Errorf("Content-Length %q: rewritten=%v, want %v (%q)", v, got, bad, out)
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for n > 0 {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	return s
}
