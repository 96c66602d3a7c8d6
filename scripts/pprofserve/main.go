// Command pprofserve is `leasehold serve` plus net/http/pprof on a
// separate loopback listener, for profiling under load
// (scripts/bench-api.sh with BENCH_PPROF=1). It is a benchmarking tool,
// not shipped:
//
//	go build -o bin/leasehold-pprof ./scripts/pprofserve
//	bin/leasehold-pprof [serve] --pprof-listen 127.0.0.1:6060 [serve flags]
//	go tool pprof -top bin/leasehold-pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=8
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/logging"
	"github.com/leasehold/leasehold/pkg/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pprofserve:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	// Accept `leasehold serve`'s command line as is.
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	fs := pflag.NewFlagSet("pprofserve", pflag.ContinueOnError)
	config.Flags(fs)
	pprofAddr := fs.String("pprof-listen", "127.0.0.1:6060", "address of the pprof listener")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// pprof-listen is ours, not a config key.
	fs.Lookup("pprof-listen").Changed = false
	cfg, err := config.Load(fs)
	if err != nil {
		return err
	}
	slog.SetDefault(logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel))
	defer logging.Flush()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ps := &http.Server{Addr: *pprofAddr, Handler: mux}
	go func() {
		if err := ps.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("pprof listener", "err", err)
		}
	}()
	defer ps.Close()

	s, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
