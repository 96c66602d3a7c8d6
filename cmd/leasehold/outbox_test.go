package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// TestOutboxCommand: an operator lists a failed action, retries it and
// the worker runs it; a second failure is discarded.
func TestOutboxCommand(t *testing.T) {
	url := dbtest.URL(t)
	ctx := context.Background()
	d, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, func(tx *gorm.DB) error {
		return outbox.Enqueue(tx, outbox.Action{Kind: "test.call", Key: "host:1", LeaseID: "l1", Payload: map[string]int{"n": 1}},
			outbox.Action{Kind: "test.call", Key: "host:2", Payload: map[string]int{"n": 2}})
	}); err != nil {
		t.Fatal(err)
	}
	fail := true
	var ran []string
	w := outbox.NewWorker(d, map[string]outbox.Handler{"test.call": func(_ context.Context, p json.RawMessage) error {
		if fail {
			return outbox.Permanent(errors.New("compute service said no"))
		}
		ran = append(ran, string(p))
		return nil
	}}, outbox.Config{}, time.Now)
	if _, err := w.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(append(append([]string{"outbox"}, args...), "--database", url), strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("outbox %v: %v (%s)", args, err, errb.String())
		}
		return out.String()
	}
	list := cmd("list", "--status", "FAILED")
	for _, want := range []string{"FAILED", "test.call", "host:1", "l1", "compute service said no"} {
		if !strings.Contains(list, want) {
			t.Errorf("list does not show %q:\n%s", want, list)
		}
	}
	rows, err := outbox.List(ctx, d, outbox.StatusFailed)
	if err != nil || len(rows) != 2 {
		t.Fatalf("failed rows %v, %v", rows, err)
	}
	cmd("retry", fmt.Sprint(rows[0].ID))
	cmd("discard", fmt.Sprint(rows[1].ID))
	fail = false
	if _, err := w.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != `{"n":1}` {
		t.Errorf("ran %v, want the retried action only", ran)
	}
	if left := cmd("list", "--json"); strings.TrimSpace(left) != "[]" {
		t.Errorf("rows left: %s", left)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"outbox", "retry", fmt.Sprint(rows[0].ID), "--database", url}, strings.NewReader(""), &out, &errb); err == nil {
		t.Error("retrying an action that is not FAILED succeeded")
	}
}
