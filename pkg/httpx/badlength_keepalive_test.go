package httpx

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestBadLengthListenerKeepAlive drives many keep-alive connections with
// request bodies and idle gaps through the rewriting listener. The gaps
// make net/http start and abort its background read between requests,
// the path where a partial request head once got handed out early and
// hung the connection; every request must come back, body intact.
func TestBadLengthListenerKeepAlive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(append([]byte(r.Method+" "), b...))
	})}
	go func() { _ = srv.Serve(ListenerWithBadContentLength(l)) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + l.Addr().String()

	const clients, perClient = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			for i := range perClient {
				method, body := "GET", ""
				if i%2 == 0 {
					method, body = "PUT", fmt.Sprintf(`{"client": %d, "i": %d, "pad": %q}`, g, i, bytes.Repeat([]byte("x"), rng.Intn(3000)))
				}
				req, _ := http.NewRequest(method, base+"/x", bytes.NewBufferString(body))
				resp, err := c.Do(req)
				if err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", g, i, err)
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := method + " " + body; string(got) != want {
					errs <- fmt.Errorf("client %d request %d: answer %.60q, want %.60q", g, i, got, want)
					return
				}
				if rng.Intn(3) == 0 {
					time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBadLengthConnAbortedReadKeepsHead is the aborted background read
// made deterministic: a deadline fires while only part of a request head
// has arrived. The partial head must stay buffered (Read reports the
// timeout and no bytes); handing it out would make the rewriter take the
// rest of the head and the body for a new head, and since a JSON body has
// no blank line it would wait for more bytes forever.
func TestBadLengthConnAbortedReadKeepsHead(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := &badLenConn{Conn: server}
	defer c.Close()

	part1 := "PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n"
	part2 := "\r\n{\"a\":1}"
	go func() { _, _ = client.Write([]byte(part1)) }()

	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	p := make([]byte, 1) // net/http's background read asks for one byte
	n, err := c.Read(p)
	if ne, ok := err.(net.Error); n != 0 || !ok || !ne.Timeout() {
		t.Fatalf("aborted read with a partial head = (%d, %v), want (0, a timeout)", n, err)
	}

	go func() { _, _ = client.Write([]byte(part2)) }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	want := part1 + part2
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the request after the aborted read: %v (got %q)", err, got)
	}
	if string(got) != want {
		t.Errorf("request bytes = %q, want %q", got, want)
	}
}
