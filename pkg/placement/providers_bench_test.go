package placement

import (
	"context"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// BenchmarkGetProvider is the service half of GET
// /resource_providers/{uuid}, on 20 providers.
func BenchmarkGetProvider(b *testing.B) {
	s := NewService(dbtest.Open(b), Config{})
	ctx := context.Background()
	var uuids []string
	for i := range 20 {
		p, err := s.CreateProvider(ctx, fmt.Sprintf("bench-%d", i), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		uuids = append(uuids, p.UUID)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.GetProvider(ctx, uuids[i%len(uuids)]); err != nil {
			b.Fatal(err)
		}
	}
}
