package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/httpx"
)

// healthcheck answers GET 200 "OK" / HEAD 204 when the database answers,
// 503 otherwise, without authentication.
func (s *Server) healthcheck(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	reason, status := "OK", http.StatusOK
	if err := s.db.Ping(ctx); err != nil {
		reason, status = "database unreachable: "+err.Error(), http.StatusServiceUnavailable
	}
	if r.Method == http.MethodHead {
		if status == http.StatusOK {
			status = http.StatusNoContent
		}
		w.WriteHeader(status)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"detailed": false, "reasons": [%q]}`, reason)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(reason))
}

// metricsOnly serves h at /metrics and 404 elsewhere (the separate
// metrics listener).
func metricsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Run serves until ctx is cancelled, then drains for ShutdownTimeout.
func (s *Server) Run(ctx context.Context) error {
	type lis struct {
		l net.Listener
		h http.Handler
	}
	var ls []lis
	listen := func(addr string, h http.Handler, what string) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s (%s): %w", addr, what, err)
		}
		// Let the API answer a malformed Content-Length with its own
		// error body instead of Go's bare 400.
		ls = append(ls, lis{httpx.ListenerWithBadContentLength(l), h})
		s.Addrs = append(s.Addrs, l.Addr().String())
		slog.InfoContext(ctx, "listening", "addr", l.Addr().String(), "serves", what)
		return nil
	}
	if err := listen(s.cfg.Listen, s.main, "blazar /v1, placement /placement, /healthcheck"); err != nil {
		return err
	}
	closeAll := func() {
		for _, x := range ls {
			x.l.Close()
		}
	}
	if s.cfg.PlacementListen != "" {
		if err := listen(s.cfg.PlacementListen, s.placement, "placement at /"); err != nil {
			closeAll()
			return err
		}
	}
	if s.cfg.Metrics.Listen != "" && s.metrics != nil {
		if err := listen(s.cfg.Metrics.Listen, metricsOnly(s.metrics), "/metrics (no authentication)"); err != nil {
			closeAll()
			return err
		}
		s.MetricsAddr = s.Addrs[len(s.Addrs)-1]
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(ls))
	var srvs []*http.Server
	for _, x := range ls {
		srv := &http.Server{Handler: x.h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
		srvs = append(srvs, srv)
		wg.Add(1)
		go func(l net.Listener) {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}(x.l)
	}
	bctx, bcancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	for _, fn := range s.background {
		bg.Add(1)
		go func() { defer bg.Done(); fn(bctx) }()
	}
	close(s.Ready)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	slog.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range srvs {
		_ = srv.Shutdown(sctx)
	}
	wg.Wait()
	bcancel()
	bg.Wait()
	if err := s.Notifier.Close(); err != nil {
		slog.Warn("closing the notification transport", "err", err)
	}
	if err := s.db.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
