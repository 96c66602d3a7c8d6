// Package logging sets up log/slog so that every record logged with a
// request context carries the request id and caller identity.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/leasehold/leasehold/pkg/auth"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	globalRequestIDKey
)

// WithRequestID stores the local and (optional) global request ids.
func WithRequestID(ctx context.Context, id, global string) context.Context {
	ctx = context.WithValue(ctx, requestIDKey, id)
	if global != "" {
		ctx = context.WithValue(ctx, globalRequestIDKey, global)
	}
	return ctx
}

// RequestID returns the request id stored in ctx, or "".
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

// New returns a logger writing to w in format ("json" or "text") at level.
func New(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(ctxHandler{h})
}

// ctxHandler adds request attributes from the context to every record.
type ctxHandler struct{ slog.Handler }

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if g, _ := ctx.Value(globalRequestIDKey).(string); g != "" {
		r.AddAttrs(slog.String("global_request_id", g))
	}
	if who := auth.FromContext(ctx); who != nil {
		if who.UserID != "" {
			r.AddAttrs(slog.String("user_id", who.UserID))
		}
		if who.ProjectID != "" {
			r.AddAttrs(slog.String("project_id", who.ProjectID))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h ctxHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ctxHandler{h.Handler.WithAttrs(as)}
}
func (h ctxHandler) WithGroup(n string) slog.Handler { return ctxHandler{h.Handler.WithGroup(n)} }
