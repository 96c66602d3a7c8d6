package host

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/outbox"
)

type fakeMigrator struct {
	calls [][2]string
	err   error
}

func (f *fakeMigrator) LiveMigrate(_ context.Context, server, host string) error {
	f.calls = append(f.calls, [2]string{server, host})
	return f.err
}

// TestMoverLiveMigrates: with a Migrator a move is a live migration of
// the consumer (the server) to the target host, made only while the lease
// still wants it, its failure returned for the outbox to retry.
func TestMoverLiveMigrates(t *testing.T) {
	wanted := map[string]bool{"l1": true}
	fm := &fakeMigrator{}
	m := &Mover{Migrator: fm, Wanted: func(_ context.Context, id string) (bool, error) { return wanted[id], nil }}
	h := m.Handlers()[KindMoveInstance]
	payload := func(lease, server, to string) json.RawMessage {
		b, _ := json.Marshal(move{LeaseID: lease, Consumer: server, From: "p1", To: "p2", FromHost: "c1", ToHost: to})
		return b
	}
	if err := h(context.Background(), payload("l1", "s1", "c2")); err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), payload("gone", "s2", "c3")); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([][2]string{{"s1", "c2"}}, fm.calls); d != "" {
		t.Errorf("live migrations (-want +got):\n%s", d)
	}
	fm.err = errors.New("nova: 503")
	if err := h(context.Background(), payload("l1", "s3", "c2")); err == nil || outbox.IsPermanent(err) {
		t.Errorf("a failed migration gives %v, want a retryable error", err)
	}
	if err := h(context.Background(), json.RawMessage(`{`)); !outbox.IsPermanent(err) {
		t.Errorf("a bad payload gives %v, want a permanent error", err)
	}
}
