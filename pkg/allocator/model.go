package allocator

import (
	"fmt"
	"slices"
)

// DiskTemplate is an instance's storage layout (Ganeti's disk templates).
type DiskTemplate uint8

// Disk templates. Plain and DRBD use node-local disk; DRBD is mirrored
// between a primary and a secondary; the shared ones can run anywhere in
// their group.
const (
	DTDiskless DiskTemplate = iota
	DTFile
	DTSharedFile
	DTPlain
	DTBlock
	DTDrbd
	DTRbd
	DTExt
	DTGluster
)

var templateNames = [...]string{"diskless", "file", "sharedfile", "plain", "blockdev", "drbd", "rbd", "ext", "gluster"}

func (t DiskTemplate) String() string { return templateNames[t] }

// ParseDiskTemplate parses a Ganeti disk template name.
func ParseDiskTemplate(s string) (DiskTemplate, error) {
	for i, n := range templateNames {
		if n == s {
			return DiskTemplate(i), nil
		}
	}
	return 0, fmt.Errorf("unknown disk template %q", s)
}

// usesLocalStorage: plain and drbd consume node disk.
func (t DiskTemplate) usesLocalStorage() bool { return t == DTPlain || t == DTDrbd }

// Mirror kinds of templates.
const (
	mirrorNone = iota
	mirrorInternal
	mirrorExternal
)

func (t DiskTemplate) mirror() int {
	switch t {
	case DTFile, DTPlain:
		return mirrorNone
	case DTDrbd:
		return mirrorInternal
	default:
		return mirrorExternal
	}
}

// movable is Ganeti's diskTemplateMovable: shared storage that can be
// failed over to any node of the group.
func (t DiskTemplate) movable() bool {
	switch t {
	case DTSharedFile, DTRbd, DTExt, DTGluster, DTDiskless:
		return true
	}
	return false
}

// FailMode names why a placement was rejected. The order is Ganeti's and
// is the order of failure counts in hail's messages.
type FailMode uint8

// Failure modes.
const (
	FailNone FailMode = iota
	FailMem
	FailDisk
	FailCPU
	FailN1
	FailTags
	FailMig
	FailDiskCount
	FailSpindles
	FailInternal
)

var failNames = [...]string{"", "FailMem", "FailDisk", "FailCPU", "FailN1", "FailTags", "FailMig", "FailDiskCount", "FailSpindles", "FailInternal"}

func (f FailMode) String() string { return failNames[f] }

// Reason explains a failure mode in words, for API users.
func (f FailMode) Reason() string {
	switch f {
	case FailMem:
		return "not enough memory (or the node would stop being N+1 redundant)"
	case FailDisk:
		return "not enough disk, spindle budget exceeded, or disk template/size outside the policy"
	case FailCPU:
		return "vCPU ratio limit exceeded, or CPU count outside the policy"
	case FailN1:
		return "the cluster would not survive the loss of a node (global N+1)"
	case FailTags:
		return "an instance with the same exclusion tag already runs there"
	case FailMig:
		return "migration between these hosts is not allowed by migration tags"
	case FailDiskCount:
		return "number of disks outside the policy"
	case FailSpindles:
		return "not enough spindles, or spindles outside the policy"
	case FailInternal:
		return "no policy interval matches"
	}
	return ""
}

// ISpec is one instance spec (bound of a policy interval).
type ISpec struct {
	MemorySize, CPUCount, DiskSize, DiskCount, NICCount, SpindleUse int
}

// MinMax is one allowed interval of instance specs.
type MinMax struct{ Min, Max ISpec }

// Policy is a group's instance policy.
type Policy struct {
	MinMax        []MinMax
	Std           ISpec
	DiskTemplates []DiskTemplate
	VCPURatio     float64
	SpindleRatio  float64

	testSpecs []ISpec // cache for the dedicated metric (set by NewCluster)
}

// DefaultPolicy is Ganeti's default instance policy.
func DefaultPolicy() Policy {
	return Policy{
		MinMax: []MinMax{{
			Min: ISpec{MemorySize: 128, CPUCount: 1, DiskSize: 1024, DiskCount: 1, NICCount: 1, SpindleUse: 1},
			Max: ISpec{MemorySize: 32768, CPUCount: 8, DiskSize: 1024 * 1024, DiskCount: 16, NICCount: 8, SpindleUse: 12},
		}},
		Std:           ISpec{MemorySize: 128, CPUCount: 1, DiskSize: 1024, DiskCount: 1, NICCount: 1, SpindleUse: 1},
		DiskTemplates: []DiskTemplate{DTDrbd, DTPlain, DTFile, DTSharedFile, DTBlock, DTRbd, DTExt, DTGluster, DTDiskless},
		VCPURatio:     4,
		SpindleRatio:  32,
	}
}

// AllocPolicy is a group's allocation preference.
type AllocPolicy uint8

// Allocation policies, best first.
const (
	AllocPreferred AllocPolicy = iota
	AllocLastResort
	AllocUnallocable
)

func (p AllocPolicy) String() string {
	return [...]string{"preferred", "last_resort", "unallocable"}[p]
}

// Group is a node group.
type Group struct {
	Name, UUID  string
	AllocPolicy AllocPolicy
	Networks    []string
	Tags        []string
	Policy      Policy
	Idx         int
}

// Disk is one instance disk.
type Disk struct {
	Size     int
	Spindles *int
}

// InstanceStatus is the admin state of an instance.
type InstanceStatus uint8

// Instance states.
const (
	StatusRunning InstanceStatus = iota
	StatusDown
	StatusOffline
)

// Instance is a placed item (an instance or a reservation slot) or a
// request for one. Memory and disk are in MiB.
type Instance struct {
	Name        string
	Mem, Dsk    int // Dsk is what is charged to node disk
	VCPUs       int
	Disks       []Disk
	Status      InstanceStatus
	AutoBalance bool
	Template    DiskTemplate
	SpindleUse  int
	Tags        []string
	NICNetworks []string // networks required by the NICs ("" = none)
	Forthcoming bool

	// Derived by the cluster from its tag rules.
	PNode, SNode  int // node indices; -1 = none
	Idx           int
	ExclTags      []string
	DsrdLocTags   []string // sorted set
	LocationScore int
}

func (i *Instance) usesMemory() bool {
	return !i.Forthcoming && i.Status == StatusRunning
}
func (i *Instance) notOffline() bool { return i.Status != StatusOffline }
func (i *Instance) usesSecMem() bool { return i.notOffline() && i.AutoBalance }
func (i *Instance) hasSecondary() bool {
	return i.Template == DTDrbd
}

// totalSpindles returns the sum of the disks' spindles, ok=false if any
// disk lacks them.
func (i *Instance) totalSpindles() (int, bool) {
	s := 0
	for _, d := range i.Disks {
		if d.Spindles == nil {
			return 0, false
		}
		s += *d.Spindles
	}
	return s, true
}

// RequiredNodes is 2 for DRBD, 1 otherwise.
func (i *Instance) RequiredNodes() int {
	if i.Template == DTDrbd {
		return 2
	}
	return 1
}

// compareSpec returns the failure mode if the instance is on the wrong
// side (which = +1: above max, -1: below min) of spec.
func (i *Instance) compareSpec(which int, s *ISpec, excl bool) FailMode {
	cmp := func(a, b int) int {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	if cmp(i.Mem, s.MemorySize) == which {
		return FailMem
	}
	for _, d := range i.Disks {
		if cmp(d.Size, s.DiskSize) == which {
			return FailDisk
		}
	}
	if cmp(i.VCPUs, s.CPUCount) == which {
		return FailCPU
	}
	if excl {
		sp, ok := i.totalSpindles()
		if !ok || cmp(sp, s.SpindleUse) == which {
			return FailSpindles
		}
	} else if cmp(i.SpindleUse, s.SpindleUse) == which {
		return FailSpindles
	}
	if i.Template != DTDiskless && cmp(len(i.Disks), s.DiskCount) == which {
		return FailDiskCount
	}
	return FailNone
}

// MatchesPolicy checks the instance against a policy: it must lie in one
// of the intervals (when all fail, the first interval's failure is
// reported, as in htools) and use an allowed template.
func (i *Instance) MatchesPolicy(p *Policy, excl bool) FailMode {
	if len(p.MinMax) > 0 {
		f := FailInternal
		for k := len(p.MinMax) - 1; k >= 0; k-- {
			mm := &p.MinMax[k]
			f = i.compareSpec(-1, &mm.Min, excl)
			if f == FailNone {
				f = i.compareSpec(1, &mm.Max, excl)
			}
			if f == FailNone {
				break
			}
		}
		if f != FailNone {
			return f
		}
	}
	if !slices.Contains(p.DiskTemplates, i.Template) {
		return FailDisk
	}
	return FailNone
}
