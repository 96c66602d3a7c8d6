// Package microversion parses and negotiates OpenStack API microversions
// (the OpenStack-API-Version header), with the semantics of the
// microversion_parse library that Placement uses.
package microversion

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Version is a microversion such as 1.39.
type Version struct{ Major, Minor int }

// String formats v as "X.Y".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v < o.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || (v.Major == o.Major && v.Minor < o.Minor)
}

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor int) bool { return !v.Less(Version{major, minor}) }

// Parse parses "X.Y" strictly: two non-negative decimal integers.
func Parse(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	if !ok || maj == "" || min == "" {
		return Version{}, fmt.Errorf("invalid version string: %s", s)
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 || strings.ContainsAny(s, "+- ") {
		return Version{}, fmt.Errorf("invalid version string: %s", s)
	}
	return Version{a, b}, nil
}

// ErrNotAcceptable is returned by Negotiate for a version outside the range.
type ErrNotAcceptable struct{ Requested string }

func (e *ErrNotAcceptable) Error() string {
	return "Unacceptable version header: " + e.Requested
}

// Negotiate picks the version for a request given the header values
// (possibly several, comma-separated, for several services). The last
// entry for service wins; a missing one means min; "latest" means max.
func Negotiate(headers []string, service string, min, max Version) (Version, error) {
	var want string
	found := false
	for _, h := range headers {
		for _, part := range strings.Split(h, ",") {
			fields := strings.Fields(part)
			if len(fields) == 0 {
				continue
			}
			if !strings.EqualFold(fields[0], service) {
				continue
			}
			found = true
			if len(fields) == 2 {
				want = fields[1]
			} else {
				want = strings.Join(fields[1:], " ")
			}
		}
	}
	if !found {
		return min, nil
	}
	if strings.EqualFold(want, "latest") {
		return max, nil
	}
	v, err := Parse(want)
	if err != nil {
		return Version{}, err
	}
	if v.Less(min) || max.Less(v) {
		return Version{}, &ErrNotAcceptable{Requested: want}
	}
	return v, nil
}

type ctxKey struct{}

// WithVersion stores v in ctx.
func WithVersion(ctx context.Context, v Version) context.Context {
	return context.WithValue(ctx, ctxKey{}, v)
}

// FromContext returns the negotiated version, or the zero Version.
func FromContext(ctx context.Context) Version {
	v, _ := ctx.Value(ctxKey{}).(Version)
	return v
}
