package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/logging"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

// TestRenderErrorMapping renders one error of each kind (and the other
// shapes renderError sees) at 1.22 and 1.23 and checks the status, the
// headers and the whole JSON body.
func TestRenderErrorMapping(t *testing.T) {
	const msg = "Something specific."
	type want struct {
		status int
		title  string
		expl   string // webob explanation ahead of the message
		code   string // at 1.23+; "" means the message is replaced
	}
	expl := func(s string) string { return s + "\n\n " }
	cases := []struct {
		name string
		err  error
		want want
		// detail overrides the computed detail (templated statuses).
		detail string
	}{
		{"bad request", placement.BadRequest(msg), want{400, "Bad Request", expl(explanations[400]), placement.CodeUndefined}, ""},
		{"bad request with code", placement.BadRequestCode(placement.CodeQueryBadValue, msg), want{400, "Bad Request", expl(explanations[400]), placement.CodeQueryBadValue}, ""},
		{"unauthorized", errs.New(errs.Unauthorized, msg), want{401, "Unauthorized", expl(explanations[401]), placement.CodeUndefined}, ""},
		{"forbidden", placement.Forbidden(msg), want{403, "Forbidden", expl(explanations[403]), placement.CodeUndefined}, ""},
		{"not found", placement.NotFound(msg), want{404, "Not Found", expl(explanations[404]), placement.CodeUndefined}, ""},
		{"not found with code", placement.NotFoundCode(placement.CodeProviderNotFound, msg), want{404, "Not Found", expl(explanations[404]), placement.CodeProviderNotFound}, ""},
		{"method not allowed", errOf(errs.MethodNotAllowed, msg), want{405, "Method Not Allowed", "", placement.CodeUndefined},
			"The method GET is not allowed for this resource. \n\n " + msg},
		{"not acceptable", errOf(errs.NotAcceptable, msg), want{406, "Not Acceptable", "", placement.CodeUndefined},
			"The resource could not be generated that was acceptable to your browser (content of type application/json. \n\n " + msg},
		{"conflict", placement.Conflict("", msg), want{409, "Conflict", expl(explanations[409]), placement.CodeUndefined}, ""},
		{"concurrent update", placement.Conflict(placement.CodeConcurrentUpdate, msg), want{409, "Conflict", expl(explanations[409]), placement.CodeConcurrentUpdate}, ""},
		{"not enough resources", placement.NotEnough(msg), want{409, "Conflict", expl(explanations[409]), placement.CodeUndefined}, ""},
		{"too large", errs.New(errs.TooLarge, msg), want{413, "Request Entity Too Large", expl(explanations[413]), placement.CodeUndefined}, ""},
		{"unsupported media type", errOf(errs.UnsupportedMediaType, msg), want{415, "Unsupported Media Type", "", placement.CodeUndefined},
			"The request media type None is not supported by this server. \n\n " + msg},
		{"unavailable", errs.Unavailablef(msg), want{503, "Service Unavailable", expl(explanations[503]), placement.CodeUndefined}, ""},
		{"internal kind", errs.New(errs.Internal, "secret: %s", msg), want{500, "Internal Server Error", expl(explanations[500]), ""}, ""},
		{"plain error", errors.New("secret: dial tcp: refused"), want{500, "Internal Server Error", expl(explanations[500]), ""}, ""},
		{"wrapped domain error", fmt.Errorf("op: %w", placement.NotFound(msg)), want{404, "Not Found", expl(explanations[404]), placement.CodeUndefined}, ""},
		{"unknown kind", errs.New(errs.Kind(99), msg), want{500, "Internal Server Error", expl(explanations[500]), placement.CodeUndefined}, ""},
	}
	for _, tc := range cases {
		for _, minor := range []int{22, 23, 39} {
			t.Run(fmt.Sprintf("%s/1.%d", tc.name, minor), func(t *testing.T) {
				w, r := errorRequest(minor)
				renderError(w, r, tc.err)
				message := msg
				if tc.want.code == "" { // an internal error: its text is not shown
					message = msgInternal
				}
				detail := tc.detail
				if detail == "" {
					detail = tc.want.expl + message + "  " // the template's closing blank line, stripped
				}
				item := map[string]any{
					"status": float64(tc.want.status), "title": tc.want.title,
					"detail": detail, "request_id": "req-test",
				}
				if minor >= 23 {
					code := tc.want.code
					if code == "" {
						code = placement.CodeUndefined
					}
					item["code"] = code
				}
				checkErrorResponse(t, w, tc.want.status, map[string]any{"errors": []any{item}})
				if got := w.Header().Get("Vary"); got != "openstack-api-version" {
					t.Errorf("Vary = %q, want it kept", got)
				}
			})
		}
	}
}

// TestRenderErrorWireExtras covers what only the HTTP layer adds: the
// Allow header, min/max_version on the 406 from negotiation, and no Vary
// on errors upstream lets escape the handler.
func TestRenderErrorWireExtras(t *testing.T) {
	w, r := errorRequest(23)
	renderError(w, r, &httpError{err: errOf(errs.MethodNotAllowed, "nope"), headers: map[string]string{"Allow": "GET, PUT"}})
	if w.Code != 405 || w.Header().Get("Allow") != "GET, PUT" {
		t.Errorf("405: status %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}

	w, r = errorRequest(23)
	renderError(w, r, &httpError{err: errOf(errs.NotAcceptable, "Invalid microversion: x"), versions: true})
	var body errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if it := body.Errors[0]; w.Code != 406 || it.MinVersion != minVersion.String() || it.MaxVersion != maxVersion.String() {
		t.Errorf("406: status %d, versions %q..%q", w.Code, it.MinVersion, it.MaxVersion)
	}

	for _, err := range []error{escaped(placement.NotFound("gone")), escapedNotFound(fmt.Errorf("x: %w", placement.NotFound("gone"))), escaped(placement.Forbidden("no"))} {
		w, r = errorRequest(23)
		renderError(w, r, err)
		if v, ok := w.Header()["Vary"]; ok {
			t.Errorf("%v: Vary %q on an escaped error", err, v)
		}
	}
	w, r = errorRequest(23)
	renderError(w, r, escapedNotFound(placement.Conflict("", "busy")))
	if w.Code != 409 || w.Header().Get("Vary") == "" {
		t.Errorf("a conflict is not escaped by escapedNotFound: status %d, Vary %q", w.Code, w.Header().Get("Vary"))
	}
}

// errorRequest is a JSON request at 1.minor with a request id, and a
// recorder that already carries the microversion middleware's Vary.
func errorRequest(minor int) (*httptest.ResponseRecorder, *http.Request) {
	r := httptest.NewRequest("GET", "/resource_providers", nil)
	r.Header.Set("Accept", "application/json")
	ctx := microversion.WithVersion(r.Context(), microversion.Version{Major: 1, Minor: minor})
	r = r.WithContext(logging.WithRequestID(ctx, "req-test", ""))
	w := httptest.NewRecorder()
	w.Header().Set("Vary", "openstack-api-version")
	return w, r
}

func checkErrorResponse(t *testing.T, w *httptest.ResponseRecorder, status int, want map[string]any) {
	t.Helper()
	if w.Code != status {
		t.Errorf("status %d, want %d", w.Code, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}
