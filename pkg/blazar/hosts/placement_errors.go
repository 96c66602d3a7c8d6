package hosts

import (
	"github.com/leasehold/leasehold/pkg/errs"
)

// placementError turns a Placement domain error into a Blazar one: the
// same kind and message, without Placement's error code (Blazar names
// its errors by their status). Other errors are returned as they are.
func placementError(err error) error {
	if e := errs.As(err); e != nil {
		return &errs.Error{Kind: e.Kind, Msg: e.Msg, Err: err}
	}
	return err
}
