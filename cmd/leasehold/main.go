// Command leasehold is the Leasehold reservation and placement service.
//
//	leasehold serve [flags]        run the API server
//	leasehold db sync [flags]      create or upgrade the database schema
//	leasehold outbox …             list, retry or discard external actions
//	leasehold iallocator FILE|-    answer a Ganeti IAllocator request
//	leasehold policy sample        print the default policy rules (etc/policy.yaml.sample)
//	leasehold version [--json]     version and build information
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/logging"
	"github.com/leasehold/leasehold/pkg/server"
)

const usage = `usage:
  leasehold serve [--config FILE] [--listen ADDR] [--placement-listen ADDR] [--database URL] [--auth keystone|noauth]
  leasehold db sync [--config FILE] [--database URL]
  leasehold outbox list|retry|discard [flags]
  leasehold iallocator FILE|-
  leasehold policy sample
  leasehold version [--json]
`

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "leasehold:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "db":
		if len(args) < 2 || args[1] != "sync" {
			fmt.Fprint(stderr, usage)
			return errors.New(`"db" needs the subcommand "sync"`)
		}
		return dbSync(args[2:], stderr)
	case "outbox":
		return outboxCmd(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "iallocator":
		if code := iallocatorCmd(args[1:], stdin, stdout, stderr); code != 0 {
			os.Exit(code)
		}
		return nil
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func loadConfig(name string, args []string, stderr io.Writer) (*config.Config, error) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, err := config.Load(fs)
	if err != nil {
		return nil, err
	}
	slog.SetDefault(logging.New(stderr, cfg.LogFormat, cfg.LogLevel))
	return cfg, nil
}

func serve(args []string, stderr io.Writer) error {
	cfg, err := loadConfig("serve", args, stderr)
	if err != nil {
		return err
	}
	defer logging.Flush()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	slog.Info("starting leasehold", "version", server.Version, "database", db.Redact(cfg.Database), "auth", cfg.Auth)
	s, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

func dbSync(args []string, stderr io.Writer) error {
	cfg, err := loadConfig("db sync", args, stderr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	d, err := db.Open(ctx, cfg.Database)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		return err
	}
	slog.Info("database schema is up to date", "database", db.Redact(cfg.Database))
	return nil
}
