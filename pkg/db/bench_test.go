package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/db/dbtest"
)

// benchRow is the row of the point-select benchmark: a primary key and a
// few columns, like a resource provider's.
type benchRow struct {
	ID         int64 `gorm:"primaryKey"`
	UUID       string
	Name       string
	Generation int64
	CreatedAt  time.Time
}

func (benchRow) TableName() string { return "bench_rows" }

// BenchmarkPointSelect reads one row by primary key through GORM, the
// shape of most Placement reads. On SQLite it shows whether prepared
// statements are cached per connection (without the cache SQLite parses
// and plans the statement on every call). Besides ns/op it reports the
// process CPU time per read (cpu-ns/op), the steadier figure on a shared
// machine.
func BenchmarkPointSelect(b *testing.B) {
	const rows = 10_000
	for _, dialect := range dbtest.Dialects() {
		b.Run(string(dialect), func(b *testing.B) {
			d := dbtest.OpenDialect(b, dialect)
			if err := d.AutoMigrate(&benchRow{}); err != nil {
				b.Fatal(err)
			}
			batch := make([]benchRow, 0, 500)
			now := time.Now().UTC()
			for i := 1; i <= rows; i++ {
				batch = append(batch, benchRow{ID: int64(i), UUID: fmt.Sprintf("uuid-%05d", i), Name: "row", CreatedAt: now})
				if len(batch) == cap(batch) {
					if err := d.Create(&batch).Error; err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			// Read in a scattered order so the page cache, not one hot
			// page, serves the reads.
			id := int64(1)
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				id = id*7919%rows + 1
				var r benchRow
				if err := d.First(&r, id).Error; err != nil {
					b.Fatal(err)
				}
				if r.ID != id {
					b.Fatalf("read row %d, want %d", r.ID, id)
				}
			}
			b.StopTimer()
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
