package db

import (
	"fmt"
	"net/url"
	"strings"
)

// Dialect names the storage engine behind a URL.
type Dialect string

// Supported dialects.
const (
	SQLite Dialect = "sqlite"
	MySQL  Dialect = "mysql"
)

// Target is a parsed database URL: the dialect and the driver DSN.
type Target struct {
	Dialect Dialect
	DSN     string
	// Path is the SQLite file ("" for MySQL, ":memory:" for in-memory).
	Path string
}

// ParseURL accepts the URLs operators already have in their OpenStack
// configs and turns them into a driver DSN:
//
//	sqlite:///relative.db   sqlite:////abs/path.db   sqlite://  (in memory)
//	mysql+pymysql://user:pw@host:port/db?charset=utf8   mysql://…
//
// A bare path (no scheme) is taken as a SQLite file.
func ParseURL(raw string) (Target, error) {
	if raw == "" {
		return Target{}, fmt.Errorf("database URL is empty")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return sqliteTarget(raw), nil
	}
	base, _, _ := strings.Cut(scheme, "+") // mysql+pymysql → mysql
	switch base {
	case "sqlite", "sqlite3":
		// SQLAlchemy form: sqlite:///rel.db (three slashes) is relative,
		// sqlite:////abs.db (four) is absolute; rest starts after "//".
		path := strings.TrimPrefix(rest, "/")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		if path == "" || path == ":memory:" {
			return sqliteTarget(":memory:"), nil
		}
		return sqliteTarget(path), nil
	case "mysql", "mariadb":
		return mysqlTarget(rest)
	default:
		return Target{}, fmt.Errorf("database URL %q: unsupported scheme %q (use sqlite:// or mysql+pymysql://)", redact(raw), scheme)
	}
}

func sqliteTarget(path string) Target {
	// WAL lets readers run beside the one writer; immediate transactions
	// take the write lock at BEGIN so two writers never deadlock on a
	// lock upgrade; busy_timeout makes the second writer wait, not fail.
	// synchronous=FULL: a commit is on disk when it returns. The page
	// cache (per connection) holds a Placement working set; temporary
	// b-trees and the savepoint journals of the group writer stay in
	// memory.
	params := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=cache_size(-8192)&_pragma=temp_store(MEMORY)&_txlock=immediate&_time_format=sqlite"
	if path == ":memory:" {
		return Target{Dialect: SQLite, Path: path, DSN: "file::memory:?cache=shared&" + params}
	}
	return Target{Dialect: SQLite, Path: path, DSN: "file:" + path + "?_pragma=journal_mode(WAL)&" + params}
}

func mysqlTarget(rest string) (Target, error) {
	u, err := url.Parse("mysql://" + rest)
	if err != nil {
		return Target{}, fmt.Errorf("database URL: %w", err)
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	if dbname == "" {
		return Target{}, fmt.Errorf("database URL mysql://%s: no database name", u.Host)
	}
	user := u.User.Username()
	pw, _ := u.User.Password()
	cred := user
	if pw != "" {
		cred += ":" + pw
	}
	q := u.Query()
	addr := "tcp(" + u.Host + ")"
	if sock := q.Get("unix_socket"); sock != "" {
		addr = "unix(" + sock + ")"
	} else if u.Port() == "" && u.Host != "" {
		addr = "tcp(" + u.Host + ":3306)"
	} else if u.Host == "" {
		addr = "tcp(127.0.0.1:3306)"
	}
	// charset=utf8 in oslo URLs means MySQL's 3-byte utf8; we always use
	// utf8mb4 so any Unicode name round-trips.
	params := url.Values{}
	params.Set("parseTime", "true")
	params.Set("loc", "UTC")
	params.Set("charset", "utf8mb4")
	params.Set("collation", "utf8mb4_bin")
	params.Set("interpolateParams", "true")
	for k, vs := range q {
		switch k {
		case "charset", "unix_socket", "plugin", "read_default_file":
			continue
		}
		for _, v := range vs {
			params.Set(k, v)
		}
	}
	return Target{Dialect: MySQL, DSN: cred + "@" + addr + "/" + dbname + "?" + params.Encode()}, nil
}

// redact hides a password in a URL for error messages and logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	return u.String()
}

// Redact is redact for callers that log the configured URL.
func Redact(raw string) string { return redact(raw) }
