// Package httpx holds the HTTP plumbing shared by the Blazar and Placement
// APIs: request ids, the access log, panic recovery and response capture.
package httpx

import (
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/pkg/logging"
)

// HeaderRequestID is the response header carrying the local request id.
const HeaderRequestID = "X-Openstack-Request-Id"

var globalIDRe = regexp.MustCompile(`^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$`)

// RequestID gives every request a fresh local id (never the inbound one,
// as oslo.middleware does) and keeps a well-formed inbound id as the
// global request id for the logs.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "req-" + uuid.NewString()
		global := r.Header.Get(HeaderRequestID)
		if !globalIDRe.MatchString(global) {
			global = ""
		}
		w.Header().Set(HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(logging.WithRequestID(r.Context(), id, global)))
	})
}

// StatusRecorder remembers the status and size of a response.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
	Bytes  int
}

// WriteHeader records the status.
func (s *StatusRecorder) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.Bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// AccessLog logs one line per request in the spirit of placement's
// request log: remote, method, URI, status, length and duration. The
// line costs nothing when its level is off, and no boxing when on.
func AccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &StatusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		lvl := slog.LevelInfo
		if rec.Status >= 500 {
			lvl = slog.LevelError
		}
		l := slog.Default()
		ctx := r.Context()
		if !l.Enabled(ctx, lvl) {
			return
		}
		l.LogAttrs(ctx, lvl, "request",
			slog.String("remote", r.RemoteAddr), slog.String("method", r.Method), slog.String("uri", r.URL.RequestURI()),
			slog.Int("status", rec.Status), slog.Int("len", rec.Bytes),
			slog.String("microversion", w.Header().Get("Openstack-Api-Version")),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	})
}

// Recover turns a panic into a 500 rendered by render, after logging the
// stack, so one bad request never takes the process down.
func Recover(render func(w http.ResponseWriter, r *http.Request, status int, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					slog.ErrorContext(r.Context(), "panic serving request", "panic", v, "stack", string(debug.Stack()))
					render(w, r, http.StatusInternalServerError, "An unexpected error occurred; the request id identifies it in the service log.")
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}
