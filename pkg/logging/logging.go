// Package logging sets up log/slog so that every record logged with a
// request context carries the request id and caller identity.
package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

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
//
// When w is a file (stderr), records go through a buffer written out
// within flushEvery, and at once for a warning or an error, so that the
// access log's line per request costs no write system call of its own.
func New(w io.Writer, format, level string) *slog.Logger {
	var bw *bufWriter
	if f, ok := w.(*os.File); ok {
		bw = &bufWriter{f: f}
		w = bw
	}
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
	return slog.New(ctxHandler{h, bw})
}

// Flush writes out what the default logger has buffered (before exit).
func Flush() {
	if h, ok := slog.Default().Handler().(ctxHandler); ok && h.bw != nil {
		h.bw.Flush()
	}
}

// flushEvery bounds how long a buffered record waits.
const flushEvery = 50 * time.Millisecond

// bufWriter buffers whole records for a file.
type bufWriter struct {
	mu      sync.Mutex
	f       *os.File
	buf     []byte
	pending bool
	timer   *time.Timer
}

func (b *bufWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= 32<<10 {
		b.flushLocked()
		return len(p), nil
	}
	if !b.pending {
		b.pending = true
		if b.timer == nil {
			b.timer = time.AfterFunc(flushEvery, b.Flush)
		} else {
			b.timer.Reset(flushEvery)
		}
	}
	return len(p), nil
}

// Flush writes the buffer out.
func (b *bufWriter) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *bufWriter) flushLocked() {
	if len(b.buf) > 0 {
		_, _ = b.f.Write(b.buf)
		b.buf = b.buf[:0]
	}
	b.pending = false
}

// ctxHandler adds request attributes from the context to every record.
type ctxHandler struct {
	slog.Handler
	bw *bufWriter // nil when writing straight through
}

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
	err := h.Handler.Handle(ctx, r)
	if h.bw != nil && r.Level >= slog.LevelWarn {
		h.bw.Flush()
	}
	return err
}

func (h ctxHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ctxHandler{h.Handler.WithAttrs(as), h.bw}
}
func (h ctxHandler) WithGroup(n string) slog.Handler { return ctxHandler{h.Handler.WithGroup(n), h.bw} }
