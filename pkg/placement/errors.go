package placement

import (
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/pkg/errs"
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

// newErr builds a Placement domain error. Every Placement error carries a
// code (CodeUndefined when none applies), as upstream's bodies do.
func newErr(k errs.Kind, code, format string, args ...any) *errs.Error {
	if code == "" {
		code = CodeUndefined
	}
	return errs.WithCode(k, code, format, args...)
}

// BadRequest is an invalid request.
func BadRequest(format string, args ...any) *errs.Error {
	return newErr(errs.BadRequest, "", format, args...)
}

// BadRequestCode is an invalid request with a specific code.
func BadRequestCode(code, format string, args ...any) *errs.Error {
	return newErr(errs.BadRequest, code, format, args...)
}

// NotFound is a missing object.
func NotFound(format string, args ...any) *errs.Error {
	return newErr(errs.NotFound, "", format, args...)
}

// NotFoundCode is a missing object with a specific code.
func NotFoundCode(code, format string, args ...any) *errs.Error {
	return newErr(errs.NotFound, code, format, args...)
}

// Conflict is a conflict with the current state, with a code ("" means
// undefined).
func Conflict(code, format string, args ...any) *errs.Error {
	return newErr(errs.Conflict, code, format, args...)
}

// NotEnough is a request for more capacity than is free.
func NotEnough(format string, args ...any) *errs.Error {
	return newErr(errs.NotEnoughResources, "", format, args...)
}

// Forbidden is a request the policy does not allow.
func Forbidden(format string, args ...any) *errs.Error {
	return newErr(errs.Forbidden, "", format, args...)
}

// IsNotFoundErr reports whether err is a domain "not found".
func IsNotFoundErr(err error) bool { return errs.Is(err, errs.NotFound) }

// IsNoSuchResourceClass reports exception.ResourceClassNotFound (a class
// name that does not exist).
func IsNoSuchResourceClass(err error) bool {
	pe := errs.As(err)
	return pe != nil && strings.HasPrefix(pe.Msg, "No such resource class ")
}

// IsNoSuchTrait reports exception.TraitNotFound.
func IsNoSuchTrait(err error) bool {
	pe := errs.As(err)
	return pe != nil && strings.HasPrefix(pe.Msg, "No such trait(s): ")
}

// asBadRequest turns a lookup's "not found" (unknown trait or class) into
// an invalid request with the same message.
func asBadRequest(err error) error {
	if pe := errs.As(err); pe != nil && pe.Kind == errs.NotFound {
		return BadRequest("%s", pe.Msg)
	}
	return err
}

// errConcurrent is the generation-conflict error for a provider.
func errConcurrent(msg string) *errs.Error { return Conflict(CodeConcurrentUpdate, "%s", msg) }

// wrap adds op to an unexpected error; domain errors pass unchanged.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errs.As(err) != nil {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
