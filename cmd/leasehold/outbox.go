package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/outbox"
)

const outboxUsage = `usage:
  leasehold outbox list [--status PENDING|CLAIMED|FAILED] [--json] [--config FILE] [--database URL]
  leasehold outbox retry ID [--config FILE] [--database URL]     (a FAILED action, after fixing its cause)
  leasehold outbox discard ID [--config FILE] [--database URL]   (a FAILED action given up or done by hand)
`

// outboxCmd lets an operator see the external actions (compute service
// calls) still to run or failed for good, and retry or discard the
// failed ones.
func outboxCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, outboxUsage)
		return errors.New(`"outbox" needs list, retry or discard`)
	}
	sub, args := args[0], args[1:]
	fs := pflag.NewFlagSet("outbox "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.Flags(fs)
	status := fs.String("status", "", "list only the actions in this status")
	asJSON := fs.Bool("json", false, "list as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(fs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := db.Open(ctx, cfg.Database)
	if err != nil {
		return err
	}
	defer d.Close()
	switch sub {
	case "list":
		if fs.NArg() != 0 {
			return fmt.Errorf("unexpected arguments: %v", fs.Args())
		}
		var statuses []string
		if *status != "" {
			statuses = append(statuses, *status)
		}
		rows, err := outbox.List(ctx, d, statuses...)
		if err != nil {
			return err
		}
		return printOutbox(stdout, rows, *asJSON)
	case "retry", "discard":
		if fs.NArg() != 1 {
			return fmt.Errorf("outbox %s needs one action id", sub)
		}
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil {
			return fmt.Errorf("outbox %s: %q is not an action id", sub, fs.Arg(0))
		}
		if sub == "retry" {
			err = outbox.Retry(ctx, d, id)
		} else {
			err = outbox.Discard(ctx, d, id)
		}
		if err != nil {
			return fmt.Errorf("outbox %s %d: %w", sub, id, err)
		}
		fmt.Fprintf(stdout, "outbox action %d: %s\n", id, map[string]string{"retry": "will run again", "discard": "discarded"}[sub])
		return nil
	default:
		fmt.Fprint(stderr, outboxUsage)
		return fmt.Errorf("unknown outbox command %q", sub)
	}
}

func printOutbox(w io.Writer, rows []outbox.Record, asJSON bool) error {
	if asJSON {
		if rows == nil {
			rows = []outbox.Record{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tKIND\tKEY\tLEASE\tATTEMPTS\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Status, r.Kind, r.Key, r.LeaseID, r.Attempts, r.LastError)
	}
	return tw.Flush()
}
