package scheduler

import (
	"testing"

	"github.com/leasehold/leasehold/pkg/db"
)

// BenchCloud fills d with the benchmark's cloud for the HTTP benchmark in
// package scheduler_test (which may import the handlers; this package's
// own tests may not).
func BenchCloud(b *testing.B, d *db.DB) (svc *Service, resNow, project string, hosts int) {
	svc, resNow, project = benchCloud(b, d)
	return svc, resNow, project, benchHosts
}
