package placement

import (
	"errors"
	"html"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/leasehold/leasehold/pkg/logging"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

// explanations are webob's default explanation per status: Placement's
// error detail is this text, a blank line, then the specific message.
var explanations = map[int]string{
	400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
	401: "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
	403: "Access was denied to this resource.",
	404: "The resource could not be found.",
	405: "The method specified is not allowed for this resource.",
	406: "The resource could not be generated that was acceptable to your browser (content of type application/json).",
	409: "There was a conflict when trying to complete your request.",
	415: "The request media type is not supported by this server.",
	500: "The server has either erred or is incapable of performing the requested operation.",
}

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

// httpError is an error raised by the HTTP layer itself (content
// negotiation, routing) rather than the domain.
type httpError struct {
	status  int
	code    string
	msg     string
	headers map[string]string
	// versions adds min_version/max_version (only on the 406 from
	// microversion negotiation).
	versions bool
}

func (e *httpError) Error() string { return e.msg }

func errStatus(status int, format string) *httpError { return &httpError{status: status, msg: format} }

// renderError writes err as an API-WG error body.
func renderError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := http.StatusInternalServerError, placement.CodeUndefined, ""
	var he *httpError
	var pe *placement.Error
	versions := false
	switch {
	case errors.As(err, &pe):
		status, code, msg = pe.Status, pe.Code, pe.Msg
	case errors.As(err, &he):
		status, msg, versions = he.status, he.msg, he.versions
		if he.code != "" {
			code = he.code
		}
		for k, v := range he.headers {
			w.Header().Set(k, v)
		}
	default:
		slog.ErrorContext(r.Context(), "internal error", "err", err)
		msg = "An unexpected error occurred; the request id identifies it in the service log."
	}
	if status >= 500 && pe == nil && he == nil {
		// already logged
	} else if status >= 500 {
		slog.ErrorContext(r.Context(), "server error", "err", err)
	}
	writeErrorBody(w, r, status, code, msg, versions)
}

func writeErrorBody(w http.ResponseWriter, r *http.Request, status int, code, msg string, versions bool) {
	title := http.StatusText(status)
	detail := webobDetail(r, status, msg)
	// webob renders HTML when the client prefers it (and the request log
	// middleware only forces JSON when Accept is absent or */*).
	if acc := r.Header.Get("Accept"); acc != "" && !acceptsJSON(acc) && strings.Contains(acc, "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html>\n <head>\n  <title>" + html.EscapeString(http.StatusText(status)) +
			"</title>\n </head>\n <body>\n  <h1>" + html.EscapeString(title) + "</h1>\n  " +
			html.EscapeString(strings.TrimSpace(detail)) + "\n </body>\n</html>"))
		return
	}
	item := errorItem{Status: status, Title: title, Detail: detail, RequestID: logging.RequestID(r.Context())}
	if versions {
		item.MaxVersion = maxVersion.String()
		item.MinVersion = minVersion.String()
	}
	if mv := microversion.FromContext(r.Context()); mv.AtLeast(1, 23) {
		item.Code = code
	}
	b, _ := marshalJSON(errorBody{Errors: []errorItem{item}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Last-Modified")
	w.Header().Del("Cache-Control")
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

// webobDetail renders the "detail" of an error the way webob's exception
// templates do after strip_tags: the status' explanation, a blank line,
// then the message. 405, 406 and 415 have their own templates.
func webobDetail(r *http.Request, status int, msg string) string {
	m := webobStripTags(msg)
	switch status {
	case http.StatusMethodNotAllowed:
		return "The method " + r.Method + " is not allowed for this resource. \n\n " + m
	case http.StatusNotAcceptable:
		return "The resource could not be generated that was acceptable to your browser (content of type " +
			webobStripTags(r.Header.Get("Accept")) + ". \n\n " + m
	case http.StatusUnsupportedMediaType:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "None"
		}
		return "The request media type " + webobStripTags(ct) + " is not supported by this server. \n\n " + m
	}
	expl := explanations[status]
	if expl == "" {
		expl = http.StatusText(status)
	}
	return expl + "\n\n " + m + "  "
}

// renderPanic is the Recover middleware's renderer.
func renderPanic(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeErrorBody(w, r, status, placement.CodeUndefined, msg, false)
}
