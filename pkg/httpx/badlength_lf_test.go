package httpx

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// echoServer serves, through ListenerWithBadContentLength, a handler that
// answers "body=<body>", or 400 "bad length <value>" for a renamed
// Content-Length. It returns the address.
func echoServer(t *testing.T) string {
	t.Helper()
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
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// TestBadLengthListenerLineEndings: net/http accepts request heads whose
// lines end in a bare "\n", or in a mix of "\n" and "\r\n"; through the
// rewriting listener each such request must still get its answer (the
// rewriter once waited for "\r\n\r\n" forever), body intact, and a bad
// Content-Length in such a head must still reach the handler renamed.
// Every exchange is bounded by a deadline on the connection.
func TestBadLengthListenerLineEndings(t *testing.T) {
	addr := echoServer(t)
	type answer struct {
		status int
		body   string
	}
	for _, tc := range []struct {
		name string
		raw  string // one or more requests, sent at once
		want []answer
	}{
		{"GET, LF only", "GET / HTTP/1.1\nHost: x\n\n", []answer{{200, "body="}}},
		{"PUT with a body, LF only", "PUT / HTTP/1.1\nHost: x\nContent-Length: 7\n\n{\"a\":1}", []answer{{200, `body={"a":1}`}}},
		{"POST, mixed endings, LF blank line", "POST / HTTP/1.1\r\nHost: x\nContent-Length: 2\r\n\n{}", []answer{{200, "body={}"}}},
		{"GET, mixed endings, CRLF blank line", "GET / HTTP/1.1\nHost: x\n\r\n", []answer{{200, "body="}}},
		{"keep-alive: body then GET, LF only", "PUT / HTTP/1.1\nHost: x\nContent-Length: 4\n\n\n\n\nxGET / HTTP/1.1\nHost: x\n\n",
			[]answer{{200, "body=\n\n\nx"}, {200, "body="}}},
		{"keep-alive: CRLF then LF", "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nokGET / HTTP/1.1\nHost: x\n\n",
			[]answer{{200, "body=ok"}, {200, "body="}}},
		{"bad Content-Length, LF only", "POST / HTTP/1.1\nHost: x\nContent-Length: abc\n\n{}", []answer{{400, "bad length abc"}}},
		{"bad Content-Length, mixed endings", "POST / HTTP/1.1\nHost: x\r\ncontent-length: 1.5\n\r\n{}", []answer{{400, "bad length 1.5"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tc.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			for i, want := range tc.want {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				if got := (answer{resp.StatusCode, string(b)}); got != want {
					t.Errorf("answer %d: %+v, want %+v", i, got, want)
				}
			}
		})
	}
}

// TestHeadEnd: where a request head ends, for every line-ending mix and
// wherever the search resumes.
func TestHeadEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody", 27},
		{"GET / HTTP/1.1\nHost: x\n\nbody", 24},
		{"GET / HTTP/1.1\r\nHost: x\n\nbody", 25},
		{"GET / HTTP/1.1\nHost: x\r\n\nbody", 25},
		{"GET / HTTP/1.1\nHost: x\n\r\nbody", 25},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r", -1},
		{"GET / HTTP/1.1\r\nHost: x\r\n", -1},
		{"GET / HTTP/1.1\nHost: x\n", -1},
		{"GET / HTTP/1.1\nHost: x\n\rX\n\n", 27},
		{"", -1},
	} {
		b := []byte(tc.in)
		if got := headEnd(b, 0); got != tc.want {
			t.Errorf("headEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
		// The rewriter resumes two bytes before the end of what it
		// searched in vain.
		for n := range len(b) {
			if headEnd(b[:n], 0) >= 0 {
				break
			}
			if got := headEnd(b, max(0, n-2)); got != tc.want {
				t.Errorf("headEnd(%q) resumed after %d bytes = %d, want %d", tc.in, n, got, tc.want)
			}
		}
	}
}

// TestBadLenConnRapid: a stream of requests with any mix of line endings,
// bodies that look like heads, cut into arbitrary reads, comes out of the
// rewriter byte for byte, except that the first bad Content-Length is
// renamed (and everything after it passes through untouched).
func TestBadLenConnRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var in, want bytes.Buffer
		bad := false
		for i := range rapid.IntRange(1, 5).Draw(rt, "requests") {
			eol := func(what string) string {
				return rapid.SampledFrom([]string{"\r\n", "\n"}).Draw(rt, fmt.Sprintf("eol %d %s", i, what))
			}
			body := rapid.StringOf(rapid.SampledFrom([]rune("ab\r\n:{}"))).Draw(rt, fmt.Sprintf("body %d", i))
			if rapid.Bool().Draw(rt, fmt.Sprintf("head-like body %d", i)) {
				body += "X" + eol("body") + "Content-Length: nope" + eol("body") + eol("body")
			}
			length := fmt.Sprint(len(body))
			badHere := !bad && rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("bad %d", i)) == 0
			if badHere {
				length = rapid.SampledFrom([]string{"x", "-1", "+3", "1.0", ""}).Draw(rt, fmt.Sprintf("bad value %d", i))
			}
			name := rapid.SampledFrom([]string{"Content-Length", "content-length", "CONTENT-LENGTH"}).Draw(rt, fmt.Sprintf("name %d", i))
			h := "PUT /r/" + fmt.Sprint(i) + " HTTP/1.1" + eol("request line") + "Host: x" + eol("host") +
				name + ": " + length + eol("length") + "X-Other: y" + eol("other") + eol("blank")
			in.WriteString(h + body)
			if badHere {
				want.WriteString(strings.Replace(h, name, BadContentLengthHeader, 1) + body)
				bad = true
				continue
			}
			want.WriteString(h + body)
		}
		c := &badLenConn{}
		var out bytes.Buffer
		rest := in.Bytes()
		for len(rest) > 0 {
			n := rapid.IntRange(1, len(rest)).Draw(rt, "read size")
			c.out = nil
			c.feed(rest[:n])
			out.Write(c.out)
			rest = rest[n:]
		}
		if got := out.String(); got != want.String() {
			rt.Fatalf("rewriter output\n%q\nwant\n%q", got, want.String())
		}
	})
}
