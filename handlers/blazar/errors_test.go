package blazar

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
)

// TestRenderError: every error kind becomes Blazar's body with its status;
// error_name repeats the status unless the error carries a code; anything
// that is not an *errs.Error (or is Internal) is a hidden 500.
func TestRenderError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		body   string
	}{
		{errs.BadRequestf("Missing parameter name"), 400, `{"error_code":400,"error_message":"Missing parameter name","error_name":400}`},
		{errs.New(errs.Unauthorized, "no token"), 401, `{"error_code":401,"error_message":"no token","error_name":401}`},
		{errs.Forbiddenf("Policy doesn't allow x to be performed."), 403, `{"error_code":403,"error_message":"Policy doesn't allow x to be performed.","error_name":403}`},
		{errs.NotFoundf("Object with {'lease_id': 'x'} not found"), 404, `{"error_code":404,"error_message":"Object with {'lease_id': 'x'} not found","error_name":404}`},
		{errs.New(errs.MethodNotAllowed, "m"), 405, `{"error_code":405,"error_message":"m","error_name":405}`},
		{errs.New(errs.NotAcceptable, "v"), 406, `{"error_code":406,"error_message":"v","error_name":406}`},
		{errs.Conflictf("Invalid lease status"), 409, `{"error_code":409,"error_message":"Invalid lease status","error_name":409}`},
		{errs.New(errs.NotEnoughResources, "Not enough hosts available"), 409, `{"error_code":409,"error_message":"Not enough hosts available","error_name":409}`},
		{errs.New(errs.TooLarge, "big"), 413, `{"error_code":413,"error_message":"big","error_name":413}`},
		{errs.New(errs.UnsupportedMediaType, "xml"), 415, `{"error_code":415,"error_message":"xml","error_name":415}`},
		{errs.Unavailablef("Nova is unreachable"), 503, `{"error_code":503,"error_message":"Nova is unreachable","error_name":503}`},
		{&errs.Error{Kind: errs.BadRequest, Msg: "No data to update", Code: "INTERNAL_SERVER_ERROR"}, 400, `{"error_code":400,"error_message":"No data to update","error_name":"INTERNAL_SERVER_ERROR"}`},
		{fmt.Errorf("wrapped: %w", errs.NotFoundf("gone")), 404, `{"error_code":404,"error_message":"gone","error_name":404}`},
		{errs.New(errs.Internal, "secret detail"), 500, `{"error_code":500,"error_message":"Internal Server Error","error_name":"INTERNAL_SERVER_ERROR"}`},
		{errors.New("database exploded"), 500, `{"error_code":500,"error_message":"Internal Server Error","error_name":"INTERNAL_SERVER_ERROR"}`},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			w := httptest.NewRecorder()
			RenderError(w, httptest.NewRequest("GET", "/v1/leases", nil), tc.err)
			if w.Code != tc.status || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d %q, want %d application/json", w.Code, w.Header().Get("Content-Type"), tc.status)
			}
			if diff := cmp.Diff(tc.body, w.Body.String()); diff != "" {
				t.Errorf("body (-want +got): %s", diff)
			}
		})
	}
}
