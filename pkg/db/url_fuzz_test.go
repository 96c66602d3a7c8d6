package db

import "testing"

// FuzzParseURL: a database URL of any content becomes a target or an
// error, never a panic.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite:///leasehold.db", "sqlite:////abs/x.db", "sqlite://", "sqlite:///:memory:", "x.db",
		"mysql+pymysql://user:secret@127.0.0.1:3307/leasehold?charset=utf8mb4",
		"mysql://u:p@[::1]:3306/db", "mysql://u:p@/db", "mysql://", "mariadb://u@h/d?x=%zz",
		"postgres://u:p@h/d", "://", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, _ = ParseURL(raw)
	})
}
