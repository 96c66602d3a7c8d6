package hosts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// seedHosts inserts n reservable hosts with caps capabilities each,
// directly (no providers), for benchmarks.
func seedHosts(b *testing.B, s *Service, n, caps int) {
	b.Helper()
	d := s.db
	t := fixed
	var props []models.ResourceProperty
	for c := 0; c < caps; c++ {
		props = append(props, models.ResourceProperty{ID: uuid.NewString(), ResourceType: ResourceType, PropertyName: fmt.Sprintf("cap%d", c), CreatedAt: t})
	}
	if len(props) > 0 {
		if err := d.Create(&props).Error; err != nil {
			b.Fatal(err)
		}
	}
	const batch = 500
	for i := 0; i < n; i += batch {
		var hs []models.ComputeHost
		for j := i; j < i+batch && j < n; j++ {
			hs = append(hs, models.ComputeHost{ID: int64(j + 1), VCPUs: int64(j % 64), CPUInfo: "{}", HypervisorHostname: fmt.Sprintf("h%05d", j),
				ServiceName: fmt.Sprintf("h%05d", j), MemoryMB: 1024, LocalGB: 10, Reservable: true, CreatedAt: t})
		}
		if err := d.CreateInBatches(&hs, 100).Error; err != nil {
			b.Fatal(err)
		}
		var cs []models.ComputeHostExtraCapability
		for _, h := range hs {
			for _, p := range props {
				cs = append(cs, models.ComputeHostExtraCapability{ID: uuid.NewString(), ComputeHostID: h.ID, PropertyID: p.ID, CapabilityValue: fmt.Sprint(h.ID % 7), CreatedAt: t})
			}
		}
		if len(cs) > 0 {
			if err := d.CreateInBatches(&cs, 200).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := BumpMarkerTx(d.DB); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReservable: 10,000 hosts with 3 capabilities each, served from
// the cache (one marker read per call) and loaded from the database.
func BenchmarkReservable(b *testing.B) {
	d := dbtest.Open(b)
	s := New(d, nil)
	s.now = func() time.Time { return fixed }
	seedHosts(b, s, 10000, 3)
	ctx := context.Background()
	b.Run("cached", func(b *testing.B) {
		if _, err := s.Reservable(ctx); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			hs, err := s.Reservable(ctx)
			if err != nil || len(hs) != 10000 {
				b.Fatalf("%d hosts, %v", len(hs), err)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.invalidate()
			hs, err := s.Reservable(ctx)
			if err != nil || len(hs) != 10000 {
				b.Fatalf("%d hosts, %v", len(hs), err)
			}
		}
	})
}
