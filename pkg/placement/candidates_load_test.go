package placement

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

// acFixture inserts rows directly: a shared-storage layout with cn1, cn2
// (VCPU, MEMORY_MB) and ss (DISK_GB, MISC_SHARES_VIA_AGGREGATE) all in
// one aggregate, and a nested cn3 → numa (VCPU).
type acFixture struct {
	svc *Service
	tx  *gorm.DB
	ids map[string]int64
}

func rpUUID(name string) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", []byte(name)[0:1][0])
}

func newACFixture(t *testing.T) *acFixture {
	t.Helper()
	d := dbtest.Open(t)
	f := &acFixture{svc: NewService(d, Config{}), tx: d.DB, ids: map[string]int64{}}
	now := time.Now().UTC()
	exec := func(q string, args ...any) {
		t.Helper()
		if err := f.tx.Exec(q, args...).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	addRP := func(name, parent string) {
		var parentID any
		root := int64(0)
		if parent != "" {
			parentID = f.ids[parent]
			root = f.rootOf(t, parent)
		}
		exec("INSERT INTO resource_providers (uuid, name, generation, parent_provider_id, root_provider_id, created_at, updated_at) VALUES (?, ?, 0, ?, 0, ?, ?)",
			rpUUID(name), name, parentID, now, now)
		var id int64
		f.tx.Raw("SELECT id FROM resource_providers WHERE uuid = ?", rpUUID(name)).Scan(&id)
		if root == 0 {
			root = id
		}
		exec("UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", root, id)
		f.ids[name] = id
	}
	classID := func(rc string) int64 {
		var id int64
		f.tx.Raw("SELECT id FROM resource_classes WHERE name = ?", rc).Scan(&id)
		return id
	}
	addInv := func(name, rc string, total int64, ratio float64) {
		exec("INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio, created_at, updated_at) VALUES (?, ?, ?, 0, 1, ?, 1, ?, ?, ?)",
			f.ids[name], classID(rc), total, total, ratio, now, now)
	}
	addTrait := func(name, trait string) {
		exec("INSERT INTO resource_provider_traits (resource_provider_id, trait_id) SELECT ?, id FROM traits WHERE name = ?", f.ids[name], trait)
	}
	addRP("a-cn1", "")
	addRP("b-cn2", "")
	addRP("c-ss", "")
	addRP("d-cn3", "")
	addRP("e-numa", "d-cn3")
	addInv("a-cn1", "VCPU", 8, 1)
	addInv("a-cn1", "MEMORY_MB", 1024, 1.5)
	addInv("b-cn2", "VCPU", 4, 1)
	addInv("b-cn2", "MEMORY_MB", 1024, 1)
	addInv("c-ss", "DISK_GB", 100, 1)
	addInv("e-numa", "VCPU", 2, 1)
	addInv("d-cn3", "MEMORY_MB", 512, 1)
	addTrait("a-cn1", "HW_CPU_X86_AVX2")
	addTrait("c-ss", "MISC_SHARES_VIA_AGGREGATE")
	exec("INSERT INTO placement_aggregates (uuid) VALUES (?)", "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa")
	for _, n := range []string{"a-cn1", "b-cn2", "c-ss"} {
		exec("INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id) SELECT ?, id FROM placement_aggregates", f.ids[n])
	}
	return f
}

func (f *acFixture) rootOf(t *testing.T, name string) int64 {
	var root int64
	f.tx.Raw("SELECT root_provider_id FROM resource_providers WHERE id = ?", f.ids[name]).Scan(&root)
	return root
}

func (f *acFixture) find(t *testing.T, query string) []string {
	t.Helper()
	req, err := ParseCandidatesQuery(query, microversion.Version{Major: 1, Minor: 39})
	if err != nil {
		t.Fatalf("parse %q: %v", query, err)
	}
	res, err := f.svc.AllocationCandidates(context.Background(), req, CandidateOptions{MaxCandidates: -1})
	if err != nil {
		t.Fatalf("find %q: %v", query, err)
	}
	names := map[string]string{}
	for n := range f.ids {
		names[rpUUID(n)] = n
	}
	var out []string
	for _, ar := range res.AllocationRequests() {
		s := ""
		for _, a := range ar.Allocations {
			s += fmt.Sprintf("%s:%s=%d ", names[a.Provider], a.Class, a.Amount)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestAllocationCandidatesService(t *testing.T) {
	f := newACFixture(t)
	tests := []struct {
		query string
		want  []string
	}{
		{"resources=VCPU:1,MEMORY_MB:512", []string{
			"a-cn1:VCPU=1 a-cn1:MEMORY_MB=512 ", "b-cn2:VCPU=1 b-cn2:MEMORY_MB=512 ", "d-cn3:MEMORY_MB=512 e-numa:VCPU=1 "}},
		{"resources=VCPU:1,DISK_GB:10", []string{"a-cn1:VCPU=1 c-ss:DISK_GB=10 ", "b-cn2:VCPU=1 c-ss:DISK_GB=10 "}},
		{"resources=VCPU:1,DISK_GB:10&required=HW_CPU_X86_AVX2", []string{"a-cn1:VCPU=1 c-ss:DISK_GB=10 "}},
		{"resources=VCPU:1,DISK_GB:10&required=!HW_CPU_X86_AVX2", []string{"b-cn2:VCPU=1 c-ss:DISK_GB=10 "}},
		{"resources=MEMORY_MB:1536", nil}, // capacity 1536 but max_unit 1024
		{"resources=MEMORY_MB:1024", []string{"a-cn1:MEMORY_MB=1024 ", "b-cn2:MEMORY_MB=1024 "}},
		{"resources=VCPU:3&in_tree=" + rpUUID("e-numa"), nil},
		{"resources=VCPU:2&in_tree=" + rpUUID("e-numa"), []string{"e-numa:VCPU=2 "}},
		{"resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate&in_tree_A=" + rpUUID("a-cn1"), nil},
		{"resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none&in_tree_A=" + rpUUID("a-cn1") + "&in_tree_B=" + rpUUID("a-cn1"),
			[]string{"a-cn1:VCPU=2 "}},
		{"resources=DISK_GB:10&member_of=aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa&root_required=HW_CPU_X86_AVX2", []string{"c-ss:DISK_GB=10 "}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, f.find(t, tc.query)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.query, diff)
		}
	}
}

// TestAllocationCandidatesSeeWrites: every committed change is visible to
// the next request, including those that bump no generation.
func TestAllocationCandidatesSeeWrites(t *testing.T) {
	f := newACFixture(t)
	q := "resources=VCPU:1,DISK_GB:10"
	if got := len(f.find(t, q)); got != 2 {
		t.Fatalf("before: %d candidates", got)
	}
	// An allocation using all of cn2's VCPU, written without any
	// generation bump.
	if err := rawAllocateVCPU(f.tx, f.ids["b-cn2"], 4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-cn1:VCPU=1 c-ss:DISK_GB=10 "}, f.find(t, q)); diff != "" {
		t.Errorf("after allocation (-want +got):\n%s", diff)
	}
	// Moving the sharing provider out of the aggregate (PUT aggregates
	// below 1.19 bumps no generation).
	if err := f.tx.Exec("DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?", f.ids["c-ss"]).Error; err != nil {
		t.Fatal(err)
	}
	if got := f.find(t, q); len(got) != 0 {
		t.Errorf("after aggregate removal: %v", got)
	}
}

func TestAllocationCandidatesErrors(t *testing.T) {
	f := newACFixture(t)
	mv := microversion.Version{Major: 1, Minor: 39}
	for _, tc := range []struct{ query, want string }{
		{"resources=CUSTOM_NOPE:1", "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."},
		{"resources=VCPU:1&required=CUSTOM_NOPE", "No such trait(s): CUSTOM_NOPE."},
		{"resources=VCPU:1&root_required=CUSTOM_NOPE", "No such trait(s): CUSTOM_NOPE."},
	} {
		req, err := ParseCandidatesQuery(tc.query, mv)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.AllocationCandidates(context.Background(), req, CandidateOptions{MaxCandidates: -1})
		pe, ok := err.(*errs.Error)
		if !ok || pe.Kind != errs.BadRequest || pe.Msg != tc.want {
			t.Errorf("%s: got %v, want 400 %q", tc.query, err, tc.want)
		}
	}
}

func TestLimitAndCap(t *testing.T) {
	f := newACFixture(t)
	req, _ := ParseCandidatesQuery("resources=VCPU:1&limit=2", microversion.Version{Major: 1, Minor: 39})
	res, err := f.svc.AllocationCandidates(context.Background(), req, CandidateOptions{MaxCandidates: -1})
	if err != nil || res.Len() != 2 {
		t.Fatalf("limit: %v %v", err, res)
	}
	roots := map[string]bool{}
	for _, ar := range res.AllocationRequests() {
		for _, a := range ar.Allocations {
			roots[a.Provider] = true
		}
	}
	for _, s := range res.Summaries {
		if !roots[s.RootUUID] && !roots[s.UUID] {
			// every summary belongs to a tree of a kept request
			found := false
			for _, ar := range res.AllocationRequests() {
				for _, a := range ar.Allocations {
					if a.Provider == s.UUID || s.RootUUID == rootUUIDOf(res, a.Provider) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("summary %s of an unused tree", s.UUID)
			}
		}
	}
	req, _ = ParseCandidatesQuery("resources=VCPU:1", microversion.Version{Major: 1, Minor: 39})
	for _, maxC := range []int{0, 1} {
		res, err = f.svc.AllocationCandidates(context.Background(), req, CandidateOptions{MaxCandidates: maxC})
		if err != nil || res.Len() != 1 || !res.Capped {
			t.Fatalf("cap %d: %v %+v", maxC, err, res)
		}
	}
	res, err = f.svc.AllocationCandidates(context.Background(), req, CandidateOptions{MaxCandidates: -1})
	if err != nil || res.Len() != 3 || res.Capped {
		t.Fatalf("no cap: %v %+v", err, res)
	}
}

func rootUUIDOf(res *candidates.Result, uuid string) string {
	for _, s := range res.Summaries {
		if s.UUID == uuid {
			return s.RootUUID
		}
	}
	return ""
}

// TestSharedMarkerStartsAfterArrival: a caller only ever gets a marker
// read that started after it asked, however many callers share reads.
func TestSharedMarkerStartsAfterArrival(t *testing.T) {
	c := &snapshotCache{}
	var clock, reads atomic.Int64
	read := func() (string, error) {
		start := clock.Add(1)
		reads.Add(1)
		time.Sleep(200 * time.Microsecond)
		return fmt.Sprint(start), nil
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				arrived := clock.Add(1)
				m, err := c.sharedMarker(read)
				if err != nil {
					t.Error(err)
					return
				}
				var started int64
				fmt.Sscan(m, &started)
				if started <= arrived {
					t.Errorf("read started at %d, caller arrived at %d", started, arrived)
					return
				}
			}
		}()
	}
	wg.Wait()
	if reads.Load() == 0 || reads.Load() > 16*50 {
		t.Fatalf("%d reads", reads.Load())
	}
}

// TestAllocationCandidatesSeeOtherProcessWrites: on a SQLite file the
// marker read is skipped while PRAGMA data_version is unchanged; a write
// through another pool (another process) must still be seen.
func TestAllocationCandidatesSeeOtherProcessWrites(t *testing.T) {
	f := newACFixture(t)
	d := f.svc.db
	if d.Dialect != db.SQLite {
		t.Skip("SQLite only")
	}
	var seq int
	var name, file string
	if err := d.Raw("PRAGMA database_list").Row().Scan(&seq, &name, &file); err != nil || file == "" {
		t.Skipf("no database file (%v)", err)
	}
	q := "resources=VCPU:1,DISK_GB:10"
	for i := 0; i < 2; i++ { // the second find takes the fast path
		if got := len(f.find(t, q)); got != 2 {
			t.Fatalf("before: %d candidates", got)
		}
	}
	c := f.svc.snapshots
	c.dv.Lock()
	fast := c.dvValid
	c.dv.Unlock()
	if !fast {
		t.Fatal("data_version fast path not in use")
	}
	other, err := db.Open(context.Background(), "sqlite:///"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := rawAllocateVCPU(other.DB, f.ids["b-cn2"], 4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-cn1:VCPU=1 c-ss:DISK_GB=10 "}, f.find(t, q)); diff != "" {
		t.Errorf("after another pool's write (-want +got):\n%s", diff)
	}
	// And through this process's own pool.
	if err := f.tx.Exec("DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?", f.ids["c-ss"]).Error; err != nil {
		t.Fatal(err)
	}
	if got := f.find(t, q); len(got) != 0 {
		t.Errorf("after aggregate removal: %v", got)
	}
}

// rawAllocateVCPU writes an allocation of n VCPU on provider rp and its
// usage summary row, as an allocation write does, but without bumping
// the provider's generation.
func rawAllocateVCPU(tx *gorm.DB, rp int64, n int64) error {
	if err := tx.Exec("INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at) SELECT ?, 'c1', id, ?, ?, ? FROM resource_classes WHERE name = 'VCPU'",
		rp, n, time.Now(), time.Now()).Error; err != nil {
		return err
	}
	return tx.Exec("INSERT INTO allocation_usages (resource_provider_id, resource_class_id, used) SELECT ?, id, ? FROM resource_classes WHERE name = 'VCPU'", rp, n).Error
}
