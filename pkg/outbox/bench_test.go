package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/outbox"
)

// BenchmarkWorker measures rows/s through one worker (default
// concurrency): b.N actions over 64 keys are enqueued untimed, then
// RunDue passes run them all (claim, a no-op handler, delete).
func BenchmarkWorker(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			h := func(context.Context, json.RawMessage) error { return nil }
			w := outbox.NewWorker(d, map[string]outbox.Handler{"bench.noop": h}, outbox.Config{ID: "bench"}, nil)
			ctx := context.Background()
			for i := 0; i < b.N; i += 100 {
				var acts []outbox.Action
				for j := i; j < min(i+100, b.N); j++ {
					acts = append(acts, act("bench.noop", fmt.Sprintf("key%d", j%64), j))
				}
				enqueue(b, d, acts...)
			}
			b.ResetTimer()
			done := 0
			for done < b.N {
				n, err := w.RunDue(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if n == 0 {
					b.Fatalf("stuck after %d of %d rows", done, b.N)
				}
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkEnqueue measures what Enqueue adds to a write transaction:
// one action per transaction, ten writers at once.
func BenchmarkEnqueue(b *testing.B) {
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			ctx := context.Background()
			b.SetParallelism(10)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					a := act("bench.noop", fmt.Sprintf("key%d", i%64), i)
					if err := d.Write(ctx, func(tx *gorm.DB) error { return outbox.Enqueue(tx, a) }); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
