package notify

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Host is one broker of a transport URL.
type Host struct {
	// Hostname and Port (5672 when the URL gives none).
	Hostname string
	Port     int
	// Username and Password ("" when the URL gives none: the broker's
	// guest account is used, as oslo.messaging's rabbit driver does).
	Username, Password string
}

// Addr is host:port.
func (h Host) Addr() string { return net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port)) }

// TransportURL is a parsed oslo.messaging transport URL:
//
//	rabbit://user:pass@host1:port1[,userN:passN@hostN:portN]/virtual_host?query
//
// The hosts are tried in order (the next one after a failure).
type TransportURL struct {
	// Scheme is the driver; only "rabbit" is served.
	Scheme string
	Hosts  []Host
	// VirtualHost is the URL's path unescaped ("/" when empty, RabbitMQ's
	// default vhost).
	VirtualHost string
	// TLS is set by ?ssl=1 (or true/yes/on).
	TLS bool
}

// ParseTransportURL parses s the way oslo.messaging does: the netloc is
// split on commas into hosts, each with optional credentials (split at
// the last "@", then the first ":") and an optional port (IPv6 hosts in
// brackets). Only the rabbit scheme is accepted.
func ParseTransportURL(s string) (*TransportURL, error) {
	if s == "" {
		return nil, fmt.Errorf("notify: no transport_url (set [DEFAULT] transport_url or [oslo_messaging_notifications] transport_url)")
	}
	// Split by hand: url.Parse refuses several hosts with credentials
	// in one authority.
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !isScheme(scheme) {
		return nil, fmt.Errorf("notify: transport_url has no scheme (want rabbit://user:pass@host:port/vhost)")
	}
	if scheme != "rabbit" {
		return nil, fmt.Errorf("notify: transport_url scheme %q is not served (only rabbit://)", scheme)
	}
	netloc, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		netloc, path = rest[:i], rest[i:]
	}
	var query string
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query = path[:i], path[i+1:]
	}
	t := &TransportURL{Scheme: scheme, VirtualHost: "/"}
	if strings.HasPrefix(path, "/") && len(path) > 1 {
		vh, err := url.PathUnescape(path[1:])
		if err != nil {
			return nil, fmt.Errorf("notify: transport_url virtual host: a %% not followed by two hex digits")
		}
		t.VirtualHost = vh
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("notify: transport_url query: not name=value pairs joined by &, %%-escaped")
	}
	switch strings.ToLower(q.Get("ssl")) {
	case "", "0", "false", "no", "off":
	case "1", "true", "yes", "on":
		t.TLS = true
	default:
		return nil, fmt.Errorf("notify: transport_url ssl: want true or false (1/0, yes/no, on/off)")
	}
	n := 0
	for part := range strings.SplitSeq(netloc, ",") {
		n++
		if part == "" {
			continue
		}
		h, err := parseHost(part, n)
		if err != nil {
			return nil, err
		}
		t.Hosts = append(t.Hosts, h)
	}
	if len(t.Hosts) == 0 {
		t.Hosts = []Host{{Hostname: "localhost", Port: 5672}}
	}
	return t, nil
}

// parseHost reads the n-th (from 1) broker of a transport URL. Its
// errors quote nothing of it: a password with an unescaped "/", ",", "?"
// or "#" splits the URL elsewhere than meant, and any quoted piece could
// be part of it.
func parseHost(part string, n int) (Host, error) {
	h := Host{Port: 5672}
	hostport := part
	if i := strings.LastIndexByte(part, '@'); i >= 0 {
		cred := part[:i]
		hostport = part[i+1:]
		user, pass, _ := strings.Cut(cred, ":")
		var err error
		if h.Username, err = url.PathUnescape(user); err != nil {
			return h, fmt.Errorf("notify: transport_url broker %d: a %% not followed by two hex digits in the user name", n)
		}
		if h.Password, err = url.PathUnescape(pass); err != nil {
			return h, fmt.Errorf("notify: transport_url broker %d: a %% not followed by two hex digits in the password", n)
		}
	}
	port := ""
	switch {
	case strings.HasPrefix(hostport, "["):
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return h, fmt.Errorf("notify: transport_url broker %d: a [ without ]", n)
		}
		h.Hostname = hostport[1:end]
		if rest := hostport[end+1:]; strings.HasPrefix(rest, ":") {
			port = rest[1:]
		}
	default:
		h.Hostname, port, _ = strings.Cut(hostport, ":")
	}
	if h.Hostname == "" {
		h.Hostname = "localhost"
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 {
			return h, fmt.Errorf("notify: transport_url broker %d: the port is not a number from 1 to 65535", n)
		}
		h.Port = p
	}
	return h, nil
}

// isScheme reports whether s is a URL scheme (a letter, then letters,
// digits, "+", "-" or "."): only then is it quoted in an error, since
// text before a "://" that is not a scheme may hold a password.
func isScheme(s string) bool {
	for i, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			continue
		}
		return false
	}
	return s != ""
}
