package allocator

import "maps"

// Node is a host in the Ganeti-compatible model. It is a value: the
// operations below return modified copies. Maps and slices are never
// modified in place (copy on write), so copying a Node is cheap and safe.
type Node struct {
	Name    string
	Idx     int
	Group   int
	Offline bool
	Tags    []string

	TMem              float64
	NMem, IMem, XMem  int
	FMem, FMemForth   int
	TDsk              float64
	FDsk, FDskForth   int
	TCpu              float64
	NCpu, UCpu        int
	UCpuForth         int
	TSpindles         int
	FSpindles         int
	FSpindlesForth    int
	NPri, NSec        int // non-forthcoming primaries and secondaries
	FailN1            bool
	RMem              int
	PMem, PMemForth   float64
	PDsk, PDskForth   float64
	PRem              float64
	PCpu, PCpuForth   float64
	LoDsk             int
	HiSpindles        float64
	InstSpindles      float64
	InstSpindlesForth float64
	// Load sums (each instance has utilisation 1 in every dimension, as
	// with IAllocator input): CLoad = MLoad = NLoad = primaries, DLoad =
	// primaries + secondaries.
	CLoad, MLoad, DLoad, NLoad float64

	// ConflictPri is Σ count − distinct over the primaries' exclusion tags.
	ConflictPri   int
	LocationScore int

	Policy      *Policy
	ExclStorage bool
	MigTags     []string // sorted
	RMigTags    []string // sorted
	LocTags     []string // sorted

	pTags   map[string]int    // exclusion tags of primaries
	instMap map[[2]string]int // (location tag, exclusion tag) of primaries
	peers   map[int]int       // primary node -> memory needed on failover
	pList   []int             // primary instance indices (all)
	sList   []int             // secondary instance indices (all)
}

// unallocatedMem is Ganeti's unallocatedMem.
func (n *Node) unallocatedMem() int {
	return int(n.TMem) - n.NMem - n.IMem - max(0, n.XMem)
}

func computePDsk(free int, total float64) float64 {
	if total == 0 {
		return 1
	}
	return float64(free) / total
}

func (n *Node) newPDsk(freeSp, freeDsk int) float64 {
	if n.ExclStorage {
		return computePDsk(freeSp, float64(n.TSpindles))
	}
	return computePDsk(freeDsk, n.TDsk)
}

func (n *Node) spindleDelta(inst *Instance) float64 {
	if n.ExclStorage || !inst.Template.usesLocalStorage() {
		return 0
	}
	return float64(inst.SpindleUse)
}

// freeSpindlesAfter is calcNewFreeSpindles for adding (add) or removing.
func freeSpindlesAfter(n *Node, inst *Instance, add bool, cur int) int {
	if !n.ExclStorage {
		return 0
	}
	s, ok := inst.totalSpindles()
	if !ok {
		if add {
			return -1
		}
		return cur
	}
	if add {
		return cur - s
	}
	return cur + s
}

func rejectTags(pTags map[string]int, tags []string) bool {
	for _, t := range tags {
		if pTags[t] > 0 {
			return true
		}
	}
	return false
}

// addPri places inst as a primary on n (Ganeti's Node.addPriEx). force
// skips the soft checks. Maps are not updated: call commitPri to make the
// placement part of the state.
func (n *Node) addPri(inst *Instance, force bool) (Node, FailMode) {
	strict := !force
	usesDisk := inst.Template.usesLocalStorage()
	lcpu := n.Policy.VCPURatio
	t := *n

	newMemForth := n.FMemForth - inst.Mem
	newDskForth := n.FDskForth
	if usesDisk {
		newDskForth -= inst.Dsk
	}
	newFreeSpForth := freeSpindlesAfter(n, inst, true, n.FSpindlesForth)
	newInstSpForth := n.InstSpindlesForth + n.spindleDelta(inst)
	newUCpuForth := n.UCpuForth
	if inst.notOffline() {
		newUCpuForth += inst.VCPUs
	}
	newPCpuForth := float64(newUCpuForth) / n.TCpu
	forthViolation := func() FailMode {
		switch {
		case newMemForth <= 0:
			return FailMem
		case usesDisk && newDskForth <= 0:
			return FailDisk
		case usesDisk && newDskForth < n.LoDsk:
			return FailDisk
		case usesDisk && n.ExclStorage && newFreeSpForth < 0:
			return FailSpindles
		case usesDisk && newInstSpForth > n.HiSpindles:
			return FailDisk
		case lcpu >= 0 && lcpu < newPCpuForth:
			return FailCPU
		}
		return FailNone
	}
	applyForth := func() {
		t.FMemForth = newMemForth
		t.PMemForth = float64(newMemForth) / n.TMem
		t.FDskForth = newDskForth
		t.PDskForth = n.newPDsk(newFreeSpForth, newDskForth)
		t.UCpuForth = newUCpuForth
		t.PCpuForth = newPCpuForth
		t.InstSpindlesForth = newInstSpForth
		t.FSpindlesForth = newFreeSpForth
		t.ConflictPri = n.conflictAfterAdd(inst.ExclTags)
	}
	if inst.Forthcoming {
		if strict {
			if f := forthViolation(); f != FailNone {
				return t, f
			}
		}
		applyForth()
		return t, FailNone
	}
	newIMem := n.IMem
	if inst.usesMemory() {
		newIMem += inst.Mem
	}
	newFreeMem := int(n.TMem) - n.NMem - newIMem - max(0, n.XMem)
	newFailN1 := newFreeMem <= n.RMem
	newDsk := n.FDsk
	if usesDisk {
		newDsk -= inst.Dsk
	}
	newFreeSp := freeSpindlesAfter(n, inst, true, n.FSpindles)
	newInstSp := n.InstSpindles + n.spindleDelta(inst)
	newUCpu := n.UCpu
	if inst.notOffline() {
		newUCpu += inst.VCPUs
	}
	newPCpu := float64(newUCpu) / n.TCpu
	switch {
	case newFreeMem <= 0:
		return t, FailMem
	case usesDisk && newDsk <= 0:
		return t, FailDisk
	case strict && usesDisk && newDsk < n.LoDsk:
		return t, FailDisk
	case usesDisk && n.ExclStorage && newFreeSp < 0:
		return t, FailSpindles
	case strict && usesDisk && newInstSp > n.HiSpindles:
		return t, FailDisk
	case strict && newFailN1 && !n.FailN1:
		return t, FailMem
	case strict && lcpu >= 0 && lcpu < newPCpu:
		return t, FailCPU
	case strict && rejectTags(n.pTags, inst.ExclTags):
		return t, FailTags
	}
	if strict {
		if f := forthViolation(); f != FailNone {
			return t, f
		}
	}
	applyForth()
	t.NPri++
	t.IMem = newIMem
	t.FDsk = newDsk
	t.FailN1 = newFailN1
	t.PMem = float64(newFreeMem) / n.TMem
	t.PDsk = n.newPDsk(newFreeSp, newDsk)
	t.UCpu = newUCpu
	t.PCpu = newPCpu
	t.CLoad++
	t.MLoad++
	t.DLoad++
	t.NLoad++
	t.InstSpindles = newInstSp
	t.FSpindles = newFreeSp
	t.LocationScore = n.LocationScore + inst.LocationScore + n.dsrdLocMisses(inst)
	return t, FailNone
}

func (n *Node) conflictAfterAdd(tags []string) int {
	c := n.ConflictPri
	for i, tg := range tags {
		// a tag new to the node (and not repeated earlier in tags) adds a
		// distinct key; any other adds a conflict.
		if n.pTags[tg] > 0 || containsStr(tags[:i], tg) {
			c++
		}
	}
	return c
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// dsrdLocMisses counts the instance's desired locations the node lacks.
func (n *Node) dsrdLocMisses(inst *Instance) int {
	c := 0
	for _, t := range inst.DsrdLocTags {
		if !containsSorted(n.LocTags, t) {
			c++
		}
	}
	return c
}

// locExclPairs are the (location, exclusion tag) pairs an instance adds.
func (n *Node) locExclPairs(inst *Instance) [][2]string {
	if len(n.LocTags) == 0 || len(inst.ExclTags) == 0 {
		return nil
	}
	out := make([][2]string, 0, len(n.LocTags)*len(inst.ExclTags))
	for _, l := range n.LocTags {
		for _, e := range inst.ExclTags {
			out = append(out, [2]string{l, e})
		}
	}
	return out
}

// commitPri updates the maps and lists of t (the result of n.addPri) for
// the primary inst.
func (t *Node) commitPri(inst *Instance) {
	if len(inst.ExclTags) > 0 {
		m := maps.Clone(t.pTags)
		if m == nil {
			m = map[string]int{}
		}
		for _, tg := range inst.ExclTags {
			m[tg]++
		}
		t.pTags = m
	}
	if inst.Forthcoming {
		return
	}
	if pairs := t.locExclPairs(inst); len(pairs) > 0 {
		m := maps.Clone(t.instMap)
		if m == nil {
			m = map[[2]string]int{}
		}
		for _, p := range pairs {
			m[p]++
		}
		t.instMap = m
	}
	t.pList = append(t.pList[:len(t.pList):len(t.pList)], inst.Idx)
}

// addSec places inst as a secondary with primary pdx (Ganeti's
// addSecExEx). ignoreDisks skips the disk-full check; force the soft ones.
func (n *Node) addSec(inst *Instance, pdx int, ignoreDisks, force bool) (Node, FailMode) {
	strict := !force
	t := *n
	secMem := 0
	if inst.usesSecMem() {
		secMem = inst.Mem
	}
	newPeem := n.peers[pdx] + secMem
	newDskForth := n.FDskForth - inst.Dsk
	newFreeSpForth := freeSpindlesAfter(n, inst, true, n.FSpindlesForth)
	newInstSpForth := n.InstSpindlesForth + n.spindleDelta(inst)
	forthViolation := func() FailMode {
		switch {
		case !inst.hasSecondary():
			return FailDisk
		case newDskForth <= 0, newDskForth < n.LoDsk:
			return FailDisk
		case n.ExclStorage && newFreeSpForth < 0:
			return FailSpindles
		case newInstSpForth > n.HiSpindles:
			return FailDisk
		case secMem >= n.FMemForth:
			return FailMem
		}
		return FailNone
	}
	applyForth := func() {
		t.FDskForth = newDskForth
		t.PDskForth = n.newPDsk(newFreeSpForth, newDskForth)
		t.InstSpindlesForth = newInstSpForth
		t.FSpindlesForth = newFreeSpForth
	}
	if inst.Forthcoming {
		if strict {
			if f := forthViolation(); f != FailNone {
				return t, f
			}
		}
		applyForth()
		return t, FailNone
	}
	oldMem := n.unallocatedMem()
	newDsk := n.FDsk - inst.Dsk
	newFreeSp := freeSpindlesAfter(n, inst, true, n.FSpindles)
	newInstSp := n.InstSpindles + n.spindleDelta(inst)
	newRMem := max(n.RMem, newPeem)
	newFailN1 := oldMem <= newRMem
	switch {
	case !inst.hasSecondary():
		return t, FailDisk
	case !ignoreDisks && newDsk <= 0:
		return t, FailDisk
	case strict && newDsk < n.LoDsk:
		return t, FailDisk
	case n.ExclStorage && newFreeSp < 0:
		return t, FailSpindles
	case strict && newInstSp > n.HiSpindles:
		return t, FailDisk
	case strict && secMem >= oldMem:
		return t, FailMem
	case strict && newFailN1 && !n.FailN1:
		return t, FailMem
	}
	if strict {
		if f := forthViolation(); f != FailNone {
			return t, f
		}
	}
	applyForth()
	t.NSec++
	t.FDsk = newDsk
	t.FailN1 = newFailN1
	t.RMem = newRMem
	t.PDsk = n.newPDsk(newFreeSp, newDsk)
	t.PRem = float64(newRMem) / n.TMem
	t.DLoad++
	t.InstSpindles = newInstSp
	t.FSpindles = newFreeSp
	return t, FailNone
}

// commitSec updates maps and lists for a secondary added with addSec.
func (t *Node) commitSec(inst *Instance, pdx int) {
	if inst.Forthcoming {
		return
	}
	secMem := 0
	if inst.usesSecMem() {
		secMem = inst.Mem
	}
	m := maps.Clone(t.peers)
	if m == nil {
		m = map[int]int{}
	}
	m[pdx] += secMem
	t.peers = m
	t.sList = append(t.sList[:len(t.sList):len(t.sList)], inst.Idx)
}

func removeIdx(s []int, v int) []int {
	for i, x := range s {
		if x == v {
			out := make([]int, 0, len(s)-1)
			out = append(out, s[:i]...)
			return append(out, s[i+1:]...)
		}
	}
	return s
}

// removePri removes the primary inst (Ganeti's removePri), maps included.
func (n *Node) removePri(inst *Instance) Node {
	t := *n
	usesDisk := inst.Template.usesLocalStorage()
	// forthcoming fields (always)
	if len(inst.ExclTags) > 0 {
		m := maps.Clone(n.pTags)
		for _, tg := range inst.ExclTags {
			if m[tg] > 1 {
				m[tg]--
			} else if m[tg] == 1 {
				delete(m, tg)
				// distinct count drops: conflicts unchanged
				continue
			}
		}
		t.pTags = m
		t.ConflictPri = conflictOf(m)
	}
	t.FMemForth = n.FMemForth + inst.Mem
	if usesDisk {
		t.FDskForth = n.FDskForth + inst.Dsk
	}
	t.FSpindlesForth = freeSpindlesAfter(n, inst, false, n.FSpindlesForth)
	t.InstSpindlesForth = n.InstSpindlesForth - n.spindleDelta(inst)
	t.PMemForth = float64(t.FMemForth) / n.TMem
	t.PDskForth = n.newPDsk(t.FSpindlesForth, t.FDskForth)
	if inst.notOffline() {
		t.UCpuForth = n.UCpuForth - inst.VCPUs
	}
	t.PCpuForth = float64(t.UCpuForth) / n.TCpu
	if inst.Forthcoming {
		return t
	}
	t.pList = removeIdx(n.pList, inst.Idx)
	t.NPri--
	if inst.usesMemory() {
		t.IMem = n.IMem - inst.Mem
	}
	newFree := t.unallocatedMem()
	t.PMem = float64(newFree) / n.TMem
	t.FailN1 = newFree <= n.RMem
	if usesDisk {
		t.FDsk = n.FDsk + inst.Dsk
	}
	t.FSpindles = freeSpindlesAfter(n, inst, false, n.FSpindles)
	t.InstSpindles = n.InstSpindles - n.spindleDelta(inst)
	t.PDsk = n.newPDsk(t.FSpindles, t.FDsk)
	if inst.notOffline() {
		t.UCpu = n.UCpu - inst.VCPUs
	}
	t.PCpu = float64(t.UCpu) / n.TCpu
	t.CLoad--
	t.MLoad--
	t.DLoad--
	t.NLoad--
	if pairs := n.locExclPairs(inst); len(pairs) > 0 {
		m := maps.Clone(n.instMap)
		for _, p := range pairs {
			if m[p] > 1 {
				m[p]--
			} else {
				delete(m, p)
			}
		}
		t.instMap = m
	}
	t.LocationScore = n.LocationScore - inst.LocationScore - n.dsrdLocMisses(inst)
	return t
}

func conflictOf(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s - len(m)
}

// removeSec removes the secondary inst (Ganeti's removeSec).
func (n *Node) removeSec(inst *Instance) Node {
	t := *n
	usesDisk := inst.Template.usesLocalStorage()
	if usesDisk {
		t.FDskForth = n.FDskForth + inst.Dsk
	}
	t.FSpindlesForth = freeSpindlesAfter(n, inst, false, n.FSpindlesForth)
	t.InstSpindlesForth = n.InstSpindlesForth - n.spindleDelta(inst)
	t.PDskForth = n.newPDsk(t.FSpindlesForth, t.FDskForth)
	if inst.Forthcoming {
		return t
	}
	t.sList = removeIdx(n.sList, inst.Idx)
	t.NSec--
	if usesDisk {
		t.FDsk = n.FDsk + inst.Dsk
	}
	t.FSpindles = freeSpindlesAfter(n, inst, false, n.FSpindles)
	t.InstSpindles = n.InstSpindles - n.spindleDelta(inst)
	pnode := inst.PNode
	oldPeem := n.peers[pnode]
	newPeem := oldPeem
	if inst.usesSecMem() {
		newPeem -= inst.Mem
	}
	m := maps.Clone(n.peers)
	if m == nil {
		m = map[int]int{}
	}
	if newPeem > 0 {
		m[pnode] = newPeem
	} else {
		delete(m, pnode)
	}
	t.peers = m
	newRMem := n.RMem
	if oldPeem >= n.RMem {
		newRMem = 0
		for _, v := range m {
			newRMem = max(newRMem, v)
		}
	}
	t.RMem = newRMem
	t.PRem = float64(newRMem) / n.TMem
	t.FailN1 = n.unallocatedMem() <= newRMem
	t.PDsk = n.newPDsk(t.FSpindles, t.FDsk)
	t.DLoad--
	return t
}

// checkMigration: every migration tag of src must be receivable by dst.
func checkMigration(src, dst *Node) FailMode {
	if MigrationAllowed(src.MigTags, dst.RMigTags) {
		return FailNone
	}
	return FailMig
}
