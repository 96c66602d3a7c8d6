package iallocator

import (
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// resolved holds the indices of the names an evacuation-type request
// refers to (looked up at decode time, as hail does).
type resolved struct {
	insts  []int
	nodes  []int
	groups []int
	mode   allocator.EvacMode
}

// resolve looks up names; failures are parse errors (hail exits 1).
func (r *Request) resolve() (*resolved, error) {
	c := r.Cluster
	out := &resolved{}
	switch r.Type {
	case "relocate":
		idx, err := c.FindInstance(r.Name)
		if err != nil {
			return nil, fmt.Errorf("Unknown instance: %s", r.Name)
		}
		out.insts = []int{idx}
		for _, n := range r.RelocateFrom {
			found := -1
			for i := range c.Nodes {
				if c.Nodes[i].Name == n {
					found = i
				}
			}
			if found < 0 {
				return nil, fmt.Errorf("Wrong number of elems found with name %s", n)
			}
			out.nodes = append(out.nodes, found)
		}
	case "node-evacuate", "change-group":
		for _, n := range r.Instances {
			idx, err := c.FindInstance(n)
			if err != nil {
				return nil, err
			}
			out.insts = append(out.insts, idx)
		}
		if r.Type == "node-evacuate" {
			m, err := allocator.ParseEvacMode(r.EvacMode)
			if err != nil {
				return nil, fmt.Errorf("invalid request dict: key 'evac_mode': %v", err)
			}
			out.mode = m
		}
		for _, g := range r.TargetGroups {
			gi, err := c.FindGroup(g)
			if err != nil {
				return nil, err
			}
			out.groups = append(out.groups, gi)
		}
	}
	return out, nil
}

func processEvac(req *Request, opts allocator.Options) *Response {
	c := req.Cluster
	rs, err := req.resolve()
	if err != nil {
		return failResp(err.Error())
	}
	switch req.Type {
	case "relocate":
		nodes, err := c.Relocate(rs.insts[0], req.RequiredNodes, rs.nodes, opts)
		if err != nil {
			return failResp(err.Error())
		}
		return okResp("success", strList(nodes))
	case "node-evacuate":
		return evacResp(c.NodeEvacuate(rs.insts, rs.mode, opts))
	case "change-group":
		return evacResp(c.ChangeGroup(rs.insts, rs.groups, opts))
	}
	return failResp("request type " + req.Type + " is not supported")
}

func evacResp(r *allocator.EvacResult) *Response {
	var b strings.Builder
	b.WriteByte('[')
	writeList(&b, r.Moved, func(m allocator.Moved) { writePlaced(&b, m.Nodes, m.Instance, m.Group) })
	b.WriteByte(',')
	writeList(&b, r.Failed, func(f allocator.EvacFailed) { writeStrs(&b, f.Instance, f.Reason) })
	b.WriteByte(',')
	writeList(&b, r.Jobs, func(job []allocator.Op) {
		writeList(&b, job, func(op allocator.Op) { writeOp(&b, op) })
	})
	b.WriteByte(']')
	info := fmt.Sprintf("%d instances failed to move and %d were moved successfully", len(r.Failed), len(r.Moved))
	return okResp(info, b.String())
}

// writeOp writes an opcode as Ganeti serialises it (defaults omitted).
func writeOp(b *strings.Builder, op allocator.Op) {
	switch op.Kind {
	case allocator.OpReplaceDisks:
		b.WriteString(`{"OP_ID":"OP_INSTANCE_REPLACE_DISKS","instance_name":`)
		jsonString(b, op.Instance)
		b.WriteString(`,"early_release":false,"ignore_ipolicy":false,"mode":"replace_new_secondary","disks":[],"remote_node":`)
		jsonString(b, op.Node)
		b.WriteString("}")
	case allocator.OpFailover:
		b.WriteString(`{"OP_ID":"OP_INSTANCE_FAILOVER","instance_name":`)
		jsonString(b, op.Instance)
		b.WriteString(`,"shutdown_timeout":120,"ignore_consistency":false,"ignore_ipolicy":false,"cleanup":false}`)
	default:
		b.WriteString(`{"OP_ID":"OP_INSTANCE_MIGRATE","instance_name":`)
		jsonString(b, op.Instance)
		if op.Node != "" {
			b.WriteString(`,"target_node":`)
			jsonString(b, op.Node)
		}
		b.WriteString(`,"allow_runtime_changes":false,"ignore_ipolicy":false,"cleanup":false,"allow_failover":true,"ignore_hvversions":true}`)
	}
}
