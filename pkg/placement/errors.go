package placement

import (
	"fmt"
	"net/http"
)

// Error codes carried in API-WG error bodies from microversion 1.23.
const (
	CodeUndefined          = "placement.undefined_code"
	CodeConcurrentUpdate   = "placement.concurrent_update"
	CodeDuplicateName      = "placement.duplicate_name"
	CodeInventoryInUse     = "placement.inventory.inuse"
	CodeProviderInUse      = "placement.resource_provider.inuse"
	CodeCannotDeleteParent = "placement.resource_provider.cannot_delete_parent"
	CodeProviderNotFound   = "placement.resource_provider.not_found"
	CodeQueryDuplicateKey  = "placement.query.duplicate_key"
	CodeQueryBadValue      = "placement.query.bad_value"
	CodeQueryMissingValue  = "placement.query.missing_value"
)

// Error is a domain error with the HTTP status and Placement error code it
// maps to. Services return it; handlers render it.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func newErr(status int, code, format string, args ...any) *Error {
	if code == "" {
		code = CodeUndefined
	}
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400.
func BadRequest(format string, args ...any) *Error {
	return newErr(http.StatusBadRequest, "", format, args...)
}

// BadRequestCode is a 400 with a specific code.
func BadRequestCode(code, format string, args ...any) *Error {
	return newErr(http.StatusBadRequest, code, format, args...)
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return newErr(http.StatusNotFound, "", format, args...)
}

// NotFoundCode is a 404 with a specific code.
func NotFoundCode(code, format string, args ...any) *Error {
	return newErr(http.StatusNotFound, code, format, args...)
}

// Conflict is a 409 with a code ("" means undefined).
func Conflict(code, format string, args ...any) *Error {
	return newErr(http.StatusConflict, code, format, args...)
}

// Forbidden is a 403.
func Forbidden(format string, args ...any) *Error {
	return newErr(http.StatusForbidden, "", format, args...)
}
