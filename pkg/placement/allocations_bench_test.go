package placement

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkWriteAllocations is the service half of the load benchmark's
// PUT /allocations/{consumer}: a fresh consumer per write, one VCPU and
// 16 MEMORY_MB on one of 20 providers (round robin), written by several
// goroutines at once (on SQLite they share group commits). On MySQL
// (LEASEHOLD_TEST_MYSQL_DSN set) it runs against the server.
func BenchmarkWriteAllocations(b *testing.B) {
	s := newAllocService(b)
	ctx := context.Background()
	var rps []string
	for i := range 20 {
		p := mkProvider(b, s, fmt.Sprintf("bench-%d", i), inv{class: "VCPU", total: 1 << 40, maxU: 1000}, inv{class: "MEMORY_MB", total: 1 << 40, maxU: 100000})
		rps = append(rps, p.UUID)
	}
	// The consumer type is cached after its first use, as in a server.
	if _, err := s.consumerTypeID(ctx, "INSTANCE"); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(5)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			w := ConsumerWrite{
				UUID: fmt.Sprintf("%08x-0000-4000-8000-%012d", i%4096, i), ProjectID: "bench-project", UserID: "bench-user",
				CheckGeneration: true, Type: "INSTANCE", Allocations: alloc(rps[i%int64(len(rps))], "VCPU", 1, "MEMORY_MB", 16),
			}
			if err := s.WriteAllocations(ctx, []ConsumerWrite{w}, false); err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
		}
	})
}
