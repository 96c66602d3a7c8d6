package openapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// errorGoldenPath is tests/blazar's pinned error answers, recorded from a
// real server.
var errorGoldenPath = filepath.Join("..", "blazar", "testdata", "errorbodies.golden")

// goldenCase is one block of the golden file:
//
//	### name
//	METHOD /path
//	Header: value        (request headers, optional)
//	> request body       (optional)
//	< status
//	< Header: value      (answer headers, optional)
//	< answer body
type goldenCase struct {
	name, method, path string
	header             http.Header
	body               string
	status             int
	respHeader         http.Header
	respBody           string
}

// placeholderUUID stands for the golden file's normalised "<uuid>".
const placeholderUUID = "00000000-0000-4000-8000-00000000abcd"

func parseErrorGolden(t *testing.T, text string) []goldenCase {
	t.Helper()
	var out []goldenCase
	for _, blk := range strings.Split(text, "\n\n") {
		lines := strings.Split(strings.Trim(blk, "\n"), "\n")
		if len(lines) < 4 || !strings.HasPrefix(lines[0], "### ") {
			continue
		}
		c := goldenCase{name: strings.TrimPrefix(lines[0], "### "), header: http.Header{}, respHeader: http.Header{}}
		var ok bool
		c.method, c.path, ok = strings.Cut(lines[1], " ")
		if !ok {
			t.Fatalf("%s: bad request line %q", c.name, lines[1])
		}
		c.path = strings.ReplaceAll(c.path, "<uuid>", placeholderUUID)
		i := 2
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "> ") && !strings.HasPrefix(lines[i], "< "); i++ {
			k, v, _ := strings.Cut(lines[i], ": ")
			c.header.Add(k, v)
		}
		if i < len(lines) && strings.HasPrefix(lines[i], "> ") {
			c.body = strings.TrimPrefix(lines[i], "> ")
			i++
		}
		if i+1 >= len(lines) {
			t.Fatalf("%s: no answer", c.name)
		}
		status, err := strconv.Atoi(strings.TrimPrefix(lines[i], "< "))
		if err != nil {
			t.Fatalf("%s: bad status line %q", c.name, lines[i])
		}
		c.status = status
		for i++; i < len(lines)-1; i++ {
			k, v, _ := strings.Cut(strings.TrimPrefix(lines[i], "< "), ": ")
			c.respHeader.Add(k, v)
		}
		c.respBody = strings.TrimPrefix(lines[len(lines)-1], "< ")
		if c.respBody == "<" {
			c.respBody = ""
		}
		out = append(out, c)
	}
	return out
}

// TestBlazarErrorGolden validates every /v1 answer of the golden error
// file against the description (placement's answers there belong to
// another API).
func TestBlazarErrorGolden(t *testing.T) {
	s := loadBlazar(t)
	raw, err := os.ReadFile(errorGoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	cases := parseErrorGolden(t, string(raw))
	ch := newChecker(t, s)
	n := 0
	for _, c := range cases {
		if !strings.HasPrefix(c.path, "/v1") {
			continue
		}
		n++
		ch.check(&exchange{name: c.name, method: c.method, path: c.path, header: c.header,
			reqBody: []byte(c.body), status: c.status, respHeader: c.respHeader, respBody: []byte(c.respBody),
			// The golden requests are wrong on purpose: only the answers
			// are held to the description.
			badRequest: true})
	}
	// The file holds some 180 /v1 cases; far fewer means the parser or the
	// file broke.
	if n < 150 {
		t.Fatalf("only %d /v1 cases parsed from %s", n, errorGoldenPath)
	}
	ch.summary("golden error answers")
}
