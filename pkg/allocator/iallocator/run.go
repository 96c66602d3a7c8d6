// Package iallocator speaks Ganeti's IAllocator protocol on top of package
// allocator: it reads a request (JSON, node order preserved) and writes the
// answer exactly as Ganeti's hail 3.0.2 does, so that Leasehold can be
// installed as a Ganeti iallocator and compared with hail on identical
// input.
package iallocator

import (
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/pkg/allocator"
)

// Options are hail's command-line switches.
type Options struct {
	Alloc  allocator.Options
	Decode DecodeOptions
}

// Run reads one IAllocator request from in and writes hail's one-line
// JSON answer to out. A request that cannot be parsed is an error (hail
// prints "Error: ..." and exits 1); every other outcome, including a
// failed allocation, is an answer with "success": false.
func Run(in io.Reader, out io.Writer) error {
	return RunWithOptions(in, out, Options{})
}

// RunWithOptions is Run with hail's command-line options.
func RunWithOptions(in io.Reader, out io.Writer, opts Options) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	req, err := Decode(data, opts.Decode)
	if err != nil {
		return err
	}
	resp := Process(req, opts.Alloc)
	_, err = io.WriteString(out, resp.Encode()+"\n")
	return err
}

// Response is hail's answer.
type Response struct {
	Success bool
	Info    string
	// Result is the pre-encoded JSON of the "result" key.
	Result string
}

// Encode writes the response as hail does (no spaces, keys in order).
func (r *Response) Encode() string {
	var b strings.Builder
	b.WriteString(`{"success":`)
	if r.Success {
		b.WriteString("true")
	} else {
		b.WriteString("false")
	}
	b.WriteString(`,"info":`)
	jsonString(&b, r.Info)
	b.WriteString(`,"result":`)
	if r.Result == "" {
		b.WriteString("[]")
	} else {
		b.WriteString(r.Result)
	}
	b.WriteString("}")
	return b.String()
}

func okResp(info, result string) *Response {
	return &Response{Success: true, Info: "Request successful: " + info, Result: result}
}

func failResp(msg string) *Response {
	return &Response{Info: "Request failed: " + msg}
}

func strList(xs []string) string {
	var b strings.Builder
	writeStrs(&b, xs...)
	return b.String()
}

// writeList writes xs as a JSON array, item writing each element. The
// multi-allocation and evacuation answers are arrays of such arrays.
func writeList[T any](b *strings.Builder, xs []T, item func(T)) {
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		item(x)
	}
	b.WriteByte(']')
}

// writeStrs writes a JSON array of strings.
func writeStrs(b *strings.Builder, xs ...string) {
	writeList(b, xs, func(x string) { jsonString(b, x) })
}

// writePlaced writes hail's entry for a placed instance: its names (the
// instance, and for an evacuation the group) followed by its nodes.
func writePlaced(b *strings.Builder, nodes []string, names ...string) {
	b.WriteByte('[')
	for _, n := range names {
		jsonString(b, n)
		b.WriteByte(',')
	}
	writeStrs(b, nodes...)
	b.WriteByte(']')
}

// Process runs a decoded request.
func Process(req *Request, opts allocator.Options) *Response {
	c := req.Cluster
	switch req.Type {
	case "allocate":
		r, err := c.Allocate(&req.Allocs[0], opts)
		if err != nil {
			return failResp(err.Error())
		}
		if r.Placement == nil {
			return failResp(r.Info)
		}
		return okResp(r.Info, strList(r.Nodes(c)))
	case "multi-allocate":
		r, err := c.MultiAllocate(req.Allocs, opts)
		if err != nil {
			return failResp(err.Error())
		}
		var b strings.Builder
		b.WriteByte('[')
		writeList(&b, r.Allocated, func(a allocator.MultiAllocated) { writePlaced(&b, a.Nodes, a.Name) })
		b.WriteByte(',')
		writeList(&b, r.Failed, func(f allocator.MultiFailed) { writeStrs(&b, f.Name, f.Info) })
		b.WriteByte(']')
		info := fmt.Sprintf("%d instances failed to allocate and %d were allocated successfully", len(r.Failed), len(r.Allocated))
		return okResp(info, b.String())
	}
	return processEvac(req, opts)
}
