package placement

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/httpx"
	"github.com/leasehold/leasehold/pkg/logging"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

// statusOf is the HTTP status of kind k.
func statusOf(k errs.Kind) int { return httpx.Status(k) }

// explanations are webob's default explanation per status: Placement's
// error detail is this text, a blank line, then the specific message.
var explanations = map[int]string{
	400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
	401: "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
	403: "Access was denied to this resource.",
	404: "The resource could not be found.",
	409: "There was a conflict when trying to complete your request.",
	413: "The body of your request was too large for this server.",
	500: "The server has either erred or is incapable of performing the requested operation.",
	503: "The server is currently unavailable. Please try again at a later time.",
}

// msgInternal is what a client sees of an internal error.
const msgInternal = "An unexpected error occurred; the request id identifies it in the service log."

type errorBody struct {
	Errors []errorItem `json:"errors"`
}

type errorItem struct {
	Status     int    `json:"status"`
	Title      string `json:"title"`
	Detail     string `json:"detail"`
	RequestID  string `json:"request_id,omitempty"`
	Code       string `json:"code,omitempty"`
	MaxVersion string `json:"max_version,omitempty"`
	MinVersion string `json:"min_version,omitempty"`
}

// errOf is an error of kind k with message msg, for the HTTP layer's own
// errors (bad JSON, content negotiation, routing).
func errOf(k errs.Kind, msg string) *errs.Error { return &errs.Error{Kind: k, Msg: msg} }

// httpError adds to an HTTP-layer error what only the wire needs:
// response headers (Allow on a 405) and, on the 406 from microversion
// negotiation, the min_version/max_version members.
type httpError struct {
	err      *errs.Error
	headers  map[string]string
	versions bool
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

// escapedError wraps an error that upstream lets escape the handler
// (exception.NotFound from a lookup, PolicyNotAuthorized, routing and
// header checks): the microversion middleware then adds the version
// header but not Vary.
type escapedError struct{ err error }

func (e *escapedError) Error() string { return e.err.Error() }
func (e *escapedError) Unwrap() error { return e.err }

// escaped marks err as escaping the handler (see escapedError).
func escaped(err error) error {
	if err == nil {
		return nil
	}
	return &escapedError{err}
}

// escapedNotFound marks a domain "not found" as escaping (a get_by_uuid
// outside any try block upstream); other errors are returned as they are.
func escapedNotFound(err error) error {
	if placement.IsNotFoundErr(err) {
		return escaped(err)
	}
	return err
}

// renderError is the one place an error becomes Placement's error
// response: its kind picks the status, its code (from 1.23) defaults to
// placement.undefined_code, and any error that is not an *errs.Error (or
// is of kind Internal) is logged and answered with a generic 500. A
// client that went away gets nothing (499 in the metrics).
func renderError(w http.ResponseWriter, r *http.Request, err error) {
	if httpx.ClientGone(r) {
		httpx.WriteClientGone(w, r, err)
		return
	}
	e := errs.As(err)
	if e == nil || e.Kind == errs.Internal {
		// A database that cannot be reached is a 503, not a bug.
		e = db.AsUnavailable(err)
	}
	if e == nil {
		slog.ErrorContext(r.Context(), "internal error", "err", err)
		e = &errs.Error{Kind: errs.Internal, Msg: msgInternal}
	} else if e.Kind == errs.Unavailable {
		slog.ErrorContext(r.Context(), "server error", "err", err)
	}
	code := e.Code
	if code == "" {
		code = placement.CodeUndefined
	}
	versions := false
	var he *httpError
	if errors.As(err, &he) {
		for k, v := range he.headers {
			w.Header().Set(k, v)
		}
		versions = he.versions
	}
	var esc *escapedError
	if errors.As(err, &esc) {
		w.Header().Del("Vary")
	}
	writeErrorBody(w, r, statusOf(e.Kind), code, e.Msg, versions)
}

// writeErrorBody writes the body webob would for status: HTML or plain
// text when the client asks for it, else the API-WG JSON document.
func writeErrorBody(w http.ResponseWriter, r *http.Request, status int, code, msg string, versions bool) {
	statusLine := http.StatusText(status)
	if statusLine == "" {
		statusLine = "Unknown"
	}
	statusLine = strconv.Itoa(status) + " " + statusLine
	w.Header().Del("Last-Modified")
	w.Header().Del("Cache-Control")
	// webob picks the body type from Accept among text/html and
	// application/json, falling back to text/plain.
	offers := acceptableOffers(r.Header.Get("Accept"), []string{"text/html", "application/json"})
	match := ""
	if len(offers) > 0 {
		match = offers[0]
	}
	switch match {
	case "text/html":
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<html>\n <head>\n  <title>"+statusLine+"</title>\n </head>\n <body>\n  <h1>"+
			statusLine+"</h1>\n  "+webobBody(r, status, msg, pyHTMLEscape)+"\n </body>\n</html>")
		return
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, statusLine+"\n\n"+webobDetail(r, status, msg))
		return
	}
	item := errorItem{Status: status, Title: http.StatusText(status), Detail: webobDetail(r, status, msg), RequestID: logging.RequestID(r.Context())}
	if versions {
		item.MaxVersion = maxVersion.String()
		item.MinVersion = minVersion.String()
	}
	if mv := microversion.FromContext(r.Context()); mv.AtLeast(1, 23) {
		item.Code = code
	}
	b, _ := marshalJSON(errorBody{Errors: []errorItem{item}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

var (
	webobBrRe      = regexp.MustCompile(`(?is)<br.*?>`)
	webobCommentRe = regexp.MustCompile(`<!--|-->`)
	webobTagRe     = regexp.MustCompile(`(?s)<.*?>`)
)

// webobStripTags is webob.exc.strip_tags, which the JSON error body goes
// through: newlines become spaces, <br…> a newline, comments and tags go.
func webobStripTags(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "\r", "")
	s = webobBrRe.ReplaceAllString(s, "\n")
	s = webobCommentRe.ReplaceAllString(s, "")
	return webobTagRe.ReplaceAllString(s, "")
}

// webobBody is the exception's body template filled in (webob's
// _make_body) with escape applied to the substituted values: the
// status' explanation and the message, or the 405/406/415 templates
// that name the request's method, Accept or Content-Type.
func webobBody(r *http.Request, status int, msg string, escape func(string) string) string {
	switch status {
	case http.StatusMethodNotAllowed:
		return "The method " + escape(r.Method) + " is not allowed for this resource. <br /><br />\n" + escape(msg)
	case http.StatusNotAcceptable:
		return "The resource could not be generated that was acceptable to your browser\n(content of type " +
			escape(r.Header.Get("Accept")) + ". <br /><br />\n" + escape(msg)
	case http.StatusUnsupportedMediaType:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "None"
		}
		return "The request media type " + escape(ct) + " is not supported by this server.\n<br /><br />\n" + escape(msg)
	}
	expl := explanations[status]
	if expl == "" {
		expl = http.StatusText(status)
	}
	return escape(expl) + "<br /><br />\n" + escape(msg) + "\n\n"
}

// webobDetail is the "detail" of a JSON (or the text of a plain) error:
// the body template after strip_tags.
func webobDetail(r *http.Request, status int, msg string) string {
	return webobStripTags(webobBody(r, status, msg, func(s string) string { return s }))
}

// pyHTMLEscape is webob's html_escape: html.escape(s, quote=True) then
// non-ASCII characters as decimal character references.
func pyHTMLEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&#x27;")
		case r > 0x7f:
			b.WriteString("&#" + strconv.Itoa(int(r)) + ";")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// renderPanic is the Recover middleware's renderer (which has logged the
// panic and passes a 500): an internal error.
func renderPanic(w http.ResponseWriter, r *http.Request, _ int, msg string) {
	renderError(w, r, errs.New(errs.Internal, "request handler panicked: %s", msg))
}
