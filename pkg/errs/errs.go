// Package errs is Leasehold's one error vocabulary: what can go wrong in
// a request, independent of any API. Domain packages (pkg/placement,
// pkg/blazar/..., plugins/..., pkg/compute/...) return *Error values built
// here and never pick an HTTP status; each API package has exactly one
// function that maps them to its wire body (handlers/blazar.RenderError,
// handlers/placement's error renderer).
//
// Any other error reaching an API is an internal error: it is logged and
// the client sees the API's generic 500 body.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies an error.
type Kind int

// The kinds. The zero value is Internal.
const (
	// Internal is an unexpected failure (a bug, a database error).
	Internal Kind = iota
	// BadRequest: the request is malformed or its values are invalid.
	BadRequest
	// Unauthorized: no valid credentials.
	Unauthorized
	// Forbidden: valid credentials, not allowed by policy.
	Forbidden
	// NotFound: the named object does not exist (or is not visible).
	NotFound
	// MethodNotAllowed: the route exists, the method does not.
	MethodNotAllowed
	// NotAcceptable: the requested representation or version is not served.
	NotAcceptable
	// Conflict: the request conflicts with the current state (a stale
	// generation, a duplicate name, an object in use, a status that does
	// not allow the operation).
	Conflict
	// NotEnoughResources: the capacity the request asks for is not free.
	NotEnoughResources
	// TooLarge: the request body is over the limit.
	TooLarge
	// UnsupportedMediaType: the body is not in a type the API reads.
	UnsupportedMediaType
	// Unavailable: a dependency (database, identity service, compute
	// service) cannot be reached; the request may succeed later.
	Unavailable
)

var kindNames = [...]string{
	Internal: "internal", BadRequest: "bad request", Unauthorized: "unauthorized",
	Forbidden: "forbidden", NotFound: "not found", MethodNotAllowed: "method not allowed",
	NotAcceptable: "not acceptable", Conflict: "conflict", NotEnoughResources: "not enough resources",
	TooLarge: "too large", UnsupportedMediaType: "unsupported media type", Unavailable: "unavailable",
}

func (k Kind) String() string {
	if int(k) >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a classified error with a message for the client.
type Error struct {
	Kind Kind
	// Msg is the message the client sees.
	Msg string
	// Code is an optional machine-readable code of the API the error
	// belongs to (Placement's "placement.concurrent_update", Blazar's
	// error_name quirks); "" for none.
	Code string
	// Detail is optional extra text for logs and operators.
	Detail string
	// Err is the underlying cause, if any (not shown to clients).
	Err error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error of kind k with a formatted message.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// WithCode returns an *Error of kind k with an API code.
func WithCode(k Kind, code, format string, args ...any) *Error {
	return &Error{Kind: k, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of kind k with message msg around cause err.
func Wrap(k Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Shorthands for the common kinds.

// BadRequestf is a BadRequest error.
func BadRequestf(format string, args ...any) *Error { return New(BadRequest, format, args...) }

// NotFoundf is a NotFound error.
func NotFoundf(format string, args ...any) *Error { return New(NotFound, format, args...) }

// Conflictf is a Conflict error.
func Conflictf(format string, args ...any) *Error { return New(Conflict, format, args...) }

// Forbiddenf is a Forbidden error.
func Forbiddenf(format string, args ...any) *Error { return New(Forbidden, format, args...) }

// Unavailablef is an Unavailable error.
func Unavailablef(format string, args ...any) *Error { return New(Unavailable, format, args...) }

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// KindOf returns the kind of the *Error in err's chain; Internal when
// there is none.
func KindOf(err error) Kind {
	if e := As(err); e != nil {
		return e.Kind
	}
	return Internal
}

// Is reports whether err carries an *Error of kind k.
func Is(err error, k Kind) bool {
	e := As(err)
	return e != nil && e.Kind == k
}
