package httpx

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// StatusClientClosedRequest is the status nginx logs for a request whose
// client went away before the answer: it is counted in the metrics and
// the access log, never sent to anyone.
const StatusClientClosedRequest = 499

// ClientGone reports whether r's client closed the request: net/http
// cancels the request's context when the connection (or HTTP/2 stream)
// goes away while the handler still runs. A deadline is not a
// disconnect and is not reported.
func ClientGone(r *http.Request) bool {
	return errors.Is(r.Context().Err(), context.Canceled)
}

// WriteClientGone is the error renderers' answer to a request whose
// client went away: err is only the handler noticing it (a query cut
// short), so it is logged at debug, and the 499 status with no body
// reaches the metrics and the access log rather than a 500.
func WriteClientGone(w http.ResponseWriter, r *http.Request, err error) {
	slog.DebugContext(r.Context(), "client closed the request", "method", r.Method, "path", r.URL.Path, "err", err)
	w.WriteHeader(StatusClientClosedRequest)
}
