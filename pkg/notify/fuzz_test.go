package notify

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseTransportURL: any text is a transport URL or an error, never a
// panic; an accepted URL has at least one broker, each with a host name and
// a port in 1-65535, and writing it back out reads as the same URL.
func FuzzParseTransportURL(f *testing.F) {
	for _, s := range []string{
		"rabbit://", "rabbit://openstack:s3cr%40t@ctl1:5673/", "rabbit://u:p@h1:5672,u2:p:2@h2,h3:5674/blazar?ssl=1",
		"rabbit://u:p@[::1]:5680/%2Fvh", "rabbit://h1/?ssl=maybe", "rabbit://[::1/", "rabbit://h1:0/", "kafka://h:9092",
		"ctl1:5672", "rabbit://,,@,:/%zz?ssl=%zz#x", "rabbit://u:p/ss@h/", "://u:p@h", "rabbit://a]b:65535?ssl=on#f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseTransportURL(s)
		if err != nil {
			return
		}
		if u.Scheme != "rabbit" || len(u.Hosts) == 0 || u.VirtualHost == "" {
			t.Fatalf("%q: accepted as %+v", s, u)
		}
		for _, h := range u.Hosts {
			if h.Hostname == "" || h.Port < 1 || h.Port > 65535 {
				t.Fatalf("%q: broker %+v", s, h)
			}
		}
		again, err := ParseTransportURL(formatTransportURL(u))
		if err != nil {
			t.Fatalf("%q written as %q: %v", s, formatTransportURL(u), err)
		}
		if diff := cmp.Diff(u, again); diff != "" {
			t.Fatalf("%q written as %q reads differently (-first +again):\n%s", s, formatTransportURL(u), diff)
		}
	})
}

// FuzzTransportURLSecrets: an error about a transport URL never shows its
// password, not even a piece of it, however the password breaks the URL
// (an unescaped "/", ",", "?", "#" or "%" in it splits the URL elsewhere
// than meant). The password's ordinary characters are all '^', which the
// rest of the URL and the error messages never hold, so any '^' in the
// error text came from the password; its URL-structural characters are
// kept so that the fuzzer explores the ways it can break the URL.
func FuzzTransportURLSecrets(f *testing.F) {
	for _, s := range [][4]string{
		{"rabbit", "u", "pass", "h:5672/"}, {"rabbit", "u", "p/ss", "h/"}, {"rabbit", "u", "p,ss", "h"},
		{"rabbit", "u", "p/%zz", "h"}, {"rabbit", "u", "5672,[x/y", "h"}, {"rabbit", "u", "pw?ssl=x", "h"},
		{"rabbit", "u", "p%zz", "h"}, {"", "u", "pw", "h"}, {"amqp", "u", "pw", "h"}, {"rabbit", "u%zz", "pw", "h"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		var marked strings.Builder
		for _, c := range []byte(pass) {
			if strings.IndexByte(",/?#@:%[]=&;", c) >= 0 {
				marked.WriteByte(c)
			} else {
				marked.WriteByte('^')
			}
		}
		if !strings.Contains(marked.String(), "^") {
			return
		}
		clean := func(s string) string { return strings.ReplaceAll(s, "^", "") }
		s := clean(scheme) + "://" + clean(user) + ":" + marked.String() + "@" + clean(rest)
		_, err := ParseTransportURL(s)
		if err != nil && strings.Contains(err.Error(), "^") {
			t.Fatalf("%q: error shows the password: %v", s, err)
		}
	})
}

// formatTransportURL writes u back as a transport URL (every broker with
// its port, names and the virtual host %-escaped).
func formatTransportURL(u *TransportURL) string {
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	for i, h := range u.Hosts {
		if i > 0 {
			b.WriteByte(',')
		}
		if h.Username != "" || h.Password != "" {
			b.WriteString(escapeAll(h.Username) + ":" + escapeAll(h.Password) + "@")
		}
		host := h.Hostname
		if strings.Contains(host, ":") || strings.HasPrefix(host, "[") {
			host = "[" + host + "]"
		}
		b.WriteString(host + ":" + strconv.Itoa(h.Port))
	}
	b.WriteString("/" + escapeAll(u.VirtualHost))
	if u.TLS {
		b.WriteString("?ssl=1")
	}
	return b.String()
}

// escapeAll %-escapes every byte but letters and digits.
func escapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
