package httpx

import (
	"net/http"

	"github.com/leasehold/leasehold/pkg/errs"
)

// statuses are the HTTP statuses of the error kinds, the same in both
// APIs. A capacity shortage is a 409 like any other conflict: upstream
// Blazar answers 500 for it, which tells a client nothing it can act on.
var statuses = [...]int{
	errs.Internal:             http.StatusInternalServerError,
	errs.BadRequest:           http.StatusBadRequest,
	errs.Unauthorized:         http.StatusUnauthorized,
	errs.Forbidden:            http.StatusForbidden,
	errs.NotFound:             http.StatusNotFound,
	errs.MethodNotAllowed:     http.StatusMethodNotAllowed,
	errs.NotAcceptable:        http.StatusNotAcceptable,
	errs.Conflict:             http.StatusConflict,
	errs.NotEnoughResources:   http.StatusConflict,
	errs.TooLarge:             http.StatusRequestEntityTooLarge,
	errs.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	errs.Unavailable:          http.StatusServiceUnavailable,
}

// Status is the HTTP status of error kind k (500 for a kind it does not
// know). Each API's error renderer writes it with its own body.
func Status(k errs.Kind) int {
	if int(k) >= 0 && int(k) < len(statuses) && statuses[k] != 0 {
		return statuses[k]
	}
	return http.StatusInternalServerError
}
