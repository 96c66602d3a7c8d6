package iallocator

import (
	"os"
	"testing"
)

// TestRunFile runs the iallocator on $LEASEHOLD_IALLOC_FILE (a debugging
// aid: go test -run TestRunFile with the variable set).
func TestRunFile(t *testing.T) {
	f := os.Getenv("LEASEHOLD_IALLOC_FILE")
	if f == "" {
		t.Skip("LEASEHOLD_IALLOC_FILE not set")
	}
	in, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var opts Options
	opts.Alloc.NoCapacityChecks = os.Getenv("LEASEHOLD_NO_CAPACITY") == "1"
	if err := RunWithOptions(in, os.Stdout, opts); err != nil {
		t.Fatal(err)
	}
}
