package placement

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
)

// raceSnapshot is what a lost race must leave as it was.
type raceSnapshot struct {
	Generations map[string]int64
	Usages      map[string]map[string]int64
	Held        map[string]map[string]map[string]int64 // consumer → provider → class → used
	ConsumerGen map[string]int64
}

func takeRaceSnapshot(t *testing.T, s *Service, rps []*Provider, consumers []string) raceSnapshot {
	t.Helper()
	snap := raceSnapshot{Generations: map[string]int64{}, Usages: map[string]map[string]int64{},
		Held: map[string]map[string]map[string]int64{}, ConsumerGen: map[string]int64{}}
	for _, p := range rps {
		snap.Generations[p.UUID] = providerGen(t, s, p.UUID)
		snap.Usages[p.UUID] = usages(t, s, p.UUID)
	}
	for _, c := range consumers {
		a, err := s.GetConsumerAllocations(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]map[string]int64{}
		for rp, pr := range a.Providers {
			held[rp] = pr.Resources
		}
		snap.Held[c] = held
		if a.Consumer != nil {
			snap.ConsumerGen[c] = a.Consumer.Generation
		}
	}
	return snap
}

// TestAllocationWriteLostRace plans an allocation write, lets "another
// writer" move a provider's or the consumer's generation before the
// write's optimistic updates run, and checks that the write is a lost
// race (errRetry, run again by WriteAllocations) that changes nothing.
// The cases cover both ways the provider bumps and usage changes are
// written on MySQL: one multi-table UPDATE when every usage row exists,
// separate statements when one does not yet.
func TestAllocationWriteLostRace(t *testing.T) {
	tests := []struct {
		name string
		ws   func(p1, p2 *Provider) []ConsumerWrite
		// race runs inside the write's transaction, between its reads
		// and its writes.
		race    func(tx *gorm.DB, p1, p2 *Provider) error
		wantMsg string
		// mysqlOnly: the race only exists on MySQL.
		mysqlOnly bool
	}{
		{
			name: "provider moved, new consumer, usage rows exist",
			ws: func(p1, _ *Provider) []ConsumerWrite {
				return []ConsumerWrite{{UUID: consumerC, Allocations: alloc(p1.UUID, "VCPU", 1)}}
			},
			race: func(tx *gorm.DB, p1, _ *Provider) error {
				return tx.Exec("UPDATE resource_providers SET generation = generation + 1 WHERE id = ?", p1.ID).Error
			},
			wantMsg: msgProviderRace,
		},
		{
			name: "second of two providers moved, existing consumer",
			ws: func(p1, p2 *Provider) []ConsumerWrite {
				a := alloc(p1.UUID, "VCPU", 3)
				a[p2.UUID] = map[string]int64{"VCPU": 2}
				return []ConsumerWrite{{UUID: consumerA, Allocations: a}}
			},
			race: func(tx *gorm.DB, _, p2 *Provider) error {
				return tx.Exec("UPDATE resource_providers SET generation = generation + 1 WHERE id = ?", p2.ID).Error
			},
			wantMsg: msgProviderRace,
		},
		{
			name: "provider moved, first allocation of a class (no usage row)",
			ws: func(p1, _ *Provider) []ConsumerWrite {
				return []ConsumerWrite{{UUID: consumerC, Allocations: alloc(p1.UUID, "MEMORY_MB", 64)}}
			},
			race: func(tx *gorm.DB, p1, _ *Provider) error {
				return tx.Exec("UPDATE resource_providers SET generation = generation + 1 WHERE id = ?", p1.ID).Error
			},
			wantMsg: msgProviderRace,
		},
		{
			name: "provider moved, consumer cleared",
			ws: func(_, _ *Provider) []ConsumerWrite {
				return []ConsumerWrite{{UUID: consumerA}}
			},
			race: func(tx *gorm.DB, _, p2 *Provider) error {
				return tx.Exec("UPDATE resource_providers SET generation = generation + 1 WHERE id = ?", p2.ID).Error
			},
			wantMsg: msgProviderRace,
		},
		{
			name: "consumer moved",
			ws: func(p1, _ *Provider) []ConsumerWrite {
				return []ConsumerWrite{{UUID: consumerA, Allocations: alloc(p1.UUID, "VCPU", 1)}}
			},
			race: func(tx *gorm.DB, _, _ *Provider) error {
				return tx.Exec("UPDATE consumers SET generation = generation + 1 WHERE uuid = ?", consumerA).Error
			},
			wantMsg: msgConsumerRace,
		},
		{
			name: "usage row removed",
			ws: func(p1, _ *Provider) []ConsumerWrite {
				return []ConsumerWrite{{UUID: consumerC, Allocations: alloc(p1.UUID, "VCPU", 1)}}
			},
			race: func(tx *gorm.DB, p1, _ *Provider) error {
				// Not something any writer does, but a MySQL write that
				// counted on the row must not go on without it (SQLite
				// upserts the row and would simply recreate it).
				return tx.Exec("DELETE FROM allocation_usages WHERE resource_provider_id = ?", p1.ID).Error
			},
			wantMsg:   msgProviderRace,
			mysqlOnly: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAllocService(t)
			if tt.mysqlOnly && s.db.Dialect != db.MySQL {
				t.Skip("MySQL only")
			}
			ctx := context.Background()
			defer checkUsageTable(t, s)
			p1 := mkProvider(t, s, "race-1", inv{class: "VCPU", total: 16}, inv{class: "MEMORY_MB", total: 1024})
			p2 := mkProvider(t, s, "race-2", inv{class: "VCPU", total: 16})
			seed := alloc(p1.UUID, "VCPU", 2)
			seed[p2.UUID] = map[string]int64{"VCPU": 1}
			if err := s.WriteAllocations(ctx, []ConsumerWrite{
				{UUID: consumerA, ProjectID: "p", UserID: "u", Allocations: seed},
				{UUID: consumerB, ProjectID: "p", UserID: "u", Allocations: alloc(p1.UUID, "VCPU", 1)},
			}, true); err != nil {
				t.Fatal(err)
			}
			all := []*Provider{p1, p2}
			consumers := []string{consumerA, consumerB, consumerC}
			before := takeRaceSnapshot(t, s, all, consumers)

			err := s.writeTx(ctx, func(tx *gorm.DB) error {
				apply, err := s.planAllocations(tx, tt.ws(p1, p2), nil, true)
				if err != nil {
					return err
				}
				if err := tt.race(tx, p1, p2); err != nil {
					return err
				}
				return apply(tx)
			})
			var r *errRetry
			if !errors.As(err, &r) {
				t.Fatalf("write after a lost race: %v (%T), want *errRetry", err, err)
			}
			if r.msg != tt.wantMsg {
				t.Errorf("lost race %q, want %q", r.msg, tt.wantMsg)
			}
			if diff := cmp.Diff(before, takeRaceSnapshot(t, s, all, consumers)); diff != "" {
				t.Errorf("a lost race changed the data (-before +after):\n%s", diff)
			}

			// Run for real, the same write goes through.
			if err := s.WriteAllocations(ctx, tt.ws(p1, p2), true); err != nil {
				t.Fatalf("write without a race: %v", err)
			}
		})
	}
}

// TestDeleteAllocationsLostRace: DELETE /allocations/{c} whose consumer
// changed between its read and its writes is a lost race that changes
// nothing.
func TestDeleteAllocationsLostRace(t *testing.T) {
	tests := []struct {
		name      string
		race      func(tx *gorm.DB, p1 *Provider) error
		mysqlOnly bool
	}{
		{
			name: "consumer moved",
			race: func(tx *gorm.DB, _ *Provider) error {
				return tx.Exec("UPDATE consumers SET generation = generation + 1 WHERE uuid = ?", consumerA).Error
			},
		},
		{
			// Not something any writer does (they all move the consumer's
			// generation), but the MySQL delete, which counts the rows it
			// removes, must not remove one it did not read.
			name: "allocation row appeared",
			race: func(tx *gorm.DB, p1 *Provider) error {
				return tx.Exec(`INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)
 SELECT resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at FROM allocations WHERE consumer_id = ?`, consumerA).Error
			},
			mysqlOnly: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAllocService(t)
			if tt.mysqlOnly && s.db.Dialect != db.MySQL {
				t.Skip("MySQL only")
			}
			ctx := context.Background()
			defer checkUsageTable(t, s)
			p1 := mkProvider(t, s, "race-1", inv{class: "VCPU", total: 16}, inv{class: "MEMORY_MB", total: 1024})
			p2 := mkProvider(t, s, "race-2", inv{class: "VCPU", total: 16})
			seed := alloc(p1.UUID, "VCPU", 2, "MEMORY_MB", 64)
			seed[p2.UUID] = map[string]int64{"VCPU": 1}
			if err := s.WriteAllocations(ctx, []ConsumerWrite{{UUID: consumerA, ProjectID: "p", UserID: "u", Allocations: seed}}, false); err != nil {
				t.Fatal(err)
			}
			all := []*Provider{p1, p2}
			before := takeRaceSnapshot(t, s, all, []string{consumerA})

			err := s.writeTx(ctx, func(tx *gorm.DB) error {
				apply, err := s.planDeleteAllocations(tx, consumerA)
				if err != nil {
					return err
				}
				if err := tt.race(tx, p1); err != nil {
					return err
				}
				return apply(tx)
			})
			var r *errRetry
			if !errors.As(err, &r) || r.msg != msgConsumerRace {
				t.Fatalf("delete after a lost race: %v (%T), want *errRetry %q", err, err, msgConsumerRace)
			}
			if diff := cmp.Diff(before, takeRaceSnapshot(t, s, all, []string{consumerA})); diff != "" {
				t.Errorf("a lost race changed the data (-before +after):\n%s", diff)
			}

			// Without a race the delete goes through.
			if err := s.DeleteAllocations(ctx, consumerA); err != nil {
				t.Fatalf("delete without a race: %v", err)
			}
			got := takeRaceSnapshot(t, s, all, []string{consumerA})
			if len(got.Held[consumerA]) != 0 || got.Usages[p1.UUID]["VCPU"] != 0 || got.Usages[p2.UUID]["VCPU"] != 0 {
				t.Errorf("after delete: held %v, usages %v", got.Held[consumerA], got.Usages)
			}
		})
	}
}
