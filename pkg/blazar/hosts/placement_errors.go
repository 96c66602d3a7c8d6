package hosts

import (
	"errors"
	"net/http"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/placement"
)

// placementError turns a Placement domain error into a Blazar one: the
// same kind and message, without Placement's error code (Blazar names
// its errors by their status). Other errors are returned as they are.
func placementError(err error) error {
	if e := errs.As(err); e != nil {
		return &errs.Error{Kind: e.Kind, Msg: e.Msg, Err: err}
	}
	// Until pkg/placement returns *errs.Error itself (then this part and
	// the table go).
	var pe *placement.Error
	if errors.As(err, &pe) {
		k, ok := placementKinds[pe.Status]
		if !ok {
			k = errs.Internal
		}
		return &errs.Error{Kind: k, Msg: pe.Msg, Err: err}
	}
	return err
}

var placementKinds = map[int]errs.Kind{
	http.StatusBadRequest: errs.BadRequest, http.StatusForbidden: errs.Forbidden,
	http.StatusNotFound: errs.NotFound, http.StatusConflict: errs.Conflict,
}
