package httpx

import (
	"bytes"
	"net"
	"strconv"
	"sync"
)

// BadContentLengthHeader carries, to the handlers, a Content-Length
// request header whose value is not a decimal integer. Go's HTTP server
// answers such a request itself with a bare "400 Bad Request"; OpenStack
// services answer with their own error body ("content-length header must
// be an integer"), so ListenerWithBadContentLength renames the header on
// the wire before the server parses it. The name has the same length as
// "Content-Length".
const BadContentLengthHeader = "X-Bad-Cont-Len"

// maxHeadBytes bounds the request head the rewriter buffers; longer heads
// are passed through untouched (the server rejects them anyway).
const maxHeadBytes = 1 << 20

// ListenerWithBadContentLength wraps l so that, in every request head on
// its connections, a Content-Length header whose value is not a plain
// non-negative decimal integer is renamed to BadContentLengthHeader. The
// request then reaches the handler without a body; the handler must
// answer with "Connection: close" since the body bytes are left unread.
// Request bodies are skipped by their Content-Length; after a chunked
// request or a renamed header the connection is passed through as is.
func ListenerWithBadContentLength(l net.Listener) net.Listener { return &badLenListener{l} }

type badLenListener struct{ net.Listener }

func (l *badLenListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &badLenConn{Conn: c}, nil
}

// badLenConn rewrites the request heads read from the connection.
type badLenConn struct {
	net.Conn
	mu      sync.Mutex
	head    []byte // bytes of the current head not yet complete
	scanned int    // head[:scanned] holds no end of head (see headEnd)
	out     []byte // transformed bytes ready for the reader
	body    int64  // body bytes to pass through before the next head
	through bool   // pass everything through from now on
	buf     []byte // read buffer, reused
	outBuf  []byte // c.out's buffer, reused
}

func (c *badLenConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.out) == 0 {
		if c.through && len(c.head) == 0 {
			return c.Conn.Read(p)
		}
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		buf := c.buf[:len(p)]
		n, err := c.Conn.Read(buf)
		if n > 0 {
			// c.out is empty here (the loop's condition): refill its
			// buffer from the start.
			c.out = c.outBuf[:0]
			c.feed(buf[:n])
			c.outBuf = c.out[:0]
		}
		if len(c.out) > 0 {
			break
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				// A deadline (net/http aborting its background read):
				// keep the partial head for the next Read; handing it out
				// now would parse the rest of the head as a new one.
				return 0, err
			}
			if len(c.head) > 0 {
				// Give the server what we have; it will fail it.
				c.out, c.head, c.scanned = c.head, nil, 0
				break
			}
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// feed processes newly read bytes.
func (c *badLenConn) feed(b []byte) {
	for len(b) > 0 {
		switch {
		case c.through:
			c.out = append(c.out, b...)
			return
		case c.body > 0:
			n := int64(len(b))
			if n > c.body {
				n = c.body
			}
			c.out = append(c.out, b[:n]...)
			c.body -= n
			b = b[n:]
		default:
			c.head = append(c.head, b...)
			b = nil
			end := headEnd(c.head, c.scanned)
			if end < 0 {
				if len(c.head) > maxHeadBytes {
					c.out = append(c.out, c.head...)
					c.head, c.through = nil, true
				}
				// The blank line may straddle the next read: look again
				// from the last two bytes.
				c.scanned = max(0, len(c.head)-2)
				return
			}
			head, rest := c.head[:end], c.head[end:]
			c.head, c.scanned = nil, 0
			c.out = append(c.out, c.rewriteHead(head)...)
			b = rest
		}
	}
}

// headEnd is the length of the request head at the start of b, up to and
// including the empty line that ends it, or -1 if that line has not
// arrived yet. Like net/http it takes a bare "\n" as a line end as well
// as "\r\n", in any mix. The search starts at from, a position where no
// line end can begin a blank line before it.
func headEnd(b []byte, from int) int {
	for i := from; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

// rewriteHead renames a bad Content-Length in one request head and sets
// up the body skipping for the next one.
func (c *badLenConn) rewriteHead(head []byte) []byte {
	// Lines end in "\n" or "\r\n"; TrimSpace drops a value's "\r".
	lines := bytes.Split(head, []byte("\n"))
	var length int64
	for i, line := range lines {
		if i == 0 {
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Transfer-Encoding")):
			c.through = true
		case len(name) == len("Content-Length") && bytes.EqualFold(name, []byte("Content-Length")):
			v := bytes.TrimSpace(value)
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 || len(v) == 0 || v[0] == '+' || v[0] == '-' {
				copy(line, BadContentLengthHeader)
				c.through = true
				continue
			}
			length = n
		}
	}
	if !c.through {
		c.body = length
	}
	return head
}
