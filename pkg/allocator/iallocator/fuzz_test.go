package iallocator

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRun feeds arbitrary documents to the IAllocator decoder and, when
// they decode, to the allocator: nothing may panic, and an answer must be
// one line of JSON. Seeds are the golden requests in testdata/.
func FuzzRun(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, fn := range files {
		data, err := os.ReadFile(fn)
		if err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"request":{"type":"allocate"},"nodegroups":{},"nodes":{},"instances":{},"cluster_tags":[],"enabled_hypervisors":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- Run(bytes.NewReader(data), &out) }()
		select {
		case err := <-done:
			if err != nil {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer after 10s for %q", data)
		}
		if !bytes.HasPrefix(out.Bytes(), []byte(`{"success":`)) || bytes.Count(out.Bytes(), []byte("\n")) != 1 {
			t.Fatalf("bad answer %q", out.String())
		}
	})
}
