package candidates

import (
	"context"
	"fmt"
	"testing"
)

// Engine-only benchmarks on the perfload shapes (the HTTP comparison with
// upstream is scripts/bench-placement.sh).

func flatSnapshot(n int) *Snapshot {
	b := NewBuilder()
	b.AddClass(1, "VCPU")
	b.AddClass(2, "MEMORY_MB")
	b.AddClass(3, "DISK_GB")
	b.AddTrait("HW_CPU_X86_AVX2")
	for i := 1; i <= n; i++ {
		id := int64(i)
		b.AddProvider(id, fmt.Sprintf("00000000-0000-4000-8000-%012d", i), 0, id)
		b.AddInventory(id, 1, 32, 0, 1, 32, 1, 16)
		b.AddInventory(id, 2, 8192, 0, 1, 8192, 1, 1.5)
		b.AddInventory(id, 3, 8192, 0, 1, 8192, 1, 1)
		b.AddProviderTrait(id, "HW_CPU_X86_AVX2")
		b.AddProviderAggregate(id, fmt.Sprintf("aaaaaaaa-0000-4000-8000-%012d", i%5))
	}
	return b.Build()
}

func nestedSnapshot(n int) *Snapshot {
	b := NewBuilder()
	for i, c := range []string{"VCPU", "MEMORY_MB", "DISK_GB", "VGPU", "FPGA"} {
		b.AddClass(int64(i+1), c)
	}
	id := int64(0)
	add := func(parent, root int64) int64 {
		id++
		if root == 0 {
			root = id
		}
		b.AddProvider(id, fmt.Sprintf("00000000-0000-4000-8000-%012d", id), parent, root)
		return id
	}
	for t := 0; t < n; t++ {
		cn := add(0, 0)
		b.AddInventory(cn, 3, 20480, 0, 1, 20480, 1, 1)
		b.AddProviderTrait(cn, "COMPUTE_VOLUME_MULTI_ATTACH")
		n0 := add(cn, cn)
		b.AddInventory(n0, 1, 4, 2, 1, 4, 1, 1)
		b.AddInventory(n0, 2, 2048, 0, 512, 2048, 256, 1)
		b.AddProviderTrait(n0, "HW_NUMA_ROOT")
		b.AddInventory(add(n0, cn), 5, 1, 0, 1, 1, 1, 1)
		b.AddInventory(add(n0, cn), 4, 8, 0, 1, 8, 1, 1)
		n1 := add(cn, cn)
		b.AddInventory(n1, 1, 4, 0, 1, 4, 1, 1)
		b.AddInventory(n1, 2, 2048, 0, 256, 1024, 1, 1)
		b.AddProviderTrait(n1, "HW_NUMA_ROOT")
		b.AddProviderTrait(n1, "CUSTOM_FOO")
		b.AddInventory(add(n1, cn), 5, 1, 0, 1, 1, 1, 1)
		b.AddInventory(add(n1, cn), 5, 1, 0, 1, 1, 1, 1)
	}
	return b.Build()
}

func wideSnapshot(children int) *Snapshot {
	b := NewBuilder()
	b.AddClass(10000, "CUSTOM_ACC")
	b.AddProvider(1, "00000000-0000-4000-8000-000000000001", 0, 1)
	for c := 0; c < children; c++ {
		id := int64(c + 2)
		b.AddProvider(id, fmt.Sprintf("00000000-0000-4000-8000-%012d", id), 1, 1)
		b.AddInventory(id, 10000, 1, 0, 1, 1, 1, 1)
	}
	return b.Build()
}

func flatRequest() *Request {
	return &Request{NestedAware: true, MaxCandidates: -1, Groups: []Group{{
		Resources:      []Resource{{"VCPU", 1}, {"DISK_GB", 10}, {"MEMORY_MB", 256}},
		RequiredTraits: [][]string{{"HW_CPU_X86_AVX2"}}, MemberOf: [][]string{{"aaaaaaaa-0000-4000-8000-000000000000"}}}}}
}

func nestedRequest() *Request {
	return &Request{NestedAware: true, MaxCandidates: -1, GroupPolicy: "none", SameSubtrees: [][]string{{"_COMPUTE", "_FPGA"}},
		Groups: []Group{
			{Resources: []Resource{{"DISK_GB", 10}}, RequiredTraits: [][]string{{"COMPUTE_VOLUME_MULTI_ATTACH"}}},
			{Suffix: "_COMPUTE", UseSameProvider: true, Resources: []Resource{{"VCPU", 1}, {"MEMORY_MB", 256}}, RequiredTraits: [][]string{{"CUSTOM_FOO"}}},
			{Suffix: "_FPGA", UseSameProvider: true, Resources: []Resource{{"FPGA", 1}}},
		}}
}

func wideRequest(groups int, limit int) *Request {
	r := &Request{NestedAware: true, MaxCandidates: -1, GroupPolicy: "none", Limit: limit}
	for g := 1; g <= groups; g++ {
		r.Groups = append(r.Groups, Group{Suffix: fmt.Sprintf("_G%d", g), UseSameProvider: true, Resources: []Resource{{"CUSTOM_ACC", 1}}})
	}
	return r
}

func benchFind(b *testing.B, s *Snapshot, mk func() *Request, want int) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		res, err := s.Find(context.Background(), mk())
		if err != nil {
			b.Fatal(err)
		}
		if want >= 0 && res.Len() != want {
			b.Fatalf("%d candidates, want %d", res.Len(), want)
		}
	}
}

func BenchmarkFlat1000(b *testing.B) { benchFind(b, flatSnapshot(1000), flatRequest, 200) }

func BenchmarkFlat1000Limit5(b *testing.B) {
	benchFind(b, flatSnapshot(1000), func() *Request { r := flatRequest(); r.Limit = 5; return r }, 5)
}

func BenchmarkNested1000(b *testing.B) { benchFind(b, nestedSnapshot(1000), nestedRequest, 2000) }

func BenchmarkNested1000Limit5(b *testing.B) {
	benchFind(b, nestedSnapshot(1000), func() *Request { r := nestedRequest(); r.Limit = 5; return r }, 5)
}

// 8 children with one unit each, 8 groups: 8! = 40320 candidates of 8^8
// combinations.
func BenchmarkWide8x8(b *testing.B) {
	benchFind(b, wideSnapshot(8), func() *Request { return wideRequest(8, 0) }, 40320)
}

func BenchmarkWide8x8Limit5(b *testing.B) {
	benchFind(b, wideSnapshot(8), func() *Request { return wideRequest(8, 5) }, 5)
}

func BenchmarkBuildNested1000(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		nestedSnapshot(1000)
	}
}
