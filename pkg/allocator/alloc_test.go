package allocator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func twoNodes(t *testing.T, ctags []string, insts ...InstanceSpec) *Cluster {
	t.Helper()
	g := Group{Name: "default", UUID: "u", Policy: DefaultPolicy()}
	node := func(name string, tags ...string) NodeSpec {
		return NodeSpec{Name: name, TotalMem: 16384, FreeMem: 16384, TotalDisk: 102400, FreeDisk: 102400,
			TotalCPUs: 4, TotalSpindles: 4, Tags: tags}
	}
	nodes := []NodeSpec{node("a", "rack:1"), node("b", "rack:2")}
	for _, in := range insts {
		nodes[in.Primary].FreeMem -= in.Mem
		nodes[in.Primary].FreeDisk -= in.Dsk
	}
	c, err := NewCluster([]Group{g}, nodes, insts, ctags)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newInst(mem, dsk, vcpus int, tags ...string) Instance {
	return Instance{Name: "new", Mem: mem, Dsk: dsk, VCPUs: vcpus, Template: DTPlain, SpindleUse: 1,
		AutoBalance: true, Disks: []Disk{{Size: dsk}}, Tags: tags}
}

func TestAllocateReasons(t *testing.T) {
	web := InstanceSpec{Instance: newInst(1024, 10240, 1, "svc:web"), Primary: 0, Secondary: -1}
	web.Name = "web1"
	tests := []struct {
		name      string
		ctags     []string
		insts     []InstanceSpec
		req       Instance
		wantNodes []string
		wantInfo  string
		wantWhy   []string
	}{
		{
			name:      "balances onto the emptier node",
			insts:     []InstanceSpec{web},
			req:       newInst(1024, 10240, 1),
			wantNodes: []string{"b"},
			wantInfo:  "Selected group: default, Group default (preferred): score: 0.00000000, successes 2, failures 0 () for node(s) b",
			wantWhy:   []string{"group default: 2 feasible candidates"},
		},
		{
			name:      "exclusion tag is a hard constraint",
			ctags:     []string{"htools:iextags:svc"},
			insts:     []InstanceSpec{web},
			req:       newInst(1024, 10240, 1, "svc:web"),
			wantNodes: []string{"b"},
			wantInfo:  "Selected group: default, Group default (preferred): score: 0.00000000, successes 1, failures 1 (FailTags: 1) for node(s) b",
			wantWhy:   []string{"group default: 1 feasible candidates; 1 rejected: an instance with the same exclusion tag already runs there"},
		},
		{
			name:     "memory and vcpu limits are strict",
			req:      newInst(16384, 10240, 1),
			wantInfo: "Group default (preferred): No valid allocation solutions, failure reasons: FailMem: 2",
		},
		{
			name:     "outside the policy",
			req:      newInst(64, 10240, 1),
			wantInfo: "Group default (preferred): No valid allocation solutions, failure reasons: FailMem: 2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := twoNodes(t, tc.ctags, tc.insts...)
			req := &AllocRequest{Inst: tc.req, RequiredNodes: 1}
			c.PrepareRequest(&req.Inst)
			res, err := c.Allocate(req, Options{})
			if tc.wantNodes == nil {
				if err == nil || err.Error() != tc.wantInfo {
					t.Fatalf("error = %v, want %q", err, tc.wantInfo)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNodes, res.Nodes(c)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if res.Info != tc.wantInfo {
				t.Errorf("info = %q, want %q", res.Info, tc.wantInfo)
			}
			if diff := cmp.Diff(tc.wantWhy, res.Explain(c)); diff != "" {
				t.Errorf("explanation (-want +got):\n%s", diff)
			}
		})
	}
}
